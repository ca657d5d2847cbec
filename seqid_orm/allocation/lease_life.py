"""A lease's life: its states, the events that move it, what it holds, and the terms it was made with.

A :class:`~.leases.WorkerLease` is a façade over the pieces here, :mod:`.renewal` (one renewal, as
steps, and the renewal thread), :mod:`.grants` (one grant, as steps) and :mod:`.acquiring` (who
leads a grant and who waits).  Every state and what moves it, as :data:`TRANSITIONS` has them::

    state              event     next      sent by
    idle               begin     granting  a grant that starts (acquire(), aacquire(), a lazy first id)
    granting           begin     granting  a grant beside the flight's (on an event loop's own thread)
    fenced             begin     fenced    the same, while the flight's grant waits out its fence
    granting/fenced    fence     fenced    the grant, once the store said when its worker id is safe (or
                                           later: the previous holder's mark after a quarantine)
    idle/granting/
      fenced/lost      granted   held      a grant that ended, adopted
    granting/fenced    failed    idle      a grant that failed, or gave its worker id back
    held               expired   expired   the clock, once the lease's time ran out before a renewal (TIMED)
    held/expired       renewed   held      a renewal the store confirmed
    held               retry     held      a renewal the store did not answer, with time left
    expired            retry     lost      a renewal the store did not answer, out of time
    held/expired       lost      lost      a renewal refused, or unanswered past the lease's time
    lost               begin, fence, failed: lost (the renewal thread leases again; callers are refused meanwhile)
    (any)              released  idle      release()

What each state allows is :data:`STATES`' (a worker id of its own, renewing, stamping), beside it.  The
pairs :data:`IGNORED` names are refused on purpose, and what they carried is not applied: a grant that
ends while a lease is held already (a second grant run beside the flight) is given back; a renewal
answered after a release, or after the lease was lost and taken again, changes nothing.  Any other pair
is a bug, and :meth:`LeaseLife.move` raises :class:`UnknownMove` (h11's rule: an event the state does
not expect is an error, never dropped).  The move the clock makes (:data:`TIMED`) is taken before any
reading of the lease, or any other move, once its time has come.

Every change goes through :meth:`LeaseLife.move`, under the lease's lock, and only this module's
methods call it; no lock is held across a store's round trip, so reading the lease (a generator's
first id, a stats page) never waits behind a stalled store.  The log lines and the refusals' count
observe the moves (:data:`REPORTS`), after the lock is let go.  The timing every piece reads (the
renewal cadence, the validity's margin, the quarantine, the holder's own mark, the grant's bound) is
the lease's terms' (:class:`Timing`, :class:`Terms`).

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

__all__ = [
    "IGNORED",
    "REPORTS",
    "STATES",
    "TIMED",
    "TRANSITIONS",
    "Allows",
    "Event",
    "LeaseLife",
    "LeaseStats",
    "Move",
    "Renewal",
    "State",
    "Taken",
    "Terms",
    "Timing",
    "UnknownMove",
    "observed",
]

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


#: The pairs refused on purpose, each with why: what the event carried is no longer the lease's.
IGNORED: dict[tuple[State, Event], str] = {
    **{
        (s, e): "a grant begun or fenced as another ended: given back when it ends"
        for s in (_S.HELD, _S.EXPIRED)
        for e in (_E.BEGIN, _E.FENCE)
    },
    (_S.IDLE, _E.FENCE): "the lease was released while the grant was under way: it gives its worker id back",
    **{(s, _E.GRANTED): "a second grant (beside the flight): given back" for s in (_S.HELD, _S.EXPIRED)},
    **{
        (s, _E.FAILED): "a grant given back after a release, or beside a lease held"
        for s in (_S.IDLE, _S.HELD, _S.EXPIRED)
    },
    **{
        (s, e): "a renewal answered after a release, or after the lease was lost"
        for s in (_S.IDLE, _S.GRANTING, _S.FENCED, _S.LOST)
        for e in (_E.RENEWED, _E.RETRY, _E.LOST)
    },
}

#: The moves the clock makes: a state here takes its event once the lease's ``valid_until`` has passed.
TIMED: dict[State, Event] = {_S.HELD: _E.EXPIRED}


class UnknownMove(AssertionError):
    """An event in a state neither :data:`TRANSITIONS` nor :data:`IGNORED` lists: a bug in seqid."""


@dataclass(frozen=True)
class Allows:
    """What a state allows: a worker id of its own (to give back, to show), renewing it (and a
    ``valid_until`` kept), stamping ids with it."""

    own_id: bool
    renews: bool
    stamps: bool


#: Each state's rights, beside the moves: read wherever the code asks what a state allows.
STATES: dict[State, Allows] = {
    _S.IDLE: Allows(own_id=False, renews=False, stamps=False),
    _S.GRANTING: Allows(own_id=False, renews=False, stamps=False),
    _S.FENCED: Allows(own_id=False, renews=False, stamps=False),
    _S.HELD: Allows(own_id=True, renews=True, stamps=True),
    _S.EXPIRED: Allows(own_id=True, renews=True, stamps=False),
    _S.LOST: Allows(own_id=True, renews=False, stamps=False),
}


@dataclass(frozen=True)
class Move:
    """One move the table made (what :data:`REPORTS` observes)."""

    before: State
    event: Event
    after: State


#: What a move reports once the lock is let go: its log line (``%(name)s`` of the lease's fields and the
#: move's details) at its level, and whether it counts as a refusal in the telemetry (a lease lost).
REPORTS: dict[tuple[Event, State], tuple[int, str, bool]] = {
    (_E.GRANTED, _S.HELD): (logging.INFO, "leased worker id %(worker_id)s in %(namespace)r on %(store)s", False),
    (_E.RENEWED, _S.HELD): (logging.DEBUG, "renewed worker id %(worker_id)s in %(namespace)r", False),
    (_E.RETRY, _S.HELD): (
        logging.WARNING,
        "renewing worker id %(worker_id)s in %(namespace)r failed: %(error)s",
        False,
    ),
    **{
        (e, _S.LOST): (
            logging.ERROR,
            "lost the lease of worker id %(worker_id)s in %(namespace)r: its ids stop until a lease is held again",
            True,
        )
        for e in (_E.RETRY, _E.LOST)
    },
}


class Timing:
    """A lease's timing, each rule once: the terms of a worker lease (:class:`Terms`) and the migration
    lock have it, from their ``ttl`` and ``clock_tolerance``."""

    ttl: float
    clock_tolerance: float

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    @property
    def quarantine_ms(self) -> int:
        """How long a holder the store cannot rule out may still stamp a worker id: one ttl past its last
        renewal, and the clocks' tolerance (a takeover's, a new namespace's wait)."""
        return int((self.ttl + self.clock_tolerance) * 1000)

    def renewal_interval(self) -> float:
        """How often a held lease is renewed: a third of its ttl, so two renewals may fail before it ends."""
        return self.ttl / 3

    def valid_until(self, sent: float) -> float:
        """The monotonic time until which a lease renewed (or granted) by a request sent at ``sent`` may
        be used: the ttl less a margin, counted from the send (the store counts from a later instant)."""
        return sent + self.ttl * (1 - MARGIN)

    def next_renewal_in(self, outcome: Event, valid_until: float, now: float) -> float:
        """Seconds until the next renewal: :meth:`renewal_interval` after one that renewed, a tenth of the
        ttl after a lost lease (an attempt to lease again), and half the time left (a tenth of the ttl at
        most, 10 ms at least) after one the store did not answer."""
        if outcome is Event.RENEWED:
            return self.renewal_interval()
        if outcome is Event.LOST:
            return self.ttl / 10
        return max(0.01, min(self.ttl / 10, (valid_until - now) / 2))

    def own_mark_ms(self, wall_ms: int) -> int:
        """The latest Unix millisecond a holder may stamp before it renews again, at ``wall_ms``."""
        return wall_ms + self.ttl_ms

    def clear_since(self, grant: Grant, now_ms: int) -> int:
        """From which Unix millisecond a key stamped with ``grant``'s worker id cannot be another
        holder's (what :meth:`~seqid_orm.ids.snowflake.Snowflake.bind_column` checks a column against).

        After a quarantine longer than a takeover's one-ttl fence (a record lost, a namespace new),
        only from now: a holder the store forgot may have stamped until then.  Else past the previous
        holder's mark, and within the last ttl + tolerance only, so ids of an old configuration (worker
        ids configured before leases) are not taken for a live allocator.

        >>> t = Terms("ns", 8, 30.0, 5.0, 5.0, *[None] * 6)  # ttl 30 s, tolerance 5 s
        >>> t.clear_since(Grant(worker_id=3, mark_ms=1_000, wait_ms=0), now_ms=100_000)
        65000
        >>> t.clear_since(Grant(worker_id=3, mark_ms=90_000, wait_ms=0), 100_000)
        90001
        >>> t.clear_since(Grant(worker_id=3, mark_ms=0, wait_ms=35_000), 100_000)
        100000
        """
        if grant.wait_ms > self.ttl_ms:
            return now_ms
        return max(grant.mark_ms + 1, now_ms - self.quarantine_ms)


