"""Taking a lease: which caller leads a grant, which ones wait for it, and which will not wait.

However many threads and tasks ask a :class:`~.leases.WorkerLease` for its worker id at once, one
grant runs (:class:`~.flight.Flight`: a namespace's cold start costs one worker id and one wait),
led by the first caller; the others follow it.  Who does what, in one place:

==============================  ================================================================
the caller                      what it does
==============================  ================================================================
leads, waits (``acquire()``)    runs the grant (:mod:`.grants`) in its thread, or awaits it on its loop
leads, lazy (a first id)        hands the grant to a thread of its own, follows it until ``timeout``
follows, waits                  waits for the grant to end (:meth:`~.flight.Flight.wait`/``await_``)
follows, lazy                   looks at the grant until ``timeout``, or until its fence is known
                                to end later (:class:`~seqid_orm.errors.WorkerIdNotReadyError`)
follows, on a loop's thread     grants beside the flight (the leader may be a task of this very
                                loop); the second to end is given back (:meth:`Acquirer.settle`)
the renewal thread, once lost   leads a grant if no caller does (:meth:`Acquirer.lease_again`)
==============================  ================================================================

A grant that ends is adopted where the lease's table takes it (:meth:`~.lease_life.LeaseLife.adopt`)
and renewed from then on; a grant that ends after a release gives its worker id back.

May import: the standard library, :mod:`seqid_orm.errors` and this package's ``telemetry``, ``flight``,
``grants``, ``lease_life``, ``renewal``, ``stores.base``, ``stores.retry`` and ``stores.steps``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Protocol

from ..errors import LeaseLostError, SeqIDError, WorkerIdNotReadyError
from . import telemetry
from .flight import Abandoned, Claim, Flight
from .grants import GrantRun, Released, Taken, Terms, clear_since, give_back, released_error
from .lease_life import LATE, LeaseLife, LeaseWaits, Renewer, log, not_ready
from .renewal import Outcome
from .stores.base import LeaseStore
from .stores.retry import grant_seconds
from .stores.steps import Steps, adrive, drive

__all__ = ["Acquirer", "Leasing"]

_LOOK = 0.05  # seconds between a lazy caller's looks at the grant it follows (has its fence a known end?)


class _Slice(Exception):
    """One look of a lazy caller at the grant it follows has ended (:meth:`Acquirer._follow`)."""


class Leasing(Protocol):
    """What taking a lease reads of it (:class:`~.leases.WorkerLease`)."""

    life: LeaseLife
    renewer: Renewer
    namespace: str
    ttl: float
    clock_tolerance: float
    max_workers: int
    timeout: float
    waits: LeaseWaits

    @property
    def store(self) -> LeaseStore: ...

    def monotonic(self) -> float: ...

    def wall_ms(self) -> int: ...

    def wall_ns(self) -> int: ...


class Acquirer:
    """The grants of one lease: see the module docstring."""

    def __init__(self, lease: Leasing) -> None:
        self._lease = lease
        self._grants: Flight[Taken] = Flight()
        self.thread: threading.Thread | None = None  # a lazy caller's grant (_lead_in_thread)

    def acquire(self, wait: bool) -> int:
        """The worker id held and live, granted first where none is (:meth:`~.leases.WorkerLease.acquire`)."""
        lease = self._lease
        deadline = lease.monotonic() + lease.timeout
        while True:
            held = lease.life.live_worker_id()
            if held == LATE:
                self._renew_late()  # live again, or lost: granted again below
                continue
            if held is not None:
                return held
            claim, leads = self._grants.join(self._grant_seconds())
            if not wait:
                if leads:
                    self._lead_in_thread(claim)
                elif claim.owner is asyncio._get_running_loop():
                    # a task of this very loop leads (an aacquire() under way): it cannot run while
                    # this thread waits, so say so now rather than at the deadline
                    raise WorkerIdNotReadyError(
                        f"a worker id in namespace {lease.namespace!r} is being leased by a task of this event "
                        "loop, which cannot go on while a synchronous call (an AsyncSession flush's column "
                        "default) waits on the loop's thread: await snowflake.aprefetch() or lease.aacquire() "
                        "before the flush"
                    )
                with contextlib.suppress(Abandoned):
                    self._follow(claim, deadline)
                continue
            if leads:
                self._lead(claim)
            elif asyncio._get_running_loop() is not None:
                # On an event loop's thread (a column default in an AsyncSession's flush): the grant in
                # flight may be a task of this very loop, which cannot run while we wait. Grant here
                # too; whichever ends second is given back (settle).
                drive(self.settle(drive(self.grant(), None)), None)
            else:
                with contextlib.suppress(Abandoned):
                    self._grants.wait(claim, claim.deadline, self._timed_out)

    async def aacquire(self, wait: bool) -> int:
        """:meth:`acquire` on the running loop (:meth:`~.leases.WorkerLease.aacquire`)."""
        lease = self._lease
        deadline = lease.monotonic() + lease.timeout
        while True:
            held = lease.life.live_worker_id()
            if held == LATE:
                await asyncio.to_thread(self._renew_late)
                continue
            if held is not None:
                return held
            claim, leads = self._grants.join(self._grant_seconds())
            if leads and not wait:
                # a thread of its own leads, not a task: a short asyncio.run() that ends before the
                # fence would cancel a task's grant, and every such run would start one again
                self._lead_in_thread(claim)
            elif leads:
                await self._alead(claim)
                continue
            with contextlib.suppress(Abandoned):
                if wait:
                    await self._grants.await_(claim, claim.deadline, self._timed_out)
                else:
                    await self._afollow(claim, deadline)

    def _renew_late(self) -> None:
        """Renew a lease whose time ran out before its first use, where the store still gives it to
        this holder; where it does not (expired there too, taken over, the store unreachable) the
        lease is lost, and the caller grants again."""
        life = self._lease.life
        acquisition = life.acquisitions
        renewal = self._lease.renewer.renew(0)
        if renewal is not None and renewal.outcome is Outcome.RETRY:  # no answer, and out of time
            with life.lock:
                life.expire(acquisition)

    def _grant_seconds(self) -> float:
        """The longest a grant may take (:func:`~.stores.retry.grant_seconds`)."""
        lease = self._lease
        return grant_seconds(lease.timeout, lease.ttl, lease.clock_tolerance)

    def _lead_in_thread(self, claim: Claim[Taken]) -> None:
        """Hand ``claim`` to a thread of its own that runs the grant (a lazy caller will not wait out
        its fence; the grant goes on, renewing, and the worker id is held when it ends)."""

        def lead() -> None:
            with contextlib.suppress(Exception):  # its followers get the error; _failed logged it
                self._lead(claim)

        worker = threading.Thread(target=lead, name=f"seqid-lease-grant-{self._lease.namespace}", daemon=True)
        self._lease.life.run = None  # its fence is not yet known (a previous grant's is over)
        self.thread = worker  # release() waits for it
        worker.start()
        # the claim lives and dies with the thread that does the work (from its start: a thread not
        # yet started reads as dead, and a caller meanwhile would abandon the claim and grant again)
        claim.owner = worker

    def _past_deadline(self, deadline: float) -> WorkerIdNotReadyError | None:
        """The refusal of a lazy caller whose deadline (the lease's monotonic clock) has passed, or
        comes before the end of the fence the grant under way waits for; ``None``: look again."""
        lease = self._lease
        run = lease.life.run
        fence = None if run is None else run.fence_until
        now = lease.monotonic()
        if (fence is not None and fence > deadline) or now >= deadline:
            return not_ready(lease.namespace, lease.store.label, lease.timeout, fence, now, lease.wall_ns())
        return None

    def _follow(self, claim: Claim[Taken], deadline: float) -> None:
        """Follow ``claim`` in this thread until it ends or :meth:`_past_deadline` refuses."""
        while (refused := self._past_deadline(deadline)) is None:
            try:
                self._grants.wait(claim, time.monotonic() + _LOOK, _Slice)
                return
            except _Slice:
                continue
        raise refused

    async def _afollow(self, claim: Claim[Taken], deadline: float) -> None:
        """:meth:`_follow` on the running loop (its own future; cancelling it ends this wait only)."""
        while (refused := self._past_deadline(deadline)) is None:
            try:
                await self._grants.await_(claim, time.monotonic() + _LOOK, _Slice)
                return
            except _Slice:
                continue
        raise refused

    def _timed_out(self) -> LeaseLostError:
        lease = self._lease
        return LeaseLostError(
            f"no worker id was leased in namespace {lease.namespace!r} on {lease.store.label} within "
            f"{self._grant_seconds():g} s (the grant under way did not finish)"
        )

    def _lead(self, claim: Claim[Taken]) -> None:
        """Run a grant in this thread for ``claim`` and adopt it."""
        try:
            taken = drive(self.grant(), None)
            drive(self.settle(taken), None)
        except BaseException as exc:
            self._failed(claim, exc)
            raise
        self._grants.finish(claim, taken)

    async def _alead(self, claim: Claim[Taken]) -> None:
        """Run a grant on the loop for ``claim`` and adopt it (a cancellation ends the claim too)."""
        try:
            taken = await adrive(self.grant(), None)
            await adrive(self.settle(taken), None)
        except BaseException as exc:
            self._failed(claim, exc)
            raise
        self._grants.finish(claim, taken)

    def _failed(self, claim: Claim[Taken], exc: BaseException) -> None:
        # all leased, a clock behind the last holder's mark, a store refused: said once, in the log
        lease = self._lease
        if isinstance(exc, SeqIDError) and not isinstance(exc, Released):
            telemetry.record_refusal(exc, namespace=lease.namespace)
            log.warning(
                "no worker id leased in %r on %s: %s",
                lease.namespace,
                lease.store.label,
                exc,
                extra=lease.life.extra(error=type(exc).__name__),
            )
        self._grants.finish(claim, error=exc)

    def grant(self) -> Steps[Taken]:
        """A worker id granted, fenced and waited for (grants.py decides when it is safe), as steps
        (:mod:`.stores.steps`): a thread runs them on the store's blocking calls, a loop awaits them."""
        lease = self._lease
        life = lease.life
        run = life.run = GrantRun(
            Terms(
                namespace=lease.namespace,
                max_workers=lease.max_workers,
                ttl=lease.ttl,
                clock_tolerance=lease.clock_tolerance,
                store=lease.store,
                waits=lease.waits,
                monotonic=lease.monotonic,
                wall_ms=lease.wall_ms,
                releases=lambda: life.releases,
            )
        )
        with life.lock:
            life.granting += 1
        try:
            return (yield from run.steps())
        finally:
            with life.lock:
                life.granting -= 1
                life.granted_at, life.mark_wait = run.granted_at, run.mark_wait

    def settle(self, taken: Taken, stop: threading.Event | None = None) -> Steps[None]:
        """Adopt ``taken`` and start renewing it, where the lease's table takes it; else give it back,
        its mark unused (steps: a thread drives them, a loop awaits): a lease held already (a grant
        run beside the flight ended second), or one released since the grant began, which raises
        :class:`~.grants.Released` (for the renewal thread's grant, ``stop`` set, it ends quietly)."""
        lease = self._lease
        life = lease.life
        with life.lock:
            released = life.releases != taken.releases or (stop is not None and stop.is_set())
            since = clear_since(taken.grant, lease.wall_ms(), lease.ttl, lease.clock_tolerance)
            adopted = not released and life.adopt(taken, since, lease.ttl)
            if adopted:
                lease.renewer.start()
        if not adopted:
            yield from give_back(lease.namespace, lease.store, taken.grant, taken.token)
        if released and stop is None:
            raise released_error(lease.namespace)

    def lease_again(self, stop: threading.Event) -> None:
        """Lease a worker id again after the lease was lost (from the renewal thread).  Callers keep
        getting :class:`~seqid_orm.errors.LeaseLostError` meanwhile, not a wait; a grant that ends
        after the lease was released is given back."""
        claim = self._grants.lead(self._grant_seconds())
        if claim is None:  # a caller is leasing already
            return
        try:
            taken = drive(self.grant(), None)
            drive(self.settle(taken, stop), None)
        except BaseException as exc:
            self._grants.finish(claim, error=exc)
            if not isinstance(exc, SeqIDError):  # a bug surfaces as itself (in the renewal thread)
                raise
            # all taken, the store down: said, and tried again at the next renewal
            log.warning("leasing a worker id in %r again failed: %s", self._lease.namespace, exc)
            return
        self._grants.finish(claim, taken)

    def on_release(self) -> threading.Thread | None:
        """The lazy caller's grant thread, for release() to wait for (lock held)."""
        thread, self.thread = self.thread, None
        return thread
