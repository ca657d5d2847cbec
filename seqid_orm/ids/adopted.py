"""Keys for a column that already holds keys: one bits above the old keys, then the time.

Why.  A column adopted from random ``uuid4`` keys holds keys spread over the whole 128-bit
range.  A UUIDv7 made today (``0x019a…``) sorts *inside* them: about 99 % of the old keys sort
above it, so every new key lands just before the same old key, on a leaf page that is never the
rightmost one.  PostgreSQL's B-tree fills only the rightmost page of a level to its fillfactor and
splits any other page 50/50 (``src/backend/access/nbtree/nbtsplitloc.c``; the "split after the new
item" optimisation is for indexes of several columns), so the new part of the index stays half
empty: measured here, 200,000 uuid4 rows then 200,000 UUIDv7 rows grew the primary key by
10.8 MB, against 6.0 MB for the same rows in a table of their own.  SQL Server splits the same
way; InnoDB and SQLite do not (they split at the insertion point, or rebalance siblings), and keep
plain UUIDv7 there.

The fix is a key that sorts after every key the column held *and* strictly increases: ``above``
one bits first (in the order the database compares the bytes), then 44 bits of Unix milliseconds
(until the year 2527, as the ``SHARDED`` layout), then a counter that increments inside the
millisecond and random bits.  Measured on the same runs: 6.02 MB, the size of a fresh index.
``above`` is chosen from the column's largest key (:func:`above_for`): more one bits than it has,
so no old key sorts above, with room for the keys a rolling deploy's old code still writes.

The values are RFC 9562 version 8 (vendor-specific) UUIDs, variant ``0b10``, so every validator
of UUIDs takes them, and they carry their time (:meth:`AdoptedFormat.decode`).  SQL Server's carry
version 8 with the Microsoft variant ``0b110`` instead (as seqid's ``TIME_LAST`` keys carry it beside
version 4), so the bits alone say which engine order a key was made for.  They are recognised by
those bits and a run of at least 16 leading one bits in that order: seqid's ``SHARDED`` layout,
the other version 8 it makes, has at most four until the 23rd century, and a foreign version 8
with 16 leading one bits is one in 65,536.

Uniqueness: ``78 - above`` bits of counter and random per millisecond (62 with 16 one bits, 46
with 32; one fewer in SQL Server's order), where a UUIDv7 has 74.  The one bits are the price of
sorting above the old keys: a table of ``N`` random keys needs about ``log2(N)`` of them.

Standard library only; this folder's :mod:`.layout` says the comparison orders.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InvalidArgumentError
from .layout import ORDER_BYTES, Layout

__all__ = ["ABOVE_BITS", "AdoptedFormat", "above_for", "adopted_format", "leading_ones", "recognise"]

#: The numbers of leading one bits an adopted key can have: whole hex digits, from 16 (a table of
#: a few thousand random keys) to 32 (several hundred million).
ABOVE_BITS = (16, 20, 24, 28, 32)

#: How many more one bits than the largest old key has: one to sort above it, the rest so that a
#: random key written later by code that still makes uuid4 lands above the new keys once in
#: ``2 ** (margin + log2(N))`` keys (about ``1 / (4 N)``), not once in ``N``.
MARGIN = 3

_MS_BITS = 44
#: Each layout's fixed bits (``UUID.int`` mask and value): version 8 with the RFC variant for byte
#: order, version 8 with the Microsoft variant ``0b110`` for SQL Server's (as its ``TIME_LAST`` keys carry
#: ``0b110`` beside version 4): the bits alone say which order an adopted key was made for.
_FIXED: dict[Layout, tuple[int, int]] = {
    Layout.TIME_FIRST: ((0xF << 76) | (0b11 << 62), (0x8 << 76) | (0b10 << 62)),
    Layout.TIME_LAST: ((0xF << 76) | (0b111 << 61), (0x8 << 76) | (0b110 << 61)),
}


def leading_ones(key: bytes) -> int:
    """How many one bits ``key`` starts with (the bytes as a database compares them)."""
    value = int.from_bytes(key, "big")
    width = len(key) * 8
    inverted = ~value & ((1 << width) - 1)
    return width - inverted.bit_length()


def above_for(largest: bytes | None) -> int:
    """The ``above`` of keys that must sort after ``largest`` (an old key's bytes in the database's
    compare order), or ``0`` when there is none.  The smallest of :data:`ABOVE_BITS` with at least
    :data:`MARGIN` more one bits than ``largest``; 32 when even that is too few (a key near the top
    of the range, such as ``ffffffff-ffff-…``: the few old keys above stay on the rightmost page,
    which is filled as the tree's right edge is)."""
    if largest is None:
        return 0
    wanted = leading_ones(largest) + MARGIN
    return next((bits for bits in ABOVE_BITS if bits >= wanted), ABOVE_BITS[-1])


def _fixed_positions(order: Sequence[int], mask: int, value: int) -> dict[int, int]:
    """Bit positions (of the int whose bytes are a value's bytes in ``order``) of the fixed bits
    ``mask`` of ``UUID.int``, with the bit ``value`` holds there."""
    out = {}
    for bit in range(128):
        if (mask >> bit) & 1:
            byte, within = 15 - bit // 8, bit % 8
            position = (15 - order.index(byte)) * 8 + within
            out[position] = (value >> bit) & 1
    return out


@dataclass(frozen=True)
class AdoptedFormat:
    """The bits of adopted keys with ``above`` leading one bits, for an engine comparing bytes in
    ``order``.

    Everything is composed in the *compared* order: the int whose bytes are the value's bytes as
    the engine reads them (``S``), where the one bits, the time, the counter and the random bits
    simply follow each other; :meth:`to_uuid_int` moves the bytes to their places in
    ``uuid.UUID.bytes`` (nothing to move for PostgreSQL's byte order).
    """

    above: int
    order: tuple[int, ...]
    counter_bits: int
    random_bits: int
    runs: tuple[tuple[int, int], ...]
    """The bits that are not version or variant: ``(lowest position, length)``, most significant first."""
    fixed: int
    """The version and variant bits, in ``S``."""
    mask: int
    """The version and variant bits' positions in ``UUID.int``, and their value there."""
    flags: int

    @property
    def free_bits(self) -> int:
        """How many bits are neither version nor variant (122 in byte order, 121 in SQL Server's)."""
        return 128 - bin(self.mask).count("1")

    @property
    def identity(self) -> bool:
        """Whether ``S`` is ``UUID.int`` itself (the engine compares the bytes first to last)."""
        return self.order == ORDER_BYTES

    @property
    def counter_shift(self) -> int:
        """The lowest bit of the counter in ``S``: the counter field starts there, and, where it
        fits the lowest run, an id is the one before plus ``1 << counter_shift``."""
        return self.random_bits

    @property
    def counter_guard(self) -> int:
        """The bit above the part of the counter that is contiguous in ``S``."""
        lowest, length = self.runs[-1]
        return min(lowest + length, self.random_bits + self.counter_bits)

    def spread(self, free: int) -> int:
        """``S`` of the free bits ``free`` (the one bits, time, counter and random bits, most
        significant first), with the version and variant bits."""
        out, left = self.fixed, self.free_bits
        for lowest, length in self.runs:
            left -= length
            out |= ((free >> left) & ((1 << length) - 1)) << lowest
        return out

    def gather(self, s: int) -> int:
        """The free bits of ``S`` (the inverse of :meth:`spread`)."""
        out = 0
        for lowest, length in self.runs:
            out = (out << length) | ((s >> lowest) & ((1 << length) - 1))
        return out

    def head(self, ms: int) -> int:
        """``S`` of the one bits and the millisecond, with the fixed bits."""
        low = self.counter_bits + self.random_bits
        return self.spread((((1 << self.above) - 1) << (self.free_bits - self.above)) | (ms << low))

    def compose(self, ms: int, counter: int, rnd: int) -> int:
        """``S`` of an id: ``ms``, ``counter`` and the low :attr:`random_bits` of ``rnd``."""
        low = (counter << self.random_bits) | (rnd & ((1 << self.random_bits) - 1))
        if self.runs[-1][1] >= self.counter_bits + self.random_bits:
            return self.head(ms) | (low << self.runs[-1][0])
        return self.head(ms) | (self.spread(low) & ~self.fixed)

    def decode(self, s: int) -> tuple[int, int]:
        """``(unix_ms, counter)`` of ``S``."""
        free = self.gather(s)
        low = self.counter_bits + self.random_bits
        return (free >> low) & ((1 << _MS_BITS) - 1), (free >> self.random_bits) & ((1 << self.counter_bits) - 1)

    @functools.cached_property
    def to_uuid_int(self) -> Callable[[int], int]:
        """``S`` to ``UUID.int``: the bytes put back where ``uuid.UUID.bytes`` has them."""
        if self.identity:
            return _same
        back = operator.itemgetter(*(self.order.index(p) for p in range(16)))

        def to_uuid_int(s: int) -> int:
            return int.from_bytes(bytes(back(s.to_bytes(16, "big"))), "big")

        return to_uuid_int

    @functools.cached_property
    def from_uuid_int(self) -> Callable[[int], int]:
        """``UUID.int`` to ``S``: the bytes in the engine's compare order."""
        if self.identity:
            return _same
        take = operator.itemgetter(*self.order)

        def from_uuid_int(value: int) -> int:
            return int.from_bytes(bytes(take(value.to_bytes(16, "big"))), "big")

        return from_uuid_int

    def matches(self, value: int) -> bool:
        """Whether ``UUID.int`` ``value`` is an adopted key of this format."""
        if value & self.mask != self.flags:
            return False
        s = self.from_uuid_int(value)
        return leading_ones(s.to_bytes(16, "big")) // 4 * 4 == self.above


def _same(value: int) -> int:
    return value


#: The layouts whose engines' orders adopted keys are made for: byte order (PostgreSQL, Oracle's
#: ``RAW``, every binary and text column) and SQL Server's ``uniqueidentifier``.  ``TIME_FIRST_LE``
#: is a choice for binary columns shared with .NET, which the engine compares byte by byte: its
#: adopted keys are byte order's.
_ORDERS: dict[Layout, tuple[int, ...]] = {lay: lay.order for lay in (Layout.TIME_FIRST, Layout.TIME_LAST)}


@functools.cache
def adopted_format(layout: Layout, above: int) -> AdoptedFormat:
    """The adopted keys with ``above`` leading one bits for engines ``layout`` is made for
    (``TIME_FIRST``: byte order; ``TIME_LAST``: SQL Server's).

    Raises :class:`~seqid_orm.errors.InvalidArgumentError` for an ``above`` not in
    :data:`ABOVE_BITS` or a layout that is never adopted (``SHARDED``: a distributed engine wants
    its writes spread, not appended).
    """
    if above not in ABOVE_BITS:
        raise InvalidArgumentError(f"above must be one of {', '.join(map(str, ABOVE_BITS))}, got {above!r}")
    order = _ORDERS.get(layout)
    if order is None:
        raise InvalidArgumentError(
            f"adopted keys follow the order of an engine: byte order (time_first) or SQL Server's (time_last), "
            f"not {layout.value}"
        )
    mask, flags = _FIXED[layout]
    fixed_positions = _fixed_positions(order, mask, flags)
    runs: list[tuple[int, int]] = []
    top = 128
    for position in [*sorted(fixed_positions, reverse=True), -1]:
        if position + 1 < top:
            runs.append((position + 1, top - position - 1))
        top = position
    fixed = sum(bit << position for position, bit in fixed_positions.items())
    low = 128 - len(fixed_positions) - above - _MS_BITS
    random_bits = min(32, low - 16)
    return AdoptedFormat(above, order, low - random_bits, random_bits, tuple(runs), fixed, mask, flags)


def recognise(value: int) -> AdoptedFormat | None:
    """The adopted format ``UUID.int`` ``value`` was made in, or ``None``: its version and variant bits
    say for which engine order, its leading one bits in that order how many it has."""
    for layout, order in _ORDERS.items():
        mask, flags = _FIXED[layout]
        if value & mask != flags:
            continue
        raw = value.to_bytes(16, "big")
        bits = leading_ones(bytes(raw[i] for i in order)) // 4 * 4
        return adopted_format(layout, bits) if bits in ABOVE_BITS else None
    return None
