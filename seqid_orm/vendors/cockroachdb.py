"""CockroachDB (tested by compiling with its dialect: no server here).

A distributed engine: it splits a table into key ranges served by different nodes, and a strictly
increasing key sends every insert to the last range (a write hot spot; its documentation recommends
random keys or hash-sharded indexes).  seqid's answer is the ``SHARDED`` layout: the top 4 bits pick
one of k shards, time and counter follow, so writes spread over k ranges while each range is still
appended at its end.  :func:`hash_sharded_primary_key` gives the index-side alternative.
``uuid`` compares bytewise, as PostgreSQL's.
"""

from __future__ import annotations

import re
import uuid

from ..errors import InvalidArgumentError
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

__all__ = ["hash_sharded_primary_key"]

NAME = "cockroachdb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"

server_default = no_server_default(
    "on cockroachdb a time-ordered key made by the database sends every insert to one range (a write "
    "hot spot); make ids in Python (seqid picks the sharded layout there) or use a hash-sharded index"
)
convert_column = no_conversion(NAME)


def has_native_uuid(version: Version, /) -> bool:
    return True


def compare_order(version: Version, storage: Storage, value: uuid.UUID, /) -> tuple[int, ...] | None:
    return ORDER_BYTES


def sequential_functions(prefix_layout: Layout, /) -> list[str]:
    raise no_sequential_functions(NAME)


def drop_sequential_functions() -> list[str]:
    raise no_sequential_functions(NAME)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def hash_sharded_primary_key(table: str, column: str = "id", bucket_count: int = 16) -> str:
    """CockroachDB DDL that makes ``table``'s primary key on ``column`` hash-sharded.

    ``ALTER TABLE t ALTER PRIMARY KEY USING COLUMNS (id) USING HASH WITH (bucket_count = 16)``
    (CockroachDB 22.1+): the database prefixes the key with a hidden bucket column, so inserts
    spread over ``bucket_count`` ranges; queries by key are unchanged.  Use it in a migration
    (``op.execute(...)``) when you prefer time-first keys plus a hashed index to sharded keys.
    """
    for name, value in (("table", table), ("column", column)):
        if not isinstance(value, str) or _IDENT.match(value) is None:
            raise InvalidArgumentError(f"{name} must be a plain SQL identifier, got {value!r}")
    if isinstance(bucket_count, bool) or not isinstance(bucket_count, int) or not 2 <= bucket_count <= 2048:
        raise InvalidArgumentError(f"bucket_count must be an int between 2 and 2048, got {bucket_count!r}")
    return (
        f"ALTER TABLE {table} ALTER PRIMARY KEY USING COLUMNS ({column}) "
        f"USING HASH WITH (bucket_count = {bucket_count})"
    )
