"""MariaDB (10.7 added a ``UUID`` type; 11.7 makes ``UUID_v7()`` itself).

Its ``UUID`` type stores some values with their groups reversed, so that the *last* group sorts
first (MDEV-26664): before 10.10.6/10.11.5/11.0.3/11.1.2 every value, since then only versions 1-5
with the RFC variant (MDEV-29959, MDEV-31926); RFC versions 6-8 are refused outright.  So the layout
follows the server version *and* the bits of the values made: UUIDv7 sorts by time on a current
server, the Microsoft-variant ``TIME_LAST`` ids on every one.  ``seqid probe`` measures it live.
``BINARY(16)`` and text compare bytewise, as on MySQL.
"""

from __future__ import annotations

import re
import uuid

from ..errors import InvalidArgumentError, ServerDefaultUnavailableError
from ..ids.layout import ORDER_MARIADB_SWAPPED, Layout
from . import mysql
from ._base import (
    ORDER_BYTES,
    Bounded,
    ColumnRef,
    Quote,
    ServerDefault,
    Storage,
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

_COLLATE = re.compile(r"\s+(COLLATE|CHARACTER SET|CHARSET)\s+\S+", re.IGNORECASE)


class Online(mysql.Online):
    """MariaDB's online statements: MySQL's, each with its bounds in the statement itself
    (``SET STATEMENT lock_wait_timeout = n, max_statement_time = 0 FOR ...``, MariaDB 10.1.2+), so no
    session setting is changed at all; and its ``UUID`` type, which ``JSON_TABLE`` cannot declare,
    read from the batch's document as its canonical text and compared as that."""

    def bounded(self, statement: str, lock_ms: int, /) -> Bounded:
        seconds = self.lock_seconds(lock_ms)
        return Bounded((f"SET STATEMENT lock_wait_timeout = {seconds}, max_statement_time = 0 FOR {statement}",))

    def key_cast(self, declared: str, /) -> str:
        # JSON_TABLE's columns take no UUID type (error 1064, issue 73) and the key's own collation
        # belongs to the key's column: the comparison converts the text to it
        bare = _COLLATE.sub("", declared).strip()
        return "CHAR(36)" if bare.upper() == "UUID" else bare


ONLINE = Online()
REKEY = None  # not yet: its integer keys are changed offline (docs/how-to/migrate.md)


class Doctor(mysql.Doctor):
    """MariaDB's catalog as ``seqid doctor`` reads it: MySQL's, with MariaDB's own statement bound."""

    def _statement_bound(self, ms: int) -> str:
        return f"SET SESSION max_statement_time = {ms / 1000:.3f}"


DOCTOR = Doctor()
