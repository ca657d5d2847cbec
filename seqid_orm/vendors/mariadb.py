"""MariaDB (10.7 added a ``UUID`` type; 11.7 makes ``UUID_v7()`` itself).

Its ``UUID`` type stores some values with their groups reversed, so that the *last* group sorts
first (MDEV-26664): before 10.10.6/10.11.5/11.0.3/11.1.2 every value, since then only versions 1-5
with the RFC variant (MDEV-29959, MDEV-31926); RFC versions 6-8 are refused outright.  So the layout
follows the server version *and* the bits of the values made: UUIDv7 sorts by time on a current
server, the Microsoft-variant ``TIME_LAST`` ids on every one.  ``seqid probe`` measures it live.
``BINARY(16)`` and text compare bytewise, as on MySQL.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence

from ..errors import InvalidArgumentError, ServerDefaultUnavailableError
from ..ids.layout import ORDER_MARIADB_SWAPPED, Layout
from . import mysql
from ._base import (
    ORDER_BYTES,
    Bounded,
    ColumnRef,
    Companion,
    InSchema,
    Quote,
    Reference,
    ServerDefault,
    Step,
    Storage,
    Swap,
    Swapped,
    SwappedIndex,
    Version,
    backquoted,
    backslash_literal,
    format_version,
    hex_literal,
    no_adopted_default,
    no_adoption_statements,
    unknown_version,
    version_at_least,
)
from .mysql import in_database

NAME = "mariadb"
DISTRIBUTED = False
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = mysql.TEXT_ID_COLUMN
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP FOREIGN KEY"
INNER_SPLITS_HALF = False
quote_identifier = backquoted
string_literal = backslash_literal
# what changing a column's type holds while it rewrites the table (a conversion's refusal says it)
TYPE_CHANGE_HOLDS = "MariaDB copies the table (ALGORITHM=COPY), no write for the whole copy"
qualified = mysql.qualified
TYPED_COLUMNS = mysql.TYPED_COLUMNS
column_catalog = mysql.column_catalog

#: The column type each storage gets (as seqid's ``SeqUUID`` declares it), for conversions.
COLUMN_TYPES = {Storage.NATIVE: "UUID", Storage.BINARY: "BINARY(16)", Storage.TEXT: "CHAR(36)", Storage.HEX: "CHAR(32)"}

binary_literal = hex_literal


def has_native_uuid(version: Version, /) -> bool:
    return version is None or tuple(version[:2]) >= (10, 7)


# MariaDB stopped byte-swapping UUIDs of version >= 6 in these releases (MDEV-29959 and
# MDEV-31926); every series after 11.1 has it from the start.
_UUID_FIX: dict[tuple[int, ...], tuple[int, ...]] = {
    (10, 10): (10, 10, 6),
    (10, 11): (10, 11, 5),
    (11, 0): (11, 0, 3),
    (11, 1): (11, 1, 2),
}


def swaps_selectively(server_version: Version) -> bool:
    """True if this MariaDB stores only UUID versions 1-5 swapped (else it swaps all)."""
    if server_version is None:
        return True  # assume a current server; offline users pass layout= explicitly
    version = tuple(server_version[:3]) + (0,) * (3 - len(server_version[:3]))
    fixed = _UUID_FIX.get(version[:2])
    if fixed is not None:
        return version >= fixed
    return version >= (11, 2, 0)


def _native_order(value: uuid.UUID, server_version: Version) -> tuple[int, ...] | None:
    i = value.int
    version = (i >> 76) & 0xF
    variant_rfc = (i >> 62) & 0b11 == 0b10
    variant_bit = (i >> 63) & 1
    if not swaps_selectively(server_version):
        return ORDER_MARIADB_SWAPPED
    if variant_rfc and version >= 8:
        return None  # refused by the server: "Incorrect uuid value"
    if variant_bit and 1 <= version <= 5:
        return ORDER_MARIADB_SWAPPED
    return ORDER_BYTES


def compare_order(version: Version, storage: Storage, value: uuid.UUID, /) -> tuple[int, ...] | None:
    if storage is not Storage.NATIVE:
        return ORDER_BYTES
    return _native_order(value, version) if has_native_uuid(version) else None


_V1_SAMPLE = uuid.UUID(int=(1 << 76) | (0b10 << 62))  # the version/variant bits of UUID() values
_V7_SAMPLE = uuid.UUID(int=(7 << 76) | (0b10 << 62))  # those of the UUIDv7 expression's values


def server_default(version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
    if version is None:
        raise unknown_version(NAME, "mariadb-10.11.5")
    if shift_us:  # UUID_v7() and UUID() take no time: the expression, which reads SYSDATE(6)
        if compare_order(version, storage, _V7_SAMPLE) != ORDER_BYTES:  # the uuid type before 10.11.5
            raise ServerDefaultUnavailableError(
                f"MariaDB {format_version(version)} makes a UUID column's values with UUID(), which takes no "
                "time to shift, and its uuid type scatters a UUIDv7 before 10.11.5: use storage='binary', or "
                "make the keys in Python (comb_at)"
            )
        return mysql.v7_default("MariaDB", version, (10, 10), storage, shift_us)
    if version_at_least(version, (11, 7)):
        v7 = "uuid_v7()"
        sql = {
            Storage.NATIVE: v7,
            Storage.BINARY: f"unhex(replace({v7}, '-', ''))",
            Storage.TEXT: f"cast({v7} as char(36))",
            Storage.HEX: f"replace({v7}, '-', '')",
        }[storage]
        return ServerDefault(sql, 7, "UUID_v7()", "uuid_v7()")
    if storage is Storage.NATIVE:
        if not has_native_uuid(version):
            raise ServerDefaultUnavailableError(f"MariaDB {format_version(version)} has no UUID column type")
        # UUID() makes version-1 values; MariaDB compares those node first, then clock
        # sequence, then time_hi, time_mid, time_low: time order for one server's values.
        assert compare_order(version, storage, _V1_SAMPLE) == ORDER_MARIADB_SWAPPED
        return ServerDefault("uuid()", 1, "UUID()", "uuid()")
    return mysql.v7_default("MariaDB", version, (10, 10), storage)


# The sequential-uuids functions as stored functions (10.10+ for RANDOM_BYTES()).  A function cannot
# call NEXTVAL on a sequence given by name (no dynamic SQL in functions), so uuid_sequence_nextval takes
# the value NEXTVAL(s) returned; they return the 36-character text, with the prefix where the target
# column compares first.  MariaDB refuses stored functions in a column DEFAULT (error 1901), so they
# serve inserts and SQLAlchemy's client-side SQL defaults.
_CORE = """
CREATE OR REPLACE FUNCTION seqid_sequential_uuid(val BIGINT, block_size INT, block_count INT)
RETURNS CHAR(36) CHARACTER SET ascii NOT DETERMINISTIC NO SQL SQL SECURITY INVOKER
BEGIN
    DECLARE bits INT DEFAULT 1;
    DECLARE slots BIGINT DEFAULT 2;
    DECLARE nbytes INT;
    DECLARE prefix_count BIGINT;
    DECLARE rescaled BIGINT;
    DECLARE h CHAR(32) CHARACTER SET ascii;
    DECLARE p CHAR(12) CHARACTER SET ascii;
    IF block_size < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'block size must be a positive integer';
    END IF;
    IF block_count < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'number of blocks must be a positive integer';
    END IF;
    WHILE block_count > slots DO
        SET bits = bits + 1;
        SET slots = slots * 2;
    END WHILE;
    SET nbytes = (bits + 7) DIV 8;
    SET prefix_count = 1 << (8 * nbytes);
    SET rescaled = GREATEST(1, (CAST(block_size AS SIGNED) * block_count) DIV prefix_count);
    -- DIV truncates toward zero as C does; & takes the two's complement bits
    SET p = LPAD(HEX((val DIV rescaled) & (prefix_count - 1)), 2 * nbytes, '0');
    SET h = LOWER(HEX(RANDOM_BYTES(16)));
    SET h = {place};
    SET h = INSERT(h, 13, 1, '4');
    SET h = INSERT(h, 17, 1, LOWER(HEX((CONV(SUBSTR(h, 17, 1), 16, 10) & 3) | 8)));
    RETURN LOWER(CONCAT_WS('-', SUBSTR(h, 1, 8), SUBSTR(h, 9, 4), SUBSTR(h, 13, 4), SUBSTR(h, 17, 4),
                           SUBSTR(h, 21, 12)));
