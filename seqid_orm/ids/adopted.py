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
``above`` is the fewest one bits that put the new keys after the column's old keys
(:func:`above_for`): one more than the largest old key has, at least 16, and at most
:data:`ABOVE_CHOSEN_MAX`, the width whose keys keep a uniqueness budget (:func:`expected_duplicates`).
Keys with that many one bits or more (sentinels such as the Max UUID, crafted keys, the last few
random keys of a table of billions) stay above the new ones, on the index's rightmost leaf page, which
PostgreSQL splits at its fillfactor wherever in the page the new key goes: the right edge still fills.

The width is decided once, by the migration that adopts the column, and recorded in the schema
(:func:`record_comment`), where every process, role and tenant reads the same answer; a process that
finds no record judges the keys it can read, as before, and says so.

The values are RFC 9562 version 8 (vendor-specific) UUIDs, variant ``0b10``, so every validator
of UUIDs takes them, and they carry their time (:meth:`AdoptedFormat.decode`).  SQL Server's carry
version 8 with the Microsoft variant ``0b110`` instead (as seqid's ``TIME_LAST`` keys carry it beside
version 4), so the bits alone say which engine order a key was made for.  They are recognised by
those bits and a run of 16 to 32 leading one bits in that order (exactly ``above``: the time's top
bit is 0 until 2248): seqid's ``SHARDED`` layout, the other version 8 it makes, has at most four
until the 23rd century, and a foreign version 8 with 16 leading one bits is one in 65,536.

Uniqueness: ``77 - above`` bits of counter seed and random per millisecond in Python (the counter's
top bit starts clear), where a UUIDv7 has 73; :func:`expected_duplicates` turns that into duplicate
keys a year at an insert rate.  The one bits are the price of sorting above the old keys: a table
of ``N`` random keys needs about ``log2(N) + 1`` of them.

Standard library only; this folder's :mod:`.layout` says the comparison orders.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InvalidArgumentError
from .layout import ORDER_BYTES, Layout

__all__ = [
    "ABOVE_BITS",
    "ABOVE_CHOSEN_MAX",
    "AdoptedFormat",
    "above_for",
    "adopted_format",
    "expected_duplicates",
    "first_regular",
    "leading_ones",
    "recognise",
    "record_comment",
    "record_of",
    "without_record",
]

#: The numbers of leading one bits an adopted key can have: 16 (a table of up to 32,768 random
#: keys) to 32.  Keys made before this decision took whole hex digits (16, 20, 24, 28, 32); every
#: width in between is recognised and decoded alike.
ABOVE_BITS = tuple(range(16, 33))

#: The widest :func:`above_for` chooses: 28 one bits leave 49 bits of counter seed and random per
#: millisecond in Python (0.0027 duplicate keys a year at 10,000 inserts a second from 20
#: processes) and 38 random bits after a sub-millisecond clock in the database (0.0055); one bit
#: more doubles both.  A table whose random keys reach past it (a quarter of tables of 100 million
#: rows have an old key with 28 one bits or more) keeps those few keys above the new ones.
ABOVE_CHOSEN_MAX = 28

#: A key with this many more one bits than the number of rows would give a random key is not a
#: random key (one table in 4,096 would have such a key by chance): a sentinel, or a crafted key.
OUTLIER_BITS = 12

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


def above_for(top: Sequence[bytes], rows: int | None = None) -> int:
    """The ``above`` of keys that must sort after the old keys ``top`` (the largest, largest first, as
    bytes in the database's compare order), or ``0`` when there is none: one more one bit than the
    largest of them that is not an outlier, at least 16 and at most :data:`ABOVE_CHOSEN_MAX`.

    An outlier is a key with far more one bits than a random key of the column would have: with
    ``rows`` (how many keys the column holds) ``OUTLIER_BITS`` more than ``rows`` has bits; without
    it (a process reading only the largest few), a key ``OUTLIER_BITS`` ones above the next one.
    Outliers stay above the new keys, as do the keys past :data:`ABOVE_CHOSEN_MAX`.

    >>> above_for([bytes.fromhex("ffffc0" + "00" * 13)], rows=100_000)  # 18 one bits -> 19
    19
    >>> above_for([b"\\xff" * 16, bytes.fromhex("fff0" + "00" * 14)], rows=1000)  # the Max UUID stays above
    16
    """
    first = first_regular(top, rows)
    if first is None:  # every key read is an outlier: the widest the budget allows
        return ABOVE_CHOSEN_MAX if top else 0
    return min(max(leading_ones(top[first]) + 1, ABOVE_BITS[0]), ABOVE_CHOSEN_MAX)


