"""SQLite (BLOB and text compare bytewise, so time-first ids stay in order in every storage).

SQLite makes a primary key the table's rowid only when it is declared exactly ``INTEGER``
(https://sqlite.org/lang_createtable.html#rowid): integer keys are declared so, and a UUID-keyed
table is best made ``WITHOUT ROWID``.  Its default text collation (BINARY) is bytewise already.
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

NAME = "sqlite"
DISTRIBUTED = False
ROWID_INTEGER_KEY = True
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation=None)
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
ONLINE = None  # seqid changes no table of it online

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
