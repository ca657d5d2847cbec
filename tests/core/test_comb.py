"""Time-ordered UUIDs: bit layouts, strict monotonicity, clocks, threads and forks."""

from __future__ import annotations

import datetime as dt
import itertools
import multiprocessing
import os
import sys
import threading
import uuid

import pytest

import seqid_orm
from seqid_orm import CombGenerator, Layout, comb, comb_at, comb_batch, uuid7
from seqid_orm.ids.comb import LazyUUIDs, decode_comb, layout_of
from seqid_orm.ids.layout import ORDER_MARIADB_SWAPPED, ORDER_SQLSERVER, sort_key

UTC = dt.timezone.utc


class FakeClock:
    """A clock the test moves by hand (nanoseconds)."""

    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ns = ms * 1_000_000

    def __call__(self) -> int:
        return self.ns

    def set_ms(self, ms: int) -> None:
        self.ns = ms * 1_000_000


def test_uuid7_has_rfc9562_version_and_variant_and_current_time():
    before = dt.datetime.now(UTC).replace(microsecond=0)
    value = uuid7()
    assert isinstance(value, uuid.UUID)
    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert before <= seqid_orm.timestamp_of(value) <= dt.datetime.now(UTC)


def test_uuid7_bit_layout_matches_cpython_314():
    # CPython 3.14: unix_ts_ms(48) | ver(4) | counter_hi(12) | var(2) | counter_lo(30) | random(32)
    clock = FakeClock(0x0123_4567_89AB)
    gen = CombGenerator(clock=clock)
    a, b = gen(), gen()
    assert a.int >> 80 == 0x0123_4567_89AB
    counter_a = (((a.int >> 64) & 0xFFF) << 30) | ((a.int >> 32) & 0x3FFF_FFFF)
    counter_b = (((b.int >> 64) & 0xFFF) << 30) | ((b.int >> 32) & 0x3FFF_FFFF)
    assert counter_b == counter_a + 1
    assert counter_a < (1 << 41), "the seed leaves the counter's top bit clear"
    assert decode_comb(a, Layout.TIME_FIRST) == (0x0123_4567_89AB, counter_a)


def by_shard(layout, values):
    """The values as the database orders them: all together, or (SHARDED) each shard apart."""
    if layout is not Layout.SHARDED:
        return [values]
    shards: dict[int, list] = {}
    for v in values:
        shards.setdefault(v.int >> 124, []).append(v)
    return list(shards.values())


@pytest.mark.parametrize("layout", list(Layout))
def test_strictly_increasing_in_layout_order_within_one_millisecond(layout):
    gen = CombGenerator(layout, clock=FakeClock())
    values = [gen() for _ in range(2000)]
    for run in by_shard(layout, values):
        keys = [layout.sort_key(v) for v in run]
        assert all(a < b for a, b in itertools.pairwise(keys))
    assert {layout_of(v) for v in values} == {layout}


def test_sharded_ids_spread_over_the_shards_and_increase_within_each():
    gen = CombGenerator(Layout.SHARDED, clock=FakeClock(), shards=8)
    values = [gen() for _ in range(4000)]
    shards = by_shard(Layout.SHARDED, values)
    assert sorted(v.int >> 124 for run in shards for v in run[:1]) == list(range(8))
    assert all(500 - 150 < len(run) < 500 + 150 for run in shards)  # about 1/8 each
    assert all(v.version == 8 and v.variant == uuid.RFC_4122 for v in values)
    assert decode_comb(values[0], Layout.SHARDED)[0] == FakeClock()() // 1_000_000
    with pytest.raises(ValueError, match="2, 4, 8 or 16"):
        CombGenerator(Layout.SHARDED, shards=3)
    with pytest.raises(ValueError, match="sharded layout only"):
        CombGenerator(Layout.TIME_FIRST, shards=4)


