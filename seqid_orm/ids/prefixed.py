"""UUIDs with a short wrapping prefix: PostgreSQL's ``sequential-uuids`` extension, exactly.

Consecutive ids share a prefix and land in one area of the index; because the prefix *wraps*,
ids are not predictable from each other and pages that lost rows to deletes are refilled on the
next lap (Tomas Vondra, "Sequential UUID generators", 2018; github.com/tvondra/sequential-uuids).

The prefix is the extension's (``sequential_uuids.c``, 1.0.3), for every argument it accepts:

* the prefix takes whole bytes: the fewest that hold ``block_count`` blocks (1 byte for 1 to 256);
* when ``block_count`` does not fill those bytes, the block size is *rescaled* so the prefix still
  runs through its whole range before it wraps: ``block_size' = max(1, block_size * block_count //
  256**bytes)`` (so ``(100, 100)`` has blocks of 39 values and wraps after 9,984, not 10,000);
* the prefix is ``trunc(value / block_size')`` in two's complement, masked to those bytes;
  ``uuid_sequence_nextval`` works from ``value - 1`` (the first block of a sequence, which starts
  at 1, is values 1..block_size'), ``uuid_time_nextval`` from the Unix seconds.  Division
  truncates toward zero, as C's does, so negative sequence values give the extension's prefixes.

Kept from seqid: the prefix is placed where the layout says the database compares first (SQL
Server, MariaDB's ``UUID``), ``now=`` for the time variant, and prefixes up to 6 bytes (block
counts up to 2**48; the extension's ``int`` arithmetic crashes or hangs the server above 2**24,
where seqid gives what its formula means).  Like the extension, the values carry the RFC version 4
and variant bits and are random apart from the prefix; they carry no absolute time, so
:func:`~seqid_orm.timestamp_of` refuses them.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
import uuid
from collections.abc import Callable

from ..errors import ArgumentTypeError, InvalidArgumentError
from . import _uuid, randomness
from .comb import check_span, epoch_us, swap_le
from .layout import Layout, as_layout
from .randomness import POOL

_V4_CLEAR = ~((0xF << 76) | (0b11 << 62)) & ((1 << 128) - 1)
_V4_FLAGS = (0x4 << 76) | (0b10 << 62)
_MAX_PREFIX_BYTES = 6  # stays clear of the version and variant bits in every layout


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    return value


def prefix_bytes(block_count: int) -> int:
    """How many whole bytes the prefix of ``block_count`` blocks takes (the extension's rounding
    of its prefix bits: at least one bit, so ``block_count=1`` takes a byte too)."""
    _check_int("block_count", block_count, 1)
    bits = max(1, (block_count - 1).bit_length())  # the fewest bits b >= 1 with 2**b >= block_count
    n = (bits + 7) // 8
    if n > _MAX_PREFIX_BYTES:
        raise InvalidArgumentError(f"block_count must be <= 2**48, got {block_count}")
    return n


def extension_prefix(value: int, block_size: int, block_count: int) -> int:
    """The prefix ``sequential_uuids.c`` computes from ``value``, ``block_size`` and ``block_count``.

    ``value`` is what the extension divides: ``nextval - 1`` for sequences, Unix seconds for time.
    """
    _check_int("value", value, -(1 << 63))
    _check_int("block_size", block_size, 1)
    nbytes = prefix_bytes(block_count)
    prefix_count = 1 << (8 * nbytes)
    rescaled = max(1, block_size * block_count // prefix_count)
    quotient = abs(value) // rescaled * (1 if value >= 0 else -1)  # C division truncates toward zero
    return quotient & (prefix_count - 1)  # two's complement bits, as the extension's mask takes them


def _prefix_layout(layout: Layout | str) -> Layout:
    lay = as_layout(layout)
    if lay is Layout.SHARDED:
        raise InvalidArgumentError("a wrapping prefix already spreads writes: use time_first, not sharded")
    return lay


def _placer(nbytes: int, layout: Layout) -> Callable[[int, int], int]:
    """The function ``(prefix, 128 random bits) -> UUID.int`` placing an ``nbytes`` prefix where
    ``layout``'s engine compares first, with the version 4 and RFC variant bits."""
    if layout is Layout.TIME_FIRST:
        shift = 128 - 8 * nbytes
        keep = ((1 << shift) - 1) & _V4_CLEAR
        return lambda prefix, rnd: (rnd & keep) | (prefix << shift) | _V4_FLAGS
    if layout is Layout.TIME_LAST:  # bytes 10.. are compared first
        low = 8 * (6 - nbytes)
        keep_last = ~(((1 << (8 * nbytes)) - 1) << low) & _V4_CLEAR
        return lambda prefix, rnd: (rnd & keep_last) | (prefix << low) | _V4_FLAGS
    # TIME_FIRST_LE: lead bytes_le
    shift = 128 - 8 * nbytes
    return lambda prefix, rnd: (swap_le((rnd & ((1 << shift) - 1)) | (prefix << shift)) & _V4_CLEAR) | _V4_FLAGS


