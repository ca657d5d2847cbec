"""The ticket servers of one sequence, as a set: which one to ask next and what to refuse.

A :class:`~seqid_orm.allocation.tickets.TicketSequence` hands out values; this module decides where
they come from.  Its decisions are :mod:`seqid_orm.calls.steps` — generators that yield each store call and
receive its reply — so a thread and an event loop carry out the same ones, and a test feeds them
scripted replies with no socket (``tests/core/test_allocation_steps.py``):

* **which server next** (:meth:`ServerSet.reserve`): the one that answered last, else the others in
  list order; a server that is unreachable or stalled past its share of the deadline is skipped
  for the next, any other typed refusal stops the reservation (going on could repeat ids), and an
  untyped exception is a bug that surfaces as itself;
* **what is refused after a failover**: a block at or below the highest value this process has
  seen a server hand out (:func:`~.stores.base.regressed`: a counter restored, re-created,
  failed over to a replica that lagged);
* **the set as a whole** (:meth:`ServerSet.check`, before the first id): each server's stored step
  and offset must be the ones this client gives it, a sequence present on some servers only is
  refused, a new one is created on every server at once.

No I/O of its own: the sequence calls :meth:`reserve` for one reservation at a time (its single
flight), and carries the calls out.  A store given by URL is opened at the first step that needs it,
as a step too (:meth:`ServerSet.opening`): opening imports its driver and builds an engine or a
client (0.1-0.3 s), which a thread does in place and an event loop in a worker thread, never on the
loop (each server is a :class:`~.stores.base.Deferred`, as a lease's store is).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`.segments` and
:mod:`.stores`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from ..calls.retry import PARTIAL_SET, Again
from ..calls.steps import Call, Steps
from ..errors import (
    AllocationError,
    BackendMismatchError,
    BackendUnavailableError,
    GeneratorExhaustedError,
    StoreTimeoutError,
)
from .segments import Segment
from .stores.base import Deferred, TicketRow, TicketStore, first_value, regressed

__all__ = ["ServerSet"]

log = logging.getLogger("seqid_orm.tickets")


class _Partial(Exception):
    """The set stayed partial through every read (:data:`~seqid_orm.calls.retry.PARTIAL_SET`): refused below."""


def _ask(method: Callable[..., Any], *args: object) -> Steps[Any]:
    """``method(*args)``, a store's: a store raises seqid's typed errors for its server and driver
    (:class:`~seqid_orm.allocation.stores.TicketStore`); anything else is a bug and surfaces as itself."""
    return (yield Call(method, args))


class ServerSet:
    """The servers of sequence ``name`` with the common ``step`` and each one's offset, and what this
    process knows of them: whether they were checked as a set, the one asked first, and per server
    the highest value it is known to have handed out (kept across forks: a child knows what its
    parent saw)."""

    def __init__(
        self,
        name: str,
        stores: Sequence[Deferred[TicketStore]],
        *,
        step: int,
        offsets: Sequence[int],
        start: int,
        max_value: int,
        start_server: int | None,
    ) -> None:
        self.name = name
        self._slots = tuple(stores)
        self._labels = tuple(slot.label for slot in self._slots)
        self.step = step
        self.offsets = tuple(offsets)
        self.start = start
        self.max_value = max_value
        self.start_server = start_server
        self.checked = False
        self.high: dict[int, int] = {}
        self.reservations = 0
        """Reservations that returned a segment."""
        self.current = 0
        self.pick_first()

    def pick_first(self) -> None:
        """The server asked first: ``start_server``, else one at random (spreading processes over
        the servers; a forked child picks again)."""
        self.current = secrets.randbelow(len(self._slots)) if self.start_server is None else self.start_server

    def label(self, i: int | None = None) -> str:
        """Server ``i``'s label (the current one's by default), password hidden."""
        return self._labels[self.current if i is None else i]

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    @property
    def stores(self) -> tuple[TicketStore, ...]:
        """The stores, each opened now if it was not yet (in the calling thread)."""
        return tuple(slot.get() for slot in self._slots)

    def open(self) -> None:
        """Open every store not opened yet (what :meth:`opening` asks a thread to do)."""
        self.stores  # noqa: B018  # the property opens them

    def opening(self) -> Steps[None]:
        """The stores opened, before a step calls one: a thread opens them in place, an event loop in a
        worker thread (:func:`~seqid_orm.calls.steps.adrive` runs a call without an awaitable twin there)."""
        if any(slot.opened is None for slot in self._slots):
            yield Call(self.open, ())

    # --- which server next ------------------------------------------------------------------

    def reserve(self, count: int) -> Steps[Segment]:
        """A segment of ``count`` values from the current server or, failing that, the others in
        turn (checking the set first, once)."""
        yield from self.opening()
        if not self.checked:
            yield from self.check()
        errors: list[str] = []
        exhausted = stalled = 0
        k = len(self.stores)
        for i in [(self.current + j) % k for j in range(k)]:
            store = self.stores[i]
            try:
                first, granted = yield Call(
                    store.allocate, (self.name, count, self.step, self.offsets[i], self.max_value, self.high.get(i))
                )
            except GeneratorExhaustedError as exc:
                exhausted += 1
                errors.append(str(exc))
                continue
            except BackendUnavailableError as exc:  # unreachable, stalled past its deadline: the next one
                errors.append(str(exc))
                stalled += isinstance(exc, StoreTimeoutError)
                if k > 1:
                    log.warning("ticket server %s failed (%s); trying the next", store.label, exc)
                continue
            # Any other typed error (a contradicting server, a vanished counter, a history gone back)
            # stops here: going on could repeat ids. Anything untyped is a bug: it surfaces as itself.
            return self._taken(i, Segment(first, granted, self.step, i))
        if exhausted == k:
            raise GeneratorExhaustedError("; ".join(errors))
        if stalled == k:
            raise StoreTimeoutError(
                f"no ticket server answered for sequence {self.name!r} in time: " + "; ".join(errors)
            )
        # each error says what its server (or its driver) answered: a refusal is not silence
        raise BackendUnavailableError(f"no ticket server gave sequence {self.name!r} a block: " + "; ".join(errors))

    def _taken(self, i: int, segment: Segment) -> Segment:
        """Accept server ``i``'s segment, unless it starts at or below what that server handed out
        before (a store that did not check ``above`` itself); it becomes the server asked first."""
        high = self.high.get(i)
        if high is not None and segment.first <= high:
            raise regressed(self.name, self.label(i), segment.first, high)
        self.high[i] = segment.last
        if i != self.current:
            log.warning("sequence %r now draws from %s", self.name, self.label(i))
        self.current = i
        self.reservations += 1
        return segment

    # --- the set as a whole ----------------------------------------------------------------

    def check(self) -> Steps[None]:
        """Check the sequence on every server as a set before the first id.

        Each server must store the step and offset this client gives it; a sequence present on
        some servers and missing on others is refused (a server that lost its state, or one added
        to the list, would start over); a new sequence is created on all of them, which needs
        every server to answer.  The next value each server reports is remembered: a block below
        it later means that counter went back.
        """
        yield from self.opening()
        read: tuple[dict[int, TicketRow | None], list[str]] = ({}, [])

        def whole(left: float) -> Steps[None]:
            # Present on some servers only: another client may be creating it on its servers right
            # now (one insert after the other); a set that stays partial is refused below.
            nonlocal read
            read = yield from self._read_rows()
            if any(read[0].values()) and None in read[0].values():
                raise Again(_Partial("partial"))

        with contextlib.suppress(_Partial):
            yield from PARTIAL_SET.steps(whole)
        rows, down = read
        if not any(rows.values()):
            if down:
                raise BackendUnavailableError(
                    f"sequence {self.name!r} is new on every ticket server that answered, and a new sequence is "
                    "created on all of its servers at once (else two clients listing them differently could both "
                    "start it); not answering: " + "; ".join(down)
                )
            for i, store in enumerate(self.stores):
                offset = self.offsets[i]
                new = TicketRow(self.name, first_value(offset, self.step, self.start), self.step, offset)
                yield from _ask(store.create, new)
            rows = {}
            for i, store in enumerate(self.stores):
                rows[i] = yield from _ask(store.read, self.name)
        self.check_rows(rows)
        for i, row in rows.items():
            if row is not None and row.next_value > row.offset:
                self.high[i] = max(self.high.get(i, 0), row.next_value - row.step)
        if down:
            log.warning("sequence %r: could not check %s", self.name, "; ".join(down))
        self.checked = True

    def _read_rows(self) -> Steps[tuple[dict[int, TicketRow | None], list[str]]]:
        """The sequence's row on each server that answers, and what the others said."""
        rows: dict[int, TicketRow | None] = {}
        down: list[str] = []
        for i, store in enumerate(self.stores):
            try:
                rows[i] = yield Call(store.read, (self.name,))
            except BackendUnavailableError as exc:  # unreachable now: judged by the caller
                down.append(str(exc))
        return rows, down

    def check_rows(self, rows: dict[int, TicketRow | None]) -> None:
        """Refuse rows that contradict this client's step and offsets, or a set present on some servers only."""
        labels = self.labels
        recorded = [f"{labels[i]}: step={row.step} offset={row.offset}" for i, row in rows.items() if row is not None]
        ours = ", ".join(f"{label}: offset={o}" for label, o in zip(labels, self.offsets, strict=True))
        for i, row in rows.items():
            if row is not None and (row.step, row.offset) != (self.step, self.offsets[i]):
                raise BackendMismatchError(
                    f"sequence {self.name!r}: this client gives {labels[i]} step={self.step} "
                    f"offset={self.offsets[i]}, but the servers recorded {'; '.join(recorded)}. Clients must list "
                    f"the same servers in the same order (or pass the same step= and offsets=); this client: {ours}"
                )
        missing = [labels[i] for i, row in rows.items() if row is None]
        if missing:
            present = [labels[i] for i, row in rows.items() if row is not None]
            raise AllocationError(
                f"sequence {self.name!r} exists on {', '.join(present)} but not on {', '.join(missing)}: that server "
                "lost its state (a restart without persistence, a restore, a deleted row) or is new in the list; "
                "started at its first value it would hand out ids again. Create it above the largest id in use "
                "with `seqid ticket repair` (TicketSequence.repair())"
            )

    def repair(self, highest: int) -> Steps[list[tuple[str, TicketRow]]]:
        """Move the counter on every server above ``highest``, creating it where it is missing, never
        lower; then check the set.  ``(server label, row)`` per server."""
        yield from self.opening()
        out = []
        for i, store in enumerate(self.stores):
            offset = self.offsets[i]
            row = TicketRow(self.name, first_value(offset, self.step, max(self.start, highest + 1)), self.step, offset)
            out.append((store.label, (yield from _ask(store.raise_to, row))))
        self.check_rows({i: row for i, (_, row) in enumerate(out)})
        return out

    # --- lifecycle -----------------------------------------------------------------------

    def rows(self) -> list[tuple[str, TicketRow]]:
        """Every sequence on every server, as ``(server label, row)``."""
        return [(store.label, row) for store in self.stores for row in store.rows()]

    def after_fork(self) -> None:
        """In a forked child: new connections, and a server picked again."""
        self.pick_first()
        for slot in self._slots:
            slot.after_fork()

    def close(self) -> None:
        """Release the opened stores' connections (a store never opened has none)."""
        for slot in self._slots:
            if slot.opened is not None:
                slot.opened.close()
