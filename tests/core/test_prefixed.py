"""Wrapping-prefix UUIDs after the sequential-uuids extension."""

from __future__ import annotations

import uuid

import pytest

from seqid_orm import Layout, NoTimestampError, prefix_of, timestamp_of, uuid_sequence_nextval, uuid_time_nextval
from seqid_orm.prefixed import prefix_bytes


@pytest.mark.parametrize("layout", list(Layout))
def test_sequence_prefix_wraps_and_sits_where_the_layout_compares_first(layout):
    values = [uuid_sequence_nextval(v, block_size=4, block_count=256, layout=layout) for v in range(0, 4 * 256 * 2)]
    prefixes = [prefix_of(v, 256, layout) for v in values]
    assert prefixes[:9] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert prefixes[4 * 256] == 0, "the prefix wraps after block_count blocks"
    first_lap = values[: 4 * 256]
    keys = [layout.sort_key(v)[:1] for v in first_lap]
    assert keys == sorted(keys), "within a lap the values are ordered by their prefix"
    assert all(v.version == 4 and v.variant == uuid.RFC_4122 for v in values)
    assert len(set(values)) == len(values)


def test_prefix_takes_the_fewest_whole_bytes():
    assert prefix_bytes(2) == 1
    assert prefix_bytes(256) == 1
    assert prefix_bytes(257) == 2
    assert prefix_bytes(65536) == 2
    assert prefix_bytes(2**48) == 6
    with pytest.raises(ValueError, match="2\\*\\*48"):
        prefix_bytes(2**48 + 1)


def test_time_prefix_uses_the_interval():
    a = uuid_time_nextval(interval_length=60, interval_count=65536, now=60 * 1000 + 59)
    b = uuid_time_nextval(interval_length=60, interval_count=65536, now=60 * 1001)
    assert prefix_of(a, 65536) == 1000
    assert prefix_of(b, 65536) == 1001
    c = uuid_time_nextval(interval_length=60, interval_count=65536, now=60 * (65536 + 5))
    assert prefix_of(c, 65536) == 5


def test_prefixed_values_carry_no_absolute_time():
    with pytest.raises(NoTimestampError):
        timestamp_of(uuid_sequence_nextval(10))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"value": -1}, ValueError),
        ({"value": "1"}, TypeError),
        ({"value": True}, TypeError),
        ({"value": 1, "block_size": 0}, ValueError),
        ({"value": 1, "block_count": 1}, ValueError),
        ({"value": 1, "layout": "sideways"}, ValueError),
    ],
)
def test_bad_arguments_are_refused(kwargs, error):
    with pytest.raises(error):
        uuid_sequence_nextval(**kwargs)


def test_time_prefix_rejects_bad_now():
    with pytest.raises(TypeError):
        uuid_time_nextval(now="now")
    with pytest.raises(ValueError):
        uuid_time_nextval(now=-5)
