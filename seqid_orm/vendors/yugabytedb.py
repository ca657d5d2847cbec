"""YugabyteDB (PostgreSQL's protocol; told apart by ``version()``, which names ``-YB-``; no server here).

Distributed, as CockroachDB: ids get the ``SHARDED`` layout, and the database does not make them.
"""

from __future__ import annotations

import uuid

from ..ids.layout import Layout
from ._base import (
    ORDER_BYTES,
    Storage,
    TextColumnSpec,
    Version,
    no_conversion,
    no_sequential_functions,
    no_server_default,
)
from .postgresql import binary_literal

NAME = "yugabytedb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"

server_default = no_server_default(
    "on yugabytedb a time-ordered key made by the database sends every insert to one range (a write "
    "hot spot); make ids in Python (seqid picks the sharded layout there) or use a hash-sharded index"
)
convert_column = no_conversion(NAME)

__all__ = ["binary_literal"]


def has_native_uuid(version: Version, /) -> bool:
    return True


def compare_order(version: Version, storage: Storage, value: uuid.UUID, /) -> tuple[int, ...] | None:
    return ORDER_BYTES


def sequential_functions(prefix_layout: Layout, /) -> list[str]:
    raise no_sequential_functions(NAME)


def drop_sequential_functions() -> list[str]:
    raise no_sequential_functions(NAME)