END
"""

# where the prefix goes in the 32 hex digits: first (bytes 0..), or leading the last six bytes (10..)
_PLACE = {
    Layout.TIME_FIRST: "CONCAT(p, SUBSTR(h, 2 * nbytes + 1))",
    Layout.TIME_LAST: "CONCAT(SUBSTR(h, 1, 20), p, SUBSTR(h, 21 + 2 * nbytes))",
}

_SEQUENCE = """
CREATE OR REPLACE FUNCTION uuid_sequence_nextval(val BIGINT, block_size INT, block_count INT)
RETURNS CHAR(36) CHARACTER SET ascii NOT DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN seqid_sequential_uuid(val - 1, block_size, block_count)
"""

_TIME = """
CREATE OR REPLACE FUNCTION uuid_time_nextval(interval_length INT, interval_count INT)
RETURNS CHAR(36) CHARACTER SET ascii NOT DETERMINISTIC NO SQL SQL SECURITY INVOKER
BEGIN
    IF interval_length < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'length of interval must be a positive integer';
    END IF;
    IF interval_count < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'number of intervals must be a positive integer';
    END IF;
    RETURN seqid_sequential_uuid(UNIX_TIMESTAMP(), interval_length, interval_count);
END
"""


def sequential_functions(prefix_layout: Layout, /) -> list[str]:
    """The three functions, the prefix first (``BINARY(16)``, text) or leading the last six bytes
    (the ``UUID`` type, which compares version-4 values last group first)."""
    if prefix_layout not in _PLACE:
        raise InvalidArgumentError(f"the MariaDB functions place the prefix first or last, not {prefix_layout.value}")
    return [_CORE.format(place=_PLACE[prefix_layout]).strip(), _SEQUENCE.strip(), _TIME.strip()]


def drop_sequential_functions() -> list[str]:
    return [
        f"DROP FUNCTION IF EXISTS {name}"
        for name in ("uuid_sequence_nextval", "uuid_time_nextval", "seqid_sequential_uuid")
    ]


def convert_column(q: Quote, ref: ColumnRef, src: Storage, dst: Storage, /) -> list[str]:
    """``MODIFY``, which converts text, 32 hex digits and ``BINARY(16)`` to ``UUID`` and back to text and
    ``BINARY(16)`` by itself (checked on 10.11); to 32 hex digits it goes through ``CHAR(36)``.  MariaDB's
    DDL is not transactional: a failure midway leaves the statements before it applied."""
    null = "NULL" if ref.nullable else "NOT NULL"
    table, column = q(ref.table), q(ref.column)
    modify = f"ALTER TABLE {table} MODIFY {column} {{}} {null}"
    if Storage.NATIVE not in (src, dst):
        raise InvalidArgumentError("on MariaDB seqid converts to and from the native UUID type only")
    if dst is Storage.HEX:  # MODIFY would cut the 36 characters to 32: go through the text first
        return [
            modify.format("CHAR(36)"),
            f"UPDATE {table} SET {column} = REPLACE({column}, '-', '')",
            modify.format("CHAR(32)"),
        ]
    return [modify.format(COLUMN_TYPES[dst])]  # MODIFY converts the values itself


adopted_default = no_adopted_default(NAME)
adoption_statements = no_adoption_statements


# --- changing a live table (seqid_orm.schema.online asks) ---------------------------------------------

#: The prefix of a statement that carries its own ``SET STATEMENT`` settings (MariaDB's per-statement settings:
#: https://mariadb.com/kb/en/set-statement/), which :meth:`Online.bounded` extends with the bound's.
_OWN_SETTINGS = "SET STATEMENT "
_COLLATE = re.compile(r"\s+(COLLATE|CHARACTER SET|CHARSET)\s+\S+", re.IGNORECASE)


class Online(mysql.Online):
    """MariaDB's online statements: MySQL's, each with its bounds in the statement itself
    (``SET STATEMENT lock_wait_timeout = n, max_statement_time = 0 FOR ...``, MariaDB 10.1.2+), so no
    session setting is changed at all; and its ``UUID`` type, which ``JSON_TABLE`` cannot declare,
    read from the batch's document as its canonical text and compared as that."""

    def bounded(self, statement: str, lock_ms: int, /) -> Bounded:
        seconds = self.lock_seconds(lock_ms)
        bound = f"SET STATEMENT lock_wait_timeout = {seconds}, max_statement_time = 0"
        if statement.startswith(_OWN_SETTINGS):  # a statement with settings of its own: the bound's beside them
            return Bounded((f"{bound}, {statement[len(_OWN_SETTINGS) :]}",))
        return Bounded((f"{bound} FOR {statement}",))

    def key_cast(self, declared: str, /) -> str:
        # JSON_TABLE's columns take no UUID type (error 1064, issue 73) and the key's own collation
        # belongs to the key's column: the comparison converts the text to it
        bare = _COLLATE.sub("", declared).strip()
        return "CHAR(36)" if bare.upper() == "UUID" else bare


