"""Time-ordered UUIDs (UUIDv7 and COMB layouts), strictly monotonic within a process.

Each id is ``milliseconds | counter | random``, with the three fields placed where the target
database compares first (see :mod:`seqid_orm.ids.layout`).  The counter follows RFC 9562 §6.2
method 1, as CPython 3.14's ``uuid.uuid7()`` does: it is seeded at random when the millisecond
changes and incremented inside a millisecond.  Ids that are random inside a millisecond would
make InnoDB split pages half-full; a counter fills them.

* The embedded time never runs ahead of the clock, except by the milliseconds that counter
  overflow forces (the ``uuid6`` package drifts minutes ahead under load; this does not).
* A clock that steps back is absorbed: the last millisecond is kept and the counter goes on.
* After ``os.fork()`` the child drops its state and random buffer, so it never repeats the
  parent's values.

Bit layouts (``uuid.UUID.int``, most significant bit first):

* ``TIME_FIRST``: RFC 9562 version 7, variant ``0b10``; ms(48) | 7 | counter(12) | 0b10 |
  counter(30) | random(32) — the bit layout of CPython 3.14, so the values mix with the stdlib's.
* ``TIME_LAST``: random(48) | 4 | random(12) | 0b110 | counter(13) | ms(48).
* ``TIME_FIRST_LE``: in ``bytes_le``: ms(48) | counter(8) | 5 | counter(4) | 0b110 | counter(5) |
  counter(8) | random(48).
* ``SHARDED``: shard(4) | ms(44) | 8 | counter(12) | 0b10 | counter(30) | random(32): RFC 9562
  version 8.  The shard is drawn at random per id among ``shards`` (default 16); 44 bits of
  milliseconds last until the year 2527.

The two Microsoft-world layouts carry the Microsoft variant ``0b110`` (a GUID, in RFC terms),
with 4 and 5 in the version nibble.  That is accepted by every engine we target, including
MariaDB's ``UUID`` type (which rejects RFC version 8), and it lets :func:`~seqid_orm.timestamp_of`
tell these ids from a random UUIDv4 without a guess.
"""

from __future__ import annotations

import datetime as _dt
import functools
import struct
import sys
import threading
import time
import uuid
import weakref
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, Literal, overload

from ..errors import ArgumentTypeError, GeneratorExhaustedError, InvalidArgumentError, InvalidIDError, SeqIDError
from . import _uuid, randomness
from .adopted import AdoptedFormat, adopted_format, recognise
from .layout import Layout, as_layout
from .randomness import POOL, on_fork

_word = POOL.word_unchecked  # callers compared the pid first (see CombGenerator._build)
_words = POOL.words_unchecked

Bound = Literal["random", "min", "max", "next"]

_MS_MAX = (1 << 48) - 1
_MASK32 = 0xFFFF_FFFF
_MASK48 = 0xFFFF_FFFF_FFFF

_V7_FLAGS = (0x7 << 76) | (0b10 << 62)
_V8_FLAGS = (0x8 << 76) | (0b10 << 62)
_MS44_MAX = (1 << 44) - 1
_LAST_FLAGS = (0x4 << 76) | (0b110 << 61)
_LE_FLAGS = (0x5 << 76) | (0b110 << 61)

#: Counter width per layout; the seed leaves the top bit clear so a millisecond always has
#: at least half the counter's range before it overflows.
_COUNTER_BITS: dict[Layout, int] = {
    Layout.TIME_FIRST: 42,
    Layout.TIME_LAST: 13,
    Layout.TIME_FIRST_LE: 25,
    Layout.SHARDED: 42,
}

#: The largest millisecond each layout can hold.
_MS_LIMIT: dict[Layout, int] = {
    Layout.TIME_FIRST: _MS_MAX,
    Layout.TIME_LAST: _MS_MAX,
    Layout.TIME_FIRST_LE: _MS_MAX,
    Layout.SHARDED: _MS44_MAX,
}

MAX_SHARDS = 16

# uuid.UUID without __init__'s parsing (see ._uuid)
_new_object, _SET_INT, _SET_SAFE, _SAFE_UNKNOWN = _uuid.NEW, _uuid.SET_INT, _uuid.SET_SAFE, _uuid.SAFE_UNKNOWN
_uuid_from_int = _uuid.from_int


#: From this many ids a ``TIME_LAST`` batch is composed as bytes (:func:`_time_last_ints`);
#: below it the per-id arithmetic is cheaper than setting up the byte buffers.
_BYTES_FROM = 64

# byte 9 (little-endian) of a TIME_LAST id: the version nibble of _LAST_FLAGS over 4 random bits
_VERSION4_LOW_NIBBLE = bytes(((_LAST_FLAGS >> 72) & 0xF0) | (b & 0xF) for b in range(256))


@functools.lru_cache(maxsize=16)
def _struct16(n: int) -> Callable[[bytes | bytearray], tuple[bytes, ...]]:
    return struct.Struct("16s" * n).unpack


def _split16(buf: bytearray, n: int) -> Iterable[bytes]:
    """``buf`` cut into ``n`` 16-byte strings, in C.  Bulk inserts reuse a few batch sizes, so
    the compiled format of up to 4,096 pieces is kept (at most 16 of them, about 2 MB); larger
    batches take ``iter_unpack``, a little slower per id and holding nothing."""
    if n <= 4096:
        return _struct16(n)(buf)
    return map(itemgetter(0), struct.iter_unpack("16s", buf))


