"""The fast generator makes the same ids as the plain algorithm for the same clock and random words.

The reference below is the generator as it was written before it was made fast (lock, clock read,
seed word on a new millisecond, counter otherwise, then the random word; a batch takes its random
words first); the optimized closures must agree with it bit for bit, layout by layout.
"""

from __future__ import annotations

import random
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import Layout
from seqid_orm.errors import InvalidArgumentError
from seqid_orm.ids.comb import _COMPOSE, _COUNTER_BITS, _MS_LIMIT, _STEP, CombGenerator, _random_part, decode_comb
from seqid_orm.ids.randomness import POOL


class Reference:
    def __init__(self, layout: Layout, clock, words):
        self.layout, self.clock, self.words = layout, clock, iter(words)
        bits = _COUNTER_BITS[layout]
        self.counter_max, self.seed_mask = (1 << bits) - 1, (1 << (bits - 1)) - 1
        self.last_ms, self.counter = -1, 0

    def next(self) -> int:
        ms = self.clock() // 1_000_000
        if ms > self.last_ms:
            counter = next(self.words) & self.seed_mask
            self.last_ms = ms
        else:
            counter = self.counter + 1
            if counter > self.counter_max:
                self.last_ms += 1
                counter = next(self.words) & self.seed_mask
            ms = self.last_ms
        self.counter = counter
        return _COMPOSE[self.layout](ms, counter, next(self.words))

    def batch(self, n: int) -> list[int]:
        rnds = [next(self.words) for _ in range(n)]
        ms = self.clock() // 1_000_000
        if ms > self.last_ms:
            counter = (next(self.words) & self.seed_mask) - 1
        else:
            counter, ms = self.counter, self.last_ms
        out = []
        for rnd in rnds:
            counter += 1
            if counter > self.counter_max:
                ms += 1
                counter = next(self.words) & self.seed_mask
            out.append(_COMPOSE[self.layout](ms, counter, rnd))
        if n:
            self.last_ms, self.counter = ms, counter
        return out


@pytest.mark.parametrize("layout", [lay for lay in Layout if lay is not Layout.SHARDED] + [Layout.SHARDED])
def test_fast_generator_matches_the_plain_algorithm(layout, monkeypatch):
    rng = random.Random(layout.value)
    words = [rng.getrandbits(64) for _ in range(60_000)]
    stamps = iter(
        t for t in range(1_800_000_000_000, 1_800_000_000_000 + 40_000) for _ in range(rng.choice((1, 1, 3, 50)))
    )
    ticks = [1_799_999_999_999] * 9_000 + list(stamps)[:30_000]  # first one long millisecond: overflow
    ref_clock = iter(ticks)
    fast_clock = iter(ticks)
    reference = Reference(layout, lambda: next(ref_clock) * 1_000_000, words)
    monkeypatch.setattr(POOL, "_words", POOL._words)  # restored afterwards
    POOL._words[:] = list(reversed(words))  # the pool pops from the end: the same order as `words`
    gen = CombGenerator(layout, clock=lambda: next(fast_clock) * 1_000_000)
    expected, made = [], []
    for i in range(13_000):
        if i % 500 == 499:  # (a batch of 64 or more reads the OS directly: the next test)
            expected += reference.batch(37)
            made += [u.int for u in gen.batch(37)]
        else:
            expected.append(reference.next())
            made.append(gen.next().int)
    POOL._words.clear()
    assert made == expected
    if layout is Layout.TIME_LAST:  # the 13-bit counter ran past its end in that millisecond
        assert len({m & ((1 << 48) - 1) for m in made[:9_000]}) > 1


