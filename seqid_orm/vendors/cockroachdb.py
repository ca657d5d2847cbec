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

from ..errors import InvalidArgumentError
from ._base import (
    TextColumnSpec,
    always_native_uuid,
    bytewise_in_every_storage,
    double_quoted,
    hot_spot_refusal,
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

# its SQL takes PostgreSQL's bytea literal (it speaks PostgreSQL's wire protocol and dialect)
from .postgresql import binary_literal as binary_literal

__all__ = ["hash_sharded_primary_key"]

NAME = "cockroachdb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
quote_identifier = double_quoted
string_literal = standard_literal
qualified = qualify(quote_identifier)

has_native_uuid = always_native_uuid
compare_order = bytewise_in_every_storage
server_default = hot_spot_refusal(NAME)
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)


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


adopted_default = no_adopted_default(NAME)