def _time_last_ints(words: list[int], head: int, first: int) -> list[int]:
    """The ``UUID.int`` of ``len(words)`` consecutive ``TIME_LAST`` ids, composed in C.

    The same values as ``_compose_last(ms, first + i, words[i])`` (``head`` is the
    millisecond's part, and the counters stay within 13 bits), but the arithmetic on 128-bit
    ints, seven operations per id in Python, becomes strided copies between two byte buffers
    and one ``int.from_bytes`` per id: about half the cost at a thousand ids.  In the id's
    little-endian bytes, 0-5 are the millisecond, 6-7 the flags and counter, 8 and the low
    nibble of 9 the word's bytes 6 and 7 (its bits 48-59), 10-15 the word's bytes 0-5.
    """
    n = len(words)
    rnd = array("Q", words)
    start = ((head >> 48) & 0xFFFF) + first  # the flags' three bits over the 13-bit counter
    counters = array("H", range(start, start + n))
    if sys.byteorder == "big":  # the copies below move little-endian bytes
        rnd.byteswap()
        counters.byteswap()
    r16 = memoryview(rnd).cast("B").cast("H")
    out = bytearray(head.to_bytes(16, "little") * n)
    o16 = memoryview(out).cast("H")  # eight 16-bit units per id
    o16[3::8] = memoryview(counters)
    o16[4::8] = r16[3::4]
    o16[5::8] = r16[0::4]
    o16[6::8] = r16[1::4]
    o16[7::8] = r16[2::4]
    out[9::16] = out[9::16].translate(_VERSION4_LOW_NIBBLE)
    little: Literal["little"] = "little"
    return list(map(int.from_bytes, _split16(out, n), repeat(little, n)))


def swap_le(value: int) -> int:
    """Convert between ``UUID.int`` and the integer read from ``bytes_le`` (an involution)."""
    b = value.to_bytes(16, "big")
    return int.from_bytes(b[3::-1] + b[5:3:-1] + b[7:5:-1] + b[8:], "big")


def flags_of(layout: Layout) -> tuple[int, int]:
    """The bits of ``UUID.int`` every key of ``layout`` carries the same (its version and variant), as
    ``(value, mask)``: what a key made outside the generator (:mod:`.rekeyed`) keeps, so an engine stores and
    compares it as it does the layout's own keys."""
    if layout is Layout.TIME_LAST:
        return _LAST_FLAGS, (0xF << 76) | (0b111 << 61)
    if layout is Layout.TIME_FIRST_LE:
        return _LE_FLAGS, (0xF << 76) | (0b111 << 61)
    if layout is Layout.SHARDED:
        return _V8_FLAGS, (0xF << 76) | (0b11 << 62)
    return _V7_FLAGS, (0xF << 76) | (0b11 << 62)


def _compose_first(ms: int, counter: int, rnd: int) -> int:
    return (ms << 80) | ((counter >> 30) << 64) | ((counter & 0x3FFF_FFFF) << 32) | (rnd & _MASK32) | _V7_FLAGS


def _compose_last(ms: int, counter: int, rnd: int) -> int:
    return ((rnd & _MASK48) << 80) | (((rnd >> 48) & 0xFFF) << 64) | (counter << 48) | ms | _LAST_FLAGS


_le_ms_cache: tuple[int, int] = (-1, 0)


def _le_ms_part(ms: int) -> int:
    """The 48-bit time as it sits in ``UUID.int`` when it leads ``bytes_le`` (cached per ms)."""
    global _le_ms_cache
    cached = _le_ms_cache
    if cached[0] == ms:
        return cached[1]
    hi = int.from_bytes((ms >> 16).to_bytes(4, "little"), "big")
    lo = int.from_bytes((ms & 0xFFFF).to_bytes(2, "little"), "big")
    part = (hi << 96) | (lo << 80)
    _le_ms_cache = (ms, part)
    return part


def _compose_first_le(ms: int, counter: int, rnd: int) -> int:
    # bytes_le 6 and 7 are bytes 7 and 6 of the text order; 8 onwards are shared.
    return (
        _le_ms_part(ms)
        | ((counter >> 17) << 64)
        | (((counter >> 13) & 0xF) << 72)
        | (((counter >> 8) & 0x1F) << 56)
        | ((counter & 0xFF) << 48)
        | (rnd & _MASK48)
        | _LE_FLAGS
    )


def _compose_sharded(ms: int, counter: int, rnd: int) -> int:
    # the shard comes in bits 60-63 of rnd (the generator puts it there); the random field is its low 32
    return (
        ((rnd >> 60) << 124)
        | (ms << 80)
        | ((counter >> 30) << 64)
        | ((counter & 0x3FFF_FFFF) << 32)
        | (rnd & _MASK32)
        | _V8_FLAGS
    )


def _head_first(ms: int) -> int:
    return (ms << 80) | _V7_FLAGS


def _head_last(ms: int) -> int:
    return ms | _LAST_FLAGS


def _head_first_le(ms: int) -> int:
    return _le_ms_part(ms) | _LE_FLAGS


