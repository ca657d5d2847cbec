"""Key floors: what a ticket sequence checks against the key columns it fills.

A counter can go back under the data: restored from a backup, created anew, emptied by a Redis
restart, put back by a failover to a lagging replica.  A process that never saw the counter
before cannot tell from the store alone (:func:`~.stores.base.regressed` covers only what *this*
process saw), so a sequence bound to its key columns checks every block it reserves against
them: a block whose own values are keys already is refused as
:class:`~seqid_orm.errors.CounterBelowDataError`, before any of its values is handed out.

Only the block's own range counts (one index range read, :meth:`KeyFloor.taken_in`): keys above
it are other processes' later blocks, which refused nothing wrong.

The decisions are here, the reads are the caller's: :meth:`Floors.check` is steps
(:mod:`seqid_orm.calls.steps`), so a thread runs the floor's read directly and an event loop in a worker
thread (a floor reads through its engine's blocking connections).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's
``segments``, ``telemetry``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Protocol, cast

from ..calls.steps import Call, Steps
from ..errors import ArgumentTypeError, CounterBelowDataError
from . import telemetry
from .segments import Segment

__all__ = ["Floors", "KeyFloor", "check_floor"]

log = logging.getLogger("seqid_orm.tickets")


class KeyFloor(Protocol):
    """The keys a ticket sequence fills, as far as its safety checks need them (one table's column).

    The SQLAlchemy adapter's ``ticket_pk`` and Django's ``TicketField`` make these; any object
    with the two methods will do.
    """

    label: str
    """The column as messages name it (``orders.id``)."""

    def largest(self) -> int | None:
        """The largest key in the column (``None`` when empty)."""
        ...

    def taken_in(self, first: int, last: int, step: int) -> int | None:
        """The largest key in ``first..last`` congruent to ``first`` modulo ``step`` (``None`` if none):
        a key that the block ``first, first + step, ..., last`` would hand out again."""
        ...


def check_floor(floor: object) -> KeyFloor:
    """``floor`` as a :class:`KeyFloor`, or :class:`~seqid_orm.errors.ArgumentTypeError` naming
    what it lacks (a column name passed as a string is the usual mistake)."""
    if not all(hasattr(floor, a) for a in ("label", "largest", "taken_in")):
        raise ArgumentTypeError(f"floor must be a KeyFloor (label, largest(), taken_in()), got {type(floor).__name__}")
    return cast(KeyFloor, floor)


class Floors:
    """The key columns one sequence is bound to, and the verdict on a block against them.

    Thread-safe: binding takes a lock of its own for the list only, never across a read."""

    def __init__(self, sequence: str, floors: Iterable[object] = ()) -> None:
        self.sequence = sequence
        self._lock = threading.Lock()
        self._floors: list[KeyFloor] = [check_floor(f) for f in floors]

    def __bool__(self) -> bool:
        return bool(self._floors)

    def add(self, floor: object) -> KeyFloor | None:
        """Bind one more column; ``None`` if a column of that label is bound already (``ticket_pk``
        and ``TicketField`` bind theirs at each first use)."""
        checked = check_floor(floor)
        with self._lock:
            if any(f.label == checked.label for f in self._floors):
                return None
            self._floors.append(checked)
        return checked

    def check(self, segment: Segment, server: str) -> Steps[None]:
        """Refuse ``segment`` (reserved from ``server``) if a bound column already holds one of its
        own values: one ``taken_in`` read per column, as steps."""
        with self._lock:
            floors = list(self._floors)
        for floor in floors:
            taken = yield Call(floor.taken_in, (segment.first, segment.last, segment.step))
            if taken is not None:
                raise self.below_data(floor, taken, segment, server)

    def check_one(self, floor: KeyFloor, segment: Segment, server: str) -> None:
        """:meth:`check` for one newly bound column, read in the caller's thread (the segment in
        use when it was bound: what is left of it is checked too)."""
        taken = floor.taken_in(segment.first, segment.last, segment.step)
        if taken is not None:
            raise self.below_data(floor, taken, segment, server)

    def largest(self) -> int:
        """The largest key in any bound column (0 when they are empty): where a repair must move
        the counters above."""
        with self._lock:
            floors = list(self._floors)
        return max((floor.largest() or 0 for floor in floors), default=0)

    def below_data(self, floor: KeyFloor, taken: int, segment: Segment, server: str) -> CounterBelowDataError:
        """The refusal of a block whose own values are keys already (logged and counted here)."""
        error = CounterBelowDataError(
            f"sequence {self.sequence!r} on {server} handed out a block from {segment.first}, but "
            f"{floor.label} already holds the key {taken} that this server would hand out again: its counter "
            "is behind the data (created anew, or restored from a backup). Move it above the largest key with "
            "`seqid ticket repair` (TicketSequence.repair())"
        )
        telemetry.record_refusal(error, sequence=self.sequence)
        log.error("%s", error, extra={"seqid_sequence": self.sequence, "seqid_error": type(error).__name__})
        return error
