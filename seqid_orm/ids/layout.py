"""Where the ordered part of a 16-byte id goes, in terms of how a database compares it.

A database compares two UUIDs by looking at their 16 bytes in some order.  That order is a
permutation of the byte positions of :attr:`uuid.UUID.bytes` (the order the text form is
written in), and it is all we need to know about an engine:

* PostgreSQL ``uuid``, ``BINARY(16)``, Oracle ``RAW(16)``, SQLite BLOBs, lower-case hex text:
  :data:`ORDER_BYTES`, positions 0 to 15.
* SQL Server ``uniqueidentifier``: :data:`ORDER_SQLSERVER` (Microsoft's ``SqlGuid`` rule).
* MariaDB's ``UUID`` type, for the values it stores group-swapped: :data:`ORDER_MARIADB_SWAPPED`.
* A ``BINARY(16)`` written by .NET's ``Guid.ToByteArray()``: :data:`ORDER_BYTES_LE`.

A :class:`Layout` states which byte positions its timestamp and counter occupy, most
significant first (:attr:`Layout.requires`).  A layout keeps ids ordered on an engine exactly
when the engine's comparison order *starts with* those positions; :func:`layout_for_order`
makes that decision, whether the order came from the vendor rules (:mod:`seqid_orm.vendors`) or from a live probe.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from typing import TypeVar

from ..errors import InvalidArgumentError

ORDER_BYTES: tuple[int, ...] = tuple(range(16))
"""Unsigned bytes, first to last: PostgreSQL uuid, BINARY/VARBINARY, RAW, BLOB, hex text."""

ORDER_SQLSERVER: tuple[int, ...] = (10, 11, 12, 13, 14, 15, 8, 9, 7, 6, 5, 4, 3, 2, 1, 0)
"""SQL Server ``uniqueidentifier``, expressed in ``uuid.UUID.bytes`` positions.

SQL Server stores ``bytes_le`` and compares stored bytes 10-15, 8-9, 6-7, 4-5, 0-3
(``System.Data.SqlTypes.SqlGuid``); mapped back through ``bytes_le`` that is this tuple.
"""

ORDER_MARIADB_SWAPPED: tuple[int, ...] = (10, 11, 12, 13, 14, 15, 8, 9, 6, 7, 4, 5, 0, 1, 2, 3)
"""MariaDB ``UUID`` for values it stores with the five groups in reverse order."""

ORDER_BYTES_LE: tuple[int, ...] = (3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15)
"""Byte-wise comparison of ``uuid.UUID.bytes_le`` (a binary column filled by .NET)."""


class Layout(str, enum.Enum):
    """Where the timestamp and counter of a time-ordered UUID are placed.

    The members are named after how the *database* reads the bytes; the names of Jeremy
    Todd's multi-database COMB generator (github.com/jhtodd/SequentialGuid, after Jimmy
    Nilsson's "The Cost of GUIDs as Primary Keys", 2002) are aliases of them.
    """

    TIME_FIRST = "time_first"
    """RFC 9562 UUIDv7: 48-bit Unix milliseconds in bytes 0-5, then a 42-bit counter."""

    TIME_LAST = "time_last"
    """Milliseconds in bytes 10-15 and the counter in bytes 8-9: SQL Server, swapped MariaDB."""

    TIME_FIRST_LE = "time_first_le"
    """Milliseconds first in ``bytes_le``: binary columns shared with .NET applications."""

    SHARDED = "sharded"
    """For distributed SQL (CockroachDB, TiDB, YugabyteDB): a shard in the top 4 bits, then 44-bit
    milliseconds and the UUIDv7 counter (RFC 9562 version 8).  Writes spread over k key ranges,
    each appended at its end, instead of all going to the last range."""

    SEQUENTIAL_AS_STRING = "time_first"
    SEQUENTIAL_AS_BINARY = "time_first_le"
    SEQUENTIAL_AT_END = "time_last"

    @property
    def requires(self) -> tuple[int, ...]:
        """Byte positions (of ``uuid.UUID.bytes``) holding time and counter, most significant first."""
        return _REQUIRES[self]

    @property
    def order(self) -> tuple[int, ...]:
        """The comparison order of the engines this layout is meant for (``uuid.UUID.bytes`` positions)."""
        return _NATIVE_ORDER[self]

    def sort_key(self, value: uuid.UUID) -> bytes:
        """The bytes of ``value`` in the order of an engine this layout is meant for."""
        return sort_key(value, _NATIVE_ORDER[self])


_REQUIRES: dict[Layout, tuple[int, ...]] = {
    # ms in 0-5; 42-bit counter in the low nibble of 6, 7, the low 6 bits of 8, and 9-11.
    Layout.TIME_FIRST: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
    # ms in 10-15; 13-bit counter in the low 5 bits of 8 and in 9.
    Layout.TIME_LAST: (10, 11, 12, 13, 14, 15, 8, 9),
    # ms in bytes_le 0-5; 25-bit counter in bytes_le 6, 7 (low nibble), 8 (low 5 bits), 9.
    Layout.TIME_FIRST_LE: (3, 2, 1, 0, 5, 4, 7, 6, 8, 9),
    # shard in the top nibble of 0, ms in the rest of 0-5; counter as TIME_FIRST.
    Layout.SHARDED: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
}

_NATIVE_ORDER: dict[Layout, tuple[int, ...]] = {
    Layout.TIME_FIRST: ORDER_BYTES,
    Layout.TIME_LAST: ORDER_SQLSERVER,
    Layout.TIME_FIRST_LE: ORDER_BYTES_LE,
    Layout.SHARDED: ORDER_BYTES,
}


E = TypeVar("E", bound=enum.Enum)


def coerce_enum(enum_cls: type[E], value: object, name: str) -> E:
    """``value`` as a member of ``enum_cls`` (a member or its value); anything else raises ``ValueError``."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    choices = ", ".join(repr(m.value) for m in enum_cls)
    raise InvalidArgumentError(f"{name} must be one of {choices}, got {value!r}")


