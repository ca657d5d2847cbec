"""Taking a lease: what a caller that asks for the worker id does, as one table, and its two drivers.

However many threads and tasks ask at once, one grant runs (:class:`~.flight.Flight`: a
namespace's cold start costs one worker id and one wait), led by the first caller; the others
follow it.  What each caller does is a pure function of what it sees, :func:`choose`:

==========================  =========  ======  ====================  =====================================
the lease                   the grant  waits   the caller            what it does (:class:`Act`)
==========================  =========  ======  ====================  =====================================
held, with time left        (any)      (any)   (any)                 RETURN the worker id
expired (its time ran out)  (any)      (any)   (any)                 RENEW_LATE, then choose again
not held                    not asked  (any)   (any)                 JOIN the flight, then choose again
(any)                       leads      yes     (any)                 LEAD: run the grant here
(any)                       leads      no      (any)                 LEAD_IN_THREAD, then follow it
(any)                       follows    yes     on a loop's thread    GRANT_BESIDE the flight (its leader
                                                                     may be a task of this very loop)
(any)                       follows    yes     a thread, a task      WAIT for the grant to end
(any)                       follows    no      led on this loop,     REFUSE_ON_LOOP at once (it cannot
                                               from its thread       go on while this thread waits)
(any)                       follows    no      (any)                 REFUSE where the caller's deadline
                                                                     passed, or comes before the fence
(any)                       follows    no      (any)                 else FOLLOW until the deadline
==========================  =========  ======  ====================  =====================================

A grant that ends is adopted where the lease's table takes it (:meth:`~.lease_life.LeaseLife.ended`)
and renewed from then on; one that ends second, or after a release, gives its worker id back.  The
renewal thread leases again after a loss with the same grant (:meth:`Acquirer.lease_again`).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's
``telemetry``, ``flight``, ``grants``, ``lease_life`` and ``renewal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..calls.retry import Deadline
from ..calls.steps import Call, Steps, adrive, drive
from ..errors import LeaseLostError, SeqIDError, WorkerIdNotReadyError
from . import telemetry
from .flight import Abandoned, Claim, Flight, running_loop
from .grants import GrantRun, Released, give_back, released_error
from .lease_life import LeaseLife, State, Taken, log
from .renewal import Renewer

__all__ = ["ACTS", "Acquirer", "Act", "Ask", "Caller", "LeaseWaits", "choose"]


class Caller(enum.Enum):
    """Where the caller runs: a thread, an event loop's own thread (a synchronous call there, such
    as an AsyncSession flush's column default), or a task awaiting ``aacquire``."""

    THREAD = "thread"
    LOOP_THREAD = "loop thread"
    TASK = "task"


class Act(enum.Enum):
    """What a caller does next (see the module docstring's table)."""

    RETURN = "return the worker id held"
    RENEW_LATE = "renew a lease whose time ran out before its first use"
    JOIN = "join the flight"
    LEAD = "lead the grant"
    LEAD_IN_THREAD = "lead the grant in a thread of its own"
    GRANT_BESIDE = "grant beside the flight"
    WAIT = "wait for the grant"
    FOLLOW = "follow the grant until the caller's deadline"
    REFUSE = "refuse: not ready within the caller's deadline"
    REFUSE_ON_LOOP = "refuse: led by a task of this loop"


@dataclass(frozen=True)
class Ask:
    """What a caller sees: the lease's state, its role in the flight (``None``: not joined, else
    whether it leads), whether it waits out a fence, where it runs, whether the grant's leader is
    its own loop, when the fence ends (``None``: not known yet), the time and its deadline."""

    state: State
    leads: bool | None
    waits: bool
    caller: Caller
    leader_here: bool = False
    fence: float | None = None
    now: float = 0.0
    deadline: float = float("inf")


def choose(ask: Ask) -> Act:
    """The module docstring's table, read top to bottom."""
    if ask.leads is None:
        if ask.state is State.HELD:
            return Act.RETURN
        return Act.RENEW_LATE if ask.state is State.EXPIRED else Act.JOIN
    if ask.leads:
        return Act.LEAD if ask.waits else Act.LEAD_IN_THREAD
    if ask.waits:
        return Act.GRANT_BESIDE if ask.caller is Caller.LOOP_THREAD else Act.WAIT
    if ask.caller is Caller.LOOP_THREAD and ask.leader_here:
        return Act.REFUSE_ON_LOOP
    if ask.now >= ask.deadline or (ask.fence is not None and ask.fence > ask.deadline):
        return Act.REFUSE
    return Act.FOLLOW


