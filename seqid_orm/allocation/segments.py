"""A ticket sequence's segment buffer: what is handed out next, and when to reserve more.

Pure decisions, no I/O and no lock (h11's shape: the caller brings the I/O and the
concurrency).  A :class:`SegmentBuffer` holds the segment values are handed out from and the
segments reserved ahead of it (double buffering, as Meituan's Leaf does: the next segment is
reserved once ``prefetch_at`` of the current one is used), and it decides:

* which value comes next (:meth:`SegmentBuffer.take`, :meth:`SegmentBuffer.take_many`), moving to
  a reserved segment when the current one runs out;
* when the next segment should be reserved (:meth:`SegmentBuffer.wants_prefetch`, and the
  *trigger*, the value whose hand-out asks for it);
* how many values the next reservation asks for (:attr:`SegmentBuffer.block`: Leaf's adaptive
  step doubles while segments last less than ``segment_seconds`` and halves when one lasts over
  twice that, between ``block_size`` and ``max_block_size``).

:class:`~seqid_orm.allocation.tickets.TicketSequence` guards one buffer with a lock held only
around these calls, and reserves segments through its stores (threads) or their asynchronous
drivers (event loops).  The tests drive a buffer with scripted segments and clock readings.

May import: the standard library only.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Segment", "SegmentBuffer"]


@dataclass(frozen=True)
class Segment:
    """Values ``first, first + step, ..., first + (count - 1) * step`` reserved from server ``server``."""

    first: int
    count: int
    step: int
    server: int

    @property
    def last(self) -> int:
        """The last value of the segment."""
        return self.first + (self.count - 1) * self.step


class SegmentBuffer:
    """The values of one sequence in memory; see the module docstring.

    >>> buf = SegmentBuffer(block_size=4, max_block_size=4, prefetch_at=0.5, segment_seconds=900.0, clock=lambda: 0.0)
    >>> buf.take() is None                 # nothing reserved yet: the caller reserves a segment
    True
    >>> buf.add(Segment(first=1, count=4, step=1, server=0))
    True
    >>> [buf.take(), buf.take()], buf.trigger, buf.wants_prefetch()
    ([1, 2], 3, False)
    >>> buf.take(), buf.wants_prefetch()   # the trigger handed out: reserve the next segment now
    (3, True)
    >>> buf.add(Segment(first=9, count=4, step=1, server=0))
    True
    >>> buf.take_many(3)                   # the rest of the first segment, then the reserved one
    [4, 9, 10]
    """

    def __init__(
        self,
        *,
        block_size: int,
        max_block_size: int,
        prefetch_at: float,
        segment_seconds: float,
        clock: Callable[[], float],
        double_buffer: bool = True,
    ) -> None:
        self.block_size = block_size
        self.max_block_size = max_block_size
        self.prefetch_at = prefetch_at
        self.segment_seconds = segment_seconds
        self.double_buffer = double_buffer
        self.block = block_size
        """How many values the next reservation asks for."""
        self.values: Iterator[int] = iter(())
        """The current segment's values not yet handed out (a range iterator: ``next()`` on it is
        atomic under the GIL, so the hot path may read it without the lock)."""
        self.trigger: int | None = None
        """The value whose hand-out asks for the next segment (``None``: none to ask for)."""
        self.segment: Segment | None = None
        """The segment values are handed out from (``None`` before the first)."""
        self.ready: collections.deque[Segment] = collections.deque()
        """Segments reserved ahead, in the order they were reserved."""
        self.installs = 0
        """Segments handed out from so far."""
        self.handed = 0
        """Values of every segment installed (handed out or still in memory)."""
        self.dropped = 0
        """Values of segments refused by :meth:`add` (reserved below the one in use)."""
        self._clock = clock  # monotonic seconds: when a segment starts being handed out
        self._installed_at: float | None = None

    # --- reading --------------------------------------------------------------------------

    def remaining(self) -> int:
        """Values left in the current segment."""
        return operator.length_hint(self.values)

    def prefetched(self) -> int:
        """Values in the segments reserved ahead."""
        return sum(s.count for s in self.ready)

    def empty(self) -> bool:
        """Whether no value is in memory (the caller must reserve before the next one)."""
        return self.remaining() == 0 and not self.ready

    def wants_prefetch(self) -> bool:
        """Whether the next segment should be reserved now: double buffering is on, nothing is
        reserved ahead, and the current segment has reached its trigger (or is gone)."""
        if not self.double_buffer or self.ready:
            return False
        left = self.remaining()
        if left == 0:
            return True
        assert self.segment is not None
        next_value = self.segment.last - (left - 1) * self.segment.step
        return self.trigger is None or next_value > self.trigger

    # --- deciding -------------------------------------------------------------------------

    def add(self, segment: Segment) -> bool:
        """A segment reserved: handed out from at once when the current one is empty, else kept
        for when it is.  Returns ``False``, keeping nothing, for a segment of the same server that
        starts below the one in use: two reservations made side by side (a synchronous call on an
        event loop's thread never waits for another's) can arrive in either order, and values from
        one server increase within a process.  Its values are lost, as unused values are."""
        current = self.ready[-1] if self.ready else self.segment
        if current is not None and segment.server == current.server and segment.first < current.first:
            self.dropped += segment.count
            return False
        self.ready.append(segment)
        if self.remaining() == 0:
            self._install_next()
        return True

    def take(self) -> int | None:
        """The next value, moving to a reserved segment when the current one is used up; ``None``
        when memory holds none (the caller reserves a segment and calls again)."""
        value = next(self.values, None)
        if value is None and self._install_next():
            value = next(self.values, None)
        return value

    def take_many(self, n: int) -> list[int]:
        """Up to ``n`` values (fewer when memory holds fewer), in order."""
        out = list(itertools.islice(self.values, n))
        while len(out) < n and self._install_next():
            out.extend(itertools.islice(self.values, n - len(out)))
        return out

    def clear(self) -> None:
        """Drop every value in memory (a closed sequence: unused values are lost, as at exit)."""
        self.values = iter(())
        self.ready.clear()
        self.trigger = None

    def _install_next(self) -> bool:
        if not self.ready:
            return False
        segment = self.ready.popleft()
        now = self._clock()
        if self._installed_at is not None and self.max_block_size > self.block_size:
            lasted = now - self._installed_at  # Leaf's rule: double when fast, halve when slow
            if lasted < self.segment_seconds:
                self.block = min(self.block * 2, self.max_block_size)
            elif lasted > 2 * self.segment_seconds:
                self.block = max(self.block // 2, self.block_size)
        self._installed_at = now
        self.installs += 1
        self.handed += segment.count
        self.segment = segment
        self.values = iter(range(segment.first, segment.last + 1, segment.step))
        if self.double_buffer:
            index = min(segment.count - 1, int(segment.count * self.prefetch_at))
            self.trigger = segment.first + index * segment.step
        else:
            self.trigger = None
        return True
