"""A lease's life: its states, the events that move it, what it holds, and the terms it was made with.

A :class:`~.leases.WorkerLease` is a façade over the pieces here, :mod:`.renewal` (one renewal, as
steps, and the renewal thread), :mod:`.grants` (one grant, as steps) and :mod:`.acquiring` (who
leads a grant and who waits).  Every state and what moves it, as :data:`TRANSITIONS` has them::

    state              event     next      sent by
    idle               begin     granting  a grant that starts (acquire(), aacquire(), a lazy first id)
    granting           fence     fenced    the grant, once the store said when its worker id is safe
    idle/granting/
      fenced/lost      granted   held      a grant that ended, adopted
    granting/fenced    failed    idle      a grant that failed, or gave its worker id back
    held               expired   expired   a reader that found the lease's time ran out before a renewal
    held/expired       renewed   held      a renewal the store confirmed
    held               retry     held      a renewal the store did not answer, with time left
    expired            retry     lost      a renewal the store did not answer, out of time
    held/expired       lost      lost      a renewal refused, or unanswered past the lease's time
    lost               begin, fence, failed: lost (the renewal thread leases again; callers are refused meanwhile)
    (any)              released  idle      release()

An event the table does not list for the state is refused, and what it carried is not applied: a
grant that ends while a lease is held already (a second grant run beside the flight) is given back;
a renewal answered after a release, or after the lease was lost and taken again, changes nothing.

Every change goes through :meth:`LeaseLife.move`, under the lease's lock, and only this module's
methods call it; no lock is held across a store's round trip, so reading the lease (a generator's
first id, a stats page) never waits behind a stalled store.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.ids` and
this package's ``telemetry`` and ``stores.base``.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..calls.retry import grant_seconds
from ..errors import AllocationError, LeaseLostError
from ..ids.snowflake import Holding
from . import telemetry
from .stores.base import Grant, LeaseStore

__all__ = ["TRANSITIONS", "Event", "LeaseLife", "LeaseStats", "Renewal", "State", "Taken", "Terms", "observed"]

log = logging.getLogger("seqid_orm.leases")

#: The share of the ttl a holder gives up, so that it stops before the store's expiry.
MARGIN = 0.1


class State(enum.Enum):
    """Where a lease is (see the module docstring)."""

    IDLE = "idle"
    GRANTING = "granting"
    FENCED = "fenced"
    HELD = "held"
    EXPIRED = "expired"
    LOST = "lost"


class Event(enum.Enum):
    """What moves a lease (see the module docstring); a renewal's outcome is one of the last three."""

    BEGIN = "begin"
    FENCE = "fence"
    GRANTED = "granted"
    FAILED = "failed"
    EXPIRED = "expired"
    RELEASED = "released"
    RENEWED = "renewed"
    RETRY = "retry"
    LOST = "lost"


_S, _E = State, Event
#: Every state and what moves it; a pair not listed is refused (not applied).
TRANSITIONS: dict[tuple[State, Event], State] = {
    (_S.IDLE, _E.BEGIN): _S.GRANTING,
    (_S.GRANTING, _E.BEGIN): _S.GRANTING,  # a grant beside the flight (a loop's own thread)
    (_S.FENCED, _E.BEGIN): _S.FENCED,
    (_S.LOST, _E.BEGIN): _S.LOST,
    (_S.GRANTING, _E.FENCE): _S.FENCED,
    (_S.FENCED, _E.FENCE): _S.FENCED,
    (_S.LOST, _E.FENCE): _S.LOST,
    **{(state, _E.GRANTED): _S.HELD for state in (_S.IDLE, _S.GRANTING, _S.FENCED, _S.LOST)},
    (_S.GRANTING, _E.FAILED): _S.IDLE,
    (_S.FENCED, _E.FAILED): _S.IDLE,
    (_S.LOST, _E.FAILED): _S.LOST,
    (_S.HELD, _E.EXPIRED): _S.EXPIRED,
    (_S.HELD, _E.RENEWED): _S.HELD,
    (_S.EXPIRED, _E.RENEWED): _S.HELD,
    (_S.HELD, _E.RETRY): _S.HELD,
    (_S.EXPIRED, _E.RETRY): _S.LOST,
    (_S.HELD, _E.LOST): _S.LOST,
    (_S.EXPIRED, _E.LOST): _S.LOST,
    **{(state, _E.RELEASED): _S.IDLE for state in State},
}