class LeaseWaits:
    """A lease's own sleep (:attr:`~.lease_life.Terms.sleep`) as a step target: a thread calls it (a
    release wakes it at once), a loop awaits ``asyncio.sleep`` instead (or the test's clock)."""

    def __init__(self, life: LeaseLife) -> None:
        self._life = life

    def sleep(self, seconds: float, releases: int) -> None:
        life = self._life
        if life.terms.sleep is not time.sleep:
            life.terms.sleep(seconds)
            return
        with life.released:  # release() ends the wait at once (then the grant gives its id back)
            life.released.wait_for(lambda: life.releases != releases, seconds)

    async def asleep(self, seconds: float, releases: int) -> None:
        if self._life.terms.sleep is time.sleep:
            await asyncio.sleep(seconds)  # a release() meanwhile is seen after it
        else:
            self._life.terms.sleep(seconds)


@dataclass
class _Turn:
    """One caller's way through the table: what it waits for, where it runs, its deadline, and the claim
    it joined (``leads``: ``None`` until it joins, then whether it leads)."""

    waits: bool
    caller: Caller
    deadline: Deadline
    claim: Claim[Taken] | None = None
    leads: bool | None = None


class Acquirer:
    """The grants of one lease (its life, and the renewer it starts): see the module docstring."""

    def __init__(self, life: LeaseLife) -> None:
        self.life = life
        self.terms = life.terms
        self.renewer = Renewer(life, self.lease_again)
        self.waits = LeaseWaits(life)
        self._grants: Flight[Taken] = Flight()
        self.thread: threading.Thread | None = None  # a lazy caller's grant (LEAD_IN_THREAD)

    def _ask(
        self, claim: Claim[Taken] | None, leads: bool | None, waits: bool, caller: Caller, deadline: float
    ) -> tuple[Ask, int | None]:
        """What the caller sees now, and the worker id held where the lease is held (read together)."""
        state, worker_id = self.life.seen()
        return Ask(
            state,
            leads,
            waits,
            caller,
            leader_here=claim is not None and claim.owner is running_loop(),
            fence=self.life.fence_until,
            now=self.terms.monotonic(),
            deadline=deadline,
        ), worker_id

    def _deadline(self, waits: bool) -> Deadline:
        """The call's one deadline, handed to every store call beneath it: ``timeout`` for a caller
        that will not wait out a fence, else the grant's own bound."""
        t = self.terms
        return Deadline.after(t.grant_seconds() if waits else t.timeout, t.monotonic)

    def acquire(self, waits: bool) -> int:
        """The worker id held and live, granted first where none is (the table's steps, on this thread)."""
        caller = Caller.LOOP_THREAD if running_loop() is not None else Caller.THREAD
        return drive(self._acquiring(waits, caller), None)

    async def aacquire(self, waits: bool) -> int:
        """:meth:`acquire` on the running loop (the same steps, awaited)."""
        return await adrive(self._acquiring(waits, Caller.TASK), None)

    def _acquiring(self, waits: bool, caller: Caller) -> Steps[int]:
        """Read the table (:func:`choose`) and carry out its act (:data:`ACTS`) until one returns the
        worker id: one copy for both drivers, which only differ in how a step's call is made."""
        turn = _Turn(waits, caller, self._deadline(waits))
        while True:
            ask, held = self._ask(turn.claim, turn.leads, waits, caller, turn.deadline.end)
            act = choose(ask)
            effect, same_turn = ACTS[act]
            with contextlib.suppress(Abandoned):  # its leader gave the claim up: lead or follow anew
                worker_id = yield from effect(self, turn, held)
                if worker_id is not None:
                    return worker_id
            if not same_turn:
                turn.claim, turn.leads = None, None

    # --- the acts' effects (ACTS), each once for both drivers --------------------------------

    def _return(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        yield from ()  # no step: the worker id held (None: read again)
        return held

    def _renew_late(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        yield Call(self.renewer.renew, (0, None, turn.deadline))  # held again, or lost: granted again
        return None

    def _join(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        yield from ()
        turn.claim, turn.leads = self._grants.join(self.terms.grant_seconds())
        return None

    def _lead_here(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        assert turn.claim is not None
        yield from self._lead(turn.claim, turn.deadline)
        return None

    def _hand_to_thread(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        # a thread of its own leads, not a task: a short asyncio.run() that ends before the
        # fence would cancel a task's grant, and every such run would start one again
        yield from ()
        assert turn.claim is not None
        self._lead_in_thread(turn.claim)
        turn.leads = False
        return None

    def _grant_beside(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        yield from self._take(turn.deadline)  # whichever grant ends second is given back (_take)
        return None

    def _wait(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        """Wait for the grant within its own bound."""
        assert turn.claim is not None
        yield Call(self._grants.follow, (turn.claim, turn.claim.deadline, self._timed_out))
        return None

    def _follow_until(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        """Follow the grant until the caller's deadline, refused as soon as the table says so (the fence is
        seen to end after the deadline)."""
        claim, deadline = turn.claim, turn.deadline
        assert claim is not None
        until = time.monotonic() + max(0.0, deadline.left())

        def refused() -> BaseException | None:
            ask, _ = self._ask(claim, False, False, Caller.THREAD, deadline.end)
            return self._refused() if choose(ask) is Act.REFUSE else None

        yield Call(self._grants.follow, (claim, until, self._refused, refused))
        return None

    def _refuse(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        yield from ()
        raise self._refused()

    def _refuse_on_loop(self, turn: _Turn, held: int | None) -> Steps[int | None]:
        yield from ()
        raise self._refused_on_loop()

    def _refused_on_loop(self) -> WorkerIdNotReadyError:
        return WorkerIdNotReadyError(
            f"a worker id in namespace {self.terms.namespace!r} is being leased by a task of this event loop, which "
            "cannot go on while a synchronous call (an AsyncSession flush's column default) waits on the loop's "
            "thread: await snowflake.aprefetch() or lease.aacquire() before the flush"
        )

    def _refused(self) -> WorkerIdNotReadyError:
        """The typed refusal of a caller that will not wait past its deadline (what it says of the
        fence: its end where the store has told it)."""
        t = self.terms
        fence, now = self.life.fence_until, t.monotonic()
        if fence is None or fence <= now:  # unknown, or over with the grant's last steps under way
            return WorkerIdNotReadyError(
                f"no worker id was leased in namespace {t.namespace!r} on {t.label()} within "
                f"timeout={t.timeout:g} s; the grant under way goes on in the background"
            )
        safe_in = max(0.0, fence - now)
        at = time.strftime("%H:%M:%S", time.gmtime(t.wall_ns() / 1e9 + safe_in))
        return WorkerIdNotReadyError(
            f"the worker id leased in namespace {t.namespace!r} on {t.label()} is safe to use in "
            f"{safe_in:.1f} s (at {at} UTC): a holder the store cannot rule out may stamp it until then (a "
            "new namespace's cold start, a takeover); a first id waits at most timeout="
            f"{t.timeout:g} s. The lease stays taken meanwhile. Take it at start-up (lease.acquire(), "
            "await lease.aacquire(), await snowflake.aprefetch()), which waits, or pass first_id_waits=True",
            safe_in=safe_in,
        )

    def _timed_out(self) -> LeaseLostError:
        t = self.terms
        return LeaseLostError(
            f"no worker id was leased in namespace {t.namespace!r} on {t.label()} within "
            f"{t.grant_seconds():g} s (the grant under way did not finish)"
        )

    def _lead_in_thread(self, claim: Claim[Taken]) -> None:
        """Hand ``claim`` to a thread of its own that runs the grant (a lazy caller will not wait out
        its fence; the grant goes on, renewing, and the worker id is held when it ends)."""

        def lead() -> None:
            # its followers get the error (_failed logged it); its deadline is the grant's own bound
            with contextlib.suppress(Exception):
                drive(self._lead(claim, self._deadline(True)), None)

        worker = threading.Thread(target=lead, name=f"seqid-lease-grant-{self.terms.namespace}", daemon=True)
        self.thread = worker  # release() waits for it
        self._grants.hand_over(claim, worker)

    def _lead(self, claim: Claim[Taken], deadline: Deadline) -> Steps[None]:
        """Run a grant for ``claim`` and adopt it (an error, a cancellation included, ends the claim too)."""
        try:
            taken = yield from self._take(deadline)
        except BaseException as exc:
            self._failed(claim, exc)
            raise
        self._grants.finish(claim, taken)

    def _failed(self, claim: Claim[Taken], exc: BaseException) -> None:
        # all leased, a clock behind the last holder's mark, a store refused: said once, in the log
        if isinstance(exc, SeqIDError) and not isinstance(exc, Released):
            telemetry.record_refusal(exc, namespace=self.terms.namespace)
            log.warning(
                "no worker id leased in %r on %s: %s",
                self.terms.namespace,
                self.terms.label(),
                exc,
                extra=self.life.extra(error=type(exc).__name__),
            )
        self._grants.finish(claim, error=exc)

    def _take(self, deadline: Deadline, stop: threading.Event | None = None) -> Steps[Taken]:
        """A worker id granted, fenced and waited for (grants.py decides when it is safe), then adopted
        and renewed where the lease's table takes it; else given back, its mark unused: a lease held
        already (a grant run beside the flight ended second), or one released since the grant began,
        which raises :class:`~.grants.Released` (for the renewal thread's grant, ``stop`` set, it ends
        quietly).  Steps: a thread runs them on the store's blocking calls, a loop awaits them."""
        life, t = self.life, self.terms
        life.begin()
        run = GrantRun(t, self.waits, lambda: life.releases, life.fenced, deadline)
        try:
            taken = yield from run.steps()
        except BaseException:
            life.ended(run.granted_at, run.mark_wait, None, 0)
            raise
        released = life.releases != taken.releases or (stop is not None and stop.is_set())
        since = t.clear_since(taken.grant, t.wall_ms())
        with life.lock:  # adopted and renewing at once: a release meanwhile stops both
            adopted = life.ended(run.granted_at, run.mark_wait, None if released else taken, since)
            if adopted:
                self.renewer.start()
        life.report(adopted, mark_wait=run.mark_wait)
        if not adopted:
            yield from give_back(t.namespace, run.store, taken.grant, taken.token, deadline)
        if released and stop is None:
            raise released_error(t.namespace)
        return taken

    def lease_again(self, stop: threading.Event) -> None:
        """Lease a worker id again after the lease was lost (from the renewal thread).  Callers keep
        getting :class:`~seqid_orm.errors.LeaseLostError` meanwhile, not a wait; a grant that ends
        after the lease was released is given back."""
        claim = self._grants.lead(self.terms.grant_seconds())
        if claim is None:  # a caller is leasing already
            return
        try:
            taken = drive(self._take(self._deadline(True), stop), None)
        except BaseException as exc:
            self._grants.finish(claim, error=exc)
            if not isinstance(exc, SeqIDError):  # a bug surfaces as itself (in the renewal thread)
                raise
            # all taken, the store down: said, and tried again at the next renewal
            log.warning("leasing a worker id in %r again failed: %s", self.terms.namespace, exc)
            return
        self._grants.finish(claim, taken)

    def halt(self) -> list[threading.Thread]:
        """Stop renewing and forget the lazy caller's grant thread: the threads for release() to join."""
        thread, self.thread = self.thread, None
        return [t for t in (self.renewer.halt(), thread) if t is not None]


_Effect = Callable[[Acquirer, _Turn, "int | None"], Steps["int | None"]]

#: What each act does, once for both drivers (:meth:`Acquirer._acquiring`), and whether the caller then
#: chooses again within the same turn (its claim kept: it joined, or handed the lead to a thread) or
#: anew: the module docstring's table, column by column.
ACTS: dict[Act, tuple[_Effect, bool]] = {
    Act.RETURN: (Acquirer._return, False),
    Act.RENEW_LATE: (Acquirer._renew_late, False),
    Act.JOIN: (Acquirer._join, True),
    Act.LEAD: (Acquirer._lead_here, False),
    Act.LEAD_IN_THREAD: (Acquirer._hand_to_thread, True),
    Act.GRANT_BESIDE: (Acquirer._grant_beside, False),
    Act.WAIT: (Acquirer._wait, False),
    Act.FOLLOW: (Acquirer._follow_until, False),
    Act.REFUSE: (Acquirer._refuse, False),
    Act.REFUSE_ON_LOOP: (Acquirer._refuse_on_loop, False),
}