def _head_sharded(ms: int) -> int:
    return (ms << 80) | _V8_FLAGS


#: The part of an id that depends on the millisecond only (with the fixed bits): the
#: generators compose it once per millisecond and add the counter and random bits per id.
_HEAD: dict[Layout, Callable[[int], int]] = {
    Layout.TIME_FIRST: _head_first,
    Layout.TIME_LAST: _head_last,
    Layout.TIME_FIRST_LE: _head_first_le,
    Layout.SHARDED: _head_sharded,
}

#: Where each layout's counter counts in ``UUID.int``: its lowest bit, and the flag bit (0 in
#: every id) just above the run of bits that starts there.  Adding ``1 << lowest`` to an id
#: without its random bits makes the next id's, until the carry reaches that guard bit: the
#: counter's low field is full (TIME_FIRST, SHARDED: 30 bits; TIME_FIRST_LE: 13) or the whole
#: counter is (TIME_LAST: 13 bits).  Then, once in thousands of ids or more, the generator
#: composes the next id in full.
_STEP: dict[Layout, tuple[int, int]] = {
    Layout.TIME_FIRST: (32, 62),
    Layout.TIME_LAST: (48, 61),
    Layout.TIME_FIRST_LE: (48, 61),
    Layout.SHARDED: (32, 62),
}


def _random_part(layout: Layout, shard_keep: int) -> tuple[int, int]:
    """``(mul, mask)`` with ``(word * mul) & mask`` equal to the bits ``compose(0, 0, word)``
    takes from a random word (tests/core/test_same_bits.py holds them to it).

    Where the word's bits move by two different shifts, ``mul = (1 << a) | (1 << b)`` makes both
    shifted copies in one multiplication (they cannot overlap: the word has 64 bits and
    ``a - b`` is 64), and the mask keeps each field from its copy.  One C operation instead of
    five in Python; a multiplier of 1 is skipped by the caller.
    """
    if layout is Layout.TIME_LAST:  # word bits 0-47 to 80-127, 48-59 to 64-75
        return (1 << 80) | (1 << 16), (_MASK48 << 80) | (0xFFF << 64)
    if layout is Layout.SHARDED:  # word bits 60-63 (the shard, as kept) to 124-127, 0-31 stay
        return (1 << 64) | 1, ((shard_keep >> 60) << 124) | _MASK32
    return 1, _MASK48 if layout is Layout.TIME_FIRST_LE else _MASK32


#: The branch of CombGenerator.batch's composition for each layout.
_KIND: dict[Layout, int] = {Layout.TIME_FIRST: 0, Layout.TIME_LAST: 1, Layout.TIME_FIRST_LE: 2, Layout.SHARDED: 3}


def consume(iterator: Iterator[object]) -> None:
    """Run ``iterator`` to its end, keeping nothing (the itertools recipe)."""
    deque(iterator, maxlen=0)


_COMPOSE: dict[Layout, Callable[[int, int, int], int]] = {
    Layout.TIME_FIRST: _compose_first,
    Layout.TIME_LAST: _compose_last,
    Layout.TIME_FIRST_LE: _compose_first_le,
    Layout.SHARDED: _compose_sharded,
}


def decode_comb(value: uuid.UUID, layout: Layout, above: int = 0) -> tuple[int, int]:
    """Return ``(unix_ms, counter)`` of a value generated in ``layout`` (with ``above`` one bits first)."""
    if above:
        fmt = adopted_format(layout, above)
        return fmt.decode(fmt.from_uuid_int(value.int))
    return _decode_int(value.int, layout)


def _decode_int(i: int, layout: Layout) -> tuple[int, int]:
    if layout is Layout.TIME_FIRST:
        return i >> 80, (((i >> 64) & 0xFFF) << 30) | ((i >> 32) & 0x3FFF_FFFF)
    if layout is Layout.SHARDED:
        return (i >> 80) & _MS44_MAX, (((i >> 64) & 0xFFF) << 30) | ((i >> 32) & 0x3FFF_FFFF)
    if layout is Layout.TIME_LAST:
        return i & _MASK48, (i >> 48) & 0x1FFF
    le = swap_le(i)
    counter = (
        (((le >> 72) & 0xFF) << 17) | (((le >> 64) & 0xF) << 13) | (((le >> 56) & 0x1F) << 8) | ((le >> 48) & 0xFF)
    )
    return le >> 80, counter


def layout_of(value: uuid.UUID) -> Layout | None:
    """The layout a seqid time-ordered UUID was generated in, read from its fixed bits.

    ``None`` when the bits match no layout (a UUIDv4, a wrapping-prefix id, a foreign id).  An
    adopted key (:func:`adopted_of`) is version 8 as ``SHARDED`` ids are, and reads as that here.
    """
    i = value.int
    variant3 = (i >> 61) & 0b111
    nibble = (i >> 76) & 0xF
    if variant3 >> 1 == 0b10 and nibble == 7:
        return Layout.TIME_FIRST
    if variant3 >> 1 == 0b10 and nibble == 8:
        return Layout.SHARDED
    if variant3 == 0b110 and nibble == 4:
        return Layout.TIME_LAST
    if variant3 == 0b110 and nibble == 5:
        return Layout.TIME_FIRST_LE
    return None


