"""comb_at(bound="next"): ids for past instants, many to a millisecond, in the order they were asked
for, in every layout and for adopted keys; a new count in a forked child; typed refusals."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from seqid_orm import Layout, comb_at
from seqid_orm.errors import GeneratorExhaustedError, InvalidArgumentError
from seqid_orm.ids.adopted import ABOVE_BITS
from seqid_orm.ids.comb import adopted_of, decode_comb

WHEN = dt.datetime(2021, 3, 14, 15, 9, 26, 535000, tzinfo=dt.timezone.utc)
CASES = [(layout, 0) for layout in Layout] + [(Layout.TIME_FIRST, ABOVE_BITS[0]), (Layout.TIME_LAST, ABOVE_BITS[-1])]


@pytest.mark.parametrize(("layout", "above"), CASES, ids=[f"{lay.value}-{above}" for lay, above in CASES])
def test_a_backfill_in_time_order_gets_ids_in_its_order(layout, above):
    """Rows of three milliseconds, 200 to each, as an import goes through them: the ids sort in the
    layout's own order exactly as the rows came, and each decodes to its row's time."""
    whens = [WHEN + dt.timedelta(milliseconds=ms) for ms in (0, 1, 7) for _ in range(200)]
    made = [comb_at(when, layout, "next", above=above) for when in whens]
    assert len(set(made)) == len(made)
    if layout is Layout.SHARDED:  # each id draws one of 16 key ranges: in order within each
        made_in = {shard: [k for k in made if k.int >> 124 == shard] for shard in range(16)}
        assert all(sorted(ks, key=layout.sort_key) == ks for ks in made_in.values())
    else:
        assert sorted(made, key=layout.sort_key) == made
    for key, when in zip(made, whens, strict=True):
        ms, _ = decode_comb(key, layout, above)
        assert ms == int(when.timestamp() * 1000)
        assert (adopted_of(key) is not None) == bool(above)


def test_the_present_is_not_moved_by_a_backfill():
    from seqid_orm import uuid7

    before = uuid7()
    comb_at(WHEN, Layout.TIME_FIRST, "next")
    assert uuid7() > before and comb_at(WHEN, Layout.TIME_FIRST, "next") < before


def test_a_forked_child_counts_anew():
    comb_at(WHEN, Layout.TIME_LAST, "next")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id must not be the parent's next one
        os.write(write, comb_at(WHEN, Layout.TIME_LAST, "next").bytes)
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 16)
    parent = comb_at(WHEN, Layout.TIME_LAST, "next").bytes
    assert child != parent


def test_a_full_millisecond_and_bad_input_are_refused():
    odd = WHEN + dt.timedelta(milliseconds=3)
    with pytest.raises(GeneratorExhaustedError, match="no later id fits that millisecond"):
        for _ in range(1 << 13):  # TIME_LAST's counter: 13 bits, seeded in its lower half
            comb_at(odd, Layout.TIME_LAST, "next")
    with pytest.raises(InvalidArgumentError, match="timezone-aware"):
        comb_at(WHEN.replace(tzinfo=None), Layout.TIME_FIRST, "next")
    with pytest.raises(InvalidArgumentError, match="'next'"):
        comb_at(WHEN, Layout.TIME_FIRST, "later")  # type: ignore[arg-type]


def test_bsv_ids_of_past_instants_sort_as_their_rows_came():
    from seqid_orm.ids.text import bsv_at, bsv_parts, text_bounds

    whens = [WHEN + dt.timedelta(milliseconds=ms) for ms in (0, 0, 0, 2, 2, 9) for _ in range(50)]
    made = [bsv_at(when) for when in whens]
    assert sorted(made) == made and len(set(made)) == len(made)  # text order is the ids' order
    for text, when in zip(made, whens, strict=True):
        at, _ = bsv_parts(text)
        assert when <= at < when + dt.timedelta(milliseconds=1)  # its instant, a tick on per id made before
    low, high = text_bounds("bsv", WHEN + dt.timedelta(milliseconds=1), WHEN + dt.timedelta(milliseconds=3))
    assert [t for t in made if low <= t < high] == made[150:250]  # the ids of the 2 ms instant
    with pytest.raises(InvalidArgumentError, match="timezone-aware"):
        bsv_at(WHEN.replace(tzinfo=None))