@pytest.mark.parametrize("size", [64, 1000, 8000])
def test_a_large_time_last_batch_has_the_bits_of_one_composed_id_at_a_time(size, monkeypatch):
    """From 64 ids a TIME_LAST batch is composed as bytes; every bit must still be where
    ``_compose_last`` puts it, with the random words' high bits (60-63, unused) set too."""
    ms = 1_800_000_000_000
    gen = CombGenerator(Layout.TIME_LAST, clock=lambda: ms * 1_000_000)
    gen.next()
    gen._counter = 5
    words = [(0xF << 60) | random.Random(size + i).getrandbits(60) for i in range(size)]
    # a batch of 64 or more reads its words from the OS in one call, not from the pool
    monkeypatch.setattr(
        "seqid_orm.ids.randomness.os.urandom", lambda k: b"".join(w.to_bytes(8, sys.byteorder) for w in words)[:k]
    )
    made = gen.batch(size)
    assert [u.int for u in made] == [_COMPOSE[Layout.TIME_LAST](ms, 6 + i, w) for i, w in enumerate(words)]
    assert all((u.int >> 76) & 0xF == 4 and decode_comb(u, Layout.TIME_LAST) == (ms, 6 + i) for i, u in enumerate(made))


@pytest.mark.parametrize("start", [(1 << 30) - 5, (1 << 30) - 10, (1 << 30) + 7, (1 << 31) - 1])
def test_a_batch_across_a_30_bit_boundary_of_the_counter_keeps_the_bits(start):
    """A UUIDv7 batch takes a shortcut while the counter stays in its low 30 bits (rand_b);
    across the carry into rand_a it must compose each id in full, and agree with the plain one."""
    ms = 1_800_000_000_000
    gen = CombGenerator(Layout.TIME_FIRST, clock=lambda: ms * 1_000_000)
    gen.next()  # this millisecond has begun
    gen._counter = start
    made = gen.batch(10)
    counters = [decode_comb(u, Layout.TIME_FIRST) for u in made]
    assert counters == [(ms, start + 1 + i) for i in range(10)]
    assert [u.int for u in made] == [_COMPOSE[Layout.TIME_FIRST](ms, start + 1 + i, u.int) for i, u in enumerate(made)]
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in made)


@given(
    layout=st.sampled_from(list(Layout)),
    shards=st.sampled_from([2, 4, 8, 16]),
    ms_fraction=st.floats(0, 1),
    counter_bits=st.integers(0, 64),
    word=st.integers(0, 2**64 - 1),
)
def test_an_id_is_its_random_free_part_plus_the_shaped_word(layout, shards, ms_fraction, counter_bits, word):
    """The generator joins ``compose(ms, counter, 0)`` and ``(word * mul) & mask``: for every
    layout, shard count, millisecond, counter and word that must be ``compose(ms, counter, word)``."""
    gen = CombGenerator(layout, shards=shards if layout is Layout.SHARDED else None)
    ms = int(_MS_LIMIT[layout] * ms_fraction)
    counter = counter_bits & gen._counter_max
    mul, mask = _random_part(layout, gen._shard_keep)
    assert gen._compose(ms, counter, 0) | ((word * mul) & mask) == gen._compose(ms, counter, word)
    assert gen._compose(ms, counter, 0) & mask == 0  # the random bits never touch the rest


@pytest.mark.parametrize("layout", list(Layout))
def test_the_step_counts_until_its_guard_bit_and_no_further(layout):
    """Adding ``1 << lowest`` to an id's random-free part is the next counter's, exactly while
    the guard bit stays clear; at the end of the counter's low field the guard bit is set."""
    lowest, guard = _STEP[layout]
    compose, top = _COMPOSE[layout], (1 << _COUNTER_BITS[layout]) - 1
    ms = 1_800_000_000_000
    low = (1 << (guard - lowest)) - 1  # the low field: counted by the step alone
    counters = [0, 1, 77, low - 1, low, low + 6, top - low - 1, top - low, top - 1, top]
    for c in filter(lambda c: 0 <= c <= top, counters):
        stepped = compose(ms, c, 0) + (1 << lowest)
        if c & low != low:
            assert stepped >> guard & 1 == 0
            assert stepped == compose(ms, c + 1, 0)
        else:  # the carry leaves the low field (at the top: the counter's end)
            assert stepped >> guard & 1 == 1