def as_layout(value: object, name: str = "layout") -> Layout:
    """``value`` as a :class:`Layout` (a member or its string value)."""
    return coerce_enum(Layout, value, name)


def sort_key(value: uuid.UUID, order: Sequence[int]) -> bytes:
    """Reference comparator: ``value``'s bytes read in an engine's comparison ``order``.

    Sorting UUIDs by this key reproduces the engine's ``ORDER BY``; the tests use it for
    engines that have no server on the test machine (SQL Server).
    """
    raw = value.bytes
    return bytes(raw[i] for i in order)


def fits(layout: Layout, order: Sequence[int]) -> bool:
    """Whether an engine comparing bytes in ``order`` reads ``layout``'s time and counter first.

    The one test of "does this layout keep ids ordered there", used by :func:`layout_for_order`,
    the vendor rules and the live probe alike.
    """
    return tuple(order[: len(layout.requires)]) == layout.requires


def candidates(preferred: Layout | str | None = None) -> list[Layout]:
    """Every layout, ``preferred`` first, then in declaration order (the order choices are tried).

    ``SHARDED`` is a choice for distributed engines (the vendor rules prefer it there), never a
    fallback: on a single-node engine it would scatter inserts over 16 places for nothing.
    """
    order: list[Layout] = [lay for lay in Layout if lay is not Layout.SHARDED]
    if preferred is not None:
        first = as_layout(preferred, "preferred")
        if first in order:
            order.remove(first)
        order.insert(0, first)
    return order


def layout_for_order(order: Sequence[int], preferred: Layout | None = None) -> Layout | None:
    """The layout whose time and counter an engine with comparison ``order`` reads first.

    ``preferred`` wins when several layouts fit (e.g. a user's explicit choice); otherwise
    the first fitting layout in declaration order.  ``None`` when no layout fits: such an
    engine needs a layout seqid_orm does not have, and guessing would scatter inserts.
    """
    order = tuple(order)
    if sorted(order) != list(range(16)):
        raise InvalidArgumentError(f"order must be a permutation of 0..15, got {order!r}")
    return next((lay for lay in candidates(preferred) if fits(lay, order)), None)
