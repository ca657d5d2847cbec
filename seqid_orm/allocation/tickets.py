"""Ticket sequences: compact integer keys handed out in blocks by ticket servers.

A :class:`TicketSequence` reserves a *segment* of ``block_size`` values from a ticket server in
one round trip and hands them out from memory, as TiDB's batched auto-increment and Meituan's
Leaf (segment mode) do.  Ticket servers are SQL databases or Redis
(:mod:`seqid_orm.allocation.stores`); several of them with a common ``step`` and the offsets ``1..K``
hand out disjoint values (Flickr's odd/even ticket servers, generalised)::

    orders = TicketSequence("orders", "postgresql+psycopg://app@db/app", block_size=1000)
    orders.next_id()      # 1, 2, 3, ... in this process; another process gets 1001, ...
    orders.next_ids(500)  # a list of 500 increasing values

What a user running twenty application processes gets:

* **Uniqueness** across threads, processes and forks: every value comes from one atomic
  reservation on a server, and a forked child drops its parent's segments before its first id
  (however the fork was made; see :mod:`seqid_orm.ids.randomness`).  ``os.fork()`` waits for a
  reservation in flight, so the child never inherits a driver in mid-call.  A fork made in C
  (no Python at-fork hooks) is safe only in a process without a prefetch thread, as CPython
  itself requires: fork such workers before the first id, as uWSGI's prefork does.
* **Increasing within a process** while it draws from one server.  Across processes values
  interleave by segment; across servers they are not ordered (each server counts on its own),
  and a process that fails over to another server may continue lower.
* **No waiting in steady state** (double buffering, as Leaf does): when ``prefetch_at`` of the
  current segment is used, a background thread reserves the next one.
* **Losses**: a process that stops, cleanly or not, loses the rest of its current segment and its
  prefetched one, at most ``2 * block_size`` values (``2 * max_block_size`` when adaptive).
  Gaps are normal; ids are unique, not dense.
* **A batch is a range**: :meth:`TicketSequence.next_ids` that finds too few values in memory
  reserves all it still lacks in one segment (one round trip for a bulk load, not one a block);
  the next reservation after it asks for a block again.
* **Never inside your transaction**: a reservation is one statement on the store's own
  connection, committed at once, so an open business transaction holds no ticket-row lock.
* **Failover**: each process starts at a random server of the list and stays with it while it
  answers; when it fails the next one is asked.  :class:`~seqid_orm.errors.BackendUnavailableError`
  is raised only when none answers.

* **Never a block twice** (docs/explanation/what-can-go-wrong.md): before its first id a
  process reads the sequence on *every* server of its list and checks them as a set (each
  server's stored step and offset must be the ones this client gives it; a sequence missing on
  some servers but present on others is refused; a new one is created on all at once).  It then
  remembers, per server, the highest value it has seen that server hand out, and refuses
  (:class:`~seqid_orm.errors.CounterRegressedError`) a block at or below it: a counter restored
  from a backup, deleted and re-created, or emptied by a Redis restart never makes this process
  repeat itself.  A sequence bound to the key columns it fills (``floor``; ``ticket_pk`` and
  ``TicketField`` bind theirs) also refuses any block whose own values are already keys there
  (:class:`~seqid_orm.errors.CounterBelowDataError`), which covers a process started after the
  counter went back and a counter put back under a running process.  A store whose history went
  back (:mod:`seqid_orm.allocation.stores.history`) is refused until repaired.
  :meth:`TicketSequence.repair` (``seqid ticket repair``) moves the counters above the largest key.

Loads beyond the defaults: ``max_block_size`` turns on Leaf's adaptive block size (it doubles
while segments last less than ``segment_seconds`` and halves when one lasts over twice that).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.ids` and
this package's ``telemetry``, ``flight``, ``floors``, ``segments``, ``servers`` and ``stores`` (its one
factory of stores, and the retry policy's derivations of a deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..calls.retry import follower_wait, per_server
from ..calls.steps import Steps, adrive, drive
from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    SeqIDError,
    StoreTimeoutError,
)
from ..ids.randomness import check_fork, on_fork
from ..ids.validate import BIGINT_MAX, check_bool, check_seconds
from . import telemetry
from .flight import Abandoned, Claim, Flight, running_loop
from .floors import Floors, KeyFloor
from .segments import Segment, SegmentBuffer
from .servers import ServerSet
from .stores import (
    TicketRow,
    check_name,
    check_store_options,
    defer,
    open_ticket_store,
)

__all__ = ["MAX_BLOCK_SIZE", "KeyFloor", "Segment", "TicketSequence", "TicketStats"]

log = logging.getLogger("seqid_orm.tickets")

#: The largest segment one reservation may take (a billion values; Leaf caps at a million).
MAX_BLOCK_SIZE = 1 << 30

_MAX_BATCH = 1 << 24  # next_ids() per call, as comb_batch


@dataclass(frozen=True)
class TicketStats:
    """What one :class:`TicketSequence` has done and holds, read at one moment (:meth:`TicketSequence.stats`).

    ``servers`` and ``server`` are labels with any password hidden; ``remaining`` counts the values
    left in the current segment and ``prefetched`` those of the next one, already reserved;
    ``last_reservation_seconds`` is ``None`` before the first reservation.
    """

    name: str
    servers: tuple[str, ...]
    server: str
    block_size: int
    segment: Segment | None
    remaining: int
    prefetched: int
    ids_issued: int
    reservations: int
    reservation_failures: int
    last_reservation_seconds: float | None


_T = TypeVar("_T")


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark a background task's failure as seen (asyncio logs one nobody retrieved)."""
    if not task.cancelled():
        task.exception()


