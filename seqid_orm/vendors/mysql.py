"""MySQL 8 (no UUID type: ``BINARY(16)`` compares its bytes first to last).

The MySQL family's SQL for database-made ids lives here and MariaDB's module reuses it: a UUIDv7
built from one ``SYSDATE(6)`` reading and ``RANDOM_BYTES()``, which a column default may call from
MySQL 8.0.13 and MariaDB 10.10.  Text ids need a binary collation (``ascii_bin``): the default ones
are case-insensitive, and two bsv ids differing only in case would collide.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence

from ..errors import DatabaseUnavailableError, ServerDefaultUnavailableError
from ..ids.layout import Layout
from ._base import (
    Bounded,
    Fetch,
    InSchema,
    KeyColumn,
    ServerDefault,
    Step,
    Storage,
    TableFacts,
    TextColumnSpec,
    Version,
    backquoted,
    backslash_literal,
    bytewise_order,
    format_version,
    hex_literal,
    key_width,
    no_adopted_default,
    no_adoption_statements,
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
    qualify,
    row_params,
    seconds_literal,
    unknown_version,
    version_at_least,
)

NAME = "mysql"
DISTRIBUTED = False
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset="ascii", collation="ascii_bin")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP FOREIGN KEY"
INNER_SPLITS_HALF = False
quote_identifier = backquoted
string_literal = backslash_literal
# what changing a column's type holds while it rewrites the table (a conversion's refusal says it)
TYPE_CHANGE_HOLDS = "MySQL copies the table (ALGORITHM=COPY), no write for the whole copy"
qualified = qualify(quote_identifier)

has_native_uuid = no_native_uuid
compare_order = bytewise_order
binary_literal = hex_literal
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)


# 32 upper-case hex digits of a UUIDv7: one SYSDATE(6) reading as (ms << 12 | fraction) with
# '7' inserted after the millisecond digits, a variant byte 0b10xxxxxx, 7 random bytes.
V7_HEX = (
    "concat(insert(lpad(hex(floor(unix_timestamp(sysdate(6)) * 4096000)), 15, '0'), 13, 0, '7'), "
    "hex(ord(random_bytes(1)) & 63 | 128), hex(random_bytes(7)))"
)


def hyphenate(hex32: str) -> str:
    """SQL turning 32 hex digits into the canonical lower-case 36-character text."""
    return f"lower(insert(insert(insert(insert({hex32}, 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'))"


_EPOCH = "unix_timestamp(sysdate(6))"


def shifted(sql: str, shift_us: int) -> str:
    """``sql`` with its reading of the clock moved by ``shift_us`` microseconds: added to the seconds since
    the epoch, exact in decimal and blind to the session's time zone and its daylight-saving gaps (a
    ``SYSDATE(6) + INTERVAL`` is local time); written first, so that the default SQLAlchemy reflects,
    cut at its first space (``...hex(floor((-2592000.000000``), still shows that it is shifted."""
    return sql.replace(_EPOCH, f"({seconds_literal(shift_us)} + {_EPOCH})") if shift_us else sql


def v7_default(
    name: str, version: Version, minimum: tuple[int, ...], storage: Storage, shift_us: int = 0
) -> ServerDefault:
    """The UUIDv7 expression in a ``BINARY(16)`` or text column of the MySQL family (``name`` and the
    first ``minimum`` version whose defaults may call ``RANDOM_BYTES()``); ``storage`` may be the
    native ``UUID`` of MariaDB 10.11.5 and later, which takes the text and keeps a UUIDv7 in order."""
    if not version_at_least(version, minimum):
        raise ServerDefaultUnavailableError(
            f"{name} {format_version(version)} cannot make a UUID column default from a strong random "
            f"source (needs {name} {'.'.join(map(str, minimum))}+ for RANDOM_BYTES() in a default)"
        )
    v7 = shifted(V7_HEX, shift_us)
    sql = {
        Storage.BINARY: f"unhex({v7})",
        Storage.NATIVE: hyphenate(v7),
        Storage.TEXT: hyphenate(v7),
        Storage.HEX: f"lower({v7})",
    }[storage]
    return ServerDefault(sql, 7, "UUIDv7 expression", "floor((" if shift_us else "sysdate(6)")


def server_default(version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
    if version is None:
        raise unknown_version(NAME, "8.0.36")
    if storage is Storage.NATIVE:
        raise ServerDefaultUnavailableError(f"MySQL {format_version(version)} has no UUID column type")
    return v7_default("MySQL", version, (8, 0, 13), storage, shift_us)


adopted_default = no_adopted_default(NAME)
adoption_statements = no_adoption_statements


# --- changing a live table (seqid_orm.schema.online asks) ---------------------------------------------


def in_database(table: str, alias: str = "", schema_column: str = "TABLE_SCHEMA") -> tuple[str, dict[str, object]]:
    """The catalog's condition naming ``table`` (``alias``: the prefix of the view's columns; ``schema_column``
    its database's column), and its parameters: in the current database, or where it is an
    :class:`~._base.InSchema`, in its own (another database's table whose foreign key references the current
    one's, which a change follows)."""
    schema = ":s" if isinstance(table, InSchema) else "DATABASE()"
    params: dict[str, object] = {"s": table.schema, "t": table.name} if isinstance(table, InSchema) else {"t": table}
    return f"{alias}{schema_column} = {schema} AND {alias}TABLE_NAME = :t", params


class Online:
    """The MySQL family's online statements: InnoDB's online DDL with the algorithm asked for
    explicitly, so the server refuses rather than copies the table ("InnoDB Online DDL Operations"):
    ``ADD COLUMN`` instant, the unique index in place with no lock.  Each statement waits for the
    table's metadata lock at most the bound (``lock_wait_timeout``, whole seconds): MySQL has no
    per-statement form for it, so it is set on the operation's connection and put back to the server's
    default after (MariaDB's rules say it per statement)."""

    LONG_STATEMENT_SETTINGS: tuple[str, ...] = ()  # no step runs outside a bounded statement
    TRIGGERS_CAN_WAIT = False  # no session switch keeps InnoDB's triggers from firing

    def quote(self, name: str, /) -> str:
        return quote_identifier(name)

    @staticmethod
    def lock_seconds(lock_ms: int) -> int:
        return max(1, round(lock_ms / 1000))

    def bounded(self, statement: str, lock_ms: int, /) -> Bounded:
        return Bounded(
            (f"SET SESSION lock_wait_timeout = {self.lock_seconds(lock_ms)}", statement),
            after=("SET SESSION lock_wait_timeout = DEFAULT",),
        )

    def fact_reads(self, table: str, column: str, index: str, /) -> dict[str, tuple[str, dict[str, object]]]:
        named, t = in_database(table)
        where = f"WHERE {named}"
        return {
            "column": (
                f"SELECT IS_NULLABLE = 'NO' FROM information_schema.COLUMNS {where} AND COLUMN_NAME = :c",
                {**t, "c": column},
            ),
            "index": (
                f"SELECT 1 FROM information_schema.STATISTICS {where} AND INDEX_NAME = :i LIMIT 1",
                {**t, "i": index},
            ),
            "constraint": (
                f"SELECT 1 FROM information_schema.STATISTICS {where} AND INDEX_NAME = :i LIMIT 1",
                {**t, "i": index},
            ),
            # a unique index must hold every column of the partitioning function: its expression, once
            "partition_key": (
                f"SELECT PARTITION_EXPRESSION FROM information_schema.PARTITIONS {where} "
                "AND PARTITION_NAME IS NOT NULL LIMIT 1",
                t,
            ),
        }

    def estimate(self, table: str, /) -> tuple[str, dict[str, object]]:
        named, t = in_database(table)
        return f"SELECT TABLE_ROWS FROM information_schema.TABLES WHERE {named}", t

    def reads_every_row(self, table: str, /) -> tuple[str, dict[str, object]] | None:
        # no privilege function to ask first (roles, database- and column-level grants:
        # https://mariadb.com/kb/en/grant/); a refused statement leaves the transaction as it was
        return None

    def may_alter(self, table: str, /) -> tuple[str, dict[str, object]] | None:
        return None  # grants at global, database, table level and through roles: the ALTER itself says

    def client_view(self) -> str:
        return "SELECT CONNECTION_ID()"

    def is_client(self, ends: tuple[object, object], row: Sequence[object], /) -> bool:
        return False  # never asked: no step of this family runs outside a bounded statement

    def setting(self, name: str, /) -> str:
        return f"SELECT @@SESSION.{name}"

    def set_session(self, name: str, value: str, /) -> str:
        return f"SET SESSION {name} = {value}"

    def triggers_privilege(self) -> str:
        return "SELECT 0"

    def hold_triggers(self) -> str:
        return ""

    def add_column(self, table: str, column: str, column_type: str, /) -> str:
        return f"ALTER TABLE {table} ADD COLUMN {column} {column_type} NULL, ALGORITHM=INSTANT"

    def set_default(self, table: str, column: str, default_sql: str, /) -> str:
        return f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT ({default_sql}), ALGORITHM=INSTANT"

    def unique_steps(self, table: str, column: str, index: str, facts: TableFacts, /) -> list[Step]:
        if facts.index is not None:
            return []
        return [Step(f"ALTER TABLE {table} ADD UNIQUE INDEX {index} ({column}), ALGORITHM=INPLACE, LOCK=NONE")]

    def not_null_steps(
        self, table: str, column: str, column_type: str, check: str, default_sql: str | None, /
    ) -> list[Step]:
        # MODIFY restates the column: a default not restated is dropped with it
        kept = "" if default_sql is None else f" DEFAULT ({default_sql})"
        return [Step(f"ALTER TABLE {table} MODIFY {column} {column_type} NOT NULL{kept}, ALGORITHM=INPLACE, LOCK=NONE")]

    def drop_default(self, table: str, column: str, /) -> str:
        return f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT, ALGORITHM=INSTANT"

    def drop_steps(self, table: str, column: str, index: str, facts: TableFacts, /) -> list[Step]:
        steps = []
        if facts.index is not None:
            steps.append(Step(f"ALTER TABLE {table} DROP INDEX {index}, ALGORITHM=INPLACE, LOCK=NONE"))
        if facts.column_present:
            steps.append(Step(f"ALTER TABLE {table} DROP COLUMN {column}, ALGORITHM=INPLACE, LOCK=NONE"))
        return steps

    def text_type(self) -> str:
        return "TEXT"

    def key_cast(self, declared: str, /) -> str:
        """A ``JSON_TABLE`` column's type for a key of ``declared`` type."""
        return declared

    def param(self, storage: Storage, value: uuid.UUID, /) -> object:
        # MariaDB's UUID type reads its canonical text
        return {Storage.BINARY: value.bytes, Storage.HEX: value.hex}.get(storage, str(value))

    def batch_update(
        self,
        table: str,
        column: str,
        keys: Sequence[str],
        key_casts: Sequence[str],
        column_type: str,
        rows: Sequence[Sequence[object]],
        values: Sequence[object],
        /,
    ) -> tuple[str, dict[str, object]]:
        """``UPDATE ... JOIN JSON_TABLE(:rows, ...)``: the batch as one JSON document of ``[key..., value]``
        rows (bytes as hex, ``UNHEX``-ed back), the same text each batch (a ``UNION ALL`` of the rows took
        2.2x as long); that list stays for keys of types JSON cannot carry, or not known."""
        hexed: set[str] = set()
        if len(key_casts) == len(keys) and rows and all(isinstance(v, (int, str, bytes)) for v in rows[0]):
            hexed = {f"k{i}" for i, v in enumerate(rows[0]) if isinstance(v, bytes)}
            hexed |= {"v"} if values and isinstance(values[0], bytes) else set()
            fields = [
                f"k{i} {'TEXT' if f'k{i}' in hexed else self.key_cast(cast)} PATH '$[{i}]'"
                for i, cast in enumerate(key_casts)
            ]
            fields.append(f"v TEXT PATH '$[{len(keys)}]'")
            document = json.dumps(
                [
                    [v.hex() if isinstance(v, bytes) else v for v in (*row, value)]
                    for row, value in zip(rows, values, strict=True)
                ]
            )
            source = f"JSON_TABLE(:rows, '$[*]' COLUMNS ({', '.join(fields)})) s"
            params: dict[str, object] = {"rows": document}
        else:
            selects = " UNION ALL ".join(
                "SELECT " + ", ".join([*(f":r{r}k{i} AS k{i}" for i in range(len(keys))), f":r{r}v AS v"])
                for r in range(len(rows))
            )
            source, params = f"({selects}) s", row_params(rows, values)
        match = " AND ".join(
            f"t.{key} = " + (f"UNHEX(s.k{i})" if f"k{i}" in hexed else f"s.k{i}") for i, key in enumerate(keys)
        )
        value = "UNHEX(s.v)" if "v" in hexed else "s.v"
        return f"UPDATE {table} t JOIN {source} ON {match} SET t.{column} = {value} WHERE t.{column} IS NULL", params

    def key_compare(
        self, keys: Sequence[str], key_casts: Sequence[str], key: Sequence[object], op: str, name: str, /
    ) -> tuple[str, dict[str, object]]:
        marks = [f"UNHEX(:{name}{i})" if isinstance(v, bytes) else f":{name}{i}" for i, v in enumerate(key)]
        params = {f"{name}{i}": (v.hex() if isinstance(v, bytes) else v) for i, v in enumerate(key)}
        return f"({', '.join(keys)}) {op} ({', '.join(marks)})", params

    def key_at(self, storage: Storage, layout: Layout, stamp: str, /) -> str | None:
        """The UUIDv7 expression of the server default with the stamp for the clock, its epoch counted as
        ``TIMESTAMPDIFF`` from 1970-01-01 (the value as the session reads it, as UTC: as Python reads the
        naive datetime the driver hands over); text and binary storage, and MariaDB's ``UUID`` type where it
        keeps a UUIDv7 in order (``TIME_FIRST``, 10.11.5 and later)."""
        if layout is not Layout.TIME_FIRST:
            return None
        # the millisecond << 12 | its fraction in 1/4096, in whole numbers: a division by 10**6 keeps only
        # div_precision_increment (4) decimals
        ticks = f"floor(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {stamp}) * 4096 / 1000)"
        v7 = V7_HEX.replace(f"floor({_EPOCH} * 4096000)", ticks)
        assert v7 != V7_HEX
        return {
            Storage.BINARY: f"unhex({v7})",
            Storage.NATIVE: hyphenate(v7),
            Storage.TEXT: hyphenate(v7),
            Storage.HEX: f"lower({v7})",
        }[storage]


ONLINE = Online()
REKEY = None  # not yet: its integer keys are changed offline (docs/how-to/migrate.md)
REBUILD = None


# --- what seqid doctor reads (seqid_orm.schema.doctor asks) ------------------------------------------

_MYSQL_KEYS = """
SELECT s.TABLE_NAME, s.COLUMN_NAME, c.COLUMN_TYPE, s.INDEX_NAME = 'PRIMARY', t.TABLE_ROWS, s.INDEX_NAME,
       c.IS_NULLABLE = 'YES',
       CASE WHEN s.INDEX_NAME = 'PRIMARY' AND t.ENGINE = 'InnoDB' THEN t.DATA_LENGTH END,
       (SELECT k.REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE k
        WHERE k.TABLE_SCHEMA = s.TABLE_SCHEMA AND k.TABLE_NAME = s.TABLE_NAME AND k.COLUMN_NAME = s.COLUMN_NAME
          AND k.REFERENCED_TABLE_NAME IS NOT NULL LIMIT 1)
FROM information_schema.STATISTICS s
JOIN information_schema.COLUMNS c
  ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME
JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = s.TABLE_SCHEMA AND t.TABLE_NAME = s.TABLE_NAME
WHERE s.TABLE_SCHEMA = DATABASE() AND s.NON_UNIQUE = 0 AND t.TABLE_TYPE = 'BASE TABLE'
  AND s.SUB_PART IS NULL
  AND (SELECT COUNT(*) FROM information_schema.STATISTICS o WHERE o.TABLE_SCHEMA = s.TABLE_SCHEMA
       AND o.TABLE_NAME = s.TABLE_NAME AND o.INDEX_NAME = s.INDEX_NAME) = 1
ORDER BY s.TABLE_NAME, s.INDEX_NAME <> 'PRIMARY', s.COLUMN_NAME
"""


# InnoDB's own statistics of each index (ANALYZE TABLE and the background statistics keep them):
# readable where the user may read the ``mysql`` database, else no size is shown.
_INNODB_LEAVES = """
SELECT table_name, index_name, stat_value, @@innodb_page_size FROM mysql.innodb_index_stats
WHERE database_name = DATABASE() AND stat_name = 'n_leaf_pages'
"""


# An InnoDB page's room for records: 16 KiB less its headers, trailer and the infimum and supremum
# records (https://dev.mysql.com/doc/refman/8.0/en/innodb-physical-record.html); each record has a
# 5-byte header and about a third of a 2-byte directory slot.
_INNODB_PAGE_ROOM = 38 + 56 + 26 + 8
_INNODB_RECORD = 5 + 2 / 6


def _innodb_leaves(fetch: Fetch, recover: Callable[[], None]) -> tuple[dict[tuple[str, str], int], int]:
    """Each index's leaf pages in bytes, from InnoDB's statistics (empty where they cannot be read),
    and the page size."""
    try:
        rows = fetch(_INNODB_LEAVES, {})
    except DatabaseUnavailableError:  # no right to read the mysql database: sizes unknown
        recover()
        return {}, 16384
    page = int(rows[0][3]) if rows else 16384
    return {(str(t), str(i)): int(pages) * page for t, i, pages, _ in rows}, page


def _innodb_ideal(rows: int | None, key: int | None, primary_key: int | None, nullable: bool, page: int) -> int | None:
    """A unique InnoDB index's leaf pages (bytes) built in key order: each record its header, the key
    and the primary key it points to (a nullable key one byte more), pages full as key-order inserts
    leave them (50,000 UUIDs: 92 leaf pages measured, 91 from this)."""
    if rows is None or key is None or primary_key is None:
        return None
    per_record = _INNODB_RECORD + key + primary_key + (1 if nullable else 0)
    return max(1, math.ceil(rows * per_record / (page - _INNODB_PAGE_ROOM))) * page


def _mysql_columns(fetch: Fetch, recover: Callable[[], None]) -> list[KeyColumn]:
    """MariaDB's and MySQL's key columns.  InnoDB's primary key is the table (its clustered index),
    so its size is the table's ``DATA_LENGTH``, with no ideal (its records hold every column).  A
    unique index beside it shows its leaf pages from InnoDB's own statistics, and beside them the
    leaf pages the same index would take built in key order, where its key and the table's primary
    key have fixed widths (``information_schema``'s ``INDEX_LENGTH`` adds up every secondary index)."""
    found = fetch(_MYSQL_KEYS, {})
    leaves, page = (
        _innodb_leaves(fetch, recover) if any(not primary for _t, _c, _s, primary, *_ in found) else ({}, 16384)
    )
    pk_width = {str(t): key_width(str(sql_type)) for t, _c, sql_type, primary, *_ in found if primary}
    out = []
    for table, column, sql_type, primary, rows, index, nullable, size, references in found:
        key_rows = None if rows is None else int(rows)
        if primary:
            index_bytes, ideal = (None if size is None else int(size)), None
        else:
            index_bytes = leaves.get((str(table), str(index)))
            ideal = None
            if index_bytes is not None:
                ideal = _innodb_ideal(
                    key_rows, key_width(str(sql_type)), pk_width.get(str(table)), bool(nullable), page
                )
        out.append(
            KeyColumn(
                str(table),
                str(column),
                str(sql_type),
                bool(primary),
                key_rows,
                index_bytes,
                references=None if references is None else str(references),
                ideal_bytes=ideal,
            )
        )
    return out


class Doctor:
    """MySQL's catalog as ``seqid doctor`` reads it (MariaDB's the same, its statement bound apart)."""

    SCHEMAS = False  # the report is the database the URL names

    def _statement_bound(self, ms: int) -> str:
        return f"SET SESSION max_execution_time = {ms}"

    def session_statements(self, timeout_s: float, /) -> list[str]:
        # a table another session holds (LOCK TABLES ... WRITE: a dump, a migration) makes a read wait for its
        # metadata lock, which lock_wait_timeout (whole seconds) ends with error 1205: the table's line says it
        # could not be read, and the rest of the report comes
        ms = max(1, math.ceil(timeout_s * 1000))
        lock_wait = f"SET SESSION lock_wait_timeout = {max(1, math.ceil(timeout_s))}"
        return ["SET SESSION TRANSACTION READ ONLY", self._statement_bound(ms), lock_wait]

    def key_columns(self, fetch: Fetch, recover: Callable[[], None], /) -> list[KeyColumn]:
        return _mysql_columns(fetch, recover)

    def exists(self, table: str, schema: str | None, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :table",
            {"table": table},
        )

    def ideal_index_bytes(self, column: KeyColumn, /) -> int | None:
        return column.ideal_bytes  # the secondary indexes' (the catalog's reader models InnoDB's pages)


DOCTOR = Doctor()


# --- a live key column read before its first key (seqid_orm.schema.live asks) -----------------------

TYPED_COLUMNS = True


def column_catalog(table: str, column: str, schema: str | None, /) -> str | None:
    """The catalog row of a key column: its database, its declared type, whether this user may read it,
    its comment."""
    owner = "DATABASE()" if schema is None else string_literal(schema)
    return (
        "SELECT TABLE_SCHEMA, COLUMN_TYPE, FIND_IN_SET('select', PRIVILEGES) > 0, COLUMN_COMMENT "
        "FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA = {owner} AND TABLE_NAME = {string_literal(table)} "
        f"AND COLUMN_NAME = {string_literal(column)}"
    )