def _place(prefix: int, nbytes: int, layout: Layout) -> uuid.UUID:
    rnd = (POOL.word() << 64) | POOL.word()
    return _uuid.from_int(_placer(nbytes, layout)(prefix, rnd))


def uuid_sequence_nextval(
    value: int,
    block_size: int = 65536,
    block_count: int = 65536,
    layout: Layout | str = Layout.TIME_FIRST,
) -> uuid.UUID:
    """A random UUID with the extension's prefix for sequence value ``value`` (a ``nextval``).

    ``value`` is the value a sequence (or a :class:`~seqid_orm.allocation.tickets.TicketSequence`) just
    handed out; like the extension, the prefix is computed from ``value - 1``.  Defaults as in
    the extension: 65536 ids share a prefix, and the 2-byte prefix wraps after 65536 blocks.
    """
    _check_int("value", value, -(1 << 63) + 1)
    prefix = extension_prefix(value - 1, block_size, block_count)
    return _place(prefix, prefix_bytes(block_count), _prefix_layout(layout))


def sequence_prefixer(
    block_size: int = 65536, block_count: int = 65536, layout: Layout | str = Layout.TIME_FIRST
) -> Callable[[int], uuid.UUID]:
    """:func:`uuid_sequence_nextval` with its arguments checked once: a function of the sequence value.

    For column defaults that make one id per row (``prefixed_uuid_pk``): the block arithmetic and the
    placement are worked out here, so a row costs the prefix's division, two random words and the
    ``uuid.UUID`` (made as :mod:`.comb` makes its ids, without re-parsing).
    """
    _check_int("block_size", block_size, 1)
    nbytes = prefix_bytes(block_count)
    lay = _prefix_layout(layout)
    place = _placer(nbytes, lay)
    prefix_count = 1 << (8 * nbytes)
    rescaled, mask = max(1, block_size * block_count // prefix_count), prefix_count - 1
    lowest = -(1 << 63) + 1
    mark, pop, refill = randomness.MARK, POOL.pop, POOL.refill
    new, set_int, set_safe, UUID, unknown = _uuid.NEW, _uuid.SET_INT, _uuid.SET_SAFE, uuid.UUID, _uuid.SAFE_UNKNOWN
    # TIME_FIRST and TIME_LAST place the prefix with a mask and a shift; TIME_FIRST_LE calls `place`
    shift = 128 - 8 * nbytes if lay is Layout.TIME_FIRST else 8 * (6 - nbytes)
    keep = ~(mask << shift) & _V4_CLEAR
    inline = lay is not Layout.TIME_FIRST_LE

    def make(value: int) -> uuid.UUID:
        if value.__class__ is not int or value < lowest:
            _check_int("value", value, lowest)
        if not mark[0]:  # a forked child: forget the parent's random words first
            randomness.after_fork()
        try:
            rnd = (pop() << 64) | pop()
        except IndexError:
            rnd = (refill() << 64) | refill()
        v = value - 1
        prefix = (v // rescaled if v >= 0 else -(-v // rescaled)) & mask  # C division truncates toward zero
        u = new(UUID)
        set_int(u, (rnd & keep) | (prefix << shift) | _V4_FLAGS if inline else place(prefix, rnd))
        set_safe(u, unknown)
        return u

    return make


def uuid_time_nextval(
    interval_length: int = 60,
    interval_count: int = 65536,
    layout: Layout | str = Layout.TIME_FIRST,
    *,
    now: float | _dt.datetime | None = None,
) -> uuid.UUID:
    """A random UUID whose prefix is ``(unix_seconds // interval_length) % interval_count``.

    ``now`` (Unix seconds, or a timezone-aware ``datetime``) overrides the clock, for backfills and
    tests: a backfilled row's key lands among the keys its time's interval was given.
    """
    _check_int("interval_length", interval_length, 1)
    nbytes = prefix_bytes(interval_count)
    if now is None:
        seconds = int(time.time())
    elif isinstance(now, _dt.datetime):
        seconds = _seconds(now, "now")
        if seconds < 0:
            raise InvalidArgumentError(f"now must be at or after 1970, got {now.isoformat()}")
    elif isinstance(now, bool) or not isinstance(now, (int, float)):
        raise ArgumentTypeError(f"now must be Unix seconds (int or float), got {type(now).__name__}")
    elif not math.isfinite(now) or now < 0:  # inf would overflow int(), nan compares false
        raise InvalidArgumentError(f"now must be finite Unix seconds >= 0, got {now!r}")
    else:
        seconds = int(now)
    prefix = extension_prefix(seconds, interval_length, interval_count)
    return _place(prefix, nbytes, _prefix_layout(layout))


def _seconds(when: _dt.datetime, name: str) -> int:
    """An aware ``datetime`` as whole Unix seconds (floored, as ``int(time.time())`` floors)."""
    return epoch_us(when, name) // 1_000_000


def check_time_prefix(time_prefix: object) -> tuple[int, int]:
    """``time_prefix`` as the ``(interval_length, interval_count)`` of :func:`uuid_time_nextval` keys,
    the pair the adapters' time-range queries take (their values checked by :func:`time_prefix_bounds`)."""
    if not isinstance(time_prefix, tuple) or len(time_prefix) != 2:
        raise ArgumentTypeError(f"time_prefix must be (interval_length, interval_count), got {time_prefix!r}")
    return time_prefix


def time_prefix_bounds(
    start: _dt.datetime,
    end: _dt.datetime,
    interval_length: int = 60,
    interval_count: int = 65536,
    layout: Layout | str = Layout.TIME_FIRST,
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The key ranges holding the :func:`uuid_time_nextval` keys made in ``[start, end)``: one
    ``(low, high)`` pair, *both included* (``low <= key <= high``), or two where the prefix wraps
    inside the range, or the whole key space for a range as long as a lap of the prefix.

    ``low`` and ``high`` are the smallest and the largest key of a prefix in the order of an engine
    that compares the prefix first (``layout``: the column's ``prefix_layout``), so each range is a
    range of the primary key's index.  The prefix tells an interval within a lap, not the lap: keys
    made one or more laps earlier (``interval_length * interval_count`` seconds, 45.5 days by
    default) lie in the same ranges.  A query that must be exact keeps a time column beside the key.
    """
    _check_int("interval_length", interval_length, 1)
    # the first second of the range, and the last that holds an instant of it (the one before ``end``'s)
    first, last = _seconds(start, "start"), (epoch_us(end, "end") - 1) // 1_000_000
    check_span(start, end)
    nbytes = prefix_bytes(interval_count)
    lay = _prefix_layout(layout)
    place, top = _placer(nbytes, lay), (1 << 128) - 1
    prefix_count = 1 << (8 * nbytes)
    rescaled = max(1, interval_length * interval_count // prefix_count)
    if last < first:
        return []  # an empty range: no second in it
    if first < 0:
        raise InvalidArgumentError(f"start must be at or after 1970, got {start.isoformat()}")

    def span(low: int, high: int) -> tuple[uuid.UUID, uuid.UUID]:
        return _uuid.from_int(place(low, 0)), _uuid.from_int(place(high, top))

    if last // rescaled - first // rescaled + 1 >= prefix_count:
        return [span(0, prefix_count - 1)]
    low, high = (first // rescaled) % prefix_count, (last // rescaled) % prefix_count
    if low <= high:
        return [span(low, high)]
    return [span(low, prefix_count - 1), span(0, high)]


def prefix_of(value: uuid.UUID, block_count: int, layout: Layout | str = Layout.TIME_FIRST) -> int:
    """The prefix of a value made by :func:`uuid_sequence_nextval`/:func:`uuid_time_nextval`."""
    nbytes = prefix_bytes(block_count)
    lay = _prefix_layout(layout)
    i = value.int
    if lay is Layout.TIME_FIRST:
        return i >> (128 - 8 * nbytes)
    if lay is Layout.TIME_LAST:
        return (i >> (8 * (6 - nbytes))) & ((1 << (8 * nbytes)) - 1)
    return swap_le(i) >> (128 - 8 * nbytes)
