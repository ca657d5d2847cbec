"""Wrapping-prefix UUIDs: the sequential-uuids extension's prefixes, exactly.

The expected figures below are those of the extension's own regression test
(test/expected/uuids.out in github.com/tvondra/sequential-uuids, 1.0.3), computed here by seqid.
"""

from __future__ import annotations

import collections
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import Layout, timestamp_of, uuid_sequence_nextval, uuid_time_nextval
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, NoTimestampError
from seqid_orm.ids.prefixed import extension_prefix, prefix_bytes, prefix_of, sequence_prefixer


def blocks(block_size: int, block_count: int, values: range) -> dict[int, int]:
    """How many values of a fresh sequence (1, 2, 3...) fall in each prefix, as the extension counts."""
    made = [uuid_sequence_nextval(v, block_size, block_count) for v in values]
    return dict(sorted(collections.Counter(prefix_of(u, block_count) for u in made).items()))


def test_the_extensions_own_regression_figures():
    found = blocks(256, 65536, range(1, 10_001))  # 40 blocks, all of 256 but the last (0x0027: 16)
    assert len(found) == 40 and {k: v for k, v in found.items() if v != 256} == {0x27: 16}
    assert blocks(65536, 256, range(1, 200_001)) == {0: 65536, 1: 65536, 2: 65536, 3: 3392}
    tiny = blocks(100, 100, range(1, 1001))  # rescaled: blocks of 39, wrapping after 9,984 values
    assert len(tiny) == 26 and set(list(tiny.values())[:25]) == {39} and tiny[0x19] == 25
    wrapped = blocks(256, 256, range(1, 67_001))  # the prefix wraps after 256 blocks
    assert {k: v for k, v in wrapped.items() if v != 256} == {0: 512, 1: 512, 2: 512, 3: 512, 4: 512, 5: 440}


def test_rescaling_and_the_first_block():
    assert extension_prefix(9983, 100, 100) == 255 and extension_prefix(9984, 100, 100) == 0
    assert [extension_prefix(v - 1, 4, 256) for v in (1, 4, 5)] == [0, 0, 1]  # values 1..4 share block 0
    assert extension_prefix(0, 1000, 1) == 0 and extension_prefix(2560, 10, 1) == 0  # block_count=1: a byte
    assert prefix_bytes(1) == 1


def test_negative_sequence_values_divide_as_c_does():
    """C truncates toward zero, and the mask keeps two's complement bits."""
    assert extension_prefix(-1, 100, 100) == 0  # -1 / 39 == 0 in C (Python's // would say -1)
    assert extension_prefix(-39, 100, 100) == 255  # -1 & 0xFF
    assert extension_prefix(-40, 100, 100) == 255
    assert extension_prefix(-78, 100, 100) == 254
    assert extension_prefix(-(2**63), 1, 256) == 0
    made = uuid_sequence_nextval(-77, 100, 100)  # nextval returned -77: the prefix of -78
    assert prefix_of(made, 100) == 254


def test_a_sharded_layout_takes_no_prefix():
    with pytest.raises(ValueError, match="not sharded"):
        uuid_sequence_nextval(1, layout=Layout.SHARDED)


@pytest.mark.parametrize("layout", [lay for lay in Layout if lay is not Layout.SHARDED])
def test_sequence_prefix_wraps_and_sits_where_the_layout_compares_first(layout):
    values = [uuid_sequence_nextval(v, block_size=4, block_count=256, layout=layout) for v in range(1, 4 * 256 * 2 + 1)]
    prefixes = [prefix_of(v, 256, layout) for v in values]
    assert prefixes[:9] == [0, 0, 0, 0, 1, 1, 1, 1, 2]  # a sequence's values 1..4 form the first block
    assert prefixes[4 * 256] == 0, "the prefix wraps after block_count blocks"
    first_lap = values[: 4 * 256]
    keys = [layout.sort_key(v)[:1] for v in first_lap]
    assert keys == sorted(keys), "within a lap the values are ordered by their prefix"
    assert all(v.version == 4 and v.variant == uuid.RFC_4122 for v in values)
    assert len(set(values)) == len(values)


def test_prefix_takes_the_fewest_whole_bytes():
    assert prefix_bytes(1) == 1
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
        ({"value": -(2**63)}, ValueError),  # nextval cannot return it (value - 1 would not fit a bigint)
        ({"value": "1"}, TypeError),
        ({"value": True}, TypeError),
        ({"value": 1, "block_size": 0}, ValueError),
        ({"value": 1, "block_count": 0}, ValueError),
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


@given(
    layout=st.sampled_from([Layout.TIME_FIRST, Layout.TIME_LAST, Layout.TIME_FIRST_LE]),
    block_size=st.integers(1, 1 << 20),
    block_count=st.integers(1, 1 << 48),
    value=st.integers(-(1 << 63) + 1, (1 << 63) - 1),
)
def test_the_per_row_prefixer_places_what_uuid_sequence_nextval_places(layout, block_size, block_count, value):
    """sequence_prefixer (the column default's) checks its arguments once and places the prefix inline:
    the same prefix, place and version/variant bits as the public function, for every argument."""
    made = sequence_prefixer(block_size, block_count, layout)(value)
    reference = uuid_sequence_nextval(value, block_size, block_count, layout)
    assert prefix_of(made, block_count, layout) == prefix_of(reference, block_count, layout)
    assert prefix_of(made, block_count, layout) == extension_prefix(value - 1, block_size, block_count)
    assert (made.version, made.variant) == (reference.version, reference.variant) == (4, uuid.RFC_4122)
    assert made == uuid.UUID(str(made))  # a well-formed UUID, as parsing its text gives back


def test_the_per_row_prefixer_refuses_what_the_function_refuses():
    with pytest.raises(InvalidArgumentError):
        sequence_prefixer(0, 16)
    with pytest.raises(InvalidArgumentError):
        sequence_prefixer(16, 1 << 49)
    make = sequence_prefixer(16, 16)
    with pytest.raises(ArgumentTypeError):
        make(1.5)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError):
        make(True)
