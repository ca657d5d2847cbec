"""Rotated rounds: how every benchmark here runs its candidates on a shared, noisy machine.

Each round runs every candidate once, in an order shifted by one place per round, so each runs
first once and last once over as many rounds as there are candidates; a candidate is then
compared with the baseline *of the same round*, and the median of those ratios is quoted.
Standard library only (the generation benchmark needs nothing else).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["median_ratio", "ratios", "rotated"]

T = TypeVar("T")


def rotated(items: Sequence[T], round_number: int) -> list[T]:
    """``items`` in the order of round ``round_number`` (0-based): shifted left by that many places."""
    if not items:
        return []
    shift = round_number % len(items)
    return [*items[shift:], *items[:shift]]


def ratios(values: Sequence[float], bases: Sequence[float]) -> list[float]:
    """Each round's value over the same round's base (both lists in round order)."""
    return [v / b for v, b in zip(values, bases, strict=True)]


def median_ratio(values: Sequence[float], bases: Sequence[float]) -> float:
    """The median of :func:`ratios`, rounded to three places: the figure the reports quote."""
    return round(statistics.median(ratios(values, bases)), 3)