def adopted_of(value: uuid.UUID) -> tuple[Layout, int] | None:
    """``(layout, above)`` of an adopted key (a version 8 with 16 to 32 leading one bits in byte order
    or in SQL Server's, :mod:`seqid_orm.ids.adopted`), else ``None``."""
    fmt = recognise(value.int)
    if fmt is None:
        return None
    return (Layout.TIME_FIRST if fmt.identity else Layout.TIME_LAST), fmt.above


_LIVE: weakref.WeakSet[CombGenerator] = weakref.WeakSet()

#: The most ids one :meth:`CombGenerator.batch` call makes (about 1.6 GB of ``uuid.UUID``
#: objects); larger requests are a bug in the caller, refused before any memory is taken.
MAX_BATCH = 1 << 24


class CombGenerator:
    """A thread-safe source of strictly increasing time-ordered UUIDs in one layout.

    "Increasing" is meant in the layout's database order (``layout.sort_key``), which for
    ``TIME_FIRST`` is also ``uuid.UUID``'s own ordering.  The module-level :func:`uuid7` and
    :func:`comb` share one generator per layout; build your own to inject a ``clock`` (a
    callable returning Unix time in nanoseconds, like :func:`time.time_ns`) in tests.

    In a forked child (``os.fork()``, ``multiprocessing`` or a ``fork()`` made in C) the
    generator starts afresh before its first id: see :mod:`seqid_orm.ids.randomness`.

    ``shards`` (``SHARDED`` only: 2, 4, 8 or 16, the default) is how many key ranges the ids
    spread over; each id draws its shard at random, and within a shard ids strictly increase.

    ``above`` (0, or one of :data:`~seqid_orm.ids.adopted.ABOVE_BITS`) makes the keys of a column
    that already held keys: that many one bits first, then the time, so that they sort after the
    old keys (see :mod:`seqid_orm.ids.adopted`; the adapters choose it from the column's keys).
    """

    def __init__(
        self,
        layout: Layout | str = Layout.TIME_FIRST,
        *,
        clock: Callable[[], int] = time.time_ns,
        shards: int | None = None,
        above: int = 0,
    ) -> None:
        self.layout = as_layout(layout)
        self.shards = self._check_shards(shards)
        self.above = self._check_above(above)
        # shard bits < shards, the rest as drawn
        self._shard_keep = ((self.shards - 1) << 60) | ((1 << 60) - 1) if self.layout is Layout.SHARDED else 0
        self._adopted: AdoptedFormat | None = None
        self._compose: Callable[[int, int, int], int]
        self._head: Callable[[int], int]
        self._decode: Callable[[int, Layout], tuple[int, int]]
        if self.above:
            self._adopted = fmt = adopted_format(self.layout, self.above)
            self._compose, self._head = fmt.compose, fmt.head
            self._decode = lambda i, _layout: fmt.decode(i)  # the layout is the format's
            self._ms_max = _MS44_MAX
            bits = fmt.counter_bits
            self._step = (fmt.counter_shift, fmt.counter_guard)
            self._mul_mask = (1, (1 << fmt.random_bits) - 1)
            # contiguous counter (byte order): a batch steps it; else (SQL Server's) compose each id
            self._kind = 4 if fmt.counter_guard == fmt.counter_shift + fmt.counter_bits else 5
        else:
            self._compose, self._head, self._decode = _COMPOSE[self.layout], _HEAD[self.layout], _decode_int
            self._ms_max = _MS_LIMIT[self.layout]
            bits = _COUNTER_BITS[self.layout]
            self._step = _STEP[self.layout]
            self._mul_mask = _random_part(self.layout, self._shard_keep)
            self._kind = _KIND[self.layout]
        if self.layout is Layout.SHARDED and self.shards < MAX_SHARDS:
            keep = self._shard_keep
            self._compose = lambda ms, counter, rnd: _compose_sharded(ms, counter, rnd & keep)
        self._counter_max = (1 << bits) - 1
        self._seed_mask = (1 << (bits - 1)) - 1
        self._clock = clock
        self._build()
        _LIVE.add(self)

    def _check_above(self, above: object) -> int:
        if isinstance(above, bool) or not isinstance(above, int):
            raise ArgumentTypeError(f"above must be an int, got {type(above).__name__}")
        if above == 0:
            return 0
        adopted_format(self.layout, above)  # refuses a width or layout that has no adopted keys
        return above

    def _check_shards(self, shards: object) -> int:
        if shards is None:
            return MAX_SHARDS if self.layout is Layout.SHARDED else 1
        if self.layout is not Layout.SHARDED:
            raise InvalidArgumentError(f"shards= applies to the sharded layout only, not {self.layout.value}")
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise ArgumentTypeError(f"shards must be an int, got {type(shards).__name__}")
        if shards not in (2, 4, 8, 16):
            raise InvalidArgumentError(f"shards must be 2, 4, 8 or 16 (the 4 leading bits), got {shards}")
        return shards

    def _bad_clock(self, ms: int) -> SeqIDError:
        if ms > self._ms_max:
            return self._exhausted()
        return InvalidArgumentError(f"the clock reads {ms} ms, before 1970: a UUIDv7 time cannot be negative")

    def _exhausted(self) -> GeneratorExhaustedError:
        bits = self._ms_max.bit_length()
        return GeneratorExhaustedError(
            f"the {bits}-bit millisecond field of {self.layout.value} ids is used up (counter overflow at "
            f"{ms_to_iso(self._ms_max)}); no later id can be made"
        )

    def _build(self) -> None:
        """Make :meth:`next` and :meth:`batch` as closures over this generator's state.

        Why closures: every name they use is a local or a cell, the cheapest lookups CPython
        has, and the lock is taken with ``acquire``/``release``, half the cost of ``with lock``
        (the two errors raised under it, a clock out of range and an exhausted counter,
        release it first).  A forked child
        keeps the closures (``uuid7`` *is* one) and resets the state they share: a new lock, no
        millisecond begun.  The random words are taken in the order they
        always were (the seed of a new millisecond, then the random field; a batch takes its
        random fields first), so the same clock and words give the same ids.

        The state is the last id without its random bits (``compose(ms, counter, 0)``), not
        the counter: the next id's is one addition away (see :data:`_STEP`), and the random
        word joins it with one to three operations (see :func:`_random_part`).  Composing the
        counter, flags and word anew took nine operations on 128-bit ints, 30 to 50 ns each:
        a third of what an id cost.  Likewise the clock's reading is compared with the first
        nanosecond of the next millisecond, and divided only when it has come.
        """
        layout = self.layout
        lock = threading.Lock()
        acquire, release = lock.acquire, lock.release
        clock, ms_max = self._clock, self._ms_max
        counter_max, seed_mask = self._counter_max, self._seed_mask
        compose, head_of, decode = self._compose, self._head, self._decode
        mark = randomness.MARK
        pop, refill = POOL.pop, POOL.refill
        new, set_int, set_safe = _new_object, _SET_INT, _SET_SAFE
        UUID, unknown = uuid.UUID, _SAFE_UNKNOWN
        lowest, guard_bit = self._step
        step, guard = 1 << lowest, 1 << guard_bit
        mul, mask = self._mul_mask
        plain = mul == 1
        kind = self._kind
        m30, m32, m48 = 0x3FFF_FFFF, _MASK32, _MASK48
        below_guard = guard - 1

        def limit_of(s: int) -> int:  # the first value past `s` whose step has reached the guard bit
            return (s | below_guard) + 1

        # The state: the last id without its random bits (compose(ms, counter, 0)), the first
        # value of it that needs the slow path (the guard bit carried into), and the first clock
        # reading, in ns, of a later millisecond (comparing the raw reading saves a division).
        state, limit, next_ns = 0, 0, 0

        def next_id() -> uuid.UUID:
            nonlocal state, limit, next_ns
            if not mark[0]:  # a forked child, however the fork was made: reset, then begin
                randomness.after_fork()
                return next_id()
            t = clock()
            acquire()
            if t >= next_ns:  # a later millisecond than the last id's
                ms = t // 1_000_000
                if ms > ms_max:
                    release()
                    raise self._bad_clock(ms)
                try:
                    c = pop() & seed_mask
                except IndexError:
                    c = refill() & seed_mask
                next_ns = (ms + 1) * 1_000_000
                s = compose(ms, c, 0)
                limit = limit_of(s)
            elif t < 0:
                release()
                raise self._bad_clock(t // 1_000_000)
            else:  # same millisecond, or the clock stepped back: keep counting
                s = state + step
                if s >= limit:  # the carry left the counter's low field: count the slow way
                    ms, c = decode(state, layout)
                    c += 1
                    if c > counter_max:
                        if ms >= ms_max:
                            release()
                            raise self._exhausted()
                        ms += 1
                        next_ns += 1_000_000
                        try:
                            c = pop() & seed_mask
                        except IndexError:
                            c = refill() & seed_mask
                    s = compose(ms, c, 0)
                    limit = limit_of(s)
            state = s
            try:
                rnd = pop()
            except IndexError:
                rnd = refill()
            release()
            u = new(UUID)
            set_int(u, s | (rnd & mask) if plain else s | ((rnd * mul) & mask))
            set_safe(u, unknown)
            return u

        def batch_ints(n: int) -> list[int]:
            nonlocal state, limit, next_ns
            if not mark[0]:
                randomness.after_fork()
                return batch_ints(n)
            words = _words(n)
            ms = clock() // 1_000_000
            if not 0 <= ms <= ms_max:
                raise self._bad_clock(ms)
            with lock:  # a batch is long: the context manager's cost does not matter here
                last_ms = next_ns // 1_000_000 - 1
                if ms > last_ms:
                    c = (_word() & seed_mask) - 1  # incremented before first use
                else:
                    c = decode(state, layout)[1]
                    ms = last_ms
                first = c + 1
                if c + n <= counter_max:  # the common case: no overflow inside the batch
                    h = head_of(ms)
                    if kind == 0 and (first & m30) + n <= m30 + 1:
                        # the counter only moves bits 32-61: the values step by 1 << 32 from `base`
                        base = h | ((first >> 30) << 64) | ((first & m30) << 32)
                        steps = range(base, base + (n << 32), 1 << 32)
                        ints = [b | (r & m32) for b, r in zip(steps, words, strict=True)]
                    elif kind == 1 and n >= _BYTES_FROM:
                        ints = _time_last_ints(words, h, first)
                    elif kind == 4:  # adopted keys in byte order: the counter steps its own field
                        base = compose(ms, first, 0)
                        steps = range(base, base + (n << lowest), step)
                        ints = [b | (r & mask) for b, r in zip(steps, words, strict=True)]
                    elif kind == 1:  # TIME_LAST: the counter steps bits 48-60, the random bits go on top
                        steps = range(h | (first << 48), h | ((first + n) << 48), 1 << 48)
                        ints = [
                            b | ((r & m48) << 80) | (((r >> 48) & 0xFFF) << 64)
                            for b, r in zip(steps, words, strict=True)
                        ]
                    else:
                        ints = [compose(ms, k, r) for k, r in zip(range(first, first + n), words, strict=True)]
                    c += n
                else:
                    ints = []
                    for rnd in words:
                        c += 1
                        if c > counter_max:
                            if ms >= ms_max:  # nothing is kept: the state stays as before the call
                                raise self._exhausted()
                            ms += 1
                            c = _word() & seed_mask
                        ints.append(compose(ms, c, rnd))
                if n:
                    state = compose(ms, c, 0)
                    limit, next_ns = limit_of(state), (ms + 1) * 1_000_000
            return ints

        def batch(n: int) -> list[uuid.UUID]:
            return _uuids(batch_ints(n))

        def reset() -> None:  # run in a forked child, before its first id (see .randomness)
            nonlocal lock, acquire, release, state, limit, next_ns
            lock = threading.Lock()  # the parent's may have been held by a thread the child lacks
            acquire, release = lock.acquire, lock.release
            state, limit, next_ns = 0, 0, 0

        def set_counter(value: int) -> None:  # for tests that drive the counter to its end
            nonlocal state, limit
            state = compose(max(next_ns // 1_000_000 - 1, 0), value, 0)
            limit = limit_of(state)

        def get_counter() -> int:
            return decode(state, layout)[1]

        adopted = self._adopted
        if adopted is not None and not adopted.identity:
            # SQL Server's adopted keys are composed in its compare order: their bytes move to
            # their places in uuid.UUID.bytes last (a dearer id, for an engine seqid cannot measure)
            to_uuid_int, compared_next, compared_ints = adopted.to_uuid_int, next_id, batch_ints

            def next_id() -> uuid.UUID:
                return _uuid_from_int(to_uuid_int(compared_next().int))

            def batch_ints(n: int) -> list[int]:
                return list(map(to_uuid_int, compared_ints(n)))

            def batch(n: int) -> list[uuid.UUID]:
                return _uuids(batch_ints(n))

        self._next = next_id
        self._reset = reset
        self._batch = batch
        self._batch_ints = batch_ints
        self._get_counter = get_counter
        self._set_counter = set_counter

    @property
    def _counter(self) -> int:
        return self._get_counter()

    @_counter.setter
    def _counter(self, value: int) -> None:
        self._set_counter(value)

    def __call__(self) -> uuid.UUID:
        return self._next()

    def next(self) -> uuid.UUID:
        """Return the next id."""
        return self._next()

    @property
    def id_function(self) -> Callable[[], uuid.UUID]:
        """The function making this generator's next id: what :meth:`next` calls, without that call.

        For the adapters' per-row defaults, which look it up once and call it for every row (the
        module-level :func:`uuid7` is the same function of the shared ``TIME_FIRST`` generator).
        It stays valid in a forked child, which resets the state it reads.
        """
        return self._next

    def batch(self, n: int) -> list[uuid.UUID]:
        """Return ``n`` consecutive ids with one clock read, one lock and one random read.

        Meant for bulk inserts: the ids are strictly increasing, exactly as ``n`` calls of
        :meth:`next` would be, at a fraction of the cost.  ``n`` is at most :data:`MAX_BATCH`.
        """
        return self._batch(_batch_size(n))

    def batch_ints(self, n: int) -> list[int]:
        """:meth:`batch`'s ids as their 128-bit ``UUID.int``, taken from the same sequence.

        For a bulk path that sends the ids' bytes while the rows stream and returns them as
        :class:`LazyUUIDs`, whose ``uuid.UUID`` objects are made only when read: an int is not
        tracked by the garbage collector, and thousands of new ``uuid.UUID`` objects alive at once
        make it sweep the whole heap, which cost a PostgreSQL ``COPY`` a third of its client time.
        """
        return self._batch_ints(_batch_size(n))


def _batch_size(n: object) -> int:
    """``n`` checked as a batch's size: an int from 0 to :data:`MAX_BATCH`."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ArgumentTypeError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise InvalidArgumentError(f"n must be >= 0, got {n}")
    if n > MAX_BATCH:
        raise InvalidArgumentError(f"n must be at most {MAX_BATCH:,} (MAX_BATCH) per call, got {n}")
    return n


def _uuids(ints: list[int]) -> list[uuid.UUID]:
    """``uuid.UUID`` objects of ``ints`` (known to be 0 <= i < 2**128), made in C in three passes:
    cheaper than a Python loop building one at a time, or than ``UUID(int=i)``'s checks."""
    n = len(ints)
    out = list(map(_new_object, repeat(uuid.UUID, n)))
    consume(map(_SET_INT, out, ints))
    consume(map(_SET_SAFE, out, repeat(_SAFE_UNKNOWN, n)))
    return out


class LazyUUIDs(Sequence[uuid.UUID]):
    """A sequence of UUIDs held as their ints, each ``uuid.UUID`` made when it is read.

    What a bulk load returns for the keys it made with :meth:`CombGenerator.batch_ints`: a load
    whose caller never reads its keys makes no ``uuid.UUID`` objects at all, and neither do their
    thousands wake the garbage collector (ints are not tracked by it, ``uuid.UUID`` objects are).
    It compares equal to any sequence of the same UUIDs, a ``list`` included.
    """

    __slots__ = ("_ints",)

    def __init__(self, ints: list[int]) -> None:
        if not isinstance(ints, list):
            raise ArgumentTypeError(f"ints must be a list, got {type(ints).__name__}")
        if ints:  # as UUID(int=...) checks each value, in C here
            if set(map(type, ints)) != {int}:
                bad = next(i for i in ints if type(i) is not int)
                raise ArgumentTypeError(f"ints must hold ints, got a {type(bad).__name__}")
            if min(ints) < 0 or max(ints) >> 128:
                raise InvalidArgumentError("every int must be at least 0 and below 2**128")
        self._ints = ints

    def __len__(self) -> int:
        return len(self._ints)

    @overload
    def __getitem__(self, index: int) -> uuid.UUID: ...
    @overload
    def __getitem__(self, index: slice) -> list[uuid.UUID]: ...
    def __getitem__(self, index: int | slice) -> uuid.UUID | list[uuid.UUID]:
        if isinstance(index, slice):
            return _uuids(self._ints[index])
        return _uuids([self._ints[index]])[0]

    def __iter__(self) -> Iterator[uuid.UUID]:
        return iter(_uuids(self._ints))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyUUIDs):
            return self._ints == other._ints
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __repr__(self) -> str:
        return f"LazyUUIDs({list(self)!r})"


_DEFAULT: dict[Layout, CombGenerator] = {lay: CombGenerator(lay) for lay in Layout}
_V7 = _DEFAULT[Layout.TIME_FIRST]


_ADOPTED: dict[tuple[Layout, int], CombGenerator] = {}
_ADOPTED_LOCK = threading.Lock()


def generator_for(layout: Layout | str, above: int = 0) -> CombGenerator:
    """The process's shared generator of ``layout``: the one :func:`comb` and :func:`comb_batch` use,
    so ids made through any door of one process are strictly increasing in that layout together.
    With ``above``, the shared generator of adopted keys of that width (made at the first ask)."""
    gen = _DEFAULT.get(layout) if isinstance(layout, Layout) and not above else None
    if gen is not None:
        return gen
    lay = as_layout(layout)
    if not above:
        return _DEFAULT[lay]
    gen = _ADOPTED.get((lay, above))
    if gen is None:
        with _ADOPTED_LOCK:  # one per width and layout, however many threads ask first at once
            gen = _ADOPTED.get((lay, above))
            if gen is None:
                gen = _ADOPTED[(lay, above)] = CombGenerator(lay, above=above)
    return gen


def _published(fn: Callable[[], uuid.UUID], name: str, doc: str) -> Callable[[], uuid.UUID]:
    """``fn`` under a public name: the module-level ``uuid7`` is the generator's closure itself,
    saving a Python call per id (the closure survives forks; only its state is reset)."""
    named: Any = fn
    named.__name__ = named.__qualname__ = name
    named.__module__ = __name__
    named.__doc__ = doc
    return fn


uuid7 = _published(
    _V7._next, "uuid7", "A new RFC 9562 UUIDv7, strictly greater than every earlier one from this process."
)


def comb(layout: Layout | str = Layout.TIME_FIRST) -> uuid.UUID:
    """A new time-ordered UUID in ``layout``, strictly increasing in that layout's order."""
    gen = _DEFAULT.get(layout) if isinstance(layout, Layout) else None  # a member: skip the coercion
    if gen is None:
        gen = _DEFAULT[as_layout(layout)]
    return gen._next()


def comb_batch(n: int, layout: Layout | str = Layout.TIME_FIRST) -> list[uuid.UUID]:
    """``n`` new ids in ``layout`` at once; see :meth:`CombGenerator.batch`."""
    return _DEFAULT[as_layout(layout)].batch(n)


def comb_at(
    when: _dt.datetime,
    layout: Layout | str = Layout.TIME_FIRST,
    bound: Bound = "random",
    *,
    above: int = 0,
) -> uuid.UUID:
    """An id for the instant ``when``: the smallest, the greatest, a random one, or the next one.

    ``bound="min"``/``"max"`` give the first and last id any seqid generator can produce in
    that millisecond, so ``min(start) <= id < min(end)`` selects rows created in
    ``[start, end)`` as a primary-key range scan.  ``"next"`` is for backfills (rows imported or
    made late that keep their own time): each call for the same millisecond as the call before it
    counts on from that id (RFC 9562's counter, as :func:`uuid7` does for the present), so a
    backfill that goes through its rows in time order gets ids in the order of its rows, many to
    a millisecond; a call for another millisecond starts a new count at a random point.
    ``"random"``: one id, not ordered against others of its millisecond.  ``above``: the same
    for the adopted keys of a column with that many leading one bits (:mod:`seqid_orm.ids.adopted`).
    """
    lay = as_layout(layout)
    ms = datetime_to_ms(when, "when")
    fmt = adopted_format(lay, above) if above else None
    limit = _MS44_MAX if fmt is not None else _MS_LIMIT[lay]
    if ms > limit:
        raise InvalidArgumentError(f"when {when.isoformat()} is past what the {lay.value} layout's time field holds")
    bits = fmt.counter_bits if fmt is not None else _COUNTER_BITS[lay]
    if bound == "min":
        counter, rnd = 0, 0
    elif bound == "max":
        counter, rnd = (1 << bits) - 1, (1 << 64) - 1
    elif bound == "random":
        counter, rnd = POOL.word() & ((1 << (bits - 1)) - 1), POOL.word()
    elif bound == "next":
        counter, rnd = _backfill_counter(lay, above, ms, bits), POOL.word()
    else:
        raise InvalidArgumentError(f"bound must be 'random', 'min', 'max' or 'next', got {bound!r}")
    if fmt is not None:
        return _uuid_from_int(fmt.to_uuid_int(fmt.compose(ms, counter, rnd)))
    return _uuid_from_int(_COMPOSE[lay](ms, counter, rnd))


# comb_at(bound="next"): per layout and width of adopted keys, the millisecond and counter of the
# last id it made (a backfill's own count, apart from the live generators': a backfill of past
# times never moves the present's counter).
_BACKFILL: dict[tuple[Layout, int], tuple[int, int]] = {}
_BACKFILL_LOCK = threading.Lock()


def _backfill_counter(layout: Layout, above: int, ms: int, bits: int) -> int:
    with _BACKFILL_LOCK:
        last = _BACKFILL.get((layout, above))
        if last is not None and last[0] == ms:
            counter = last[1] + 1
            if counter >> bits:
                raise GeneratorExhaustedError(
                    f"comb_at(bound='next') made every id the {layout.value} layout's {bits}-bit counter holds "
                    f"for {ms_to_iso(ms)}; no later id fits that millisecond"
                )
        else:
            counter = POOL.word() & ((1 << (bits - 1)) - 1)  # at least half the counter left to count
        _BACKFILL[(layout, above)] = (ms, counter)
    return counter


def _backfill_after_fork() -> None:
    """A child counts on from nothing of its parent's (whose next ids it would repeat)."""
    global _BACKFILL_LOCK
    _BACKFILL_LOCK = threading.Lock()
    _BACKFILL.clear()


on_fork(_backfill_after_fork)

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


_ONE_US = _dt.timedelta(microseconds=1)


def epoch_us(when: object, name: str) -> int:
    """An aware ``datetime`` as whole microseconds since the Unix epoch (exact: a ``timedelta`` counts
    microseconds), which the millisecond, .NET-tick and second clocks of the ids are each a division or
    multiple of; a typed error naming ``name`` otherwise."""
    if not isinstance(when, _dt.datetime):
        raise ArgumentTypeError(f"{name} must be a datetime.datetime, got {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidArgumentError(f"{name} must be timezone-aware (naive datetimes are ambiguous)")
    return (when - _EPOCH) // _ONE_US


def check_span(start: _dt.datetime, end: _dt.datetime) -> None:
    """Refuse a time range ``[start, end)`` that runs backwards (both already checked as aware)."""
    if start > end:
        raise InvalidArgumentError(f"start {start.isoformat()} is after end {end.isoformat()}")


def datetime_to_ms(when: object, name: str) -> int:
    """An aware ``datetime`` as Unix milliseconds in the 48-bit range; a typed error naming ``name`` otherwise."""
    ms = epoch_us(when, name) // 1000
    if not 0 <= ms <= _MS_MAX:
        assert isinstance(when, _dt.datetime)  # epoch_us refused anything else
        raise InvalidArgumentError(f"{name} {when.isoformat()} is outside the 48-bit millisecond range")
    return ms


def ms_limit(layout: Layout) -> int:
    """The last Unix millisecond ``layout``'s time field holds (44 bits for ``SHARDED``, else 48)."""
    return _MS_LIMIT[layout]


def ms_to_datetime(ms: int) -> _dt.datetime:
    """Unix milliseconds as an aware UTC datetime.

    Raises :class:`~seqid_orm.errors.InvalidIDError` past year 9999, which ``datetime`` cannot
    hold (about a tenth of the 48-bit millisecond range; a Snowflake profile's far end too).
    """
    try:
        return _EPOCH + _dt.timedelta(milliseconds=ms)
    except OverflowError:
        raise InvalidIDError(
            f"the id's time, {ms} ms after 1970-01-01, is past 9999-12-31, the last instant a datetime holds"
        ) from None


def ms_to_iso(ms: int) -> str:
    """Unix milliseconds as ISO text, or a plain count where ``datetime`` cannot hold it."""
    try:
        return ms_to_datetime(ms).isoformat()
    except InvalidIDError:
        return f"{ms} ms after 1970-01-01"


def _after_fork_in_child() -> None:
    for gen in list(_LIVE):
        gen._reset()  # a new lock and a fresh state, made in the child


on_fork(_after_fork_in_child)
