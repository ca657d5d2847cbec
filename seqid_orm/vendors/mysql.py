"""MySQL 8 (no UUID type: ``BINARY(16)`` compares its bytes first to last).

The MySQL family's SQL for database-made ids lives here and MariaDB's module reuses it: a UUIDv7
built from one ``SYSDATE(6)`` reading and ``RANDOM_BYTES()``, which a column default may call from
MySQL 8.0.13 and MariaDB 10.10.  Text ids need a binary collation (``ascii_bin``): the default ones
are case-insensitive, and two bsv ids differing only in case would collide.
"""

from __future__ import annotations

from ..errors import ServerDefaultUnavailableError
from ._base import (
    ServerDefault,
    Storage,
    TextColumnSpec,
    Version,
    bytewise_order,
    format_version,
    hex_literal,
    no_adopted_default,
    no_adoption_statements,
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
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