@dataclass(frozen=True)
class Terms(Timing):
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

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000

    def grant_seconds(self) -> float:
        """The longest a worker-id grant of this lease may take (:func:`~seqid_orm.calls.retry.grant_seconds`)."""
        return grant_seconds(self.timeout, self.ttl, self.clock_tolerance)

    def mark(self, at_least_ms: int = 0) -> int:
        """The mark a renewal records: the most the lease's user may stamp before it renews again
        (:meth:`own_mark_ms`), and never less than it has used or than ``at_least_ms``."""
        return max(at_least_ms, self.high_water(), self.own_mark_ms(self.wall_ms()))


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

    def move(self, event: Event) -> Move | None:
        """Take ``event`` as :data:`TRANSITIONS` says for the state (lock held), the clock's move
        (:data:`TIMED`) first where its time has come; ``None``, nothing changed, for a pair
        :data:`IGNORED` names; :class:`UnknownMove` for any other."""
        self._elapse()
        return self._take(event)

    def _take(self, event: Event) -> Move | None:
        before = self.state
        after = TRANSITIONS.get((before, event))
        if after is None:
            if (before, event) in IGNORED:
                return None
            raise UnknownMove(f"a lease {before.value} does not expect the event {event.value!r}")
        self.state = after
        if not STATES[after].renews:  # no validity outside the states that renew
            self.valid_until = float("-inf")
        return Move(before, event, after)

    def _elapse(self) -> None:
        """The clock's move (:data:`TIMED`), where the state has one and the lease's time has passed."""
        event = TIMED.get(self.state)
        if event is not None and self.terms.monotonic() >= self.valid_until:
            self._take(event)

    def report(self, move: Move | None, **detail: object) -> None:
        """What :data:`REPORTS` says of ``move``; called once the lock is let go (a log handler that
        waits never holds a reader of the lease)."""
        row = None if move is None else REPORTS.get((move.event, move.after))
        if row is None:
            return
        level, message, refusal = row
        error = detail.get("error")
        if refusal:
            error = self.lost_error()
            telemetry.record_refusal(error, namespace=self.terms.namespace)
        fields = {"worker_id": self.worker_id, "namespace": self.terms.namespace, "store": self.terms.label()}
        errors = {"error": type(error).__name__} if error is not None else {}
        extra = {k: v for k, v in detail.items() if k != "error"}
        log.log(level, message, {**fields, "error": error}, extra=self.extra(**extra, **errors))

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
        """The state now, the clock's move taken where its time has come (lock taken)."""
        with self.lock:
            self._elapse()
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
            allows = STATES[self.now()]
            if allows.stamps:
                assert self.worker_id is not None
                return Holding(self.worker_id, self.acquisitions, self.mark_ms, self.clear_since_ms)
            if allows.own_id:  # held past its time, or lost
                raise self.expired_error()
            return None

    def renewing(self) -> tuple[int, str, int, float] | None:
        """What a renewal sends and checks against (worker id, token, acquisition, valid until) while
        a worker id is held, expired or not; ``None`` where none is."""
        with self.lock:
            if not STATES[self.now()].renews or self.worker_id is None:
                return None
            return self.worker_id, self.token, self.acquisitions, self.valid_until

    def mark_for(self, acquisition: int) -> int | None:
        """The confirmed mark while ``acquisition`` is the lease held now; ``None`` once it is not."""
        with self.lock:
            ok = acquisition == self.acquisitions and STATES[self.now()].renews
            return self.mark_ms if ok else None

    def stats(self) -> LeaseStats:
        state, worker_id = self.now(), self.worker_id
        left = self.valid_until - self.terms.monotonic()
        return LeaseStats(
            namespace=self.terms.namespace,
            store=self.terms.label(),
            state=state.value,
            worker_id=worker_id if STATES[state].own_id else None,
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

    def ended(
        self, granted_at: float | None, mark_wait: float, taken: Taken | None, clear_since_ms: int
    ) -> Move | None:
        """A grant ended: ``taken`` made the lease held where the table takes it (not while one is
        held, nor after a release since it began): the move, for the caller to :meth:`report` once it
        lets the lock go; ``None`` where it was not (it failed, ``taken`` ``None``, or it is to be
        given back)."""
        with self.lock:
            self.granted_at, self.mark_wait = granted_at, mark_wait
            adopted = None
            if taken is not None and self.releases == taken.releases:
                adopted = self.move(Event.GRANTED)
            if adopted is None or taken is None:
                self.move(Event.FAILED)
                return None
            grant = taken.grant
            self.clear_since_ms = clear_since_ms  # from when a key carrying this worker id is foreign
            self.token = taken.token
            self.inherited_mark = grant.mark_ms
            self.worker_id = grant.worker_id
            self.mark_ms = taken.bound
            self.valid_until = self.terms.valid_until(taken.sent)
            self.acquisitions += 1
        return adopted

    def apply(self, renewal: Renewal, acquisition: int) -> bool:
        """A renewal of ``acquisition`` made the lease's; ``False`` where the lease was released, or
        lost and taken again, while the store answered: that answer changes nothing."""
        with self.lock:
            moved = self.move(renewal.outcome) if self.acquisitions == acquisition else None
            if moved is None:
                return False
            if renewal.outcome is Event.RETRY:
                self.renewal_failures += 1
            elif renewal.outcome is Event.RENEWED:
                # a renewal that went out earlier and answered later never pulls the deadline back
                self.valid_until = max(self.valid_until, renewal.valid_until)
                self.mark_ms = max(self.mark_ms, renewal.mark_ms)
                self.renewals += 1
                self.last_renewal = self.terms.monotonic() - renewal.sent
        self.report(moved, error=renewal.error, seconds=self.last_renewal, mark_ms=self.mark_ms)
        return True

    def release(self, used: int) -> tuple[int | None, str, int]:
        """Move to idle: the worker id and its token to give back where one is held (held, expired or
        lost; not one a grant under way has yet, which the grant gives back itself, nor the last one
        already given back), and the mark to leave (``used``, what its user really stamped, never below
        the mark it inherited: the next holder then waits only as long as it must)."""
        with self.lock:
            holds = STATES[self.state].own_id
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