def _int_arg(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be between {low:,} and {high:,}, got {value:,}")
    return value


_LIVE: weakref.WeakSet[TicketSequence] = weakref.WeakSet()


class TicketSequence:
    """Integer ids reserved in blocks from one or more ticket servers; see the module docstring.

    ``servers``: a URL, SQLAlchemy ``Engine``, ``redis.Redis`` or ticket store, or a list of
    them.  With K servers the common ``step`` defaults to K and server *i* (0-based) gets the
    offset ``i + 1``; pass ``step=`` larger than K to leave room for servers added later, and
    ``offsets=`` to choose them.  Every client must use the same servers, step and offsets: a
    server remembers what it was created with and refuses a client that disagrees
    (:class:`~seqid_orm.errors.BackendMismatchError`).

    ``start``: the lowest value a *new* sequence hands out (adopt a table whose ids reach N with
    ``start=N + 1``).  ``max_value``: the highest (a BIGINT by default; ``2**53 - 1`` keeps ids
    exact in JavaScript).  ``start_server``: the index of the server this process asks first
    (default: one at random, which spreads processes over the servers).  ``clock`` (seconds,
    monotonic) is for tests of the adaptive block size.

    ``floor``: a :class:`KeyFloor` (or a list) for the key columns this sequence fills; more can
    be bound later with :meth:`bind_floor`.  ``accept_state_loss``: allow a server that can lose
    acknowledged writes (a Redis without persistence, a PostgreSQL with only asynchronous
    standbys; see :class:`~seqid_orm.errors.VolatileStoreError`).  ``timeout``: the longest one
    reservation may take, shared among the servers (a stalled one is given up for the next after
    its share; :class:`~seqid_orm.errors.StoreTimeoutError`).
    """

    def __init__(
        self,
        name: str,
        servers: object,
        *,
        block_size: int = 1000,
        double_buffer: bool = True,
        prefetch_at: float = 0.1,
        max_block_size: int | None = None,
        segment_seconds: float = 900.0,
        step: int | None = None,
        offsets: Sequence[int] | None = None,
        start: int = 1,
        max_value: int = BIGINT_MAX,
        create_table: bool = True,
        connect_timeout: float = 5.0,
        start_server: int | None = None,
        floor: KeyFloor | Sequence[KeyFloor] | None = None,
        accept_state_loss: bool = False,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = check_name(name)
        targets = list(servers) if isinstance(servers, (list, tuple)) else [servers]
        if not targets:
            raise InvalidArgumentError("a ticket sequence needs at least one server")
        self.block_size = _int_arg("block_size", block_size, 1, MAX_BLOCK_SIZE)
        self.max_block_size = (
            self.block_size
            if max_block_size is None
            else _int_arg("max_block_size", max_block_size, self.block_size, MAX_BLOCK_SIZE)
        )
        self.step = _int_arg("step", len(targets) if step is None else step, len(targets), 1 << 20)
        if offsets is None:
            offsets = range(1, len(targets) + 1)
        elif not isinstance(offsets, (list, tuple, range)):
            raise ArgumentTypeError(f"offsets must be a list of ints, one per server, got {type(offsets).__name__}")
        self.offsets = tuple(_int_arg("offset", o, 1, self.step) for o in offsets)
        if len(self.offsets) != len(targets) or len(set(self.offsets)) != len(self.offsets):
            raise InvalidArgumentError(
                f"offsets must give each of the {len(targets)} servers its own value in 1..{self.step}, "
                f"got {list(self.offsets)}"
            )
        self.max_value = _int_arg("max_value", max_value, 1, BIGINT_MAX)
        self.start = _int_arg("start", start, 1, self.max_value)
        self.double_buffer = check_bool("double_buffer", double_buffer)
        if isinstance(prefetch_at, bool) or not isinstance(prefetch_at, (int, float)) or not 0 < prefetch_at <= 1:
            raise InvalidArgumentError(f"prefetch_at must be a share of the segment in (0, 1], got {prefetch_at!r}")
        self.prefetch_at = float(prefetch_at)
        self.segment_seconds = check_seconds("segment_seconds", segment_seconds, 0.001, 365 * 86400.0)
        if segment_seconds <= 0:
            raise InvalidArgumentError(f"segment_seconds must be > 0, got {segment_seconds!r}")
        connect_timeout, self.timeout = check_store_options(connect_timeout, create_table, accept_state_loss, timeout)
        given: Sequence[object] = () if floor is None else floor if isinstance(floor, (list, tuple)) else (floor,)
        # what a floor checks, and the refusal: floors.py
        self.floors = Floors(self.name, given)
        if not callable(clock):
            raise ArgumentTypeError(f"clock must be callable, got {type(clock).__name__}")
        self._clock = clock
        opener = functools.partial(
            open_ticket_store,
            connect_timeout=connect_timeout,
            create_table=create_table,
            accept_state_loss=accept_state_loss,
            timeout=per_server(self.timeout, len(targets)),
        )
        # A URL is opened at the first step that needs it (servers.ServerSet.opening), not here:
        # opening imports its driver and builds an engine or a client (0.1-0.3 s), which a sequence
        # made on a running event loop (a FastAPI lifespan, a Django async view) would stall the loop
        # for (stores.defer).
        stores = [defer(t, "ticket server", opener) for t in targets]
        labels = [store.label for store in stores]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            for store in stores:
                if store.opened is not None:
                    store.opened.close()
            raise InvalidArgumentError(
                f"ticket server {', '.join(twice)} is listed more than once: one server keeps one counter per "
                "sequence, with one offset; list each server once"
            )
        self.start_server = None if start_server is None else _int_arg("start_server", start_server, 0, len(stores) - 1)
        # which server next and what to refuse after a failover: servers.py
        self.servers = ServerSet(
            self.name,
            stores,
            step=self.step,
            offsets=self.offsets,
            start=self.start,
            max_value=self.max_value,
            start_server=self.start_server,
        )
        self._init_state()
        _LIVE.add(self)
        telemetry.watch("tickets", _observed)

    def _init_state(self) -> None:
        # Guards the buffer for a few in-memory steps only: never held across a round trip, a
        # floor's read, a greenlet switch or an await, so an event loop's thread may take it.
        self._mutex = threading.Lock()
        # Held for a whole reservation made in a thread, so a fork can wait until no thread of
        # ours is inside a database driver (a C library's mutex held at the instant of fork()
        # stays held forever in the child: libsqlite3's allocator did exactly that in our tests).
        self._fetch_lock = threading.Lock()
        self._buffer = SegmentBuffer(
            block_size=self.block_size,
            max_block_size=self.max_block_size,
            prefetch_at=self.prefetch_at,
            segment_seconds=self.segment_seconds,
            clock=self._clock,
            double_buffer=self.double_buffer,
        )
        # One reservation at a time, led by the thread or loop that needed it first; the others
        # follow it (flight.py: a claim ends with its owner, each follower owns its own wait).
        self._flight: Flight[Segment] = Flight()
        self._failures = 0  # reservations that failed
        # the values a next_ids call still lacks when it has to reserve: the next reservation asks for
        # them all (a block is a range: a load of n ids costs one round trip, not n / block_size)
        self._shortfall = 0
        self._worker: threading.Thread | None = None  # the last prefetch thread
        self._tasks: set[asyncio.Task[None]] = set()  # prefetch tasks on event loops, kept referenced
        self._closed = False
        self._last_seconds: float | None = None  # the last reservation's duration

    @property
    def segment(self) -> Segment | None:
        """The segment values are handed out from now (``None`` before the first id)."""
        return self._buffer.segment

    @property
    def fetches(self) -> int:
        """Reservations made (round trips that returned a segment), for benchmarks and tests."""
        return self.servers.reservations

    def __repr__(self) -> str:
        servers = ", ".join(self.servers.labels)
        return f"TicketSequence({self.name!r}, [{servers}], block_size={self.block_size}, step={self.step})"

    # --- handing out: threads --------------------------------------------------------------

    def __call__(self) -> int:
        return self.next_id()

    def next_id(self) -> int:
        """The next id: from memory, except when a segment runs out and none was prefetched."""
        check_fork()
        buffer = self._buffer
        value = next(buffer.values, None)  # a range iterator: atomic under the GIL
        if value is None or value == buffer.trigger:
            return self._next_slow(value)
        return value

    def _next_slow(self, value: int | None) -> int:
        if value is not None:  # the trigger: reserve the next segment in the background
            self._prefetch_in_thread()
            return value
        while True:
            value, prefetch = self._take()
            if value is not None:
                if prefetch:
                    self._prefetch_in_thread()
                return value
            self._reserve_now()

    def _take(self) -> tuple[int | None, bool]:
        """A value from memory (``None``: reserve first), and whether to reserve the next segment now."""
        with self._mutex:
            value = self._buffer.take()
            return value, value is not None and self._buffer.wants_prefetch()

    def _take_into(self, out: list[int], n: int) -> bool:
        """Values from memory into ``out``, up to ``n``; whether, ``out`` full, to reserve the next segment now."""
        with self._mutex:
            out.extend(self._buffer.take_many(n - len(out)))
            return len(out) == n and self._buffer.wants_prefetch()

    def next_ids(self, n: int) -> list[int]:
        """``n`` increasing ids at once (what ``n`` calls of :meth:`next_id` would give)."""
        _int_arg("n", n, 0, _MAX_BATCH)
        check_fork()
        out: list[int] = []
        while True:
            if self._take_into(out, n):
                self._prefetch_in_thread()
            if len(out) == n:
                return out
            self._shortfall = n - len(out)
            self._reserve_now()

    def _reserve_now(self) -> None:
        """Memory is empty: lead a reservation, or follow the one in flight (at most :attr:`timeout`
        and a grace for its outcome to arrive).  A reservation that fails fails its followers too:
        it already asked every server.  One whose leader stopped without an outcome is led again.

        A call on an event loop's thread (a column default in an ``AsyncSession``'s flush) never
        follows: the reservation in flight may need that very loop (a key floor on an asyncio
        engine reads there; a task of the loop may lead it), so it reserves beside it instead."""
        claim, leads = self._flight.join(follower_wait(self.timeout))
        on_loop = running_loop() is not None
        if leads:
            self._lead(claim, fork_lock=not on_loop)
        elif on_loop:
            try:
                segment = drive(self._reserve_checked(), None)
            except Exception:
                self._failures += 1
                raise
            with self._mutex:
                if not self._closed:
                    self._buffer.add(segment)  # (refused if the flight's, lower, was installed meanwhile)
        else:
            with contextlib.suppress(Abandoned):
                self._flight.follow(claim, time.monotonic() + follower_wait(self.timeout), self._waited_too_long)

    def _lead(self, claim: Claim[Segment], fork_lock: bool = True) -> None:
        """Reserve a segment in this thread for ``claim`` and put it in the buffer.  The fork lock is
        not taken on an event loop's thread: a prefetch thread may hold it while its floor's read
        waits for that loop."""
        try:
            with self._fetch_lock if fork_lock else contextlib.nullcontext():
                segment = drive(self._reserve_checked(), None)
        except BaseException as exc:
            self._failed(claim, exc)
            raise
        self._deliver(claim, segment)

    def _prefetch_in_thread(self) -> None:
        """Reserve the next segment in a thread of its own, unless a reservation is in flight.  The
        reservation is claimed here and handed to the thread as it starts (as a lease's grant is, in
        ``Acquirer._lead_in_thread``), not claimed by the thread: a caller that empties the segment
        before a busy machine runs the new thread then follows this reservation instead of leading a
        second one beside it (a block reserved for nothing, and the caller on the server).  (A loop's
        prefetch task claims when it runs: :meth:`_prefetch_on_loop` says why.)"""
        claim = self._claim_prefetch()
        if claim is None:
            return
        worker = threading.Thread(target=self._prefetch, args=(claim,), name=f"seqid-tickets-{self.name}", daemon=True)
        self._worker = worker
        try:  # the thread owns the claim from its start: the caller's thread may end before it does
            self._flight.hand_over(claim, worker)
        except BaseException as exc:  # no thread (the process's limit): its followers lead again
            self._failed(claim, exc)
            raise

    def _claim_prefetch(self) -> Claim[Segment] | None:
        """A claim on the next segment's reservation where one is wanted now (the trigger passed,
        nothing reserved ahead) and none is in flight."""
        with self._mutex:
            wanted = not self._closed and self._buffer.wants_prefetch()
        return self._flight.lead(follower_wait(self.timeout)) if wanted else None

    def _prefetch(self, claim: Claim[Segment] | None) -> None:
        """Lead ``claim``, then the next one if a caller passed the new segment's trigger before the
        claim ended: :meth:`_deliver` puts the segment in the buffer before it wakes the claim's
        followers, and a caller drawing the trigger in between found the claim live and left the
        next reservation to it (without this, the caller reserved that segment itself at its end)."""
        while claim is not None:
            try:
                self._lead(claim)
            except Exception as exc:  # a caller waiting for it fails with it; a later one reserves again
                if not isinstance(exc, SeqIDError):  # a typed refusal _reserve has logged already
                    log.warning("prefetching sequence %r failed: %s", self.name, exc)
                return
            claim = self._claim_prefetch()

    def _deliver(self, claim: Claim[Segment], segment: Segment) -> None:
        """Put a reserved segment in the buffer, then wake the claim's followers.  A claim given up
        meanwhile (its deadline passed and another caller leads now) keeps its segment out: values
        from it could come after higher ones (ids are unique, not dense)."""
        with self._mutex:
            if self._flight.leads(claim) and not self._closed:
                self._buffer.add(segment)
        self._flight.finish(claim, segment)

    def _failed(self, claim: Claim[Segment], exc: BaseException) -> None:
        if isinstance(exc, Exception):
            self._failures += 1
        self._flight.finish(claim, error=exc)

    def _waited_too_long(self) -> StoreTimeoutError:
        return StoreTimeoutError(
            f"sequence {self.name!r}: the reservation under way did not finish within {self.timeout:g} s"
        )

    # --- handing out: event loops (the same decisions; the waits are awaits) --------------------

    async def anext_id(self) -> int:
        """:meth:`next_id` for an event loop: from memory when the segment has values (no await of
        anything).  Else the task leads a reservation on its loop, awaiting the stores'
        asynchronous drivers where they have one (``aallocate``) and a worker thread's call where
        they have not, or follows the one in flight, from whichever thread or loop it runs.  A
        reservation belongs to the task that leads it: cancelled, or its loop closed, it ends
        with it, and a follower leads the next."""
        check_fork()
        buffer = self._buffer
        value = next(buffer.values, None)
        if value is not None:
            if value == buffer.trigger:
                self._prefetch_on_loop()
            return value
        while True:
            value, prefetch = self._take()
            if value is not None:
                if prefetch:
                    self._prefetch_on_loop()
                return value
            await self._areserve_now()

    async def anext_ids(self, n: int) -> list[int]:
        """:meth:`next_ids` for an event loop, reserving as :meth:`anext_id` does."""
        _int_arg("n", n, 0, _MAX_BATCH)
        check_fork()
        out: list[int] = []
        while True:
            if self._take_into(out, n):
                self._prefetch_on_loop()
            if len(out) == n:
                return out
            self._shortfall = n - len(out)
            await self._areserve_now()

    async def aprefetch(self) -> None:
        """Reserve ahead: the current segment, and the next one when double buffering, so that an
        ``AsyncSession`` flushing rows keyed by this sequence (its column default calls
        :meth:`next_id`, which cannot be awaited) finds values in memory.  Call it at start-up;
        afterwards the prefetch thread keeps a segment ahead while ids are drawn no faster than one
        segment per reservation's round trip."""
        check_fork()
        while True:
            with self._mutex:
                empty = self._buffer.empty()
            if not empty:
                break
            await self._areserve_now()
        with self._mutex:
            ahead = bool(self._buffer.ready) or not self.double_buffer
        if not ahead:
            await self._areserve_now()  # with values in memory, a segment reserved now waits behind them

    async def _areserve_now(self) -> None:
        """:meth:`_reserve_now` on the running loop."""
        claim, leads = self._flight.join(follower_wait(self.timeout))
        if leads:
            await self._alead(claim)
            return
        with contextlib.suppress(Abandoned):
            await self._flight.afollow(claim, time.monotonic() + follower_wait(self.timeout), self._waited_too_long)

    async def _alead(self, claim: Claim[Segment]) -> None:
        """Reserve a segment on the loop for ``claim`` (:meth:`_reserve_checked`'s steps, awaited)."""
        try:
            segment = await adrive(self._reserve_checked(), None)
        except BaseException as exc:  # a cancellation too: the claim ends with its task
            self._failed(claim, exc)
            raise
        self._deliver(claim, segment)

    def _prefetch_on_loop(self) -> None:
        """Reserve the next segment in a task of the running loop, unless a reservation is in
        flight.  The task claims the reservation when it runs, not before: a loop that ends
        before it starts leaves no claim behind."""
        if self._closed or self._flight.busy():
            return
        task = asyncio.get_running_loop().create_task(self._aprefetch_once())
        self._tasks = {t for t in self._tasks if not t.done() and not t.get_loop().is_closed()}
        self._tasks.add(task)
        task.add_done_callback(_retrieve)

    async def _aprefetch_once(self) -> None:
        """Lead the next segment's reservation, and one more if its trigger passed before the claim
        ended (another thread drawing from this sequence: :meth:`_prefetch` says why)."""
        claim = self._claim_prefetch()
        while claim is not None:
            await self._alead(claim)
            claim = self._claim_prefetch()

    # --- reserving (the same steps for a thread and a loop) ---------------------------------

    def _reserve_checked(self) -> Steps[Segment]:
        """Reserve a segment (:meth:`_reserve`) and refuse it where a bound key column already
        holds one of its values (every block: one index range read, in the caller's thread or,
        from a loop, a worker thread, since a floor reads through its engine's connections)."""
        segment = yield from self._reserve()
        yield from self.floors.check(segment, self.servers.label(segment.server))
        return segment

    def _reserve(self) -> Steps[Segment]:
        """Reserve a segment, from the current server or, failing that, the others in turn; its
        duration, a log record and the metrics of each reservation (refused ones too).  Steps
        (:mod:`seqid_orm.calls.steps`), so that a thread and an event loop run the same decisions; a thread
        runs them holding ``_fetch_lock`` (so a fork waits until no thread of ours is in a driver), a
        loop's thread without it (:meth:`_lead`)."""
        began = time.monotonic()
        # a batch's shortfall, taken once (a race between two batches only sizes a block: either is right)
        shortfall, self._shortfall = self._shortfall, 0
        try:
            segment = yield from self.servers.reserve(max(self._buffer.block, min(shortfall, MAX_BLOCK_SIZE)))
        except SeqIDError as exc:
            seconds = time.monotonic() - began
            telemetry.record_reservation(self.name, seconds, exc)
            telemetry.record_refusal(exc, sequence=self.name)
            log.warning(
                "sequence %r: no block reserved (%s: %s)",
                self.name,
                type(exc).__name__,
                exc,
                extra={"seqid_sequence": self.name, "seqid_error": type(exc).__name__, "seqid_seconds": seconds},
            )
            raise
        seconds = self._last_seconds = time.monotonic() - began
        telemetry.record_reservation(self.name, seconds)
        log.debug(
            "sequence %r reserved %d values from %d on %s in %.1f ms",
            self.name,
            segment.count,
            segment.first,
            self.servers.label(segment.server),
            seconds * 1000,
            extra={
                "seqid_sequence": self.name,
                "seqid_server": self.servers.label(segment.server),
                "seqid_first": segment.first,
                "seqid_count": segment.count,
                "seqid_seconds": seconds,
            },
        )
        return segment

    # --- safety checks -------------------------------------------------------------------

    def bind_floor(self, floor: KeyFloor) -> None:
        """Check this sequence's blocks against one more key column (``ticket_pk`` and ``TicketField``
        call it for the column they fill): every block from now on, and the one in use now."""
        added = self.floors.add(floor)
        if added is None:
            return
        with self._mutex:
            segment = self._buffer.segment
        if segment is not None:  # handed out before the binding: check what is left of it (outside the lock)
            self.floors.check_one(added, segment, self.servers.label(segment.server))

    def repair(self, above: int | None = None) -> list[tuple[str, TicketRow]]:
        """Move the counter on every server above ``above`` and above the largest key of the bound
        floors, creating it where it is missing; never lower.  Returns ``(server label, row)``.

        What ``seqid ticket repair`` runs after a restore, a lost Redis, or when a server joins the list.
        """
        highest = 0 if above is None else _int_arg("above", above, 0, self.max_value)
        if above is None and not self.floors:
            raise InvalidArgumentError(
                f"repairing sequence {self.name!r} needs the largest id in use: pass above= (--above) or bind the "
                "key columns it fills (floor=, --table)"
            )
        highest = max(highest, self.floors.largest())
        return drive(self.servers.repair(highest), None)

    # --- lifecycle -----------------------------------------------------------------------

    def stats(self) -> TicketStats:
        """What this sequence has done and holds now (for a status page, a log line, metrics).

        Read without waiting for a reservation under way: the figures are each exact, taken a few
        instructions apart."""
        buffer = self._buffer
        segment, remaining, prefetched = buffer.segment, buffer.remaining(), buffer.prefetched()
        return TicketStats(
            name=self.name,
            servers=self.servers.labels,
            server=self.servers.label(),
            block_size=buffer.block,
            segment=segment,
            remaining=remaining,
            prefetched=prefetched,
            ids_issued=buffer.handed - remaining,
            reservations=self.fetches,
            reservation_failures=self._failures,
            last_reservation_seconds=self._last_seconds,
        )

    def rows(self) -> list[tuple[str, TicketRow]]:
        """Every sequence on every server, as ``(server label, row)`` (what ``seqid ticket status`` shows)."""
        return self.servers.rows()

    def close(self) -> None:
        """Stop the prefetch thread (after a reservation in flight returns) and release the servers'
        connections.  Unused values are lost, as when the process ends."""
        with self._mutex:
            self._closed = True
            self._buffer.clear()
            worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        self.servers.close()

    def __enter__(self) -> TicketSequence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _after_fork(self) -> None:
        """In a forked child: drop the parent's segments, thread and connections."""
        self._init_state()
        self.servers.after_fork()


def _after_fork_in_child() -> None:
    for sequence in list(_LIVE):
        sequence._after_fork()


on_fork(_after_fork_in_child)

_FORK_WAIT = 30.0  # seconds a fork waits for a reservation in flight before going ahead anyway
_held: list[threading.Lock] = []


def _before_fork() -> None:
    """Wait until no reservation is in flight, so the child inherits no driver mid-call."""
    for sequence in sorted(_LIVE, key=id):
        lock = sequence._fetch_lock
        if lock.acquire(timeout=_FORK_WAIT):
            _held.append(lock)
        else:
            log.warning("fork() went ahead while sequence %r was still reserving values", sequence.name)


def _after_fork_in_parent() -> None:
    while _held:
        _held.pop().release()


def _forget_held_in_child() -> None:
    _held.clear()  # the child's sequences get new locks in _after_fork_in_child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_forget_held_in_child
    )


def _observed() -> Iterator[tuple[str, float, dict[str, str | int]]]:
    """The ticket sequences' observations for :mod:`~seqid_orm.allocation.telemetry`."""
    for sequence in list(_LIVE):
        if sequence._closed:
            continue
        stats = sequence.stats()
        # by store too: one name on two stores is two sequences (the telemetry sums objects alike)
        labels: dict[str, str | int] = {
            "seqid.sequence": stats.name,
            "seqid.store": ",".join(sequence.servers.labels),
        }
        yield "seqid.ids.issued", stats.ids_issued, labels
        yield "seqid.block.remaining", stats.remaining + stats.prefetched, labels