#: The states in which the lease has a worker id of its own (to stamp with, renew, or give back).
_WITH_ID = (State.HELD, State.EXPIRED, State.LOST)


def renewal_interval(ttl: float) -> float:
    """How often a held lease is renewed: a third of its ttl, so two renewals may fail before it ends."""
    return ttl / 3


def valid_until(sent: float, ttl: float) -> float:
    """The monotonic time until which a lease renewed (or granted) by a request sent at ``sent`` may be used."""
    return sent + ttl * (1 - MARGIN)


@dataclass(frozen=True)
class Terms:
    """What a lease was made with, read by every piece that acts on it (frozen: a Snowflake's
    ``bind`` makes new terms before the lease is first taken).

    ``store`` opens the lease store at its first use; ``monotonic`` (seconds) times the waits;
    ``wall_ns`` is the clock ids are stamped with; ``high_water`` the last Unix millisecond the
    lease's user has used; ``sleep`` the lease's own wait (a test's clock, or ``time.sleep``)."""

    namespace: str
    max_workers: int
    ttl: float
    clock_tolerance: float
    timeout: float
    store: Callable[[], LeaseStore]
    label: Callable[[], str]
    monotonic: Callable[[], float]
    wall_ns: Callable[[], int]
    high_water: Callable[[], int]
    sleep: Callable[[float], object]

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000

    def grant_seconds(self) -> float:
        """The longest a worker-id grant of this lease may take (:func:`~seqid_orm.calls.retry.grant_seconds`)."""
        return grant_seconds(self.timeout, self.ttl, self.clock_tolerance)


@dataclass(frozen=True)
class Taken:
    """A grant made, fenced and waited for, not yet adopted: the worker id's token, the bound left
    before the first id, and when the last renewal was sent (monotonic)."""

    grant: Grant
    token: str
    bound: int
    sent: float
    releases: int  # the lease's release count when the grant began: moved, the grant is given back


@dataclass(frozen=True)
class Renewal:
    """One renewal's outcome (``RENEWED``, ``RETRY`` or ``LOST``): when it was sent, the mark it asked
    for, until when the lease may be used now, and the store's error where it did not answer."""

    outcome: Event
    sent: float
    mark_ms: int
    valid_until: float
    error: AllocationError | None = None

    def next_in(self, ttl: float, now: float) -> float:
        """Seconds until the next renewal: a third of the ttl after one that renewed, a tenth after a
        lost lease (an attempt to lease again), and half the time left (a tenth of the ttl at most,
        10 ms at least) after one the store did not answer."""
        if self.outcome is Event.RENEWED:
            return renewal_interval(ttl)
        if self.outcome is Event.LOST:
            return ttl / 10
        return max(0.01, min(ttl / 10, (self.valid_until - now) / 2))


