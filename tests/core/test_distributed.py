"""Keys for distributed SQL: the hash-sharded DDL alternative (the range-splitting model is tests/benchmarks')."""

from __future__ import annotations

import pytest

from seqid_orm.errors import InvalidArgumentError
from seqid_orm.vendors.cockroachdb import hash_sharded_primary_key


def test_the_model_shows_the_hot_spot_the_spread_and_the_locality():
    from benchmarks.simulate import run  # the standard library only

    outcomes = {o.scheme: o for o in run(rows=60_000, rate=5_000, split_at=2_000, shards=(4, 16))}
    v4, v7 = outcomes["UUIDv4 (random)"], outcomes["UUIDv7 (time first)"]
    k4, k16 = outcomes["seqid sharded, k=4"], outcomes["seqid sharded, k=16"]
    assert v7.hottest_share > 0.95 and v7.sequential > 0.95  # one hot range, perfectly ordered
    assert v4.hottest_share < 0.1 and v4.sequential < 0.05  # spread out, no locality
    for k, o in ((4, k4), (16, k16)):
        assert o.hottest_share < 1.6 / k and o.sequential > 0.95  # spread over k ranges, still ordered
    assert k16.ranges_written_per_s > k4.ranges_written_per_s > v7.ranges_written_per_s


def test_hash_sharded_primary_key_ddl():
    assert hash_sharded_primary_key("orders") == (
        "ALTER TABLE orders ALTER PRIMARY KEY USING COLUMNS (id) USING HASH WITH (bucket_count = 16)"
    )
    assert "bucket_count = 8" in hash_sharded_primary_key("orders", "order_id", 8)
    with pytest.raises(InvalidArgumentError, match="identifier"):
        hash_sharded_primary_key("orders; drop table x")
    with pytest.raises(InvalidArgumentError, match="bucket_count"):
        hash_sharded_primary_key("orders", bucket_count=1)
