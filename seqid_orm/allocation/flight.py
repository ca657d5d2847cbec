"""Single flight: one piece of slow work at a time, shared by threads and event loops.

When many callers need the same slow result at once (a ticket sequence's next segment, a lease's
grant), one of them *leads* — does the work — and the others *follow*: they wait for the leader's
outcome instead of starting the work again (Go's ``singleflight``; Leaf's segment buffer has one
loader per tag).  What makes this module more than a flag is where the callers live:

* **A claim belongs to its owner** — the thread, or the event loop, whose caller leads — and ends
  with it.  A leader that finishes, fails or is cancelled ends the claim in its own ``finally``;
  a leader that cannot (its loop closed while it was suspended, its thread gone) leaves a claim
  that :meth:`Claim.alive` reports dead, and the next caller takes over.  A claim also dies at its
  deadline, so no claim can wedge the work for longer than one call's time (it did: a loop closed
  after it claimed a prefetch left the sequence refusing every later call).
* **Each follower owns its own wait.**  The outcome is a :class:`concurrent.futures.Future`,
  which any thread may complete; a thread waits on it directly, an event loop through a future of
  its own that the outcome reaches with ``loop.call_soon_threadsafe`` (asyncio's rule: a loop's
  futures are touched by that loop's thread only).  A follower that is cancelled cancels its own
  wait, never the work or the other followers.
* **No lock is held across a wait or an ``await``**: the lock here guards a few attribute reads
  and writes, so taking it on an event loop's thread never blocks the loop.

A claim's outcome is a value or an exception; :class:`Abandoned` says the leader gave up without
one (cancelled, closed): followers then lead the work themselves rather than fail.

May import: the standard library only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Abandoned", "Claim", "Flight", "owner_alive", "running_loop"]

_T = TypeVar("_T")

#: How often a follower looks at its leader's health while it waits (seconds).
_LOOK = 0.05


_Raise = Callable[[], BaseException]  # the error a follower raises at its deadline
_Refuse = Callable[[], "BaseException | None"]  # asked at each look: an error to raise now, or None


def _refusal(left: float, timed_out: _Raise, refuse: _Refuse | None) -> BaseException | None:
    """What a follower with ``left`` seconds raises now, if anything."""
    if left <= 0:
        return timed_out()
    return None if refuse is None else refuse()


class Abandoned(Exception):
    """The leader of a claim gave it up without an outcome (cancelled, its loop closed, its thread
    gone, or its deadline passed): the work was not done, and a follower should lead it."""


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or ``None`` (a synchronous caller on a loop's own
    thread must not wait for that loop's tasks)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _current_owner() -> threading.Thread | asyncio.AbstractEventLoop:
    """The running event loop of this thread where there is one, else the thread."""
    loop = running_loop()
    return loop if loop is not None else threading.current_thread()


def owner_alive(owner: threading.Thread | asyncio.AbstractEventLoop) -> bool:
    """Whether a claim's owner can still complete it: a thread alive, a loop not closed."""
    if isinstance(owner, threading.Thread):
        return owner.is_alive()
    return not owner.is_closed()


def _own(error: BaseException) -> BaseException:
    """A follower's own copy of the leader's exception: one instance raised in several threads
    would share (and overwrite) one traceback."""
    try:
        return copy.copy(error)
    except Exception:  # an exception that cannot be copied is raised as it is
        return error


class Claim(Generic[_T]):
    """The work in flight: its outcome (a thread-safe future), its owner and its deadline."""

    __slots__ = ("deadline", "future", "owner")

    def __init__(self, owner: threading.Thread | asyncio.AbstractEventLoop, deadline: float) -> None:
        self.owner = owner
        self.deadline = deadline
        self.future: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def alive(self, now: float | None = None) -> bool:
        """Whether the claim can still end with an outcome: not done, its owner alive, its deadline ahead."""
        if self.future.done():
            return False
        return owner_alive(self.owner) and (time.monotonic() if now is None else now) < self.deadline