ONLINE = Online()
_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "bigint")
#: A column's full type as ``MODIFY`` must restate it: its type, and a text's character set and collation
#: (left out, ``MODIFY`` would convert the column to the table's: a copy of the table)
_FULL_TYPE = (
    "CONCAT(c.COLUMN_TYPE, IF(c.COLLATION_NAME IS NULL, '', "
    "CONCAT(' CHARACTER SET ', c.CHARACTER_SET_NAME, ' COLLATE ', c.COLLATION_NAME)))"
)


def _hex_if(kept_type: str, text: str) -> str:
    """``text`` (a UUID's 36 characters) as a column of ``kept_type`` holds it: 32 without hyphens."""
    return f"REPLACE({text}, '-', '')" if "(32)" in kept_type else text


class Rekey:
    """MariaDB's statements (10.7 and later: its ``uuid`` type) for changing a key of UUIDs kept as text
    (``char(36)``, ``char(32)``: Django before 5.0) to the ``uuid`` type, with every foreign key to it
    (:mod:`seqid_orm.schema.rekey`).  Two ``BEFORE`` triggers a table keep the new columns in step (``CAST(...
    AS UUID)``); every index and ``NOT NULL`` is built ``ALGORITHM=INPLACE, LOCK=NONE`` (reads and writes go on:
    "InnoDB Online DDL Operations" in MariaDB's docs); the new foreign keys are added with
    ``foreign_key_checks = 0`` (the only way InnoDB adds one in place), then their rows counted for orphans.
    The contract moves the primary key in place (a rebuild that lets writes go on), then swaps the names
    under ``LOCK TABLES`` for milliseconds: MariaDB's DDL does not roll back, so no transaction could hold it.

    An integer key's new column cannot be kept in step for the application's inserts: a ``BEFORE INSERT``
    trigger sees 0 for an ``AUTO_INCREMENT`` key (its value is made after the trigger: "Trigger Overview"),
    and a stored generated column or a default may not read one (error 1901).  So its keys come late
    (:meth:`late_keys`): the release N's inserts leave the new column ``NULL`` (the key's ``AUTO_INCREMENT``
    and ``LAST_INSERT_ID()`` as they were), and the contract step, once no release N code inserts, fills
    those rows and adds the new foreign keys before it swaps.  A child's new column needs no look-up (its
    key is the integer's), so it is in step throughout."""

    def primary_key(self, table: str, /) -> tuple[str, dict[str, object]]:
        named, t = in_database(table, "k.")
        return (
            f"SELECT k.COLUMN_NAME, {_FULL_TYPE} FROM information_schema.KEY_COLUMN_USAGE k "
            "JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = k.TABLE_SCHEMA AND c.TABLE_NAME = k.TABLE_NAME "
            f"AND c.COLUMN_NAME = k.COLUMN_NAME WHERE {named} AND k.CONSTRAINT_NAME = 'PRIMARY' "
            "ORDER BY k.ORDINAL_POSITION",
            t,
        )

    def column_type(self, table: str, column: str, /) -> tuple[str, dict[str, object]]:
        named, t = in_database(table, "c.")
        return f"SELECT {_FULL_TYPE} FROM information_schema.COLUMNS c WHERE {named} AND c.COLUMN_NAME = :c", {
            **t,
            "c": column,
        }

    def key_constraint(self, table: str, /) -> tuple[str, dict[str, object]]:
        return ("SELECT 'PRIMARY'", {})

    def references(self, table: str, column: str, /) -> tuple[str, dict[str, object]]:
        named, t = in_database(table, "k.REFERENCED_")
        return (
            f"SELECT k.CONSTRAINT_NAME, k.TABLE_NAME, k.COLUMN_NAME, c.IS_NULLABLE = 'NO', r.DELETE_RULE, "
            # a composite key's every column, in its order, and what each references
            "r.UPDATE_RULE, (SELECT JSON_ARRAYAGG(JSON_ARRAY(n.COLUMN_NAME, n.REFERENCED_COLUMN_NAME) "
            "ORDER BY n.ORDINAL_POSITION) FROM information_schema.KEY_COLUMN_USAGE n "
            "WHERE n.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND n.TABLE_NAME = k.TABLE_NAME "
            "AND n.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND n.REFERENCED_TABLE_NAME IS NOT NULL), "
            # the child's database, where it is not the current one: its table is named with it
            f"k.TABLE_SCHEMA = DATABASE(), k.TABLE_SCHEMA, k.REFERENCED_TABLE_SCHEMA, {_FULL_TYPE} "
            "FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
            "ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.TABLE_NAME = k.TABLE_NAME "
            "AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME JOIN information_schema.COLUMNS c "
            "ON c.TABLE_SCHEMA = k.TABLE_SCHEMA AND c.TABLE_NAME = k.TABLE_NAME AND c.COLUMN_NAME = k.COLUMN_NAME "
            f"WHERE {named} AND k.REFERENCED_COLUMN_NAME = :c ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME",
            {**t, "c": column},
        )

    def reference(self, row: Sequence[object], /) -> Reference:
        name, table, column, not_null, on_delete, on_update, listed, same, schema, referenced, kind = row
        pairs = [(str(c), str(p)) for c, p in json.loads(str(listed))]
        return Reference(
            constraint=str(name),
            table=str(table) if same else InSchema(str(schema), str(table)),
            column=str(column),
            nullable=not not_null,
            on_delete=str(on_delete),
            on_update=str(on_update),
            deferrable="",
            column_type=str(kind),
            pairs=tuple(pairs) if len(pairs) > 1 else (),
            referenced_schema="" if same else str(referenced),
        )

    def source_kind(self, sql_type: str, /) -> str | None:
        bare = sql_type.lower().split(" character set")[0]
        if bare.startswith(_INTEGERS):
            return "integer"
        if bare.startswith(("char(", "varchar(")):
            return "text"
        return None

    def key_of(self, kind: str, function: str, column: str, /) -> str | None:
        if kind == "text":
            return f"CAST({column} AS UUID)"
        # ids/rekeyed.integer_key for TIME_FIRST compared bytewise (10.11.5+'s order for these flags, the layout
        # integer_function allows), inline: no stored function, whose creation a binary log refuses to a role
        # without SUPER (error 1419); NULL for 0, the AUTO_INCREMENT key a BEFORE INSERT trigger sees
        c = column
        return (
            f"IF({c} > 0, CAST(CONCAT('00000000-0000-7', LPAD(HEX({c} >> 62), 3, '0'), '-', "
            f"LPAD(HEX((({c} >> 48) & 16383) | 32768), 4, '0'), '-', LPAD(HEX({c} & 281474976710655), 12, '0')) "
            "AS UUID), NULL)"
        )

    def not_changed(self, kind: str, /) -> str:
        return f"MariaDB changes {kind} keys"  # never asked: key_of makes every kind's key

    def late_keys(self, kind: str, /) -> bool:
        return kind == "integer"

    def integer_range(self, table: str, column: str, /) -> str:
        return f"SELECT min({column}), max({column}) FROM {table}"

    def invalid_texts(self, table: str, column: str, /) -> str:
        # what the uuid type itself refuses: 10.11 takes no UUID of a variant other than RFC 4122's or of version
        # 0 or above 5 (an MD5's hex, a COMB of another vendor's: "Incorrect uuid value", error 1292)
        return f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL AND CAST({column} AS UUID) IS NULL"

    def integer_function(self, name: str, layout: Layout, storage: Storage, /) -> str | None:
        return "" if layout is Layout.TIME_FIRST and storage is Storage.NATIVE else None  # key_of's, inline

    def function_present(self, name: str, /) -> tuple[str, dict[str, object]]:
        return ("SELECT 1 FROM DUAL", {})  # none to make: key_of writes it inline

    def keep_in_step(
        self, table: str, source: str, target: str, expression: str, names: tuple[str, str], /
    ) -> list[str]:
        # MariaDB's update trigger fires on every update (no UPDATE OF): the backfill's too. An IF that keeps a
        # key the update leaves measured slower than making it again (benchmarks.rekey, 2026-12-05)
        return [
            f"CREATE OR REPLACE TRIGGER {_beside(table, name)} BEFORE {event} ON {table} FOR EACH ROW "
            f"SET NEW.{target} = {expression}"
            for name, event in zip(names, ("INSERT", "UPDATE"), strict=True)
        ]

    def drop_in_step(self, table: str, names: tuple[str, str], /) -> list[str]:
        return [f"DROP TRIGGER IF EXISTS {_beside(table, name)}" for name in names]

    def index_steps(self, table: str, column: str, index: str, state: str | None, unique: bool, /) -> list[Step]:
        if state == "valid":
            return []
        kind = "UNIQUE INDEX" if unique else "INDEX"
        return [Step(f"ALTER TABLE {table} ADD {kind} {index} ({column}), ALGORITHM=INPLACE, LOCK=NONE")]

    def index_state(self, table: str, index: str, /) -> tuple[str, dict[str, object]]:
        named, t = in_database(table)
        return f"SELECT 1 FROM information_schema.STATISTICS WHERE {named} AND INDEX_NAME = :i LIMIT 1", {
            **t,
            "i": index,
        }

    def companions(self, table: str, columns: Sequence[str], /) -> tuple[str, dict[str, object]]:
        # plain: a B-tree over whole columns, ascending (a prefix's SUB_PART, 10.8's descending COLLATION 'D',
        # a long unique key's HASH are not made again of the columns alone)
        names = ", ".join(f":c{n}" for n in range(len(columns)))
        named, t = in_database(table, "s.")
        return (
            "SELECT s.INDEX_NAME, MIN(s.NON_UNIQUE) = 0, FALSE, JSON_ARRAYAGG(s.COLUMN_NAME ORDER BY s.SEQ_IN_INDEX), "
            "MAX(s.INDEX_TYPE <> 'BTREE' OR s.SUB_PART IS NOT NULL OR COALESCE(s.COLLATION, 'D') <> 'A') = 0, "
            # the foreign keys that reference a column of it (InnoDB needs such an index on the referenced side),
            # but the primary key's: the primary key serves those (the re-keyed table's own children, whose
            # keys the contract drops first), not an index beside it that holds the key too
            "(SELECT JSON_ARRAYAGG(DISTINCT JSON_ARRAY(k.TABLE_NAME, k.CONSTRAINT_NAME)) "
            "FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.STATISTICS x "
            "ON x.TABLE_SCHEMA = s.TABLE_SCHEMA AND x.TABLE_NAME = s.TABLE_NAME AND x.INDEX_NAME = s.INDEX_NAME "
            "AND x.COLUMN_NAME = k.REFERENCED_COLUMN_NAME WHERE k.REFERENCED_TABLE_SCHEMA = s.TABLE_SCHEMA "
            "AND k.REFERENCED_TABLE_NAME = s.TABLE_NAME AND NOT EXISTS (SELECT 1 FROM "
            "information_schema.STATISTICS p WHERE p.TABLE_SCHEMA = s.TABLE_SCHEMA AND p.TABLE_NAME = s.TABLE_NAME "
            "AND p.INDEX_NAME = 'PRIMARY' AND p.COLUMN_NAME = k.REFERENCED_COLUMN_NAME)) "
            f"FROM information_schema.STATISTICS s WHERE {named} "
            f"AND s.INDEX_NAME <> 'PRIMARY' GROUP BY s.INDEX_NAME HAVING MAX(s.COLUMN_NAME IN ({names})) = 1 "
            "ORDER BY 1",
            {**t, **{f"c{n}": c for n, c in enumerate(columns)}},
        )

    def companion(self, table: str, row: Sequence[object], /) -> Companion:
        name, unique, constraint, columns, plain, referenced = row
        listed = tuple(map(str, json.loads(str(columns))))
        keys = tuple(sorted((str(t), str(n)) for t, n in json.loads(str(referenced or "[]"))))
        return Companion(table, str(name), listed, bool(unique), bool(constraint), bool(plain), keys)

    def _indexes(self, indexes: Sequence[SwappedIndex], *clauses: Callable[[SwappedIndex], str]) -> list[str]:
        """One ``ALTER TABLE`` a table of ``indexes`` of each clause (what it says of each index), in place."""
        tables = dict.fromkeys(ix.table for ix in indexes)
        return [
            f"ALTER TABLE {t} {', '.join(clause(ix) for ix in indexes if ix.table == t)}, ALGORITHM=NOCOPY"
            for clause in clauses
            for t in tables
        ]

    def constraint_state(self, table: str, name: str, /) -> tuple[str, dict[str, object]]:
        named, t = in_database(table, schema_column="CONSTRAINT_SCHEMA")
        return f"SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE {named} AND CONSTRAINT_NAME = :n", {
            **t,
            "n": name,
        }

    def foreign_key_steps(
        self, reference: Reference, column: str, parent: str, parent_column: str, name: str, state: bool | None, /
    ) -> list[Step]:
        if state is not None:
            return []
        return [Step(self._add_foreign_key(reference, column, parent, parent_column, name))]

    def _add_foreign_key(self, reference: Reference, column: str, parent: str, parent_column: str, name: str) -> str:
        # in place only without the check (else InnoDB copies the table): orphans() counts the rows after
        own, referenced = reference.listed(column, parent_column, quote_identifier)
        parent = _referenced(reference, parent)
        return (
            f"{_OWN_SETTINGS}foreign_key_checks = 0 FOR ALTER TABLE {quote_identifier(reference.table)} "
            f"ADD CONSTRAINT {name} FOREIGN KEY ({own}) REFERENCES {parent} ({referenced}){_actions(reference)}, "
            "ALGORITHM=INPLACE, LOCK=NONE"
        )

    def orphans(self, table: str, pairs: Sequence[tuple[str, str]], parent: str, /) -> str | None:
        # InnoDB's rule (MATCH SIMPLE): a row with a NULL in any of the key's columns references nothing
        on = " AND ".join(f"p.{p} = c.{c}" for c, p in pairs)
        present = " AND ".join(f"c.{c} IS NOT NULL" for c, _ in pairs)
        return (
            f"SELECT count(*) FROM {table} c LEFT JOIN {parent} p ON {on} WHERE {present} AND p.{pairs[0][1]} IS NULL"
        )

    def stale(self, column: str, expression: str, /) -> str | None:
        return f"NOT ({column} <=> {expression})"

    def _locked(self, swap: Swap, changes: list[str]) -> Step:
        """``changes`` under ``LOCK TABLES`` of every table of ``swap`` (the lock waited for as every step's)."""
        tables = ", ".join(dict.fromkeys(f"{t.table} WRITE" for t in (swap.parent, *swap.children)))
        return Step(f"LOCK TABLES {tables}", more=tuple(changes), after=("UNLOCK TABLES",))

    def _refer(self, child: Swapped, name: str, column: str, parent: str, parent_column: str) -> str:
        ref = child.references
        assert ref is not None
        own, referenced = ref.listed(column, parent_column, quote_identifier)
        return (
            f"ADD CONSTRAINT {name} FOREIGN KEY ({own}) REFERENCES {_referenced(ref, parent)} ({referenced})"
            f"{_actions(ref)}"
        )

    def contract_steps(self, swap: Swap, /) -> list[Step]:
        p = swap.parent
        steps = [step for heir in swap.heirs for step in self.contract_steps(heir)]  # a keyed child's key first
        steps += [  # the old columns made nullable, the key moved: rebuilds in place, writes going on
            Step(
                f"ALTER TABLE {c.table} MODIFY {c.kept if c.keyed else c.column} {c.column_type} NULL, "
                "ALGORITHM=INPLACE, LOCK=NONE"
            )
            for c in swap.children
            if not c.nullable
        ]
        # the new column's unique index goes with it: the key is that index now; an old key the server makes
        # (AUTO_INCREMENT: old URLs) kept as it is, another (a text, a keyed child's integer) made nullable: the
        # new release need not write it
        nullable = "" if swap.late else f", MODIFY {p.column} {p.column_type} NULL"
        steps.append(
            Step(
                f"ALTER TABLE {p.table} DROP PRIMARY KEY, ADD PRIMARY KEY ({p.new}), DROP INDEX {p.new_constraint}"
                f"{nullable}, ALGORITHM=INPLACE, LOCK=NONE"
            )
        )
        # under the lock: the triggers go, the table's names swap (a foreign key follows its column's rename),
        # then each child's; its new foreign key takes the old one's name, which MariaDB cannot rename, by a
        # drop and an add in two statements (in one, the name is taken: error 1826), added unchecked: the
        # rows are the ones the expand step's foreign key checked, and none is written meanwhile
        changes: list[str] = []
        for t in (*swap.children, p):
            changes += self.drop_in_step(t.table, t.triggers)
        changes.append(
            f"ALTER TABLE {p.table} RENAME COLUMN {p.column} TO {p.kept}, RENAME COLUMN {p.new} TO {p.column}, "
            "ALGORITHM=NOCOPY"
        )
        if swap.default is not None:
            changes.append(f"ALTER TABLE {p.table} ALTER COLUMN {p.column} SET DEFAULT ({swap.default})")
        for c in swap.children:
            renames = "" if c.keyed else f", RENAME COLUMN {c.column} TO {c.kept}, RENAME COLUMN {c.new} TO {c.column}"
            changes.append(f"ALTER TABLE {c.table} DROP FOREIGN KEY {c.constraint}{renames}, ALGORITHM=NOCOPY")
            changes.append(
                f"{_OWN_SETTINGS}foreign_key_checks = 0 FOR ALTER TABLE {c.table} DROP FOREIGN KEY {c.new_constraint}, "
                f"{self._refer(c, c.constraint, c.column, p.table, p.column)}, ALGORITHM=NOCOPY"
            )
        # each old index dropped (the old foreign keys that needed them are gone), its copy given its name
        changes += self._indexes(
            swap.indexes, lambda ix: f"DROP INDEX {ix.name}", lambda ix: f"RENAME INDEX {ix.copy} TO {ix.name}"
        )
        return [*steps, self._locked(swap, changes)]

    def undo_contract_steps(self, swap: Swap, /) -> list[Step]:
        p = swap.parent
        # a keyed child's key back first: the table's old foreign key from it, added again below, is of integers
        steps = [step for heir in swap.heirs for step in self.undo_contract_steps(heir)]
        # the copies back to their names (or dropped, where another change's copy has the name and is the one
        # both need), the indexes the way back built over the kept columns given theirs: the old foreign keys
        # added below find theirs
        changes = self._indexes(
            swap.indexes,
            lambda ix: f"DROP INDEX {ix.name}" if ix.shared else f"RENAME INDEX {ix.name} TO {ix.copy}",
            lambda ix: f"RENAME INDEX {ix.back} TO {ix.name}",
        )
        changes += [
            f"ALTER TABLE {p.table} ALTER COLUMN {p.column} DROP DEFAULT",
            f"ALTER TABLE {p.table} RENAME COLUMN {p.column} TO {p.new}, RENAME COLUMN {p.kept} TO {p.column}, "
            "ALGORITHM=NOCOPY",
        ]
        for c in swap.children:
            renames = "" if c.keyed else f", RENAME COLUMN {c.column} TO {c.new}, RENAME COLUMN {c.kept} TO {c.column}"
            changes.append(f"ALTER TABLE {c.table} DROP FOREIGN KEY {c.constraint}{renames}, ALGORITHM=NOCOPY")
            changes.append(
                f"{_OWN_SETTINGS}foreign_key_checks = 0 FOR ALTER TABLE {c.table} "
                f"{self._refer(c, c.constraint, c.column, p.table, p.column)}, "
                f"{self._refer(c, c.new_constraint, c.new, p.table, p.new)}, ALGORITHM=NOCOPY"
            )
        for t in (p, *(c for c in swap.children if not c.keyed)):  # a keyed child's: its heir's, above
            changes += self.keep_in_step(t.table, t.column, t.new, swap.key_of(f"NEW.{t.column}"), t.triggers)
        steps.append(self._locked(swap, changes))
        # a late key's new column nullable again (release N's inserts leave it NULL: late_keys), another's old
        # column NOT NULL again
        modify = f"MODIFY {p.new} UUID NULL" if swap.late else f"MODIFY {p.column} {p.column_type} NOT NULL"
        steps.append(
            Step(  # the new column's unique index again: the seqid foreign keys reference it
                f"ALTER TABLE {p.table} DROP PRIMARY KEY, ADD PRIMARY KEY ({p.column}), "
                f"ADD UNIQUE INDEX {p.new_constraint} ({p.new}), {modify}, ALGORITHM=INPLACE, LOCK=NONE"
            )
        )
        steps += [
            Step(f"ALTER TABLE {c.table} MODIFY {c.column} {c.column_type} NOT NULL, ALGORITHM=INPLACE, LOCK=NONE")
            for c in swap.children
            if not c.nullable and not c.keyed  # a keyed child's column: its key, NOT NULL again with it above
        ]
        return steps

    def fill(
        self,
        table: str,
        column: str,
        kept: str,
        kept_type: str,
        parent: str | None,
        parent_column: str,
        parent_kept: str,
        /,
    ) -> str:
        if parent is None:  # the table's own old key: the new key's text
            text = f"CAST({column} AS CHAR)"
            return f"UPDATE {table} SET {kept} = {_hex_if(kept_type, text)} WHERE {kept} IS NULL"
        return (
            f"UPDATE {table} c JOIN {parent} p ON p.{parent_column} = c.{column} SET c.{kept} = p.{parent_kept} "
            f"WHERE c.{kept} IS NULL"
        )

    def unfilled(self, table: str, column: str, kept: str, /) -> str:
        return f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL AND {kept} IS NULL"

    def drop_foreign_key(self, table: str, name: str, /) -> str:
        return f"ALTER TABLE {table} DROP FOREIGN KEY IF EXISTS {name}"

    def drop_column(self, table: str, column: str, /) -> str:
        return f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}, ALGORITHM=INPLACE, LOCK=NONE"

    def drop_index(self, table: str, index: str, /) -> str:
        return f"ALTER TABLE {table} DROP INDEX IF EXISTS {index}, ALGORITHM=INPLACE, LOCK=NONE"

    def untracked(self) -> tuple[str, dict[str, object]]:
        # Django's generic relations: an object id beside a content type (see the PostgreSQL rule)
        return (
            "SELECT c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE FROM information_schema.COLUMNS c "
            "WHERE c.TABLE_SCHEMA = DATABASE() AND (c.COLUMN_NAME IN ('object_id', 'object_pk') "
            "OR c.COLUMN_NAME LIKE '%\\_object\\_id') AND EXISTS (SELECT 1 FROM information_schema.COLUMNS t "
            "WHERE t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
            "AND t.COLUMN_NAME LIKE '%content\\_type%') ORDER BY 1, 2",
            {},
        )


