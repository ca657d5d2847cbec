"""SQL Server (tested by compiling SQL and by Microsoft's documented ordering: no server here).

``uniqueidentifier`` stores the bytes in .NET order and compares them in the order of
``System.Data.SqlTypes.SqlGuid``: bytes 10-15 first, so the time goes at the end (``TIME_LAST``).
``NEWSEQUENTIALID()`` makes time-ordered values itself, but may restart lower after a reboot.
"""

from __future__ import annotations

import uuid

from ..errors import ServerDefaultUnavailableError
from ..ids.layout import ORDER_SQLSERVER
from ._base import (
    ORDER_BYTES,
    ServerDefault,
    Storage,
    TextColumnSpec,
    Version,
    always_native_uuid,
    bracketed,
    no_adopted_default,
    no_conversion,
    no_sequential_functions,
    qualify,
    standard_literal,
)

# what seqid neither reads nor changes on this engine: the answers of an engine it does not know
from .generic import DOCTOR as DOCTOR
from .generic import ONLINE as ONLINE
from .generic import REBUILD as REBUILD
from .generic import REKEY as REKEY
from .generic import TYPE_CHANGE_HOLDS as TYPE_CHANGE_HOLDS
from .generic import TYPED_COLUMNS as TYPED_COLUMNS
from .generic import adoption_statements as adoption_statements
from .generic import column_catalog as column_catalog

NAME = "mssql"
DISTRIBUTED = False
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="Latin1_General_BIN2")
BINARY_FALLBACK = False
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = True
quote_identifier = bracketed
string_literal = standard_literal
qualified = qualify(quote_identifier)

convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)

has_native_uuid = always_native_uuid


def compare_order(version: Version, storage: Storage, value: uuid.UUID, /) -> tuple[int, ...] | None:
    return ORDER_SQLSERVER if storage is Storage.NATIVE else ORDER_BYTES


def server_default(version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
    if shift_us:
        raise ServerDefaultUnavailableError(
            "SQL Server's NEWSEQUENTIALID() takes no time to shift; make the keys in Python (comb_at)"
        )
    if storage is not Storage.NATIVE:
        raise ServerDefaultUnavailableError(
            "SQL Server makes time-ordered UUIDs only for UNIQUEIDENTIFIER columns (NEWSEQUENTIALID())"
        )
    return ServerDefault("newsequentialid()", 1, "NEWSEQUENTIALID()", "newsequentialid()")


def binary_literal(raw: bytes, /) -> str:
    return f"0x{raw.hex().upper()}"


adopted_default = no_adopted_default(NAME)