@dataclass(frozen=True)
class LeaseStats:
    """One :class:`~.leases.WorkerLease` at one moment (:meth:`~.leases.WorkerLease.stats`).

    ``state``: one of :class:`State`'s values (``"idle"``: not taken yet, or released; ``"lost"``:
    the renewal thread keeps trying to lease again).  ``expires_in``: seconds until the worker id
    may no longer be used unless renewed (``None`` unless held).  ``store`` is the store's label,
    password hidden.
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

    def __init__(self, terms: Terms) -> None:
        self.terms = terms
        self.lock = threading.RLock()
        # release() counts here and wakes a grant's waits: a grant that sees the count move gives its
        # worker id back (a lease released during its cold start leaves nothing taken or renewing)
        self.releases = 0
        self.released = threading.Condition(self.lock)
        self.state = State.IDLE
        self.fence_until: float | None = None  # when the grant under way may use its id, once known
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

    def move(self, event: Event) -> bool:
        """Take ``event`` where :data:`TRANSITIONS` lists it for the state (lock held); ``False``,
        nothing changed, where it does not."""
        after = TRANSITIONS.get((self.state, event))
        if after is None:
            return False
        self.state = after
        if after not in (State.HELD, State.EXPIRED):
            self.valid_until = float("-inf")
        return True

    def extra(self, **fields: object) -> dict[str, object]:
        """A log record's ``extra``: the lease's fields under ``seqid_`` names."""
        out: dict[str, object] = {
            "seqid_namespace": self.terms.namespace,
            "seqid_store": self.terms.label(),
            "seqid_worker_id": self.worker_id,
        }
        out.update({f"seqid_{k}": v for k, v in fields.items()})
        return out

    # --- reading it ------------------------------------------------------------------------

    def now(self) -> State:
        """The state now: a lease held whose time ran out moves to expired here (lock taken)."""
        with self.lock:
            if self.state is State.HELD and self.terms.monotonic() >= self.valid_until:
                self.move(Event.EXPIRED)
            return self.state

    def seen(self) -> tuple[State, int | None]:
        """The state now and the worker id where one is held with time left, read together."""
        with self.lock:
            state = self.now()
            return state, self.worker_id if state is State.HELD else None

    def live(self) -> bool:
        """Whether a worker id is held with time left (the one "held and live" test)."""
        return self.now() is State.HELD

    def fresh(self, acquisition: int) -> bool:
        """Whether ``acquisition`` is the lease held now, with time left (lock-free: read before each id)."""
        return acquisition == self.acquisitions and self.terms.monotonic() < self.valid_until

    def holding(self) -> Holding | None:
        """The worker id held and live with its acquisition and mark, read together; ``None`` while
        none is taken; :meth:`expired_error` once lost, or held past its time (no id is stamped then)."""
        with self.lock:
            state = self.now()
            if state is State.HELD:
                assert self.worker_id is not None
                return Holding(self.worker_id, self.acquisitions, self.mark_ms, self.clear_since_ms)
            if state in (State.EXPIRED, State.LOST):
                raise self.expired_error()
            return None

    def renewing(self) -> tuple[int, str, int, float] | None:
        """What a renewal sends and checks against (worker id, token, acquisition, valid until) while
        a worker id is held, expired or not; ``None`` where none is."""
        with self.lock:
            if self.state not in (State.HELD, State.EXPIRED) or self.worker_id is None:
                return None
            return self.worker_id, self.token, self.acquisitions, self.valid_until

    def mark_for(self, acquisition: int) -> int | None:
        """The confirmed mark while ``acquisition`` is the lease held now; ``None`` once it is not."""
        with self.lock:
            ok = acquisition == self.acquisitions and self.state in (State.HELD, State.EXPIRED)
            return self.mark_ms if ok else None

    def stats(self) -> LeaseStats:
        state, worker_id = self.now(), self.worker_id
        left = self.valid_until - self.terms.monotonic()
        return LeaseStats(
            namespace=self.terms.namespace,
            store=self.terms.label(),
            state=state.value,
            worker_id=worker_id if state in _WITH_ID else None,
            expires_in=left if state is State.HELD and left > 0 else None,
            mark_ms=self.mark_ms,
            acquisitions=self.acquisitions,
            renewals=self.renewals,
            renewal_failures=self.renewal_failures,
            last_renewal_seconds=self.last_renewal,
            mark_wait=self.mark_wait,
        )

    # --- moving it -------------------------------------------------------------------------

    def begin(self) -> None:
        """A grant starts: its fence is not known yet (a previous grant's is over)."""
        with self.lock:
            self.move(Event.BEGIN)
            self.fence_until = None

    def fenced(self, until: float) -> None:
        """The grant under way may use its worker id from ``until`` (monotonic) on."""
        with self.lock:
            self.move(Event.FENCE)
            self.fence_until = until

    def ended(self, granted_at: float | None, mark_wait: float, taken: Taken | None, clear_since_ms: int) -> bool:
        """A grant ended: ``taken`` made the lease held where the table takes it (not while one is
        held, nor after a release since it began); ``False`` where it was not (it failed, ``taken``
        ``None``, or it is to be given back)."""
        with self.lock:
            self.granted_at, self.mark_wait = granted_at, mark_wait
            if taken is None or self.releases != taken.releases or not self.move(Event.GRANTED):
                self.move(Event.FAILED)
                return False
            grant = taken.grant
            self.clear_since_ms = clear_since_ms  # from when a key carrying this worker id is foreign
            self.token = taken.token
            self.inherited_mark = grant.mark_ms
            self.worker_id = grant.worker_id
            self.mark_ms = taken.bound
            self.valid_until = valid_until(taken.sent, self.terms.ttl)
            self.acquisitions += 1
        log.info(
            "leased worker id %s in %r on %s",
            grant.worker_id,
            self.terms.namespace,
            self.terms.label(),
            extra=self.extra(worker_id=grant.worker_id, mark_wait=mark_wait),
        )
        return True

    def apply(self, renewal: Renewal, acquisition: int) -> bool:
        """A renewal of ``acquisition`` made the lease's; ``False`` where the lease was released, or
        lost and taken again, while the store answered: that answer changes nothing."""
        with self.lock:
            if self.acquisitions != acquisition or not self.move(renewal.outcome):
                return False
            reached = self.state
            if renewal.outcome is Event.RETRY:
                self.renewal_failures += 1
            elif renewal.outcome is Event.RENEWED:
                # a renewal that went out earlier and answered later never pulls the deadline back
                self.valid_until = max(self.valid_until, renewal.valid_until)
                self.mark_ms = max(self.mark_ms, renewal.mark_ms)
                self.renewals += 1
                self.last_renewal = self.terms.monotonic() - renewal.sent
        if reached is State.LOST:  # refused, or no answer past its time (expired, then retry)
            error = self.lost_error()
            telemetry.record_refusal(error, namespace=self.terms.namespace)
            log.error(
                "lost the lease of worker id %s in %r: its ids stop until a lease is held again",
                self.worker_id,
                self.terms.namespace,
                extra=self.extra(error=type(error).__name__),
            )
        elif renewal.outcome is Event.RETRY:
            log.warning(
                "renewing worker id %s in %r failed: %s",
                self.worker_id,
                self.terms.namespace,
                renewal.error,
                extra=self.extra(error=type(renewal.error).__name__),
            )
        elif renewal.outcome is Event.RENEWED:
            log.debug(
                "renewed worker id %s in %r",
                self.worker_id,
                self.terms.namespace,
                extra=self.extra(seconds=self.last_renewal, mark_ms=self.mark_ms),
            )
        return True

    def release(self, used: int) -> tuple[int | None, str, int]:
        """Move to idle: the worker id and its token to give back where one is held (held, expired or
        lost; not one a grant under way has yet, which the grant gives back itself, nor the last one
        already given back), and the mark to leave (``used``, what its user really stamped, never below
        the mark it inherited: the next holder then waits only as long as it must)."""
        with self.lock:
            holds = self.state in _WITH_ID
            self.releases += 1  # a grant under way gives its worker id back
            self.released.notify_all()
            self.move(Event.RELEASED)
            return self.worker_id if holds else None, self.token, max(self.inherited_mark, used)

    def expired_error(self) -> LeaseLostError:
        """The error for the worker id asked of a lease lost, or held past its time."""
        return LeaseLostError(
            f"the lease of worker id {self.worker_id} in namespace {self.terms.namespace!r} on {self.terms.label()} "
            "could not be renewed before it expired; no id is made until a lease is held again (the renewal "
            "thread keeps trying)"
        )

    def lost_error(self) -> LeaseLostError:
        """The error for ids asked while no worker id is held."""
        return LeaseLostError(
            f"the lease of worker id {self.worker_id} in namespace {self.terms.namespace!r} on {self.terms.label()} "
            "is not held (expired, taken over by another process, or lost by the store); no id is made until a "
            "lease is held again (the renewal thread keeps trying)"
        )


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