_DATABASE = re.compile(r"^(`(?:[^`]|``)*`)\.")


def _beside(table: str, trigger: str) -> str:
    """The quoted ``trigger`` named in the database of ``table`` (quoted, with its database where it has one): a
    trigger lives in its table's database, and an unqualified name is the current one's ("CREATE TRIGGER").

    >>> _beside("`a ``b`` c`.`orders`", "`t`"), _beside("`orders`", "`t`")
    ('`a ``b`` c`.`t`', '`t`')
    """
    database = _DATABASE.match(table)
    return f"{database.group(1)}.{trigger}" if database else trigger


def _referenced(reference: Reference, parent: str) -> str:
    """The quoted ``parent`` as a foreign key of ``reference``'s table names it: with its database where that
    table is in another (:attr:`Reference.referenced_schema`)."""
    if not reference.referenced_schema or _DATABASE.match(parent):
        return parent
    return f"{quote_identifier(reference.referenced_schema)}.{parent}"


def _actions(reference: Reference) -> str:
    """A foreign key's ``ON DELETE`` and ``ON UPDATE`` as its statement writes them: ``RESTRICT``, the default, left
    unwritten, as an in-place add (``foreign_key_checks = 0``) records a written one as ``NO ACTION`` (10.11).
    InnoDB enforces both alike, but the catalog would say otherwise than before the change, and after its way
    back."""
    return "".join(
        f" ON {event} {action}"
        for event, action in (("DELETE", reference.on_delete), ("UPDATE", reference.on_update))
        if action != "RESTRICT"
    )


REKEY = Rekey()
REBUILD = None  # its keys change online (REKEY)


class Doctor(mysql.Doctor):
    """MariaDB's catalog as ``seqid doctor`` reads it: MySQL's, with MariaDB's own statement bound."""

    def _statement_bound(self, ms: int) -> str:
        return f"SET SESSION max_statement_time = {ms / 1000:.3f}"


DOCTOR = Doctor()
