"""Time-ordered UUIDs (UUIDv7 and COMB layouts), strictly monotonic within a process.

Each id is ``milliseconds | counter | random``, with the three fields placed where the target
database compares first (see :mod:`seqid_orm.layout`).  The counter follows RFC 9562 §6.2
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

The two Microsoft-world layouts carry the Microsoft variant ``0b110`` (a GUID, in RFC terms),
with 4 and 5 in the version nibble.  That is accepted by every engine we target, including
MariaDB's ``UUID`` type (which rejects RFC version 8), and it lets :func:`~seqid_orm.timestamp_of`
tell these ids from a random UUIDv4 without a guess.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Literal

from ._random import POOL, check_fork, on_fork
from .errors import ArgumentTypeError, GeneratorExhaustedError, InvalidArgumentError, InvalidIDError
from .layout import Layout, as_layout

_word = POOL.word_unchecked  # callers run check_fork() first
_words = POOL.words_unchecked

Bound = Literal["random", "min", "max"]

_MS_MAX = (1 << 48) - 1
_MASK32 = 0xFFFF_FFFF
_MASK48 = 0xFFFF_FFFF_FFFF

_V7_FLAGS = (0x7 << 76) | (0b10 << 62)
_LAST_FLAGS = (0x4 << 76) | (0b110 << 61)
_LE_FLAGS = (0x5 << 76) | (0b110 << 61)

#: Counter width per layout; the seed leaves the top bit clear so a millisecond always has
#: at least half the counter's range before it overflows.
_COUNTER_BITS: dict[Layout, int] = {
    Layout.TIME_FIRST: 42,
    Layout.TIME_LAST: 13,
    Layout.TIME_FIRST_LE: 25,
}

# uuid.UUID without __init__'s parsing: what CPython 3.14 calls UUID._from_int.
_new_object = object.__new__
_set = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def _uuid_from_int(value: int) -> uuid.UUID:
    u = _new_object(uuid.UUID)
    _set(u, "int", value)
    _set(u, "is_safe", _SAFE_UNKNOWN)
    return u


def swap_le(value: int) -> int:
    """Convert between ``UUID.int`` and the integer read from ``bytes_le`` (an involution)."""
    b = value.to_bytes(16, "big")
    return int.from_bytes(b[3::-1] + b[5:3:-1] + b[7:5:-1] + b[8:], "big")


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


_COMPOSE: dict[Layout, Callable[[int, int, int], int]] = {
    Layout.TIME_FIRST: _compose_first,
    Layout.TIME_LAST: _compose_last,
    Layout.TIME_FIRST_LE: _compose_first_le,
}


def decode_comb(value: uuid.UUID, layout: Layout) -> tuple[int, int]:
    """Return ``(unix_ms, counter)`` of a value generated in ``layout``."""
    i = value.int
    if layout is Layout.TIME_FIRST:
        return i >> 80, (((i >> 64) & 0xFFF) << 30) | ((i >> 32) & 0x3FFF_FFFF)
    if layout is Layout.TIME_LAST:
        return i & _MASK48, (i >> 48) & 0x1FFF
    le = swap_le(i)
    counter = (
        (((le >> 72) & 0xFF) << 17) | (((le >> 64) & 0xF) << 13) | (((le >> 56) & 0x1F) << 8) | ((le >> 48) & 0xFF)
    )
    return le >> 80, counter


def layout_of(value: uuid.UUID) -> Layout | None:
    """The layout a seqid time-ordered UUID was generated in, read from its fixed bits.

    ``None`` when the bits match no layout (a UUIDv4, a wrapping-prefix id, a foreign id).
    """
    i = value.int
    variant3 = (i >> 61) & 0b111
    nibble = (i >> 76) & 0xF
    if variant3 >> 1 == 0b10 and nibble == 7:
        return Layout.TIME_FIRST
    if variant3 == 0b110 and nibble == 4:
        return Layout.TIME_LAST
    if variant3 == 0b110 and nibble == 5:
        return Layout.TIME_FIRST_LE
    return None


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
    generator starts afresh before its first id: see :mod:`seqid_orm._random`.
    """

    def __init__(
        self,
        layout: Layout | str = Layout.TIME_FIRST,
        *,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.layout = as_layout(layout)
        self._compose = _COMPOSE[self.layout]
        bits = _COUNTER_BITS[self.layout]
        self._counter_max = (1 << bits) - 1
        self._seed_mask = (1 << (bits - 1)) - 1
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0
        _LIVE.add(self)

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def _now_ms(self) -> int:
        ms = self._clock() // 1_000_000
        if not 0 <= ms <= _MS_MAX:
            if ms > _MS_MAX:
                raise self._exhausted()
            raise InvalidArgumentError(f"the clock reads {ms} ms, before 1970: a UUIDv7 time cannot be negative")
        return ms

    def _exhausted(self) -> GeneratorExhaustedError:
        return GeneratorExhaustedError(
            f"the 48-bit millisecond field of {self.layout.value} ids is used up (counter overflow at "
            f"{ms_to_iso(_MS_MAX)}); no later id can be made"
        )

    def __call__(self) -> uuid.UUID:
        return self.next()

    def next(self) -> uuid.UUID:
        """Return the next id."""
        check_fork()
        with self._lock:
            ms = self._now_ms()
            if ms > self._last_ms:
                counter = _word() & self._seed_mask
                self._last_ms = ms
            else:  # same millisecond, or the clock stepped back: keep counting
                counter = self._counter + 1
                if counter > self._counter_max:
                    if self._last_ms >= _MS_MAX:
                        raise self._exhausted()
                    self._last_ms += 1
                    counter = _word() & self._seed_mask
                ms = self._last_ms
            self._counter = counter
            rnd = _word()
        return _uuid_from_int(self._compose(ms, counter, rnd))

    def batch(self, n: int) -> list[uuid.UUID]:
        """Return ``n`` consecutive ids with one clock read, one lock and one random read.

        Meant for bulk inserts: the ids are strictly increasing, exactly as ``n`` calls of
        :meth:`next` would be, at a fraction of the cost.  ``n`` is at most :data:`MAX_BATCH`.
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise ArgumentTypeError(f"n must be an int, got {type(n).__name__}")
        if n < 0:
            raise InvalidArgumentError(f"n must be >= 0, got {n}")
        if n > MAX_BATCH:
            raise InvalidArgumentError(f"n must be at most {MAX_BATCH:,} (MAX_BATCH) per call, got {n}")
        compose = self._compose
        counter_max = self._counter_max
        seed_mask = self._seed_mask
        check_fork()
        with self._lock:
            words = _words(n)
            ms = self._now_ms()
            if ms > self._last_ms:
                counter = (_word() & seed_mask) - 1  # incremented before first use
                self._last_ms = ms
            else:
                counter = self._counter
                ms = self._last_ms
            out: list[uuid.UUID] = []
            append = out.append
            for rnd in words:
                counter += 1
                if counter > counter_max:
                    if ms >= _MS_MAX:  # nothing is kept: the state stays as before the call
                        raise self._exhausted()
                    ms += 1
                    counter = _word() & seed_mask
                append(_uuid_from_int(compose(ms, counter, rnd)))
            if n:
                self._last_ms = ms
                self._counter = counter
        return out


_DEFAULT: dict[Layout, CombGenerator] = {lay: CombGenerator(lay) for lay in Layout}
_uuid7_next = _DEFAULT[Layout.TIME_FIRST].next


def uuid7() -> uuid.UUID:
    """A new RFC 9562 UUIDv7, strictly greater than every earlier one from this process."""
    return _uuid7_next()


def comb(layout: Layout | str = Layout.TIME_FIRST) -> uuid.UUID:
    """A new time-ordered UUID in ``layout``, strictly increasing in that layout's order."""
    return _DEFAULT[as_layout(layout)].next()


def comb_batch(n: int, layout: Layout | str = Layout.TIME_FIRST) -> list[uuid.UUID]:
    """``n`` new ids in ``layout`` at once; see :meth:`CombGenerator.batch`."""
    return _DEFAULT[as_layout(layout)].batch(n)


def comb_at(
    when: _dt.datetime,
    layout: Layout | str = Layout.TIME_FIRST,
    bound: Bound = "random",
) -> uuid.UUID:
    """An id for the instant ``when``: the smallest, the greatest, or a random one.

    ``bound="min"``/``"max"`` give the first and last id any seqid generator can produce in
    that millisecond, so ``min(start) <= id < min(end)`` selects rows created in
    ``[start, end)`` as a primary-key range scan.  ``"random"`` is for backfills; such ids are
    not ordered against each other inside one millisecond.
    """
    lay = as_layout(layout)
    ms = _datetime_to_ms(when, "when")
    if bound == "min":
        counter, rnd = 0, 0
    elif bound == "max":
        counter, rnd = (1 << _COUNTER_BITS[lay]) - 1, (1 << 64) - 1
    elif bound == "random":
        counter, rnd = POOL.word() & ((1 << (_COUNTER_BITS[lay] - 1)) - 1), POOL.word()
    else:
        raise InvalidArgumentError(f"bound must be 'random', 'min' or 'max', got {bound!r}")
    return _uuid_from_int(_COMPOSE[lay](ms, counter, rnd))


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _datetime_to_ms(when: object, name: str) -> int:
    if not isinstance(when, _dt.datetime):
        raise ArgumentTypeError(f"{name} must be a datetime.datetime, got {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidArgumentError(f"{name} must be timezone-aware (naive datetimes are ambiguous)")
    delta = when - _EPOCH
    ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if not 0 <= ms <= _MS_MAX:
        raise InvalidArgumentError(f"{name} {when.isoformat()} is outside the 48-bit millisecond range")
    return ms


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
        gen._reset_after_fork()


on_fork(_after_fork_in_child)
