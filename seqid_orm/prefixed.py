"""UUIDs with a short wrapping prefix, after PostgreSQL's ``sequential-uuids`` extension.

The prefix is ``(value // block_size) % block_count`` (or the same of Unix seconds over an
interval); the rest is random.  Consecutive ids land in one area of the index, and because the
prefix *wraps*, ids are not predictable from each other and pages that lost rows to deletes
are refilled on the next lap.  The prefix takes the fewest whole bytes that hold
``block_count - 1`` and is placed where the layout says the database compares first.

Like the extension, the values carry the RFC version 4 and variant bits: apart from the
prefix they are random.  They carry no absolute time, so :func:`~seqid_orm.timestamp_of`
refuses them.
"""

from __future__ import annotations

import math
import time
import uuid

from ._random import POOL
from .comb import _uuid_from_int, swap_le
from .errors import ArgumentTypeError, InvalidArgumentError
from .layout import Layout, as_layout

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
    """How many whole bytes the prefix of ``block_count`` blocks takes."""
    _check_int("block_count", block_count, 2)
    n = max(1, ((block_count - 1).bit_length() + 7) // 8)
    if n > _MAX_PREFIX_BYTES:
        raise InvalidArgumentError(f"block_count must be <= 2**48, got {block_count}")
    return n


def _place(prefix: int, nbytes: int, layout: Layout) -> uuid.UUID:
    rnd = (POOL.word() << 64) | POOL.word()
    if layout is Layout.TIME_FIRST:
        shift = 128 - 8 * nbytes
        value = (rnd & ((1 << shift) - 1)) | (prefix << shift)
    elif layout is Layout.TIME_LAST:  # bytes 10.. are compared first
        shift = 8 * (6 - nbytes)
        value = (rnd & ~(((1 << (8 * nbytes)) - 1) << shift)) | (prefix << shift)
    else:  # TIME_FIRST_LE: lead bytes_le
        shift = 128 - 8 * nbytes
        value = swap_le((rnd & ((1 << shift) - 1)) | (prefix << shift))
    return _uuid_from_int((value & _V4_CLEAR) | _V4_FLAGS)


def uuid_sequence_nextval(
    value: int,
    block_size: int = 65536,
    block_count: int = 65536,
    layout: Layout | str = Layout.TIME_FIRST,
) -> uuid.UUID:
    """A random UUID whose prefix is ``(value // block_size) % block_count``.

    ``value`` usually comes from a database sequence (``nextval``).  Defaults as in the
    extension: 65536 ids share a prefix, and the 2-byte prefix wraps after 65536 blocks.
    """
    _check_int("value", value, 0)
    _check_int("block_size", block_size, 1)
    nbytes = prefix_bytes(block_count)
    return _place((value // block_size) % block_count, nbytes, as_layout(layout))


def uuid_time_nextval(
    interval_length: int = 60,
    interval_count: int = 65536,
    layout: Layout | str = Layout.TIME_FIRST,
    *,
    now: float | None = None,
) -> uuid.UUID:
    """A random UUID whose prefix is ``(unix_seconds // interval_length) % interval_count``.

    ``now`` (Unix seconds) overrides the clock, for backfills and tests.
    """
    _check_int("interval_length", interval_length, 1)
    nbytes = prefix_bytes(interval_count)
    if now is None:
        seconds = int(time.time())
    elif isinstance(now, bool) or not isinstance(now, (int, float)):
        raise ArgumentTypeError(f"now must be Unix seconds (int or float), got {type(now).__name__}")
    elif not math.isfinite(now) or now < 0:  # inf would overflow int(), nan compares false
        raise InvalidArgumentError(f"now must be finite Unix seconds >= 0, got {now!r}")
    else:
        seconds = int(now)
    prefix = (seconds // interval_length) % interval_count
    return _place(prefix, nbytes, as_layout(layout))


def prefix_of(value: uuid.UUID, block_count: int, layout: Layout | str = Layout.TIME_FIRST) -> int:
    """The prefix of a value made by :func:`uuid_sequence_nextval`/:func:`uuid_time_nextval`."""
    nbytes = prefix_bytes(block_count)
    lay = as_layout(layout)
    i = value.int
    if lay is Layout.TIME_FIRST:
        return i >> (128 - 8 * nbytes)
    if lay is Layout.TIME_LAST:
        return (i >> (8 * (6 - nbytes))) & ((1 << (8 * nbytes)) - 1)
    return swap_le(i) >> (128 - 8 * nbytes)