@pytest.mark.parametrize("layout", list(Layout))
def test_ids_across_the_carry_out_of_the_counters_low_field_keep_the_bits(layout):
    """One id at a time across the point where the step reaches its guard bit (the slow,
    composed-in-full id) and on: counters consecutive, every id as ``compose`` makes it."""
    lowest, guard = _STEP[layout]
    ms = 1_800_000_000_000
    gen = CombGenerator(layout, clock=lambda: ms * 1_000_000)
    gen.next()
    start = (1 << (guard - lowest)) - 4
    if start + 8 > gen._counter_max:  # TIME_LAST: the low field is the whole counter
        start = gen._counter_max - 3
    gen._counter = start
    made = [gen.next() for _ in range(8)]
    decoded = [decode_comb(u, layout) for u in made]
    if layout is Layout.TIME_LAST:  # ran past its end: the next millisecond, counter re-seeded
        assert decoded[:3] == [(ms, start + 1 + i) for i in range(3)]
        assert [m for m, _ in decoded[3:]] == [ms + 1] * 5
        assert [c for _, c in decoded[3:]] == list(range(decoded[3][1], decoded[3][1] + 5))
    else:
        assert decoded == [(ms, start + 1 + i) for i in range(8)]
    if layout is not Layout.SHARDED:  # (sharded ids increase within their shard only)
        assert made == sorted(made, key=layout.sort_key)
    _, random_bits = _random_part(layout, gen._shard_keep)
    assert [u.int & ~random_bits for u in made] == [gen._compose(m, c, 0) for m, c in decoded]


@pytest.mark.parametrize("layout", list(Layout))
def test_a_clock_read_to_the_nanosecond_gives_the_ids_of_its_milliseconds(layout, monkeypatch):
    """The generator compares the raw reading with the next millisecond's first nanosecond
    instead of dividing it: readings anywhere inside a millisecond, at its first and last
    nanosecond, and stepping back (inside one and across several) must give the plain ids."""
    rng = random.Random(f"ns-{layout.value}")
    words = [rng.getrandbits(64) for _ in range(20_000)]
    base = 1_800_000_000_000 * 1_000_000
    ticks = []
    for _ in range(6_000):
        kind = rng.random()
        last = ticks[-1] if ticks else base
        if kind < 0.6:
            ticks.append(last + rng.randrange(0, 300_000))  # on, maybe into the next millisecond
        elif kind < 0.8:
            ticks.append(last - last % 1_000_000 + rng.choice((0, 999_999)))  # a millisecond's edges
        else:
            ticks.append(max(base, last - rng.randrange(0, 3_000_000)))  # back, up to 3 ms
    ref_clock, fast_clock = iter(ticks), iter(ticks)
    reference = Reference(layout, lambda: next(ref_clock), words)
    monkeypatch.setattr(POOL, "_words", POOL._words)
    POOL._words[:] = list(reversed(words))
    gen = CombGenerator(layout, clock=lambda: next(fast_clock))
    made = [gen.next().int for _ in range(6_000)]
    POOL._words.clear()
    assert made == [reference.next() for _ in range(6_000)]


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("reading", [-1, -999_999, -1_000_000, -(10**18)])
def test_a_clock_before_1970_is_refused_before_and_after_ids_and_the_lock_is_left_free(layout, reading):
    now = [reading]
    gen = CombGenerator(layout, clock=lambda: now[0])
    with pytest.raises(InvalidArgumentError, match="before 1970"):
        gen.next()
    now[0] = 1_800_000_000_000 * 1_000_000
    first = gen.next()
    now[0] = reading
    for make in (gen.next, lambda: gen.batch(3)):
        with pytest.raises(InvalidArgumentError, match="before 1970"):
            make()
    now[0] = 1_800_000_000_000 * 1_000_000
    after = [gen.next(), *gen.batch(2)]  # nothing was left locked or half-counted
    assert [decode_comb(u, layout) for u in after] == [
        (1_800_000_000_000, decode_comb(first, layout)[1] + i) for i in (1, 2, 3)
    ]
