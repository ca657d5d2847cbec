"""Worker ids leased from a shared store instead of configured by hand.

A Snowflake id is unique only while no two live generators share a worker id.  Configured ids
collide when containers are copied, derived ids (from an IP or a MAC) collide in Kubernetes,
and "one new id per start" runs out.  A :class:`WorkerLease` takes a free worker id from a SQL
table or Redis for a time-to-live, renews it from a daemon thread every ``ttl / 3`` and gives it
back on exit; an expired lease may be taken over::

    with WorkerLease("postgresql+psycopg://app@db/app", namespace="orders-api", max_workers=1024) as lease:
        lease.worker_id  # an int in range(1024), held by this process alone

    gen = Snowflake(worker_id=WorkerLease("redis://127.0.0.1:6379/0", namespace="orders-api"))  # leases at its first id

Rules that keep ids unique:

* **Expiry by the store's clock**, the one clock all nodes share (the database's ``now``,
  Redis's ``PX``).  The holder counts its own deadline from the moment it *sent* the renewal,
  minus a margin, so it always stops before the store lets anyone else in.
* **A lease that cannot be renewed stops its generator** (:class:`~seqid_orm.errors.LeaseLostError`)
  before it expires, instead of risking duplicates; the renewal thread keeps trying and the
  generator resumes once it holds a lease again, perhaps for another worker id.
* **A fence by time, not by a check that can be paused past.**  Every renewal records in the
  store a high-water mark ahead of the clock (its clock plus the ttl: the last Unix millisecond
  this holder may stamp until it renews again), and a leased generator never stamps an id past
  the mark the store confirmed, whatever its clock says: a clock stepped forward makes it renew
  (and record the higher mark) before it goes on.  A new holder of that worker id makes no id
  until its own clock has passed the mark: it waits up to ``clock_tolerance`` seconds, else gives
  the id back and raises :class:`~seqid_orm.errors.ClockMovedBackwardsError`.  So a holder that
  was frozen (SIGSTOP, a GC pause, a VM migration) past its ttl and resumes can only stamp
  milliseconds the next holder never stamps: its next clock reading is past its mark, and the
  renewal that would move the mark fails because its token is gone.  On release the holder
  stops its generator first and then lowers the mark to what it really used.
* **A store that lost its state**: a worker id the store has no record of may still have a
  holder the store forgot, stamping up to one ttl past its last renewal.  The store tells a
  never-used id from a lost one (see :meth:`~seqid_orm.allocation.stores.base.LeaseStore.acquire`), and
  the new holder of a lost id, or of any id in the first ``ttl + clock_tolerance`` seconds of a
  namespace the store has just (re)created, waits out that time before its first id, renewing
  meanwhile.  That is the cost of a cold start: the first process of a new namespace waits one
  ttl plus the tolerance (35 s with the defaults; tests pass a short ttl).
* **Forks**: a child never uses its parent's lease; a leased generator takes a lease of its own
  at its first id in the child (the parent keeps and renews its own).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids` and this package's
``telemetry``, ``flight``, ``grants``, ``renewal`` and ``stores`` (its one factory of stores, and
the retry policy's derivations of a deadline).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..errors import (
    AllocationError,
    ArgumentTypeError,
    InvalidArgumentError,
    LeaseLostError,
    SeqIDError,
    WorkerIdNotReadyError,
)
from ..ids.randomness import check_fork, on_fork
from ..ids.snowflake import Holding
from ..ids.validate import check_bool, check_seconds
from . import telemetry
from .flight import Abandoned, Claim, Flight
from .grants import GrantRun, Released, Taken, Terms, clear_since, give_back, released_error
from .renewal import Outcome, Renewal, renew, valid_until
from .stores import check_store_options, check_url, open_lease_store
from .stores.base import LeaseStore, check_name, hide_password
from .stores.retry import grant_seconds
from .stores.steps import Steps, adrive, drive

__all__ = ["LeaseStats", "WorkerLease"]


class _Slice(Exception):
    """One look of a lazy caller at the grant it follows has ended (:meth:`WorkerLease._follow`)."""


class _Waits:
    """The lease's own sleep (a test's clock, or ``time.sleep``; ``bind`` may set it after
    construction, so it is read at each wait) as a step target: a thread calls it, a loop awaits
    ``asyncio.sleep`` instead (or the test's clock, which does not block)."""

    def __init__(self, lease: WorkerLease) -> None:
        self._lease = lease

    def sleep(self, seconds: float, releases: int) -> None:
        lease = self._lease
        if lease._sleep is not time.sleep:
            lease._sleep(seconds)
            return
        with lease._released:  # release() ends the wait at once (then the grant gives its id back)
            lease._released.wait_for(lambda: lease._releases != releases, seconds)

    async def asleep(self, seconds: float, releases: int) -> None:
        sleep = self._lease._sleep
        if sleep is time.sleep:
            await asyncio.sleep(seconds)  # a release() meanwhile is seen after it
        else:
            sleep(seconds)


log = logging.getLogger("seqid_orm.leases")

_LATE = -1  # WorkerLease._held: a lease held whose time ran out before its first use
_LOOK = 0.05  # seconds between a lazy caller's looks at the grant it follows (has its fence a known end?)
MAX_TTL = 86400.0  # seconds: a lease or a tolerance longer than a day is a mistake in units


_LIVE: weakref.WeakSet[WorkerLease] = weakref.WeakSet()


@dataclass(frozen=True)
class LeaseStats:
    """One :class:`WorkerLease` at one moment (:meth:`WorkerLease.stats`).

    ``state``: ``"idle"`` (not taken yet, or released), ``"held"`` or ``"lost"`` (a renewal failed;
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


class WorkerLease:
    """A worker id in ``range(max_workers)`` held by this process: see the module docstring.

    ``timeout`` bounds every call on the store (a stalled one raises
    :class:`~seqid_orm.errors.StoreTimeoutError`); ``accept_state_loss`` allows a store that can
    lose acknowledged writes.  Used alone (``with lease:``, ``lease.worker_id``) or as a Snowflake's worker id
    (``Snowflake(worker_id=lease)``: a :class:`~seqid_orm.ids.snowflake.WorkerSource`), which then
    leases at its first id.  ``max_workers`` defaults to what such a Snowflake's worker and
    datacenter bits hold (1,024 for Twitter's profile), else 1,024.  ``wall_clock`` (Unix
    nanoseconds), ``monotonic`` (seconds) and ``sleep`` exist so tests can drive time; a Snowflake
    passes its own clock and sleep.  ``high_water`` returns the last Unix millisecond the lease's
    user has used; ``on_release`` is called before the lease is given back and returns the same
    after stopping its user for good, for the mark left on release (default: ``high_water``, which
    is now for a lease without a generator).

    ``first_id_waits``: whether a generator's first id (:meth:`hold`, :meth:`ahold`, which lease
    lazily) waits out a fence that ends after its ``timeout`` — a new namespace's cold start or a
    takeover's wait, ``ttl + clock_tolerance`` (35 s with the defaults).  By default it does not:
    it raises :class:`~seqid_orm.errors.WorkerIdNotReadyError` saying when the worker id will be
    safe, while the grant goes on in the background, so a request never waits past its deadline.
    :meth:`acquire`, :meth:`aacquire` and ``with lease:`` always wait (call one at start-up).
    """

    def __init__(
        self,
        store: object,
        namespace: str,
        *,
        max_workers: int | None = None,
        ttl: float = 30.0,
        clock_tolerance: float = 5.0,
        create_table: bool = True,
        connect_timeout: float = 5.0,
        accept_state_loss: bool = False,
        timeout: float = 5.0,
        high_water: Callable[[], int] | None = None,
        on_release: Callable[[], int] | None = None,
        wall_clock: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        first_id_waits: bool = False,
    ) -> None:
        self.namespace = check_name(namespace, "lease namespace")
        self.first_id_waits = check_bool("first_id_waits", first_id_waits)
        self._max_workers_given = max_workers is not None
        if max_workers is None:
            max_workers = 1024
        if isinstance(max_workers, bool) or not isinstance(max_workers, int):
            raise ArgumentTypeError(f"max_workers must be an int, got {type(max_workers).__name__}")
        if not 1 <= max_workers <= 1 << 20:
            raise InvalidArgumentError(f"max_workers must be between 1 and {1 << 20:,}, got {max_workers}")
        self.ttl = check_seconds("ttl", ttl, 0.1, MAX_TTL)
        self.clock_tolerance = check_seconds("clock_tolerance", clock_tolerance, 0.0, MAX_TTL)
        for name, fn in (
            ("high_water", high_water),
            ("on_release", on_release),
            ("wall_clock", wall_clock),
            ("monotonic", monotonic),
            ("sleep", sleep),
        ):
            if fn is not None and not callable(fn):
                raise ArgumentTypeError(f"{name} must be callable, got {type(fn).__name__}")
        self.max_workers = max_workers
        self._timeout = check_seconds("timeout", timeout, 0.1, 3600.0)
        opener = functools.partial(
            open_lease_store,
            store,
            connect_timeout=connect_timeout,
            create_table=create_table,
            accept_state_loss=accept_state_loss,
            timeout=timeout,
        )
        self._store: LeaseStore | None = None
        self._store_lock = threading.Lock()
        if isinstance(store, str):
            # A URL is opened at the first call that needs the store, not here: opening imports its
            # driver and builds an engine or a client (0.4-1.2 s), which an object made on a running
            # event loop (a FastAPI lifespan, a Django async view) would stall the loop for.  Its
            # arguments and scheme are checked now, as opening would check them.
            check_store_options(connect_timeout, create_table, accept_state_loss, timeout)
            check_url(store, "lease store")
            self._label = hide_password(store)
        else:
            self._store = opener()  # a store, an Engine, a client: nothing to import
            self._label = self._store.label
        self._open_store: Callable[[], LeaseStore] = opener
        self._opened_store = self._store is not store  # made here from a URL, an Engine, a client
        self.high_water = high_water or self._wall_ms
        self._on_release = on_release or self.high_water
        self._wall = wall_clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._waits = _Waits(self)
        self._bound = False
        self._init_state()
        _LIVE.add(self)
        telemetry.watch("leases", _observed)

    @property
    def store(self) -> LeaseStore:
        """The lease store, opened from its URL at the first call that needs it."""
        store = self._store
        if store is None:
            with self._store_lock:
                store = self._store
                if store is None:
                    store = self._store = self._open_store()
                    self._label = store.label
        return store

    # --- as a Snowflake's worker-id source (seqid_orm.ids.snowflake.WorkerSource) --------------

    def bind(
        self,
        capacity: int,
        *,
        high_water: Callable[[], int],
        on_release: Callable[[], int],
        wall_clock: Callable[[], int],
        sleep: Callable[[float], object],
    ) -> None:
        """Serve one Snowflake, whose fields hold ``capacity`` worker ids (called by its constructor)."""
        if self._bound:
            raise InvalidArgumentError(
                f"this WorkerLease in {self.namespace!r} already serves a Snowflake: two generators on one "
                "worker id would make the same ids; give each its own lease"
            )
        if self._state != "idle":
            raise InvalidArgumentError("a WorkerLease must be given to its Snowflake before it is acquired")
        if not self._max_workers_given:
            self.max_workers = capacity
        elif self.max_workers > capacity:
            raise InvalidArgumentError(
                f"max_workers={self.max_workers} exceeds the {capacity} ids the worker and datacenter bits can hold"
            )
        self.high_water, self._on_release = high_water, on_release
        self._wall, self._sleep = wall_clock, sleep
        self._bound = True

    def fresh(self, acquisition: int) -> bool:
        """Whether the worker id of ``acquisition`` is still held, with time left before it must be renewed."""
        return acquisition == self.acquisitions and self._monotonic() < self.valid_until

    def hold(self) -> Holding:
        """The worker id held now with its acquisition and mark, read together under the lock, leasing
        one if none is yet (:class:`LeaseLostError` while the lease is lost).  Leasing here is lazy:
        within ``timeout`` unless ``first_id_waits`` (:class:`~seqid_orm.errors.WorkerIdNotReadyError`)."""
        while True:
            with self._lock:
                if self._state != "idle":
                    return Holding(self.worker_id, self.acquisitions, self.mark_ms, self.clear_since_ms)
            self.acquire(wait=self.first_id_waits)  # outside the lock: a grant waits on the store

    async def ahold(self) -> Holding:
        """:meth:`hold` for an event loop (the grant awaited, or followed, on the loop)."""
        while True:
            with self._lock:
                if self._state != "idle":
                    return Holding(self.worker_id, self.acquisitions, self.mark_ms, self.clear_since_ms)
            await self.aacquire(wait=self.first_id_waits)

    def mark_for(self, acquisition: int) -> int | None:
        """The confirmed mark while ``acquisition`` is the lease held now; ``None`` once it is not."""
        with self._lock:
            if acquisition != self.acquisitions or self._state != "held":
                return None
            return self.mark_ms

    def _init_state(self) -> None:
        # The lease's state, read and written in a few steps: never held across a store round trip,
        # so hold(), mark_for() and fresh() never wait behind a stalled store, and an event loop may
        # take it; no lock is held across a store's round trip at all (renewal.py says why).
        self._lock = threading.RLock()
        # One grant at a time for the whole process, led by the first caller, however many threads
        # and tasks ask at once: a namespace's cold start costs one worker id and one wait.
        self._grants: Flight[Taken] = Flight()
        # release() counts here and wakes a grant's waits: a grant that sees the count move gives its
        # worker id back (a lease released during its cold start leaves nothing taken or renewing)
        self._releases = 0
        self._released = threading.Condition(self._lock)
        self._grant_thread: threading.Thread | None = None  # a lazy caller's grant (_lead_in_thread)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = "idle"  # idle (not taken yet, or released), held, lost (renewal failed)
        # The grant under way or last run (grants.py): when its fence ends, once the store has
        # answered, is what a caller that does not wait past its deadline tells its user
        # (WorkerIdNotReadyError).
        self._run: GrantRun | None = None
        self._worker_id: int | None = None
        self._token = ""
        self._inherited_mark = 0  # the previous holder's mark, which our own release never lowers
        self.valid_until = float("-inf")
        """The monotonic time until which the worker id may be used (renewals push it on)."""
        self.mark_ms = 0
        """The high-water mark the store confirmed last: the latest Unix millisecond this holder may
        stamp (a leased generator never stamps past it; renewals push it on)."""
        self.acquisitions = 0
        self.granted_at: float | None = None
        """When the store granted the current lease (monotonic seconds)."""
        self.mark_wait = 0.0
        """Seconds the last acquisition waited for the previous holder's clock mark."""
        self.renewals = 0
        self.renewal_failures = 0
        self._last_renewal: float | None = None
        self.clear_since_ms = 0
        """The first Unix millisecond from which no other holder in this namespace can have stamped
        the worker id held now (see :attr:`~seqid_orm.ids.snowflake.Holding.clear_since_ms`)."""

    def _extra(self, **fields: object) -> dict[str, object]:
        """A log record's ``extra``: the lease's fields under ``seqid_`` names."""
        out: dict[str, object] = {
            "seqid_namespace": self.namespace,
            "seqid_store": self._label,
            "seqid_worker_id": self._worker_id,
        }
        out.update({f"seqid_{k}": v for k, v in fields.items()})
        return out

    def stats(self) -> LeaseStats:
        """This lease now (for a status page, a log line, metrics)."""
        state, worker_id = self._state, self._worker_id
        left = self.valid_until - self._monotonic()
        return LeaseStats(
            namespace=self.namespace,
            store=self._label,
            state=state,
            worker_id=worker_id if state != "idle" else None,
            expires_in=left if state == "held" and left > 0 else None,
            mark_ms=self.mark_ms,
            acquisitions=self.acquisitions,
            renewals=self.renewals,
            renewal_failures=self.renewal_failures,
            last_renewal_seconds=self._last_renewal,
            mark_wait=self.mark_wait,
        )

    def __repr__(self) -> str:
        return f"WorkerLease({self._label}, namespace={self.namespace!r}, worker_id={self._worker_id}, {self._state})"

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    def _wall_ms(self) -> int:
        return self._wall() // 1_000_000

    # --- the worker id -------------------------------------------------------------------

    @property
    def held(self) -> bool:
        """Whether this process holds a live lease now."""
        return self._state == "held" and self._monotonic() < self.valid_until

    @property
    def worker_id(self) -> int:
        """The worker id, while the lease is live; :class:`LeaseLostError` otherwise."""
        if self._state == "held" and self._monotonic() < self.valid_until:
            assert self._worker_id is not None
            return self._worker_id
        if self._state == "idle":
            raise LeaseLostError(
                f"no worker id is leased in namespace {self.namespace!r}: use `with lease:` or lease.acquire()"
            )
        raise LeaseLostError(
            f"the lease of worker id {self._worker_id} in namespace {self.namespace!r} on {self.store.label} "
            "could not be renewed before it expired; no id is made until a lease is held again (the renewal "
            "thread keeps trying)"
        )

    def acquire(self, *, wait: bool = True) -> int:
        """Take a worker id (waiting for its previous holder's clock mark) and start renewing it.

        Callers that ask together share one grant: the first leads it, the others wait for it
        (except on an event loop's thread, which must not wait for a task of its own loop).

        ``wait=False`` (a generator's lazy first id): return within ``timeout``; the grant runs in a
        thread of its own, and a fence that ends later raises
        :class:`~seqid_orm.errors.WorkerIdNotReadyError` while the grant goes on."""
        check_fork()
        deadline = self._monotonic() + self._timeout
        while True:
            held = self._held()
            if held == _LATE:
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
                        f"a worker id in namespace {self.namespace!r} is being leased by a task of this event "
                        "loop, which cannot go on while a synchronous call (an AsyncSession flush's column "
                        "default) waits on the loop's thread: await snowflake.aprefetch() or lease.aacquire() "
                        "before the flush"
                    )
                with contextlib.suppress(Abandoned):
                    self._follow(claim, deadline)
                continue
            if leads:
                self._lead_grant(claim)
            elif asyncio._get_running_loop() is not None:
                # On an event loop's thread (a column default in an AsyncSession's flush): the grant in
                # flight may be a task of this very loop, which cannot run while we wait. Grant here
                # too; whichever ends second is given back (_settle).
                drive(self._settle(drive(self._grant(), None)), None)
            else:
                with contextlib.suppress(Abandoned):
                    self._grants.wait(claim, claim.deadline, self._grant_timed_out)

    def _held(self) -> int | None:
        """The worker id held and live now; :data:`_LATE` where one is held but its time ran out
        before it could be used (a grant slower than its ttl, on a loaded machine); ``None`` where
        none is."""
        with self._lock:
            if self._state != "held" or self._worker_id is None:
                return None
            return self._worker_id if self._monotonic() < self.valid_until else _LATE

    def _renew_late(self) -> None:
        """Renew a lease whose time ran out before its first use, where the store still gives it to
        this holder; where it does not (expired there too, taken over, the store unreachable) the
        lease is lost, and the caller grants again."""
        with self._lock:
            acquisition = self.acquisitions
        try:
            self.extend_mark(0)
        except LeaseLostError:
            with self._lock:
                if self.acquisitions == acquisition and self._state == "held":
                    self._state = "lost"
                    self.valid_until = float("-inf")

    def _grant_seconds(self) -> float:
        """The longest a grant may take (:func:`~.stores.retry.grant_seconds`)."""
        return grant_seconds(self._timeout, self.ttl, self.clock_tolerance)

    def _lead_in_thread(self, claim: Claim[Taken]) -> None:
        """Hand ``claim`` to a thread of its own that runs the grant (a lazy caller will not wait out
        its fence; the grant goes on, renewing, and the worker id is held when it ends)."""

        def lead() -> None:
            with contextlib.suppress(Exception):  # its followers get the error; _refused logged it
                self._lead_grant(claim)

        worker = threading.Thread(target=lead, name=f"seqid-lease-grant-{self.namespace}", daemon=True)
        self._run = None  # its fence is not yet known (a previous grant's is over)
        self._grant_thread = worker  # release() waits for it
        worker.start()
        # the claim lives and dies with the thread that does the work (from its start: a thread not
        # yet started reads as dead, and a caller meanwhile would abandon the claim and grant again)
        claim.owner = worker

    def _past_deadline(self, deadline: float) -> WorkerIdNotReadyError | None:
        """The refusal of a lazy caller whose deadline (the lease's monotonic clock) has passed, or
        comes before the end of the fence the grant under way waits for; ``None``: look again."""
        run = self._run
        fence = None if run is None else run.fence_until
        if (fence is not None and fence > deadline) or self._monotonic() >= deadline:
            return self._not_ready(fence)
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

    def _not_ready(self, fence: float | None) -> WorkerIdNotReadyError:
        if fence is None or fence <= self._monotonic():  # unknown, or over with the grant's last steps under way
            return WorkerIdNotReadyError(
                f"no worker id was leased in namespace {self.namespace!r} on {self.store.label} within "
                f"timeout={self._timeout:g} s; the grant under way goes on in the background"
            )
        safe_in = max(0.0, fence - self._monotonic())
        at = time.strftime("%H:%M:%S", time.gmtime(self._wall() / 1e9 + safe_in))
        return WorkerIdNotReadyError(
            f"the worker id leased in namespace {self.namespace!r} on {self.store.label} is safe to use in "
            f"{safe_in:.1f} s (at {at} UTC): a holder the store cannot rule out may stamp it until then (a "
            "new namespace's cold start, a takeover); a first id waits at most timeout="
            f"{self._timeout:g} s. The lease stays taken meanwhile. Take it at start-up (lease.acquire(), "
            "await lease.aacquire(), await snowflake.aprefetch()), which waits, or pass first_id_waits=True",
            safe_in=safe_in,
        )

    def _grant_timed_out(self) -> LeaseLostError:
        return LeaseLostError(
            f"no worker id was leased in namespace {self.namespace!r} on {self.store.label} within "
            f"{self._grant_seconds():g} s (the grant under way did not finish)"
        )

    def _lead_grant(self, claim: Claim[Taken]) -> None:
        """Run a grant in this thread for ``claim`` and adopt it."""
        try:
            taken = drive(self._grant(), None)
            drive(self._settle(taken), None)
        except BaseException as exc:
            self._grant_failed(claim, exc)
            raise
        self._grants.finish(claim, taken)

    def _grant_failed(self, claim: Claim[Taken], exc: BaseException) -> None:
        # all leased, a clock behind the last holder's mark, a store refused: said once, in the log
        if isinstance(exc, SeqIDError) and not isinstance(exc, Released):
            self._refused(exc)
        self._grants.finish(claim, error=exc)

    def _settle(self, taken: Taken) -> Steps[None]:
        """Adopt ``taken`` and start renewing it; where a lease is held already (a grant given up for a
        late one), give ``taken`` back, its mark unused (steps: a thread drives them, a loop awaits);
        where the lease was released since the grant began, give it back and raise :class:`Released`."""
        with self._lock:
            released = self._releases != taken.releases
            adopted = self._state != "held" and not released
            if adopted:
                self._adopt(taken)
                self._start_renewing()
        if not adopted:
            yield from give_back(self.namespace, self.store, taken.grant, taken.token)
        if released:
            raise released_error(self.namespace)

    def _refused(self, exc: SeqIDError) -> None:
        telemetry.record_refusal(exc, namespace=self.namespace)
        log.warning(
            "no worker id leased in %r on %s: %s",
            self.namespace,
            self.store.label,
            exc,
            extra=self._extra(error=type(exc).__name__),
        )

    def _grant(self) -> Steps[Taken]:
        """A worker id granted, fenced and waited for (grants.py decides when it is safe), as steps
        (:mod:`.stores.steps`): a thread runs them on the store's blocking calls, :meth:`aacquire`
        awaits them on the loop."""
        run = self._run = GrantRun(
            Terms(
                namespace=self.namespace,
                max_workers=self.max_workers,
                ttl=self.ttl,
                clock_tolerance=self.clock_tolerance,
                store=self.store,
                waits=self._waits,
                monotonic=self._monotonic,
                wall_ms=self._wall_ms,
                releases=lambda: self._releases,
            )
        )
        try:
            return (yield from run.steps())
        finally:
            self.granted_at, self.mark_wait = run.granted_at, run.mark_wait

    def _adopt(self, taken: Taken) -> None:
        """Make ``taken`` the lease held (lock held)."""
        grant = taken.grant
        # from when a key carrying this worker id is foreign (Snowflake.bind_column): grants.py
        self.clear_since_ms = clear_since(grant, self._wall_ms(), self.ttl, self.clock_tolerance)
        self._token = taken.token
        self._inherited_mark = grant.mark_ms
        self._worker_id = grant.worker_id
        self.mark_ms = taken.bound
        self.valid_until = valid_until(taken.sent, self.ttl)
        self._state = "held"
        self.acquisitions += 1
        log.info(
            "leased worker id %s in %r on %s",
            grant.worker_id,
            self.namespace,
            self.store.label,
            extra=self._extra(worker_id=grant.worker_id, mark_wait=self.mark_wait),
        )

    def release(self) -> None:
        """Give the worker id back now, leaving the high-water mark for the next holder; then close
        the connections of a store this lease opened from a URL (the next :meth:`acquire` opens new
        ones), so a released lease holds nothing on the server (issue 46: one connection stayed)."""
        # Stop the lease's user first, outside our lock (a generator holds its own lock and then
        # ours when it must move the mark): nothing is stamped after the figure it returns.
        used = self._on_release()
        # a renewal in flight is the store's to order: it carries the token this gives back, so whichever
        # comes second is refused (a renewal after the release) or lowered (the release after it)
        with self._lock:
            self._releases += 1  # a grant under way gives its worker id back (_unless_released)
            self._released.notify_all()
            granting, self._grant_thread = self._grant_thread, None
            self._stop.set()
            thread, self._thread = self._thread, None
            state, self._state = self._state, "idle"
            worker_id, token = self._worker_id, self._token
            # our own bound (clock + ttl) is replaced by what we really used (after stopping the
            # generator for good), but never below the mark we inherited: the next holder then
            # waits only as long as it must
            mark = max(self._inherited_mark, used)
            self.valid_until = float("-inf")
        if state != "idle" and worker_id is not None:
            try:
                self.store.release(self.namespace, worker_id, token, mark)
            except AllocationError as exc:  # the store is gone: the lease simply expires there
                log.warning("releasing worker id %s in %r failed: %s", worker_id, self.namespace, exc)
        for ending in (thread, granting):
            if ending is not None and ending is not threading.current_thread():
                ending.join(timeout=self._timeout + 5)  # a store round trip under way ends by its timeout
        if self._opened_store and self._store is not None:  # an Engine or a client passed in is the caller's
            self._store.close()

    def close(self) -> None:
        """:meth:`release` (which also closes the connections of a store this lease opened), so
        that nothing of the lease outlives it: a test database can then be dropped."""
        self.release()

    def __enter__(self) -> WorkerLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def aacquire(self, *, wait: bool = True) -> int:
        """:meth:`acquire` for an event loop: the grant's steps (:meth:`_grant`) awaited there, the
        store's round trips through its asynchronous driver where it has one and the waits before the
        first id (a takeover's fence, a new namespace's cold start: ttl + clock tolerance) as
        ``asyncio.sleep``; renewals go on in the lease's own thread, which keeps renewing while user
        code blocks the loop.  Tasks and threads that ask together share one grant (the first
        leads; a task that leads and is cancelled, or whose loop ends, hands the lead on).
        ``wait=False`` (:meth:`ahold`, a generator's lazy first id): as :meth:`acquire`'s, the grant
        in a thread of its own, which outlives the loop, and this task awaiting it until ``timeout``
        at most."""
        check_fork()
        deadline = self._monotonic() + self._timeout
        if self._store is None:  # opening imports a driver and builds a client: not on the loop
            await asyncio.to_thread(getattr, self, "store")
        while True:
            held = self._held()
            if held == _LATE:
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
                await self._alead_grant(claim)
                continue
            with contextlib.suppress(Abandoned):
                if wait:
                    await self._grants.await_(claim, claim.deadline, self._grant_timed_out)
                else:
                    await self._afollow(claim, deadline)

    async def _alead_grant(self, claim: Claim[Taken]) -> None:
        """Run a grant on the loop for ``claim`` and adopt it (a cancellation ends the claim too)."""
        try:
            taken = await adrive(self._grant(), None)
            await adrive(self._settle(taken), None)
        except BaseException as exc:
            self._grant_failed(claim, exc)
            raise
        self._grants.finish(claim, taken)

    async def arelease(self) -> None:
        """:meth:`release` in a worker thread (one round trip to the store)."""
        await asyncio.to_thread(self.release)

    async def __aenter__(self) -> WorkerLease:
        await self.aacquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.arelease()

    # --- renewal -------------------------------------------------------------------------

    def _start_renewing(self) -> None:
        """Start the renewal thread (lock held), unless one is running (a lease lost and taken again)."""
        if self._thread is not None and self._thread.is_alive() and not self._stop.is_set():
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, args=(self._stop,), daemon=True, name="seqid-lease")
        self._thread.start()

    def _renew_loop(self, stop: threading.Event) -> None:
        interval = self.ttl / 3
        while not stop.wait(interval):
            interval = self._renew_once(stop)

    def _renew_once(self, stop: threading.Event) -> float:
        """One renewal (or, once lost, one attempt to lease again); the seconds until the next."""
        if self._state == "lost":
            self._lease_again(stop)
            return self.ttl / 3
        renewal = self._renew(0, stop)
        if renewal is None:
            return self.ttl / 3  # released meanwhile, or not held
        if renewal.outcome is Outcome.RETRY:
            self.renewal_failures += 1
            log.warning(
                "renewing worker id %s in %r failed: %s",
                self._worker_id,
                self.namespace,
                renewal.error,
                extra=self._extra(error=type(renewal.error).__name__),
            )
        return renewal.next_in(self.ttl, self._monotonic())

    def _renew(self, at_least_ms: int, stop: threading.Event | None = None) -> Renewal | None:
        """Renew the lease held now, recording a mark of at least ``at_least_ms`` (and of what its user
        may stamp before the next renewal); the renewal as applied, or ``None`` where no lease is held
        (or it was released, or taken again, while the store answered: that answer is not applied).
        No lock is held across the round trip: a release meanwhile is the store's to order (the
        token it gives back is the one this renewal carries, so whichever comes second is refused)."""
        with self._lock:
            if (stop is not None and stop.is_set()) or self._state != "held" or self._worker_id is None:
                return None
            worker_id, token, acquisition, held_until = (
                self._worker_id,
                self._token,
                self.acquisitions,
                self.valid_until,
            )
        mark = max(at_least_ms, self.high_water(), self._wall_ms() + self.ttl_ms)  # the most it may use before renewing
        steps = renew(self.store, self.namespace, worker_id, token, self.ttl, mark, held_until, self._monotonic)
        renewal = drive(steps, None)
        with self._lock:
            if self.acquisitions != acquisition or self._state != "held":
                return None
            self._apply(renewal)
        return renewal

    def _apply(self, renewal: Renewal) -> None:
        """A renewal's outcome made the lease's (lock held): the one place that reads it."""
        if renewal.outcome is Outcome.RENEWED:
            # a renewal that went out earlier and answered later never pulls the deadline back
            self.valid_until = max(self.valid_until, renewal.valid_until)
            self.mark_ms = max(self.mark_ms, renewal.mark_ms)
            self.renewals += 1
            self._last_renewal = self._monotonic() - renewal.sent
            log.debug(
                "renewed worker id %s in %r on %s",
                self._worker_id,
                self.namespace,
                self._label,
                extra=self._extra(seconds=self._last_renewal, mark_ms=self.mark_ms),
            )
        elif renewal.outcome is Outcome.LOST:
            error = self.lost_error()
            telemetry.record_refusal(error, namespace=self.namespace)
            log.error(
                "lost the lease of worker id %s in %r on %s: its ids stop until a lease is held again",
                self._worker_id,
                self.namespace,
                self._label,
                extra=self._extra(error=type(error).__name__),
            )
            self._state = "lost"
            self.valid_until = float("-inf")

    def _lease_again(self, stop: threading.Event) -> None:
        """Lease a worker id again after the lease was lost (from the renewal thread).  Callers keep
        getting :class:`LeaseLostError` meanwhile, not a wait; a grant that ends after the lease was
        released is given back."""
        claim = self._grants.lead(self._grant_seconds())
        if claim is None:  # a caller is leasing already
            return
        try:
            taken = drive(self._grant(), None)
        except BaseException as exc:
            self._grants.finish(claim, error=exc)
            if not isinstance(exc, SeqIDError):  # a bug surfaces as itself (in the renewal thread)
                raise
            log.warning("leasing a worker id in %r again failed: %s", self.namespace, exc)  # all taken, store down
            return
        with self._lock:
            adopted = not stop.is_set() and self._state == "lost"
            if adopted:
                self._adopt(taken)
        if not adopted:
            drive(give_back(self.namespace, self.store, taken.grant, taken.token), None)
        self._grants.finish(claim, taken)

    def extend_mark(self, at_least_ms: int) -> int:
        """Renew now, recording a mark of at least ``at_least_ms`` (the generator's clock went past
        the confirmed one); the new confirmed mark, or :class:`LeaseLostError` if the lease is gone
        or the store did not answer (the renewal thread goes on trying)."""
        renewal = self._renew(at_least_ms)
        if renewal is None:
            raise self.lost_error()
        if renewal.outcome is Outcome.RETRY:
            raise LeaseLostError(
                f"renewing worker id {self._worker_id} in {self.namespace!r} to move its clock mark failed: "
                f"{renewal.error}"
            ) from renewal.error
        if renewal.outcome is Outcome.LOST:
            raise self.lost_error()
        with self._lock:
            return self.mark_ms

    def lost_error(self) -> LeaseLostError:
        """The error for ids asked while no worker id is held."""
        return LeaseLostError(
            f"the lease of worker id {self._worker_id} in namespace {self.namespace!r} on {self.store.label} "
            "is not held (expired, taken over by another process, or lost by the store); no id is made until a "
            "lease is held again (the renewal thread keeps trying)"
        )

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's lease (the parent keeps renewing it)."""
        self._init_state()
        if self._store is not None:
            self._store.after_fork()


def _after_fork_in_child() -> None:
    for lease in list(_LIVE):
        lease._after_fork()


on_fork(_after_fork_in_child)


@atexit.register
def _release_at_exit() -> None:
    for lease in list(_LIVE):
        if lease._state != "idle" or lease._grant_thread is not None:
            lease.release()


def _observed() -> Iterator[tuple[str, float, dict[str, str | int]]]:
    """The leases' observations for :mod:`~seqid_orm.allocation.telemetry`."""
    held: dict[tuple[str, str], int] = {}
    for lease in list(_LIVE):
        stats = lease.stats()
        key = (stats.namespace, stats.store)  # one namespace on two stores is two namespaces
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
