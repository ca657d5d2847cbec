"""Keys for distributed SQL engines (CockroachDB, TiDB, YugabyteDB): no single hot range.

These engines split a table into key ranges served by different nodes.  A strictly increasing key
(UUIDv7, a Snowflake, an identity) sends every insert to the last range: one node takes all the
writes, and its range splits again and again at the end.  Their documentation recommends random
keys, hash-sharded indexes (CockroachDB ``USING HASH``, YugabyteDB ``HASH``) or TiDB's
``AUTO_RANDOM`` / ``SHARD_ROW_ID_BITS``.

seqid's answer is the ``SHARDED`` layout (:class:`~seqid_orm.Layout`): the top 4 bits pick one of
k shards, time and counter follow, so writes spread over k ranges while each range is still
appended at its end (the index locality random keys lose).  The registry picks it for these
engines; ``layout=`` chooses another.  :func:`hash_sharded_primary_key` gives the index-side
alternative for CockroachDB, which keeps plain UUIDv7 keys and lets the database hash them.
``seqid simulate`` compares the three on a model of a range-splitting store.
"""

from __future__ import annotations

import re

from ..errors import InvalidArgumentError

__all__ = ["hash_sharded_primary_key"]

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
