"""Worker ids leased from a shared store instead of configured by hand.

A Snowflake id is unique only while no two live generators share a worker id.  Configured ids
collide when containers are copied, derived ids (from an IP or a MAC) collide in Kubernetes,
and "one new id per start" runs out.  A :class:`WorkerLease` takes a free worker id from a SQL
table or Redis for a time-to-live, renews it from a daemon thread every third of the ttl and gives it
back on exit; an expired lease may be taken over::

    with WorkerLease("postgresql+psycopg://app@db/app", namespace="orders-api", max_workers=1024) as lease:
        lease.worker_id  # an int in range(1024), held by this process alone

    gen = Snowflake(worker_id=WorkerLease("redis://127.0.0.1:6379/0", namespace="orders-api"))  # leases at its first id

The rules that keep ids unique (expiry by the store's clock, a lease that cannot be renewed stops
its generator, a fence by time through the confirmed high-water mark, a cold start's wait where the
store may have forgotten a holder) are told in docs/how-to/leases.md and docs/explanation/
what-can-go-wrong.md; each is decided in one place, which docs/architecture.md names.  A forked child
never uses its parent's lease: a leased generator takes one of its own at its first id there.

The lease's states and what moves them are :mod:`.lease_life`'s, what a caller asking for the
worker id does :mod:`.acquiring`'s; one grant is :mod:`.grants`', one renewal (and the renewal
thread) :mod:`.renewal`'s.  This module is the façade: what users and a Snowflake ask of a lease.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.ids` and
this package's ``telemetry``, ``acquiring``, ``lease_life``, ``renewal`` and ``stores`` (its one factory of
stores).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ..calls.retry import GRACE, Deadline
from ..errors import AllocationError, ArgumentTypeError, InvalidArgumentError, LeaseLostError
from ..ids.randomness import check_fork, on_fork
from ..ids.snowflake import Holding
from ..ids.validate import check_bool, check_seconds
from . import telemetry
from .acquiring import Acquirer
from .lease_life import STATES, Event, LeaseLife, LeaseStats, State, Terms, log, observed
from .stores import check_store_options, defer, open_lease_store
from .stores.base import Deferred, LeaseStore, check_name

__all__ = ["LeaseStats", "WorkerLease"]


MAX_TTL = 86400.0  # seconds: a lease or a tolerance longer than a day is a mistake in units

_LIVE: weakref.WeakSet[WorkerLease] = weakref.WeakSet()


def _from_life(name: str, doc: str) -> Any:
    """A read-only attribute of the lease that is its :class:`~.lease_life.LeaseLife`'s."""
    return property(lambda lease: getattr(lease.life, name), doc=doc)


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
        self.timeout = check_seconds("timeout", timeout, 0.1, 3600.0)
        opener = functools.partial(
            open_lease_store,
            connect_timeout=connect_timeout,
            create_table=create_table,
            accept_state_loss=accept_state_loss,
            timeout=timeout,
        )
        # A URL is opened at the first call that needs the store, not here: opening imports its
        # driver and builds an engine or a client (0.4-1.2 s), which an object made on a running
        # event loop (a FastAPI lifespan, a Django async view) would stall the loop for.  Its
        # arguments and scheme are checked now, as opening would check them (stores.defer).
        check_store_options(connect_timeout, create_table, accept_state_loss, timeout)
        self._store: Deferred[LeaseStore] = defer(store, "lease store", opener)
        self._opened_store = self._store.opened is not store  # made here from a URL, an Engine, a client
        self.high_water = high_water or self.wall_ms
        self._on_release = on_release or self.high_water
        self._wall = wall_clock
        self.monotonic = monotonic
        self._sleep = sleep
        self._bound = False
        self._init_state()
        _LIVE.add(self)
        telemetry.watch("leases", _observed)

    def _init_state(self) -> None:
        """What the lease holds and does, on frozen terms (new in a forked child: the parent keeps
        its own; new when a Snowflake binds it, before it is first taken)."""
        terms = Terms(
            namespace=self.namespace,
            max_workers=self.max_workers,
            ttl=self.ttl,
            clock_tolerance=self.clock_tolerance,
            timeout=self.timeout,
            store=self._store.get,
            label=lambda: self._store.label,
            monotonic=self.monotonic,
            wall_ns=self._wall,
            high_water=self.high_water,
            sleep=self._sleep,
        )
        self.life = LeaseLife(terms)
        self._acquirer = Acquirer(self.life)
        self.renewer = self._acquirer.renewer

    @property
    def store(self) -> LeaseStore:
        """The lease store, opened from its URL at the first call that needs it."""
        return self._store.get()

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
        if self.life.now() is not State.IDLE:
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
        self._init_state()

    def fresh(self, acquisition: int) -> bool:
        """Whether the worker id of ``acquisition`` is still held, with time left before it must be renewed."""
        return self.life.fresh(acquisition)

    def hold(self) -> Holding:
        """The worker id held now with its acquisition and mark, read together under the lock, leasing
        one if none is yet (:class:`LeaseLostError` while the lease is lost).  Leasing here is lazy:
        within ``timeout`` unless ``first_id_waits`` (:class:`~seqid_orm.errors.WorkerIdNotReadyError`)."""
        while (holding := self.life.holding()) is None:
            self.acquire(wait=self.first_id_waits)  # outside the lock: a grant waits on the store
        return holding

    async def ahold(self) -> Holding:
        """:meth:`hold` for an event loop (the grant awaited, or followed, on the loop)."""
        while (holding := self.life.holding()) is None:
            await self.aacquire(wait=self.first_id_waits)
        return holding

    def mark_for(self, acquisition: int) -> int | None:
        """The confirmed mark while ``acquisition`` is the lease held now; ``None`` once it is not."""
        return self.life.mark_for(acquisition)

    # --- what it holds (LeaseLife's, read here) ----------------------------------------------

    valid_until = _from_life(
        "valid_until", "The monotonic time until which the worker id may be used (renewals push it on)."
    )
    mark_ms = _from_life(
        "mark_ms",
        "The high-water mark the store confirmed last: the latest Unix millisecond this holder may stamp "
        "(a leased generator never stamps past it; renewals push it on).",
    )
    acquisitions = _from_life("acquisitions", "How many times a worker id was granted to this lease.")
    clear_since_ms = _from_life(
        "clear_since_ms",
        "The first Unix millisecond from which no other holder in this namespace can have stamped the worker id "
        "held now (see :attr:`~seqid_orm.ids.snowflake.Holding.clear_since_ms`).",
    )
    granted_at = _from_life("granted_at", "When the store granted the current lease (monotonic seconds).")
    mark_wait = _from_life("mark_wait", "Seconds the last acquisition waited for the previous holder's clock mark.")
    renewals = _from_life("renewals", "Renewals the store confirmed.")
    renewal_failures = _from_life("renewal_failures", "Renewals the store did not answer.")

    def stats(self) -> LeaseStats:
        """This lease now (for a status page, a log line, metrics)."""
        return self.life.stats()

    def __repr__(self) -> str:
        life, label = self.life, self._store.label
        return f"WorkerLease({label}, namespace={self.namespace!r}, worker_id={life.worker_id}, {life.now().value})"

    def wall_ms(self) -> int:
        return self._wall() // 1_000_000

    @property
    def held(self) -> bool:
        """Whether this process holds a live lease now."""
        return self.life.live()

    @property
    def worker_id(self) -> int:
        """The worker id, while the lease is live; :class:`LeaseLostError` otherwise."""
        state, worker_id = self.life.seen()
        if worker_id is not None:
            return worker_id
        if not STATES[state].own_id:
            raise LeaseLostError(
                f"no worker id is leased in namespace {self.namespace!r}: use `with lease:` or lease.acquire()"
            )
        raise self.life.expired_error()

    # --- taking it (acquiring.py decides who leads a grant and who waits) ----------------------

    def acquire(self, *, wait: bool = True) -> int:
        """Take a worker id (waiting for its previous holder's clock mark) and start renewing it.

        Callers that ask together share one grant: the first leads it, the others wait for it
        (except on an event loop's thread, which must not wait for a task of its own loop).

        ``wait=False`` (a generator's lazy first id): return within ``timeout``; the grant runs in a
        thread of its own, and a fence that ends later raises
        :class:`~seqid_orm.errors.WorkerIdNotReadyError` while the grant goes on."""
        check_fork()
        return self._acquirer.acquire(wait)

    async def aacquire(self, *, wait: bool = True) -> int:
        """:meth:`acquire` for an event loop: the grant's steps awaited there, the store's round trips
        through its asynchronous driver where it has one and the waits before the first id (a
        takeover's fence, a new namespace's cold start: ttl + clock tolerance) as ``asyncio.sleep``;
        renewals go on in the lease's own thread, which keeps renewing while user code blocks the
        loop.  Tasks and threads that ask together share one grant (the first leads; a task that
        leads and is cancelled, or whose loop ends, hands the lead on).  ``wait=False`` (:meth:`ahold`,
        a generator's lazy first id): as :meth:`acquire`'s, the grant in a thread of its own, which
        outlives the loop, and this task awaiting it until ``timeout`` at most."""
        check_fork()
        if self._store.opened is None:  # opening imports a driver and builds a client: not on the loop
            await asyncio.to_thread(getattr, self, "store")
        return await self._acquirer.aacquire(wait)

    # --- keeping it, giving it back ------------------------------------------------------------

    def extend_mark(self, at_least_ms: int) -> int:
        """Renew now, recording a mark of at least ``at_least_ms`` (the generator's clock went past
        the confirmed one); the new confirmed mark, or :class:`LeaseLostError` if the lease is gone
        or the store did not answer (the renewal thread goes on trying)."""
        renewal = self.renewer.renew(at_least_ms)
        if renewal is None or renewal.outcome is Event.LOST:
            raise self.lost_error()
        if renewal.outcome is Event.RETRY:
            raise LeaseLostError(
                f"renewing worker id {self.life.worker_id} in {self.namespace!r} to move its clock mark failed: "
                f"{renewal.error}"
            ) from renewal.error
        with self.life.lock:
            return self.life.mark_ms

    def lost_error(self) -> LeaseLostError:
        """The error for ids asked while no worker id is held."""
        return self.life.lost_error()

    def release(self) -> None:
        """Give the worker id back now, leaving the high-water mark for the next holder; then close
        the connections of a store this lease opened from a URL (the next :meth:`acquire` opens new
        ones), so a released lease holds nothing on the server."""
        # Stop the lease's user first, outside our lock (a generator holds its own lock and then
        # ours when it must move the mark): nothing is stamped after the figure it returns.
        used = self._on_release()
        # a renewal in flight is the store's to order: it carries the token this gives back, so whichever
        # comes second is refused (a renewal after the release) or lowered (the release after it)
        with self.life.lock:  # no grant adopts, and starts renewing, between the two
            worker_id, token, mark = self.life.release(used)
            ending = self._acquirer.halt()
        with Deadline.after(self.timeout).passed_down() as deadline:  # the call's one deadline
            if worker_id is not None:
                try:
                    self.store.release(self.namespace, worker_id, token, mark)
                except AllocationError as exc:  # the store is gone: the lease simply expires there
                    log.warning("releasing worker id %s in %r failed: %s", worker_id, self.namespace, exc)
        for thread in ending:  # a store round trip under way ends by its own bound, within this call's
            if thread is not threading.current_thread():
                thread.join(timeout=max(0.0, deadline.left()) + GRACE)
        if self._opened_store and self._store.opened is not None:  # an Engine or a client passed in is the caller's
            self._store.opened.close()

    def close(self) -> None:
        """:meth:`release` (which also closes the connections of a store this lease opened), so
        that nothing of the lease outlives it: a test database can then be dropped."""
        self.release()

    def __enter__(self) -> WorkerLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def arelease(self) -> None:
        """:meth:`release` in a worker thread (one round trip to the store)."""
        await asyncio.to_thread(self.release)

    async def __aenter__(self) -> WorkerLease:
        await self.aacquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.arelease()

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's lease (the parent keeps renewing it)."""
        self._init_state()
        self._store.after_fork()


def _after_fork_in_child() -> None:
    for lease in list(_LIVE):
        lease._after_fork()


on_fork(_after_fork_in_child)


@atexit.register
def _release_at_exit() -> None:
    for lease in list(_LIVE):
        if lease.life.state is not State.IDLE or lease._acquirer.thread is not None:
            lease.release()


def _observed() -> Iterator[tuple[str, float, dict[str, str | int]]]:
    """The leases' observations for :mod:`~seqid_orm.allocation.telemetry`."""
    return observed([lease.stats() for lease in list(_LIVE)])