@pytest.mark.parametrize("layout", list(Layout))
def test_time_dominates_counter_across_milliseconds(layout):
    clock = FakeClock()
    gen = CombGenerator(layout, clock=clock)
    values = []
    for step in range(50):
        clock.set_ms(1_700_000_000_000 + step)
        values.extend(gen() for _ in range(3))
    for run in by_shard(layout, values):
        assert sorted(run, key=layout.sort_key) == run
    assert [decode_comb(v, layout)[0] for v in values[::3]] == [1_700_000_000_000 + s for s in range(50)]


def test_time_last_is_ordered_by_the_sql_server_reference_comparator():
    # Microsoft's SqlGuid rule, stated on the stored (bytes_le) bytes: 10-15, 8-9, 6-7, 4-5, 0-3.
    def sqlserver_key(value: uuid.UUID) -> bytes:
        stored = value.bytes_le
        return bytes(stored[i] for i in (10, 11, 12, 13, 14, 15, 8, 9, 6, 7, 4, 5, 0, 1, 2, 3))

    clock = FakeClock()
    gen = CombGenerator(Layout.TIME_LAST, clock=clock)
    values = []
    for step in range(20):
        clock.set_ms(1_700_000_000_000 + step * 7)
        values.extend(gen() for _ in range(50))
    keys = [sqlserver_key(v) for v in values]
    assert all(a < b for a, b in itertools.pairwise(keys))
    # the table in seqid_orm.layout says the same as the rule written out here
    assert all(sqlserver_key(v) == sort_key(v, ORDER_SQLSERVER) for v in values)
    # and a plain UUIDv7 is not ordered under that comparator (why TIME_LAST exists)
    v7 = CombGenerator(clock=clock)
    sevens = []
    for step in range(20):
        clock.set_ms(1_800_000_000_000 + step)
        sevens.extend(v7() for _ in range(5))
    assert sorted(sevens, key=sqlserver_key) != sevens


def test_time_last_is_also_ordered_when_mariadb_swaps_it():
    gen = CombGenerator(Layout.TIME_LAST, clock=FakeClock())
    values = [gen() for _ in range(500)]
    assert sorted(values, key=lambda v: sort_key(v, ORDER_MARIADB_SWAPPED)) == values


def test_clock_stepping_back_is_absorbed_without_going_backwards():
    clock = FakeClock(1_700_000_000_500)
    gen = CombGenerator(clock=clock)
    first = gen()
    clock.set_ms(1_700_000_000_000)  # 500 ms back
    during = [gen() for _ in range(10)]
    assert all(decode_comb(v, Layout.TIME_FIRST)[0] == 1_700_000_000_500 for v in during)
    clock.set_ms(1_700_000_000_600)  # forward again
    after = gen()
    assert decode_comb(after, Layout.TIME_FIRST)[0] == 1_700_000_000_600
    assert [first, *during, after] == sorted([first, *during, after])


def test_counter_overflow_advances_time_by_exactly_what_is_needed():
    clock = FakeClock()
    gen = CombGenerator(Layout.TIME_LAST, clock=clock)  # 13-bit counter: overflows quickly
    values = [gen() for _ in range(20_000)]
    stamps = [decode_comb(v, Layout.TIME_LAST)[0] for v in values]
    assert sorted(values, key=Layout.TIME_LAST.sort_key) == values
    assert stamps[0] == 1_700_000_000_000
    # at least 4096 ids per millisecond fit (the seed is below half the range)...
    assert max(stamps) - stamps[0] <= 20_000 // 4096
    # ...and the time only moved forward on overflow: never more than one ms per 4096 ids
    assert max(stamps) > stamps[0]


@pytest.mark.parametrize("layout", list(Layout))
def test_batch_continues_the_same_sequence(layout):
    gen = CombGenerator(layout, clock=FakeClock())
    values = [gen(), *gen.batch(300), gen(), *gen.batch(0), *gen.batch(5)]
    assert len(values) == 307 and len(set(values)) == 307
    for run in by_shard(layout, values):
        assert sorted(run, key=layout.sort_key) == run


