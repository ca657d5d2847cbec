"""The order a database-made id promises, checked from rows as ``ORDER BY id`` returned them.

Shared by the SQLAlchemy and Django tests, so both hold a database to the same promise.
"""

from __future__ import annotations

import itertools
import uuid

from seqid_orm import timestamp_of


def exact_order(vendor: str, version: tuple[int, ...]) -> bool:
    """Whether the database's own generator orders every row exactly as it was inserted.

    SQLite's 'now' has millisecond precision, so rows of one millisecond interleave there; PostgreSQL
    13-17's expression reads the clock twice (milliseconds, then the fraction), so a row whose two
    readings straddle a millisecond's end sorts early inside it (rarely: 47 rows in 300,000). Everywhere
    else, and on PostgreSQL 18 (uuidv7()), the order is exact.
    """
    return vendor not in ("sqlite", "postgresql") or (vendor == "postgresql" and version >= (18,))


def check_time_ordered(vendor: str, version: tuple[int, ...], rows: list[tuple[int, uuid.UUID]]) -> None:
    """``rows`` (insertion number, id) as ORDER BY id gave them: insertion order, up to the database's
    millisecond where :func:`exact_order` says so, and on PostgreSQL only rarely (a straddle, not an order)."""
    numbers = [n for n, _ in rows]
    assert sorted(numbers) == list(range(len(numbers)))
    if exact_order(vendor, version):
        assert numbers == sorted(numbers)
        return
    inverted = 0
    for (n1, u1), (n2, u2) in itertools.pairwise(rows):
        if n2 < n1:  # out of order only inside one millisecond
            assert timestamp_of(u1) == timestamp_of(u2), (n1, u1, n2, u2)
            inverted += 1
    if vendor == "postgresql":
        assert inverted <= max(2, len(rows) // 100)
