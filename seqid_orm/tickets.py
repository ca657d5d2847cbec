"""Ticket sequences: compact integer keys handed out in blocks by ticket servers.

A :class:`TicketSequence` reserves a *segment* of ``block_size`` values from a ticket server in
one round trip and hands them out from memory, as TiDB's batched auto-increment and Meituan's
Leaf (segment mode) do.  Ticket servers are SQL databases or Redis
(:mod:`seqid_orm.backends`); several of them with a common ``step`` and the offsets ``1..K``
hand out disjoint values (Flickr's odd/even ticket servers, generalised)::

    orders = TicketSequence("orders", "postgresql+psycopg://app@db/app", block_size=1000)
    orders.next_id()      # 1, 2, 3, ... in this process; another process gets 1001, ...
    orders.next_ids(500)  # a list of 500 increasing values

What a user running twenty application processes gets:

* **Uniqueness** across threads, processes and forks: every value comes from one atomic
  reservation on a server, and a forked child drops its parent's segments before its first id
  (however the fork was made; see :mod:`seqid_orm._random`).  ``os.fork()`` waits for a
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
* **Never inside your transaction**: a reservation is one statement on the store's own
  connection, committed at once, so an open business transaction holds no ticket-row lock.
* **Failover**: each process starts at a random server of the list and stays with it while it
  answers; when it fails the next one is asked.  :class:`~seqid_orm.errors.BackendUnavailableError`
  is raised only when none answers.

Loads beyond the defaults: ``max_block_size`` turns on Leaf's adaptive block size (it doubles
while segments last less than ``segment_seconds`` and halves when one lasts over twice that).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ._random import check_fork, on_fork
from .backends import TicketRow, TicketStore, check_name, open_ticket_store
from .errors import (
    ArgumentTypeError,
    BackendUnavailableError,
    GeneratorExhaustedError,
    InvalidArgumentError,
    SeqIDError,
)
from .validate import BIGINT_MAX

__all__ = ["MAX_BLOCK_SIZE", "Segment", "TicketSequence"]

log = logging.getLogger("seqid_orm.tickets")

#: The largest segment one reservation may take (a billion values; Leaf caps at a million).
MAX_BLOCK_SIZE = 1 << 30

_MAX_BATCH = 1 << 24  # next_ids() per call, as comb_batch


@dataclass(frozen=True)
class Segment:
    """Values ``first, first + step, ..., first + (count - 1) * step`` reserved from ``server``."""

    first: int
    count: int
    step: int
    server: int

    @property
    def last(self) -> int:
        """The last value of the segment."""
        return self.first + (self.count - 1) * self.step


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
        self.offsets = tuple(_int_arg("offset", o, 1, self.step) for o in offsets)
        if len(self.offsets) != len(targets) or len(set(self.offsets)) != len(self.offsets):
            raise InvalidArgumentError(
                f"offsets must give each of the {len(targets)} servers its own value in 1..{self.step}, "
                f"got {list(self.offsets)}"
            )
        self.max_value = _int_arg("max_value", max_value, 1, BIGINT_MAX)
        self.start = _int_arg("start", start, 1, self.max_value)
        if isinstance(double_buffer, bool) is False:
            raise ArgumentTypeError(f"double_buffer must be a bool, got {type(double_buffer).__name__}")
        if isinstance(prefetch_at, bool) or not isinstance(prefetch_at, (int, float)) or not 0 < prefetch_at <= 1:
            raise InvalidArgumentError(f"prefetch_at must be a share of the segment in (0, 1], got {prefetch_at!r}")
        if not isinstance(segment_seconds, (int, float)) or not segment_seconds > 0:
            raise InvalidArgumentError(f"segment_seconds must be > 0, got {segment_seconds!r}")
        self.double_buffer = double_buffer
        self.prefetch_at = float(prefetch_at)
        self.segment_seconds = float(segment_seconds)
        self._clock = clock
        self._stores: list[TicketStore] = [
            open_ticket_store(t, connect_timeout=connect_timeout, create_table=create_table) for t in targets
        ]
        self.start_server = (
            None if start_server is None else _int_arg("start_server", start_server, 0, len(self._stores) - 1)
        )
        self.fetches = 0
        """Reservations made (round trips that returned a segment), for benchmarks and tests."""
        self._init_state()
        _LIVE.add(self)

    def _init_state(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        # Held for a whole reservation, so a fork can wait until no thread of ours is inside a
        # database driver (a C library's mutex held at the instant of fork() stays held forever
        # in the child: libsqlite3's allocator did exactly that in our tests).
        self._fetch_lock = threading.Lock()
        self._values: Iterator[int] = iter(())
        self._trigger: int | None = None
        self._next: Segment | None = None
        self._fetching = False
        self._want_prefetch = False
        self._worker: threading.Thread | None = None
        self._closed = False
        # spread processes over the servers
        self._server = secrets.randbelow(len(self._stores)) if self.start_server is None else self.start_server
        self._block = self.block_size
        self._installed_at: float | None = None
        self.segment: Segment | None = None
        """The segment values are handed out from now (``None`` before the first id)."""

    def __repr__(self) -> str:
        servers = ", ".join(s.label for s in self._stores)
        return f"TicketSequence({self.name!r}, [{servers}], block_size={self.block_size}, step={self.step})"

    # --- handing out ---------------------------------------------------------------------

    def __call__(self) -> int:
        return self.next_id()

    def next_id(self) -> int:
        """The next id: from memory, except when a segment runs out and none was prefetched."""
        check_fork()
        value = next(self._values, None)  # a range iterator: atomic under the GIL
        if value is None or value == self._trigger:
            return self._next_slow(value)
        return value

    def next_ids(self, n: int) -> list[int]:
        """``n`` increasing ids at once (what ``n`` calls of :meth:`next_id` would give)."""
        _int_arg("n", n, 0, _MAX_BATCH)
        check_fork()
        out: list[int] = []
        with self._cond:
            while len(out) < n:
                chunk = list(itertools.islice(self._values, n - len(out)))
                trigger = self._trigger
                if chunk and trigger is not None and chunk[0] <= trigger <= chunk[-1]:
                    self._request_prefetch()
                out.extend(chunk)
                if len(out) < n:
                    self._swap()
        return out

    def _next_slow(self, value: int | None) -> int:
        with self._cond:
            if value is not None:  # the value at which the next segment is to be prefetched
                self._request_prefetch()
                return value
            while True:
                value = next(self._values, None)
                if value is not None:
                    if value == self._trigger:
                        self._request_prefetch()
                    return value
                self._swap()

    # --- segments (called with the lock held) --------------------------------------------

    def _swap(self) -> None:
        """Install the next segment: the prefetched one, the one being fetched, or a new one."""
        # A prefetch requested but not yet picked up by the thread counts as being fetched:
        # fetching here as well would reserve a segment twice.
        while (self._fetching or self._want_prefetch) and self._worker is not None and self._worker.is_alive():
            self._cond.wait()
        segment, self._next = self._next, None
        if segment is None:
            segment = self._fetch()  # holds the lock: other threads wait for this segment too
        self._install(segment)

    def _install(self, segment: Segment) -> None:
        now = self._clock()
        if self._installed_at is not None and self.max_block_size > self.block_size:
            lasted = now - self._installed_at  # Leaf's rule: double when fast, halve when slow
            if lasted < self.segment_seconds:
                self._block = min(self._block * 2, self.max_block_size)
            elif lasted > 2 * self.segment_seconds:
                self._block = max(self._block // 2, self.block_size)
        self._installed_at = now
        self.segment = segment
        self._values = iter(range(segment.first, segment.last + 1, segment.step))
        if self.double_buffer:
            index = min(segment.count - 1, int(segment.count * self.prefetch_at))
            self._trigger = segment.first + index * segment.step
        else:
            self._trigger = None

    def _request_prefetch(self) -> None:
        if self._next is not None or self._fetching or self._closed:
            return
        self._want_prefetch = True
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._prefetch_loop, name=f"seqid-tickets-{self.name}", daemon=True)
            self._worker.start()
        self._cond.notify_all()

    def _prefetch_loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._want_prefetch and not self._closed:
                    cond.wait()
                if self._closed or cond is not self._cond:  # closed, or this process forked
                    return
                self._want_prefetch = False
                self._fetching = True
            segment = None
            try:
                segment = self._fetch()
            except Exception as exc:  # the caller fetches again itself and sees the error then
                log.warning("prefetching sequence %r failed: %s", self.name, exc)
            with cond:
                if cond is self._cond:
                    self._next = segment
                    self._fetching = False
                    cond.notify_all()

    def _fetch(self) -> Segment:
        """Reserve a segment, from the current server or, failing that, the others in turn."""
        with self._fetch_lock:
            return self._fetch_unlocked()

    def _fetch_unlocked(self) -> Segment:
        count = self._block
        errors: list[str] = []
        exhausted = 0
        k = len(self._stores)
        for i in [(self._server + j) % k for j in range(k)]:
            store = self._stores[i]
            try:
                first, granted = store.allocate(
                    self.name, count, self.step, self.offsets[i], self.start, self.max_value
                )
            except GeneratorExhaustedError as exc:
                exhausted += 1
                errors.append(str(exc))
                continue
            except SeqIDError:
                raise  # a contradicting server or a vanished counter: going on could repeat ids
            except Exception as exc:  # the server is unreachable or failing: ask the next one
                errors.append(f"{store.label}: {type(exc).__name__}: {exc}")
                if k > 1:
                    log.warning("ticket server %s failed (%s); trying the next", store.label, exc)
                continue
            if i != self._server:
                log.warning("sequence %r now draws from %s", self.name, store.label)
            self._server = i
            self.fetches += 1
            return Segment(first, granted, self.step, i)
        if exhausted == k:
            raise GeneratorExhaustedError("; ".join(errors))
        raise BackendUnavailableError(f"no ticket server answered for sequence {self.name!r}: " + "; ".join(errors))

    # --- lifecycle -----------------------------------------------------------------------

    def rows(self) -> list[tuple[str, TicketRow]]:
        """Every sequence on every server, as ``(server label, row)`` (what ``seqid ticket status`` shows)."""
        return [(store.label, row) for store in self._stores for row in store.rows()]

    def close(self) -> None:
        """Stop the prefetch thread (after a reservation in flight returns) and release the servers'
        connections.  Unused values are lost, as when the process ends."""
        with self._cond:
            self._closed = True
            self._values = iter(())
            self._next = None
            worker = self._worker
            self._cond.notify_all()
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        for store in self._stores:
            store.close()

    def __enter__(self) -> TicketSequence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _after_fork(self) -> None:
        """In a forked child: drop the parent's segments, thread and connections."""
        self._init_state()
        for store in self._stores:
            store.after_fork()


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
