"""SQLite (BLOB and text compare bytewise, so time-first ids stay in order in every storage).

SQLite makes a primary key the table's rowid only when it is declared exactly ``INTEGER``
(https://sqlite.org/lang_createtable.html#rowid): integer keys are declared so, and a UUID-keyed
table is best made ``WITHOUT ROWID``.  Its default text collation (BINARY) is bytewise already.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from ..errors import InvalidArgumentError, ServerDefaultUnavailableError
from ._base import (
    Fetch,
    KeyColumn,
    ServerDefault,
    Storage,
    TextColumnSpec,
    Version,
    bytewise_order,
    double_quoted,
    format_version,
    hex_literal,
    no_adopted_default,
    no_adoption_statements,
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
    qualify,
    read_quote,
    seconds_literal,
    standard_literal,
    unknown_version,
    version_at_least,
)

NAME = "sqlite"
DISTRIBUTED = False
ROWID_INTEGER_KEY = True
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation=None)
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
quote_identifier = double_quoted
string_literal = standard_literal
TYPE_CHANGE_HOLDS = None  # no conversion seqid refuses by size
qualified = qualify(quote_identifier)
ONLINE = None  # seqid changes no table of it online
REKEY = None  # no key changes online: its tables are made again (REBUILD)


class _Rebuild:
    # pragma_foreign_key_list: a table-valued pragma (3.16+); "to" is NULL where the key is referenced unnamed
    REFERENCES = (
        'SELECT m.name, f.id, f."from", f."to" FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f '
        "WHERE m.type = 'table' AND lower(f.\"table\") = lower(:t) ORDER BY m.name, f.id, f.seq"
    )
    FOREIGN_KEY_CHECK = "PRAGMA foreign_key_check({table})"
    TABLE = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"
    # what goes with a dropped table and is made again of its own text: its indexes (not the automatic ones of
    # its constraints, whose text is NULL) and triggers
    BESIDE = "SELECT sql FROM sqlite_master WHERE tbl_name = :t AND type IN ('index', 'trigger') AND sql IS NOT NULL"
    COLUMNS = "SELECT name FROM pragma_table_info(:t) ORDER BY cid"  # the stored ones: no generated column
    PRIMARY_KEY = "SELECT name FROM pragma_table_info(:t) WHERE pk > 0 ORDER BY pk"
    # a table's rename that re-reads no other table's triggers and views (3.26's re-reading fails on a view of
    # the table dropped a statement before; https://sqlite.org/pragma.html#pragma_legacy_alter_table)
    BEFORE = ("PRAGMA legacy_alter_table = ON",)
    AFTER = ("PRAGMA legacy_alter_table = OFF",)

    def retyped(self, create: str, name: str, types: dict[str, str], key: str | None, high: int | None, /) -> str:
        return retyped(create, name, types, key, high)

    def high_water(self, create: str, table: str, /) -> str | None:
        # sqlite_sequence is there once a table of AUTOINCREMENT is (https://sqlite.org/autoinc.html)
        if not _declares_autoincrement(create):
            return None
        return f"SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = {string_literal(table)}"

    def high_water_again(self, create: str, table: str, /) -> list[str]:
        found = _MARK.search(create)
        if found is None or _declares_autoincrement(create):
            return []
        name, high = string_literal(table), int(found.group(1))
        return [  # the copy's inserts made its row, which the rename carried; none where it copied no row
            f"UPDATE sqlite_sequence SET seq = max(seq, {high}) WHERE name = {name}",
            f"INSERT INTO sqlite_sequence (name, seq) SELECT {name}, {high} "
            f"WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = {name})",
        ]


REBUILD = _Rebuild()

#: Words that end a column's type in its definition (https://sqlite.org/syntax/column-constraint.html).
_CONSTRAINTS = frozenset(
    {"CONSTRAINT", "PRIMARY", "NOT", "NULL", "UNIQUE", "CHECK", "DEFAULT", "COLLATE", "REFERENCES", "GENERATED", "AS"}
)
_TABLE_CONSTRAINTS = frozenset({"CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"})
_TOKEN = re.compile(
    r"""\s+|--[^\n]*|/\*.*?(?:\*/|$)|'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|[(),]|[^\s(),'"`\[]+""",
    re.S,
)


def _unquoted(token: str) -> str:
    if token[:1] in '"`[':
        return token[1:-1].replace(token[0] * 2, token[0]) if token[0] != "[" else token[1:-1]
    return token


#: What an ``AUTOINCREMENT`` key made another type keeps in its table's text: the word, and the table's high-water
#: mark then (its ``sqlite_sequence`` row, which goes with the old table), so that the way back makes both again.
_MARK = re.compile(r"/\* seqid: AUTOINCREMENT (\d+) \*/")