@pytest.mark.parametrize("layout", list(Layout))
def test_batch_ints_take_their_place_in_the_same_sequence(layout):
    gen = CombGenerator(layout, clock=FakeClock())
    values = [gen(), *LazyUUIDs(gen.batch_ints(300)), *gen.batch(3), *(uuid.UUID(int=i) for i in gen.batch_ints(4))]
    assert len(values) == 308 and len(set(values)) == 308
    assert {layout_of(v) for v in values} == {layout}
    for run in by_shard(layout, values):
        assert sorted(run, key=layout.sort_key) == run
    for bad, error in (("3", TypeError), (-1, ValueError), (seqid_orm.ids.comb.MAX_BATCH + 1, ValueError)):
        with pytest.raises(error):
            gen.batch_ints(bad)


def test_lazy_uuids_read_as_the_list_of_their_uuids():
    ints = [uuid.uuid4().int for _ in range(50)] + [0, 2**128 - 1]
    made = [uuid.UUID(int=i) for i in ints]
    lazy = LazyUUIDs(ints)
    assert len(lazy) == 52 and lazy == made and made == lazy and list(lazy) == made
    assert lazy[3] == made[3] and lazy[-1] == made[-1] and lazy[5:9] == made[5:9]
    assert made[7] in lazy and lazy.index(made[9]) == 9 and list(reversed(lazy)) == made[::-1]
    assert lazy != made[:-1] and lazy != "not a sequence of uuids" and LazyUUIDs(ints[:]) == lazy
    assert all(type(u) is uuid.UUID and u.is_safe is uuid.SafeUUID.unknown for u in lazy)
    with pytest.raises(TypeError):
        hash(lazy)
    with pytest.raises(IndexError):
        lazy[52]
    for bad, error in (
        ((1, 2), TypeError),
        ([1, "2"], TypeError),
        ([1.0], TypeError),
        ([-1], ValueError),
        ([2**128], ValueError),
        ([True], TypeError),
    ):
        with pytest.raises(error):
            LazyUUIDs(bad)


def test_batch_rejects_bad_sizes():
    with pytest.raises(TypeError, match="n must be an int"):
        comb_batch("3")
    with pytest.raises(ValueError, match="n must be >= 0"):
        comb_batch(-1)


