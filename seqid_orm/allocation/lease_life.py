"""A lease's life: its states, the events that move it from one to the next, and what it holds.

A :class:`~.leases.WorkerLease` is a façade over the pieces here and in :mod:`.grants` (one grant, as
steps) and :mod:`.renewal` (one renewal, as steps).  Its states and what moves it, as
:data:`TRANSITIONS` has them::

    state      event      next     sent by
    idle       granted    held     a grant that ended, adopted (acquire(), aacquire(), a lazy first id)
    lost       granted    held     the renewal thread, leasing again after a loss
    held       renewed    held     a renewal the store confirmed
    held       retry      held     a renewal the store did not answer, with time left
    held       lost       lost     a renewal refused, or unanswered past the lease's time
    (any)      released   idle     release()

Two more states are reported (:attr:`LeaseLife.state`), not stored: **granting** (idle, a grant
under way) and **fenced** (its store answered, and the worker id is safe only from a known time on:
a takeover's or a cold start's fence).  An event that the table does not list for the state is
refused, and what it carried is not applied: a grant that ends while a lease is held already (a
second grant run beside the flight) is given back; a renewal answered after a release, or after the
lease was lost and taken again, changes nothing.

Every change goes through :meth:`LeaseLife.move`, under the lease's lock; no lock is held across a
store's round trip (:mod:`.renewal` says why), so reading the lease (a generator's first id, a stats
page) never waits behind a stalled store.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids` and this package's
``telemetry``, ``grants``, ``renewal``, ``stores.base`` and ``stores.steps``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from ..errors import LeaseLostError, WorkerIdNotReadyError
from ..ids.snowflake import Holding
from . import telemetry
from .grants import GrantRun, Taken
from .renewal import Outcome, Renewal, renew, valid_until
from .stores.base import LeaseStore
from .stores.steps import drive

__all__ = [
    "LATE",
    "TRANSITIONS",
    "Event",
    "LeaseLife",
    "LeaseStats",
    "LeaseWaits",
    "Renewer",
    "State",
    "not_ready",
    "observed",
]

log = logging.getLogger("seqid_orm.leases")

#: :meth:`LeaseLife.live_worker_id`: a lease held whose time ran out before its first use.
LATE = -1


class State(enum.Enum):
    """Where a lease is (see the module docstring)."""

    IDLE = "idle"
    GRANTING = "granting"
    FENCED = "fenced"
    HELD = "held"
    LOST = "lost"


class Event(enum.Enum):
    """What moves a lease (see the module docstring)."""

    GRANTED = "granted"
    RENEWED = "renewed"
    RETRY = "retry"
    LOST = "lost"
    RELEASED = "released"


#: The lease's stored states and what moves each; a pair not listed is refused (not applied).
TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.IDLE, Event.GRANTED): State.HELD,
    (State.LOST, Event.GRANTED): State.HELD,
    (State.HELD, Event.RENEWED): State.HELD,
    (State.HELD, Event.RETRY): State.HELD,
    (State.HELD, Event.LOST): State.LOST,
    (State.IDLE, Event.RELEASED): State.IDLE,
    (State.HELD, Event.RELEASED): State.IDLE,
    (State.LOST, Event.RELEASED): State.IDLE,
}

#: A renewal's outcome as the event it sends.
_RENEWAL_EVENTS = {Outcome.RENEWED: Event.RENEWED, Outcome.RETRY: Event.RETRY, Outcome.LOST: Event.LOST}


@dataclass(frozen=True)
class LeaseStats:
    """One :class:`~.leases.WorkerLease` at one moment (:meth:`~.leases.WorkerLease.stats`).

    ``state``: ``"idle"`` (not taken yet, or released), ``"granting"`` (a grant under way),
    ``"fenced"`` (granted, waiting out a fence whose end is known), ``"held"`` or ``"lost"`` (a
    renewal failed; the renewal thread keeps trying to lease again).  ``expires_in``: seconds until
    the worker id may no longer be used unless renewed (``None`` unless held).  ``store`` is the
    store's label, password hidden.
    """

    namespace: str
    store: str
    state: str
    worker_id: int | None
    expires_in: float | None
    mark_ms: int
    acquisitions: int
    renewals: int
    renewal_failures: int
    last_renewal_seconds: float | None
    mark_wait: float


class LeaseLife:
    """What one lease holds now, and the one place that changes it (:meth:`move`, lock held)."""

    def __init__(self, namespace: str, label: Callable[[], str], monotonic: Callable[[], float]) -> None:
        self.namespace = namespace
        self._label = label
        self._monotonic = monotonic
        self.lock = threading.RLock()
        # release() counts here and wakes a grant's waits: a grant that sees the count move gives its
        # worker id back (a lease released during its cold start leaves nothing taken or renewing)
        self.releases = 0
        self.released = threading.Condition(self.lock)
        self.stored = State.IDLE  # IDLE, HELD or LOST: the table's states
        self.granting = 0  # grants under way (reported as granting, or fenced)
        # The grant under way or last run (grants.py): when its fence ends, once the store has
        # answered, is what a caller that does not wait past its deadline tells its user.
        self.run: GrantRun | None = None
        self.worker_id: int | None = None
        self.token = ""
        self.inherited_mark = 0  # the previous holder's mark, which our own release never lowers
        self.valid_until = float("-inf")
        self.mark_ms = 0
        self.acquisitions = 0
        self.granted_at: float | None = None
        self.mark_wait = 0.0
        self.renewals = 0
        self.renewal_failures = 0
        self.last_renewal: float | None = None
        self.clear_since_ms = 0

    @property
    def state(self) -> State:
        """The stored state, or granting / fenced while idle with a grant under way."""
        if self.stored is not State.IDLE or not self.granting:
            return self.stored
        run = self.run
        return State.FENCED if run is not None and run.fence_until is not None else State.GRANTING

    def move(self, event: Event) -> bool:
        """Take ``event`` where :data:`TRANSITIONS` lists it for the stored state (lock held);
        ``False``, nothing changed, where it does not."""
        after = TRANSITIONS.get((self.stored, event))
        if after is None:
            return False
        self.stored = after
        if after is not State.HELD:
            self.valid_until = float("-inf")
        return True

    def extra(self, **fields: object) -> dict[str, object]:
        """A log record's ``extra``: the lease's fields under ``seqid_`` names."""
        out: dict[str, object] = {
            "seqid_namespace": self.namespace,
            "seqid_store": self._label(),
            "seqid_worker_id": self.worker_id,
        }
        out.update({f"seqid_{k}": v for k, v in fields.items()})
        return out

    # --- reading it ------------------------------------------------------------------------

    def holding(self) -> Holding | None:
        """The worker id held and live with its acquisition and mark, read together; ``None`` while
        idle; :meth:`expired_error` once lost, or held past its time (no id is stamped then)."""
        with self.lock:
            if self.stored is State.IDLE:
                return None
            if self.stored is not State.HELD or self._monotonic() >= self.valid_until:
                raise self.expired_error()
            assert self.worker_id is not None
            return Holding(self.worker_id, self.acquisitions, self.mark_ms, self.clear_since_ms)

    def live_worker_id(self) -> int | None:
        """The worker id held and live now; :data:`LATE` where one is held but its time ran out
        before it could be used (a grant slower than its ttl, on a loaded machine); ``None`` where
        none is."""
        with self.lock:
            if self.stored is not State.HELD or self.worker_id is None:
                return None
            return self.worker_id if self._monotonic() < self.valid_until else LATE

    def stats(self) -> LeaseStats:
        state, worker_id = self.state, self.worker_id
        left = self.valid_until - self._monotonic()
        return LeaseStats(
            namespace=self.namespace,
            store=self._label(),
            state=state.value,
            worker_id=worker_id if state in (State.HELD, State.LOST) else None,
            expires_in=left if state is State.HELD and left > 0 else None,
            mark_ms=self.mark_ms,
            acquisitions=self.acquisitions,
            renewals=self.renewals,
            renewal_failures=self.renewal_failures,
            last_renewal_seconds=self.last_renewal,
            mark_wait=self.mark_wait,
        )

    # --- moving it -------------------------------------------------------------------------

    def adopt(self, taken: Taken, clear_since_ms: int, ttl: float) -> bool:
        """Make ``taken`` the lease held, where the table takes it (lock held): not while one is held
        (a grant run beside the flight ended second), not after a release since it began."""
        if self.releases != taken.releases or not self.move(Event.GRANTED):
            return False
        grant = taken.grant
        self.clear_since_ms = clear_since_ms  # from when a key carrying this worker id is foreign
        self.token = taken.token
        self.inherited_mark = grant.mark_ms
        self.worker_id = grant.worker_id
        self.mark_ms = taken.bound
        self.valid_until = valid_until(taken.sent, ttl)
        self.acquisitions += 1
        log.info(
            "leased worker id %s in %r on %s",
            grant.worker_id,
            self.namespace,
            self._label(),
            extra=self.extra(worker_id=grant.worker_id, mark_wait=self.mark_wait),
        )
        return True

    def apply(self, renewal: Renewal, acquisition: int) -> bool:
        """A renewal of ``acquisition`` made the lease's (lock held); ``False`` where the lease was
        released, or lost and taken again, while the store answered: that answer changes nothing."""
        if self.acquisitions != acquisition or self.stored is not State.HELD:
            return False
        self.move(_RENEWAL_EVENTS[renewal.outcome])
        if renewal.outcome is Outcome.RETRY:
            self.renewal_failures += 1
            log.warning(
                "renewing worker id %s in %r failed: %s",
                self.worker_id,
                self.namespace,
                renewal.error,
                extra=self.extra(error=type(renewal.error).__name__),
            )
        elif renewal.outcome is Outcome.RENEWED:
            # a renewal that went out earlier and answered later never pulls the deadline back
            self.valid_until = max(self.valid_until, renewal.valid_until)
            self.mark_ms = max(self.mark_ms, renewal.mark_ms)
            self.renewals += 1
            self.last_renewal = self._monotonic() - renewal.sent
            log.debug(
                "renewed worker id %s in %r on %s",
                self.worker_id,
                self.namespace,
                self._label(),
                extra=self.extra(seconds=self.last_renewal, mark_ms=self.mark_ms),
            )
        elif renewal.outcome is Outcome.LOST:
            error = self.lost_error()
            telemetry.record_refusal(error, namespace=self.namespace)
            log.error(
                "lost the lease of worker id %s in %r on %s: its ids stop until a lease is held again",
                self.worker_id,
                self.namespace,
                self._label(),
                extra=self.extra(error=type(error).__name__),
            )
        return True

    def expire(self, acquisition: int) -> None:
        """The lease of ``acquisition`` lost without an answer (lock held): its time ran out before
        its first use, and the store could not be asked to renew it."""
        if self.acquisitions == acquisition:
            self.move(Event.LOST)

    def release(self) -> tuple[State, int | None, str]:
        """Move to idle (lock held): the state it left, the worker id and its token to give back."""
        left = self.stored
        self.releases += 1  # a grant under way gives its worker id back
        self.released.notify_all()
        self.move(Event.RELEASED)
        return left, self.worker_id, self.token

    def expired_error(self) -> LeaseLostError:
        """The error for the worker id asked of a lease lost, or held past its time."""
        return LeaseLostError(
            f"the lease of worker id {self.worker_id} in namespace {self.namespace!r} on {self._label()} "
            "could not be renewed before it expired; no id is made until a lease is held again (the renewal "
            "thread keeps trying)"
        )

    def lost_error(self) -> LeaseLostError:
        """The error for ids asked while no worker id is held."""
        return LeaseLostError(
            f"the lease of worker id {self.worker_id} in namespace {self.namespace!r} on {self._label()} "
            "is not held (expired, taken over by another process, or lost by the store); no id is made until a "
            "lease is held again (the renewal thread keeps trying)"
        )


def not_ready(
    namespace: str, label: str, timeout: float, fence: float | None, now: float, wall_ns: int
) -> WorkerIdNotReadyError:
    """The refusal of a caller that will not wait past ``timeout`` for a grant whose fence ends at
    ``fence`` (monotonic; ``None``: not known yet)."""
    if fence is None or fence <= now:  # unknown, or over with the grant's last steps under way
        return WorkerIdNotReadyError(
            f"no worker id was leased in namespace {namespace!r} on {label} within "
            f"timeout={timeout:g} s; the grant under way goes on in the background"
        )
    safe_in = max(0.0, fence - now)
    at = time.strftime("%H:%M:%S", time.gmtime(wall_ns / 1e9 + safe_in))
    return WorkerIdNotReadyError(
        f"the worker id leased in namespace {namespace!r} on {label} is safe to use in "
        f"{safe_in:.1f} s (at {at} UTC): a holder the store cannot rule out may stamp it until then (a "
        "new namespace's cold start, a takeover); a first id waits at most timeout="
        f"{timeout:g} s. The lease stays taken meanwhile. Take it at start-up (lease.acquire(), "
        "await lease.aacquire(), await snowflake.aprefetch()), which waits, or pass first_id_waits=True",
        safe_in=safe_in,
    )


class LeaseWaits:
    """A lease's own sleep (a test's clock, or ``time.sleep``; a Snowflake's ``bind`` may set it after
    construction, so it is read at each wait) as a step target: a thread calls it, a loop awaits
    ``asyncio.sleep`` instead (or the test's clock, which does not block)."""

    def __init__(self, life: LeaseLife, sleep: Callable[[float], object]) -> None:
        self._life = life
        self.sleep_with = sleep

    def sleep(self, seconds: float, releases: int) -> None:
        if self.sleep_with is not time.sleep:
            self.sleep_with(seconds)
            return
        life = self._life
        with life.released:  # release() ends the wait at once (then the grant gives its id back)
            life.released.wait_for(lambda: life.releases != releases, seconds)

    async def asleep(self, seconds: float, releases: int) -> None:
        if self.sleep_with is time.sleep:
            await asyncio.sleep(seconds)  # a release() meanwhile is seen after it
        else:
            self.sleep_with(seconds)


class Renewing(Protocol):
    """What the renewal thread asks of its lease (:class:`~.leases.WorkerLease`)."""

    life: LeaseLife
    namespace: str
    ttl: float
    high_water: Callable[[], int]

    @property
    def store(self) -> LeaseStore: ...

    def wall_ms(self) -> int: ...

    def monotonic(self) -> float: ...

    def lease_again(self, stop: threading.Event) -> None: ...


class Renewer:
    """A lease's renewal thread: a renewal every ``ttl / 3`` (:func:`~.renewal.renew`, its outcome made
    the lease's by :meth:`LeaseLife.apply`), sooner after one the store did not answer; once the
    lease is lost, an attempt to lease again instead.  :meth:`renew` is also what a generator calls
    when its clock passes the confirmed mark (:meth:`~.leases.WorkerLease.extend_mark`)."""

    def __init__(self, lease: Renewing) -> None:
        self._lease = lease
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (lock held), unless one is running (a lease lost and taken again)."""
        if self.thread is not None and self.thread.is_alive() and not self.stop.is_set():
            return
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(self.stop,), daemon=True, name="seqid-lease")
        self.thread.start()

    def halt(self) -> threading.Thread | None:
        """Stop the thread (lock held); the thread, for the caller to join outside the lock."""
        self.stop.set()
        thread, self.thread = self.thread, None
        return thread

    def _loop(self, stop: threading.Event) -> None:
        interval = self._lease.ttl / 3
        while not stop.wait(interval):
            interval = self.once(stop)

    def once(self, stop: threading.Event) -> float:
        """One renewal (or, once lost, one attempt to lease again); the seconds until the next."""
        lease = self._lease
        if lease.life.stored is State.LOST:
            lease.lease_again(stop)
            return lease.ttl / 3
        renewal = self.renew(0, stop)
        if renewal is None:
            return lease.ttl / 3  # released meanwhile, or not held
        return renewal.next_in(lease.ttl, lease.monotonic())

    def renew(self, at_least_ms: int, stop: threading.Event | None = None) -> Renewal | None:
        """Renew the lease held now, recording a mark of at least ``at_least_ms`` (and of what its user
        may stamp before the next renewal); the renewal as applied, or ``None`` where no lease is held
        (or it was released, or taken again, while the store answered: that answer is not applied).
        No lock is held across the round trip: a release meanwhile is the store's to order (the
        token it gives back is the one this renewal carries, so whichever comes second is refused)."""
        lease = self._lease
        life = lease.life
        with life.lock:
            if (stop is not None and stop.is_set()) or life.stored is not State.HELD or life.worker_id is None:
                return None
            worker_id, token, acquisition, held_until = life.worker_id, life.token, life.acquisitions, life.valid_until
        # the most its user may stamp before renewing again
        mark = max(at_least_ms, lease.high_water(), lease.wall_ms() + int(lease.ttl * 1000))
        steps = renew(lease.store, lease.namespace, worker_id, token, lease.ttl, mark, held_until, lease.monotonic)
        renewal = drive(steps, None)
        with life.lock:
            return renewal if life.apply(renewal, acquisition) else None


def observed(leases: Iterable[LeaseStats]) -> Iterator[tuple[str, float, dict[str, str | int]]]:
    """What :mod:`.telemetry` reports of the leases of this process: each held one's time left, and
    how many are held per namespace and store (one namespace on two stores is two namespaces)."""
    held: dict[tuple[str, str], int] = {}
    for stats in leases:
        key = (stats.namespace, stats.store)
        held.setdefault(key, 0)
        if stats.expires_in is not None and stats.worker_id is not None:
            held[key] += 1
            labels: dict[str, str | int] = {
                "seqid.namespace": stats.namespace,
                "seqid.store": stats.store,
                "seqid.worker_id": stats.worker_id,
            }
            yield "seqid.lease.time_left", stats.expires_in, labels
    for (namespace, store), count in held.items():
        yield "seqid.leases.held", count, {"seqid.namespace": namespace, "seqid.store": store}