def _declares_autoincrement(create: str) -> bool:
    return any(t.upper() == "AUTOINCREMENT" for t in _TOKEN.findall(create))


def retyped(create: str, name: str, types: dict[str, str], key: str | None, high: int | None = None) -> str:
    """``create`` (a table's ``CREATE TABLE`` as SQLite keeps it) for a table ``name`` (quoted) whose columns
    ``types`` (by name) have those types: the rest of the text as it is (every constraint, collation,
    default, check, the table's options).  The column ``key`` (the primary key, now of another type) gets
    ``NOT NULL`` (SQLite lets another type's key be NULL: https://sqlite.org/lang_createtable.html#the_primary_key)
    and loses ``AUTOINCREMENT`` (an ``INTEGER`` key's alone), which it keeps in a comment with ``high``, the
    table's high-water mark; made ``INTEGER`` again, the comment is the word again (:data:`_MARK`)."""
    tokens = _TOKEN.findall(create)
    if "".join(tokens) != create:
        raise InvalidArgumentError(f"the text of {name} could not be read: {create[:80]!r}")
    start = tokens.index("(")
    depth, end = 0, len(tokens)
    defs: list[list[str]] = []
    current: list[str] = []
    for i in range(start + 1, len(tokens)):
        token = tokens[i]
        if token == "(":
            depth += 1
        elif token == ")":
            if depth == 0:
                end = i
                break
            depth -= 1
        if token == "," and depth == 0:
            defs.append(current)
            current = []
        else:
            current.append(token)
    defs.append(current)
    wanted = {c.lower(): t for c, t in types.items()}
    done = set()
    out = []
    for part in defs:
        words = [i for i, t in enumerate(part) if not t.isspace() and not t.startswith(("--", "/*"))]
        column = _unquoted(part[words[0]]) if words else ""
        if not words or part[words[0]].upper() in _TABLE_CONSTRAINTS or column.lower() not in wanted:
            out.append("".join(part))
            continue
        typed, depth = [], 0
        for i in words[1:]:
            t = part[i]
            if depth == 0 and (t.upper() in _CONSTRAINTS or t == ","):
                break
            depth += t == "("
            depth -= t == ")"
            typed.append(i)
        new = list(part)
        if typed:
            new[typed[0] : typed[-1] + 1] = [wanted[column.lower()]]
        else:
            new[words[0] + 1 : words[0] + 1] = [" ", wanted[column.lower()]]
        if key is not None and column.lower() == key.lower():
            integer = wanted[column.lower()].upper() == "INTEGER"
            if integer:
                new = ["AUTOINCREMENT" if _MARK.fullmatch(t) else t for t in new]
            else:
                new = [f"/* seqid: AUTOINCREMENT {high or 0} */" if t.upper() == "AUTOINCREMENT" else t for t in new]
            said = [t.upper() for t in new if not t.isspace() and not t.startswith(("--", "/*"))]
            if not any(a == "NOT" and b == "NULL" for a, b in itertools.pairwise(said)):
                new.append(" NOT NULL")
        done.add(column.lower())
        out.append("".join(new))
    missing = set(wanted) - done
    if missing:
        raise InvalidArgumentError(f"the text of {name} defines no column {', '.join(sorted(missing))}")
    return f"CREATE TABLE {name} ({','.join(out)}){''.join(tokens[end + 1 :])}"


has_native_uuid = no_native_uuid
compare_order = bytewise_order
binary_literal = hex_literal
convert_column = no_conversion(NAME)  # the SQLAlchemy operation rewrites the values in Python instead
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)


# SQLite: 'now' is read once per statement step (so two readings agree) and has millisecond
# precision, so the 12 bits after the version nibble are random.
_MS = "cast((julianday('now') - 2440587.5) * 86400000 as integer)"
_VARIANT = "substr('89ab', 1 + (abs(random()) % 4), 1)"
_V7_HEX = (
    f"printf('%012x', {_MS}) || '7' || substr(hex(randomblob(2)), 1, 3) || "
    f"{_VARIANT} || substr(hex(randomblob(8)), 1, 15)"
)
_V7_TEXT = (
    f"printf('%08x-%04x-7', {_MS} / 65536, {_MS} % 65536) || "
    f"lower(substr(hex(randomblob(2)), 1, 3) || '-' || {_VARIANT} || "
    "substr(hex(randomblob(2)), 1, 3) || '-' || hex(randomblob(6)))"
)


def _shifted(sql: str, shift_us: int) -> str:
    """``sql`` with its reading of the clock (``julianday('now')``) moved by ``shift_us`` microseconds."""
    if not shift_us:
        return sql
    return sql.replace("julianday('now')", f"julianday('now', '{seconds_literal(shift_us)} seconds')")