def test_eight_threads_produce_unique_values_each_strictly_increasing():
    results: dict[int, list[uuid.UUID]] = {}
    start = threading.Barrier(8)

    def work(index: int) -> None:
        start.wait()
        results[index] = [uuid7() for _ in range(5000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [v for vs in results.values() for v in vs]
    assert len(set(everything)) == 8 * 5000
    for values in results.values():
        assert all(a < b for a, b in itertools.pairwise(values))


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("ns_per_reading", [37, 37_000])  # 27,000 or 27 readings a millisecond
def test_threads_switching_at_every_bytecode_share_one_counter(layout, ns_per_reading):
    """Six threads, a thread switch forced at nearly every bytecode, ``next`` and ``batch``
    mixed, a clock that moves on with every reading (slow enough for TIME_LAST's counter to run
    past its end, fast enough to start a millisecond every few ids): no (millisecond, counter)
    pair is handed out twice, and each thread's ids increase in the layout's order."""
    readings = itertools.count(1_800_000_000_000 * 1_000_000, ns_per_reading)
    gen = CombGenerator(layout, clock=lambda: next(readings))
    results: dict[int, list[uuid.UUID]] = {}
    start = threading.Barrier(6)

    def work(index: int) -> None:
        start.wait()
        mine: list[uuid.UUID] = []
        for i in range(3000):
            mine.extend(gen.batch(i % 7) if i % 50 == 0 else [gen.next()])
        results[index] = mine

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    everything = [v for vs in results.values() for v in vs]
    pairs = {decode_comb(v, layout) for v in everything}
    assert len(everything) > 6 * 3000 and len(pairs) == len(everything)
    for values in results.values():
        for run in by_shard(layout, values):
            assert run == sorted(run, key=layout.sort_key)


def _child_values(queue) -> None:
    queue.put([str(uuid7()) for _ in range(2000)])


def test_unique_across_processes():
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_child_values, args=(queue,)) for _ in range(3)]
    for p in procs:
        p.start()
    batches = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    mine = [str(uuid7()) for _ in range(2000)]
    everything = [v for b in batches for v in b] + mine
    assert len(set(everything)) == len(everything)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_never_repeats_the_parent():
    uuid7()  # warm the state and the random buffer in the parent
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read_fd)
            values = "\n".join(str(uuid7()) for _ in range(1000))
            os.write(write_fd, values.encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    parent = [str(uuid7()) for _ in range(1000)]
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    child = b"".join(chunks).decode().split("\n")
    assert len(child) == 1000
    assert not set(child) & set(parent)
    # the child's values are still strictly increasing among themselves
    assert child == sorted(child)


@pytest.mark.parametrize("layout", list(Layout))
def test_comb_at_bounds_enclose_every_value_of_that_millisecond(layout):
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    lo, hi = comb_at(when, layout, "min"), comb_at(when, layout, "max")
    rnd = [comb_at(when, layout) for _ in range(200)]
    key = layout.sort_key
    assert all(key(lo) <= key(v) <= key(hi) for v in rnd)
    assert seqid_orm.timestamp_of(lo, layout=layout) == when.replace(microsecond=123000)
    next_ms = comb_at(when + dt.timedelta(milliseconds=1), layout, "min")
    if layout is not Layout.SHARDED:  # sharded: the bounds span every shard, so the next ms overlaps
        assert key(hi) < key(next_ms)
    # a generator running at that instant lands inside the bounds too
    made = CombGenerator(layout, clock=FakeClock(int(when.timestamp() * 1000)))()
    assert key(lo) <= key(made) <= key(hi)


def test_comb_at_rejects_bad_input():
    with pytest.raises(ValueError, match="timezone-aware"):
        comb_at(dt.datetime(2024, 1, 1))
    with pytest.raises(TypeError, match="datetime"):
        comb_at("2024-01-01")
    with pytest.raises(ValueError, match="bound"):
        comb_at(dt.datetime(2024, 1, 1, tzinfo=UTC), bound="middle")
    with pytest.raises(ValueError, match="48-bit"):
        comb_at(dt.datetime(1969, 12, 31, tzinfo=UTC))


def test_layout_argument_is_validated_and_seed_aliases_work():
    assert Layout.SEQUENTIAL_AS_STRING is Layout.TIME_FIRST
    assert Layout.SEQUENTIAL_AS_BINARY is Layout.TIME_FIRST_LE
    assert Layout.SEQUENTIAL_AT_END is Layout.TIME_LAST
    assert layout_of(comb("time_last")) is Layout.TIME_LAST
    with pytest.raises(ValueError, match="layout must be"):
        comb("time_middle")
    with pytest.raises(ValueError, match="layout must be"):
        comb(3)


def test_time_first_le_leads_bytes_le_with_the_time():
    when = dt.datetime(2024, 5, 6, tzinfo=UTC)
    value = comb_at(when, Layout.TIME_FIRST_LE, "min")
    ms = int(when.timestamp() * 1000)
    assert value.bytes_le[:6] == ms.to_bytes(6, "big")
    assert value.variant == uuid.RESERVED_MICROSOFT


def test_randomness_comes_from_os_urandom(monkeypatch):
    import seqid_orm.ids.randomness as rnd

    calls = []
    real = os.urandom

    def spy(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(rnd.os, "urandom", spy)
    rnd.POOL.drop()
    CombGenerator(clock=FakeClock())()
    assert calls, "a fresh generator must draw from os.urandom"