class Flight(Generic[_T]):
    """At most one live :class:`Claim` at a time; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claim: Claim[_T] | None = None

    def join(self, seconds: float) -> tuple[Claim[_T], bool]:
        """The live claim to follow, ``(claim, False)``; or, where none is live, a new one led by
        the caller's thread or loop, ``(claim, True)`` — the caller must :meth:`finish` it (in a
        ``finally``).  A dead claim is abandoned for its followers, who then join again."""
        with self._lock:
            claim = self._claim
            if claim is not None and claim.alive():
                return claim, False
            if claim is not None:
                self._abandon(claim, "its leader stopped without an outcome")
            claim = self._claim = Claim(_current_owner(), time.monotonic() + seconds)
            return claim, True

    def lead(self, seconds: float) -> Claim[_T] | None:
        """A new claim led by the caller, or ``None`` where one is live (a prefetch: nothing to do)."""
        claim, leads = self.join(seconds)
        return claim if leads else None

    def hand_over(self, claim: Claim[_T], thread: threading.Thread) -> None:
        """Start ``thread``, which leads ``claim`` from now on: the claim lives and dies with the
        thread that does the work (handed over once it runs: a thread not yet started reads as dead)."""
        with self._lock:
            thread.start()
            claim.owner = thread

    def leads(self, claim: Claim[_T]) -> bool:
        """Whether ``claim`` is the live one (not given up for a successor)."""
        return self._claim is claim

    def busy(self) -> bool:
        """Whether a live claim is in flight."""
        claim = self._claim
        return claim is not None and claim.alive()

    def finish(self, claim: Claim[_T], value: _T | None = None, error: BaseException | None = None) -> bool:
        """End ``claim`` with its outcome (``error``: an exception, or ``None`` for ``value``); a
        ``BaseException`` that is not an ``Exception`` (cancellation, exit) abandons it.  Returns
        whether the claim was still the live one: a claim already abandoned (its deadline passed, a
        successor leads) reports ``False``, and its outcome reaches its old followers only."""
        with self._lock:
            current = self._claim is claim
            if current:
                self._claim = None
        if error is not None and not isinstance(error, Exception):
            error = Abandoned(f"the leader was stopped ({type(error).__name__})")
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if error is None:
                claim.future.set_result(value)  # type: ignore[arg-type]
            else:
                claim.future.set_exception(error)
        return current

    def forget(self) -> None:
        """Drop the claim without an outcome (a forked child: its owner is in the parent)."""
        self._lock = threading.Lock()
        self._claim = None

    @staticmethod
    def _abandon(claim: Claim[_T], why: str) -> None:
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            claim.future.set_exception(Abandoned(why))

    # --- following ----------------------------------------------------------------------------

    def follow(self, claim: Claim[_T], deadline: float, timed_out: _Raise, refuse: _Refuse | None = None) -> _T:
        """Follow ``claim`` in a thread until ``deadline`` (monotonic): its value, or (a copy of) its
        exception — :class:`Abandoned` where its leader died; ``timed_out()`` is raised at the deadline,
        and what ``refuse()`` returns as soon as it returns one (it is asked at each look)."""
        while True:
            left = deadline - time.monotonic()
            if (refused := _refusal(left, timed_out, refuse)) is not None:
                raise refused
            # wait(), not result(timeout=): from 3.11 a leader's TimeoutError is the wait's own type
            concurrent.futures.wait([claim.future], timeout=min(left, _LOOK))
            if claim.future.done():
                error = claim.future.exception()
                if error is not None:
                    raise _own(error) from error
                return claim.future.result()
            self._give_up_if_dead(claim)

    async def afollow(self, claim: Claim[_T], deadline: float, timed_out: _Raise, refuse: _Refuse | None = None) -> _T:
        """:meth:`follow` on the running loop, its awaitable twin (a step's :class:`~seqid_orm.calls.steps.Call`
        of ``follow`` is awaited here): a future of this loop's own, completed from whichever thread ends the
        claim; cancelling the caller cancels that future only."""
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[_T] = loop.create_future()

        def deliver(done: concurrent.futures.Future[_T]) -> None:
            def settle() -> None:
                if mine.done():
                    return
                error = done.exception()
                if error is None:
                    mine.set_result(done.result())
                else:
                    mine.set_exception(error)

            with contextlib.suppress(RuntimeError):  # this loop closed meanwhile: nobody waits here
                loop.call_soon_threadsafe(settle)

        claim.future.add_done_callback(deliver)
        while True:
            left = deadline - time.monotonic()
            if (refused := _refusal(left, timed_out, refuse)) is not None:
                mine.cancel()
                raise refused
            try:
                done, _ = await asyncio.wait([mine], timeout=min(left, _LOOK))
            except BaseException:
                mine.cancel()  # this caller was cancelled: its wait ends, the work goes on
                raise
            if done:
                error = mine.exception()
                if error is not None:
                    raise _own(error) from error
                return mine.result()
            self._give_up_if_dead(claim)

    def _give_up_if_dead(self, claim: Claim[_T]) -> None:
        """Abandon ``claim`` for its followers where its owner can no longer end it."""
        if claim.alive():
            return
        with self._lock:
            if self._claim is claim:
                self._claim = None
        self._abandon(claim, "its leader stopped without an outcome")