def first_regular(top: Sequence[bytes], rows: int | None = None) -> int | None:
    """The index in ``top`` (largest first, compare-order bytes) of the first key that is not an outlier
    (see :func:`above_for`), or ``None`` where every one is (or there is none)."""
    ones = [leading_ones(key) for key in top]
    if rows is not None:
        limit = max(rows, 1).bit_length() + OUTLIER_BITS
        return next((i for i, n in enumerate(ones) if n < limit), None)
    for i in range(len(ones)):
        if i + 1 == len(ones) or ones[i] - ones[i + 1] < OUTLIER_BITS:
            return i
    return None


# Milliseconds a year, and the sub-millisecond values a database clock of one microsecond tells apart.
_MS_A_YEAR = 365.25 * 86_400_000
_DATABASE_TICKS = 1000


def expected_duplicates(above: int, inserts_per_second: float, processes: int = 20, made_by: str = "python") -> float:
    """The duplicate keys to expect in a year (each an ``IntegrityError``) among keys of ``above`` one
    bits (``0``: plain UUIDv7s) made at ``inserts_per_second`` in all by ``processes`` processes.

    Two keys can be equal only when made in the same millisecond by two processes (a process counts
    its own): ``(rate / 1000) ** 2 / 2 * (1 - 1 / processes)`` pairs a millisecond, each equal with
    probability ``2 ** -b``.  ``made_by="python"``: ``b`` is the counter's seed (its top bit clear)
    and the random bits; ``"database"``: PostgreSQL's keys carry a sub-millisecond clock, read to the
    microsecond, then random bits, so two keys must share the microsecond as well.

    >>> round(expected_duplicates(28, 10_000), 4)
    0.0027
    >>> round(expected_duplicates(28, 10_000, made_by="database"), 4)
    0.0055
    """
    per_ms = inserts_per_second / 1000
    pairs = per_ms * per_ms / 2 * (1 - 1 / max(processes, 1))
    if made_by == "python":
        bits = 73 if above == 0 else 77 - above  # UUIDv7: 41 of the counter's 42, 32 random
        chance = 2.0**-bits
    elif made_by == "database":
        random_bits = 62 if above == 0 else 66 - above  # after the version, fraction and variant
        chance = 2.0**-random_bits / _DATABASE_TICKS
    else:
        raise InvalidArgumentError(f'made_by must be "python" or "database", got {made_by!r}')
    return _MS_A_YEAR * pairs * chance


# The record of an adoption in the column's comment, beside whatever the comment says already:
# `[seqid adopted=24]` (keys after 24 one bits) or `[seqid adopted=0]` (plain keys: nothing to
# stay above).  A comment is the same for every role, tenant and session, readable without SELECT
# on the table, and kept by TRUNCATE.
_RECORD = re.compile(r"\s*\[seqid adopted=(\d+)\]")


def record_of(comment: str | None) -> int | None:
    """The width recorded in a column's ``comment`` (``0``: plain keys), or ``None`` where there is no
    record.

    >>> record_of("The invoice's key [seqid adopted=24]")
    24
    >>> record_of("The invoice's key") is None
    True
    """
    found = _RECORD.search(comment or "")
    if found is None:
        return None
    above = int(found.group(1))
    return above if above == 0 or above in ABOVE_BITS else None


def record_comment(comment: str | None, above: int) -> str:
    """``comment`` with the record of ``above`` (replacing any earlier record, keeping the rest).

    >>> record_comment("The invoice's key [seqid adopted=20]", 24)
    "The invoice's key [seqid adopted=24]"
    >>> record_comment(None, 0)
    '[seqid adopted=0]'
    """
    if above != 0 and above not in ABOVE_BITS:
        raise InvalidArgumentError(f"above must be 0 or one of {ABOVE_BITS[0]}..{ABOVE_BITS[-1]}, got {above!r}")
    rest = _RECORD.sub("", comment or "").rstrip()
    tag = f"[seqid adopted={above}]"
    return f"{rest} {tag}" if rest else tag


def without_record(comment: str | None) -> str | None:
    """``comment`` without seqid's record (``None`` where nothing else is left): what an ORM that
    compares comments should see."""
    rest = _RECORD.sub("", comment or "").rstrip()
    return rest or None


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
        return leading_ones(s.to_bytes(16, "big")) == self.above


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
        raise InvalidArgumentError(f"above must be one of {ABOVE_BITS[0]}..{ABOVE_BITS[-1]}, got {above!r}")
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
        bits = leading_ones(bytes(raw[i] for i in order))
        return adopted_format(layout, bits) if bits in ABOVE_BITS else None
    return None
