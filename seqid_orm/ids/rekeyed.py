"""The keys of rows that had integer keys: each row's old integer, carried in order, below every new key.

A table keyed by integers moved to seqid keys (:mod:`seqid_orm.schema.rekey`) gives each existing row a key
made from its integer alone, so every foreign key to it gets the same key by the same rule, with no look-up
(the database makes them in the triggers that keep a child in step, and in the backfill):

* the key's time is 0 (1970-01-01, in the layout's time bytes), below the time of every key made since, so
  the old rows sort before every new one, whichever clock made it;
* the integer fills the bits the engine compares after the time, most significant first, around the
  layout's version and variant bits: keys compare as their integers do, so ``ORDER BY key`` reads the rows
  in the order ``ORDER BY id`` did;
* the integer can be read back (:func:`integer_of`): an old URL's number finds its row's key.

74 or more bits follow the time in every layout, so every non-negative 64-bit integer has its key; a negative
one is refused (it would need a sign that sorts below zero, and integer keys are positive in practice).

May import the standard library, :mod:`seqid_orm.errors` and this folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ..errors import InvalidArgumentError
from .comb import flags_of
from .layout import Layout

__all__ = ["INTEGER_BITS", "integer_key", "integer_of"]

#: The integers a key can carry: non-negative and below ``2 ** INTEGER_BITS`` (a ``bigint``'s range and more).
INTEGER_BITS = 64


def _free_bits(layout: Layout, order: Sequence[int]) -> list[int]:
    """The bit positions of ``UUID.int`` (127: the first bit of byte 0) an integer fills, in the order the engine
    compares them: the bytes of ``order`` after the layout's six time bytes, each from its high bit, skipping
    the layout's fixed version and variant bits."""
    time_bytes = set(layout.requires[:6])
    _value, mask = flags_of(layout)
    bits = []
    for byte in order:
        if byte in time_bytes:
            continue
        for i in range(7, -1, -1):
            bit = (15 - byte) * 8 + i
            if not mask >> bit & 1:
                bits.append(bit)
    return bits


def integer_key(n: int, layout: Layout, order: Sequence[int] | None = None) -> uuid.UUID:
    """The key of the row whose integer key is ``n``, in ``layout``, on an engine comparing the bytes in
    ``order`` (``UUID.bytes`` positions; default: the layout's own engines'): time 0, then ``n``.

    >>> a, b = integer_key(41, Layout.TIME_FIRST), integer_key(42, Layout.TIME_FIRST)
    >>> a < b, str(b)
    (True, '00000000-0000-7000-8000-00000000002a')
    >>> integer_of(b, Layout.TIME_FIRST)
    42
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgumentError(f"an integer key must be an int, got {type(n).__name__}")
    if not 0 <= n < 1 << INTEGER_BITS:
        raise InvalidArgumentError(f"integer key {n} is outside 0 to 2**{INTEGER_BITS} - 1: it has no seqid key")
    bits = _free_bits(layout, order if order is not None else layout.order)
    value, _mask = flags_of(layout)
    for i, bit in enumerate(reversed(bits)):  # n's lowest bit into the last compared bit
        if n >> i & 1:
            value |= 1 << bit
    return uuid.UUID(int=value)


def integer_of(key: uuid.UUID, layout: Layout, order: Sequence[int] | None = None) -> int | None:
    """The integer ``key`` carries where it is one of :func:`integer_key`'s (time 0, the layout's flags, an
    integer in range), else ``None``."""
    value, mask = flags_of(layout)
    time_bytes = set(layout.requires[:6])
    i = key.int
    if i & mask != value or any(key.bytes[b] for b in time_bytes):
        return None
    bits = _free_bits(layout, order if order is not None else layout.order)
    n = 0
    for bit in bits:
        n = (n << 1) | (i >> bit & 1)
    return n if n < 1 << INTEGER_BITS else None