def server_default(version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
    if version is None:
        raise unknown_version(NAME, "3.45")
    hex_v7, text_v7 = _shifted(_V7_HEX, shift_us), _shifted(_V7_TEXT, shift_us)
    if storage is Storage.BINARY:
        if not version_at_least(version, (3, 41)):
            raise ServerDefaultUnavailableError(
                f"SQLite {format_version(version)} cannot build a BLOB default (unhex() arrived in 3.41); "
                "use text or hex storage, or generate ids in Python"
            )
        sql = f"unhex({hex_v7})"
    elif storage is Storage.TEXT:
        sql = text_v7
    elif storage is Storage.HEX:
        sql = f"lower({hex_v7})"
    else:
        raise ServerDefaultUnavailableError("SQLite has no UUID column type")
    return ServerDefault(sql, 7, "UUIDv7 expression", " seconds')" if shift_us else "randomblob(")


adopted_default = no_adopted_default(NAME)
adoption_statements = no_adoption_statements


# --- what seqid doctor reads (seqid_orm.schema.doctor asks) ------------------------------------------


def _read_quote(name: object) -> str:
    return read_quote('"' + str(name).replace('"', '""') + '"')


_SQLITE_TABLES = (
    "SELECT name FROM {schema}.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
)


def _sqlite_columns(fetch: Fetch) -> list[KeyColumn]:
    """SQLite's key columns, in the main database and every attached one (``ATTACH DATABASE``: a
    table there is named ``schema.table``, as PostgreSQL's outside the current schema are)."""
    out = []
    # seq, name, file: main first, then temp (connection-private, skipped) and the attached ones
    for _seq, schema, _file in fetch("PRAGMA database_list", {}):
        if schema != "temp":
            out.extend(_sqlite_schema_columns(fetch, str(schema)))
    return out


def _sqlite_schema_columns(fetch: Fetch, schema: str) -> list[KeyColumn]:
    q = _read_quote(schema)
    main = schema == "main"
    out = []
    for (table,) in fetch(_SQLITE_TABLES.format(schema=q), {}):
        quoted = _read_quote(table)
        info = fetch(f"PRAGMA {q}.table_info({quoted})", {})  # cid, name, type, notnull, default, pk
        pk = [row for row in info if row[5]]
        types = {row[1]: row[2] for row in info}
        # id, seq, table, from, to, ...: a single-column foreign key, by the column it starts from
        links = fetch(f"PRAGMA {q}.foreign_key_list({quoted})", {})
        sizes = {row[0]: sum(1 for r in links if r[0] == row[0]) for row in links}
        references = {row[3]: row[2] for row in links if sizes[row[0]] == 1}
        if len(pk) == 1:
            out.append(
                KeyColumn(
                    table,
                    pk[0][1],
                    pk[0][2] or "",
                    True,
                    references=references.get(pk[0][1]),
                    schema=schema,
                    in_current_schema=main,
                )
            )
        for _, index, unique, origin, _partial in fetch(f"PRAGMA {q}.index_list({quoted})", {}):
            if not unique or origin == "pk":
                continue
            cols = fetch(f"PRAGMA {q}.index_info({_read_quote(index)})", {})
            if len(cols) == 1 and cols[0][2] is not None:
                name = cols[0][2]
                out.append(
                    KeyColumn(
                        table,
                        name,
                        types.get(name, ""),
                        False,
                        references=references.get(name),
                        schema=schema,
                        in_current_schema=main,
                    )
                )
    return out


class Doctor:
    """SQLite's catalog as ``seqid doctor`` reads it: the main database and every attached one."""

    SCHEMAS = True  # attached databases

    def session_statements(self, timeout_s: float, /) -> list[str]:
        return ["PRAGMA query_only = ON"]  # the adapter also opens the file read-only and sets a deadline

    def key_columns(self, fetch: Fetch, recover: Callable[[], None], /) -> list[KeyColumn]:
        return _sqlite_columns(fetch)

    def exists(self, table: str, schema: str | None, /) -> tuple[str, dict[str, object]]:
        where = _read_quote(schema or "main")
        return f"SELECT name FROM {where}.sqlite_master WHERE type = 'table' AND name = :table", {"table": table}

    def ideal_index_bytes(self, column: KeyColumn, /) -> int | None:
        return None


DOCTOR = Doctor()


# --- a live key column read before its first key (seqid_orm.schema.live asks) -----------------------

TYPED_COLUMNS = False  # any value in any column: the values say what they are, not the declared type


def column_catalog(table: str, column: str, schema: str | None, /) -> str | None:
    """The catalog row of a key column: its database (``main`` or an attached one), its declared type."""
    in_schema = "" if schema is None else f", {string_literal(schema)}"
    return (
        f"SELECT {string_literal(schema or 'main')}, type, 1, NULL "
        f"FROM pragma_table_info({string_literal(table)}{in_schema}) WHERE name = {string_literal(column)}"
    )
