"""Snowflake-style 64-bit integer ids: ``time | datacenter | worker | sequence``.

Twitter's profile (github.com/twitter-archive/snowflake, 2010) is the default: 41 bits of milliseconds since 2010-11-04
(epoch ``1288834974657``), 5 bits of datacenter, 5 bits of worker, 12 bits of sequence.  Every
width and the time unit are configurable (:meth:`Snowflake.sonyflake` gives Sonyflake's
39-bit, 10 ms profile), as long as the id fits a *signed* BIGINT (63 bits).

Uniqueness rests on the pair (datacenter, worker) being unique among live generators, so:

* the sequence never wraps inside one time unit: the generator waits for the next unit
  (it never returns ``None`` as some libraries do);
* a clock that steps back is waited out up to ``rollback_tolerance_ms`` and refused beyond
  that with :class:`~seqid_orm.errors.ClockMovedBackwardsError` (Twitter's policy, with 0);
* a generator inherited by a forked child refuses to run
  (:class:`~seqid_orm.errors.ForkedGeneratorError`): parent and child would share a worker id.

The worker id may also be *held* rather than configured: ``Snowflake(worker_id=source)`` with a
:class:`WorkerSource`, such as a :class:`~seqid_orm.WorkerLease` (Baidu's uid-generator assigns
worker ids at start; a lease also takes them back).  Then the generator reads the worker id from
the source, never stamps a time unit past the latest millisecond the source confirmed (the
check runs under its lock *after* the clock is read, so no pause between a check and the clock
reading gets past it), and in a forked child takes a worker id of its own.  This module knows
the protocol only; the leases live in :mod:`seqid_orm.allocation.leases`.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import (
    ArgumentTypeError,
    ClockMovedBackwardsError,
    ForkedGeneratorError,
    GeneratorExhaustedError,
    InvalidArgumentError,
    InvalidIDError,
    WorkerIdConflictError,
)
from . import randomness
from .comb import check_span, datetime_to_ms, ms_to_datetime
from .randomness import on_fork

TWITTER_EPOCH_MS = 1288834974657
SONYFLAKE_EPOCH_MS = 1409529600000  # 2014-09-01T00:00:00Z, Sonyflake's default start time


@dataclass(frozen=True)
class SnowflakeParts:
    """The fields of a decoded Snowflake id."""

    timestamp: _dt.datetime
    datacenter_id: int
    worker_id: int
    sequence: int


def _check_width(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= 63:
        raise InvalidArgumentError(f"{name} must be between 0 and 63, got {value}")
    return value


def _check_field(name: str, value: object, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"{name} must be between 0 and {(1 << bits) - 1} ({bits} bits), got {value}")
    return value


@dataclass(frozen=True)
class Holding:
    """A held worker id as its :class:`WorkerSource` saw it at one instant.

    The three are read together under the source's lock: read one at a time, a lease lost and taken
    again (as another worker id) in between paired one id's fields with another's mark, and ids
    repeated (4,470 to 5,637 in 0.5 s with the pause injected there).
    """

    worker_id: int
    acquisition: int
    """How many times the source had taken a worker id: a change means these fields are stale."""
    mark_ms: int
    """The latest Unix millisecond this holder may stamp until it renews."""
    clear_since_ms: int = 0
    """The first Unix millisecond from which no other holder of this source's namespace can have
    stamped this worker id (past the previous holder's mark, or the end of a quarantine): a key
    carrying it from then on, not made by this holder, comes from another allocator."""


class KeyColumn(Protocol):
    """A key column a Snowflake fills, as far as its worker-id check needs it.

    The SQLAlchemy adapter's ``snowflake_pk`` and Django's ``SnowflakeField`` make these (the same
    objects that serve ticket sequences as floors); any object with the method will do.
    """

    label: str
    """The column as messages name it (``orders.id``)."""

    def with_field(self, low: int, high: int, shift: int, mask: int, value: int) -> int | None:
        """A key in ``[low, high)`` whose bits ``(key >> shift) & mask`` equal ``value``, or ``None``:
        one index range read, bounded by the range."""
        ...


class WorkerSource(Protocol):
    """Where a :class:`Snowflake`'s worker id comes from when it is held, not configured.

    :class:`~seqid_orm.WorkerLease` is the one seqid ships.  The generator calls :meth:`bind` once,
    :meth:`fresh` before each id, :meth:`hold` when it is not, and, under its lock after reading
    the clock, :meth:`extend_mark` when the clock has passed :attr:`mark_ms`.
    """

    acquisitions: int
    """How many times a worker id was taken: a change means the id's fields must be read again."""
    mark_ms: int
    """The latest Unix millisecond the holder may stamp until it renews (the store confirmed it)."""

    def bind(
        self,
        capacity: int,
        *,
        high_water: Callable[[], int],
        on_release: Callable[[], int],
        wall_clock: Callable[[], int],
        sleep: Callable[[float], object],
    ) -> None:
        """Serve one generator: worker ids below ``capacity``; ``high_water`` is the last Unix
        millisecond it used, ``on_release`` stops it for good and returns the same; its clocks."""

    def fresh(self, acquisition: int) -> bool:
        """Whether the worker id of ``acquisition`` is still held and not about to expire."""

    def hold(self) -> Holding:
        """The worker id held now, taking one if none is, read at one instant with its acquisition
        and mark; a typed error while none can be held."""

    def mark_for(self, acquisition: int) -> int | None:
        """The confirmed mark while ``acquisition`` is still the held one (``None`` once it is lost,
        released or taken again), read at one instant."""

    def extend_mark(self, at_least_ms: int) -> int:
        """Renew now with a mark of at least ``at_least_ms``; the confirmed mark, or a typed error."""

    def lost_error(self) -> Exception:
        """The error for ids asked while no worker id is held."""

    def release(self) -> None:
        """Give the worker id back."""


@dataclass(frozen=True)
class SnowflakeStats:
    """One :class:`Snowflake` at one moment (:meth:`Snowflake.stats`).  ``worker_id`` is the whole
    node field (datacenter and worker bits), as a lease hands it out; ``last_ms`` the Unix
    millisecond at the end of the last id's time unit (``None`` before the first id); ``lease``
    the worker-id source's own stats (a :class:`~seqid_orm.allocation.leases.LeaseStats`), if it has any."""

    worker_id: int
    ids_issued: int
    last_ms: int | None
    leased: bool
    lease: object | None


_MARK = randomness.MARK
_LIVE: weakref.WeakSet[Snowflake] = weakref.WeakSet()


def generators() -> list[Snowflake]:
    """The Snowflake generators alive in this process (what the metrics observe)."""
    return list(_LIVE)


class Snowflake:
    """A thread-safe Snowflake id generator; see the module docstring for its guarantees.

    ``worker_id``: an int, or a :class:`WorkerSource` (a :class:`~seqid_orm.WorkerLease`) whose
    worker id fills both the worker and the datacenter fields.  ``clock`` returns Unix time in
    nanoseconds and ``sleep`` takes seconds; both exist so tests can drive time.
    """

    def __init__(
        self,
        worker_id: int | WorkerSource,
        datacenter_id: int = 0,
        epoch_ms: int = TWITTER_EPOCH_MS,
        *,
        time_bits: int = 41,
        datacenter_bits: int = 5,
        worker_bits: int = 5,
        sequence_bits: int = 12,
        time_unit_ms: int = 1,
        rollback_tolerance_ms: int = 0,
        clock: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        for name, width in (
            ("time_bits", time_bits),
            ("datacenter_bits", datacenter_bits),
            ("worker_bits", worker_bits),
            ("sequence_bits", sequence_bits),
        ):
            _check_width(name, width)
        total = time_bits + datacenter_bits + worker_bits + sequence_bits
        if total > 63:
            raise InvalidArgumentError(f"the bit widths add up to {total}; at most 63 fit a signed BIGINT")
        if time_bits < 1:
            raise InvalidArgumentError("time_bits must be at least 1")
        source = None if isinstance(worker_id, int) else worker_id
        if source is not None and not all(
            callable(getattr(source, name, None)) for name in ("bind", "fresh", "hold", "extend_mark", "release")
        ):
            raise ArgumentTypeError(
                f"worker_id must be an int or a worker-id source (a WorkerLease), got {type(worker_id).__name__}"
            )
        self.worker_id = 0 if source is not None else _check_field("worker_id", worker_id, worker_bits)
        self.datacenter_id = _check_field("datacenter_id", datacenter_id, datacenter_bits)
        if isinstance(epoch_ms, bool) or not isinstance(epoch_ms, int):
            raise ArgumentTypeError(f"epoch_ms must be an int, got {type(epoch_ms).__name__}")
        for name, value in (("time_unit_ms", time_unit_ms),):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
        if (
            isinstance(rollback_tolerance_ms, bool)
            or not isinstance(rollback_tolerance_ms, int)
            or rollback_tolerance_ms < 0
        ):
            raise InvalidArgumentError(f"rollback_tolerance_ms must be an int >= 0, got {rollback_tolerance_ms!r}")
        self.epoch_ms = epoch_ms
        self.time_bits = time_bits
        self.datacenter_bits = datacenter_bits
        self.worker_bits = worker_bits
        self.sequence_bits = sequence_bits
        self.time_unit_ms = time_unit_ms
        self.rollback_tolerance_ms = rollback_tolerance_ms
        self._worker_shift = sequence_bits
        self._datacenter_shift = sequence_bits + worker_bits
        self._time_shift = sequence_bits + worker_bits + datacenter_bits
        self._node = (self.datacenter_id << self._datacenter_shift) | (self.worker_id << self._worker_shift)
        self._sequence_max = (1 << sequence_bits) - 1
        self._time_max = (1 << time_bits) - 1
        self._limit = self._time_max  # the last time unit this generator may stamp now
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._last = -1
        self._sequence = 0
        self._issued = 0
        # the last id's time unit as clock readings (its first and past its last nanosecond) and its
        # id without the sequence: next_id's fast path for a configured worker id
        self._unit_start_ns = self._unit_end_ns = 0
        self._unit_head = 0
        self._backfill = (-1, 0)  # at(): the time unit and sequence of its last id
        self._forked = False
        self.source = source
        """The worker-id source (a lease), or ``None`` for a configured worker id."""
        self._acquisition = -1  # the source's acquisition whose worker id the fields hold
        # The key columns this generator fills, checked once per acquisition of a held worker id for
        # keys another allocator stamped with it (two namespaces, or one on two stores, for one column).
        self._columns: list[KeyColumn] = []
        self._clear_since_ms = 0
        self._first_unit = -1  # the first time unit stamped under the current acquisition
        self._checked = -1  # the acquisition whose columns were checked
        self._check_lock = threading.Lock()
        if source is not None:
            if datacenter_id:
                raise InvalidArgumentError("a held worker id fills the datacenter field too: leave datacenter_id at 0")
            self._limit = -1  # nothing may be stamped before a worker id is held
            source.bind(
                1 << (worker_bits + datacenter_bits),
                high_water=self._high_water_ms,
                on_release=self._stop,
                wall_clock=clock,
                sleep=sleep,
            )
        _LIVE.add(self)

    @classmethod
    def sonyflake(cls, machine_id: int, epoch_ms: int = SONYFLAKE_EPOCH_MS, **kwargs: object) -> Snowflake:
        """Sonyflake's profile: 39 bits of 10 ms units, 8-bit sequence, 16-bit machine id.

        (Sonyflake orders its fields time | sequence | machine; here the machine id sits
        before the sequence, which keeps one generator's ids ordered the same way.)
        """
        _check_field("machine_id", machine_id, 16)  # named as the caller knows it, not as worker_id
        return cls(
            worker_id=machine_id,
            epoch_ms=epoch_ms,
            time_bits=39,
            datacenter_bits=0,
            worker_bits=16,
            sequence_bits=8,
            time_unit_ms=10,
            **kwargs,  # type: ignore[arg-type]
        )

    def __repr__(self) -> str:
        if self.source is not None:
            return f"Snowflake(worker_id={self.source!r})"
        return (
            f"Snowflake(worker_id={self.worker_id}, datacenter_id={self.datacenter_id}, "
            f"epoch_ms={self.epoch_ms}, time_bits={self.time_bits}, "
            f"datacenter_bits={self.datacenter_bits}, worker_bits={self.worker_bits}, "
            f"sequence_bits={self.sequence_bits}, time_unit_ms={self.time_unit_ms})"
        )

    @property
    def forked(self) -> bool:
        """Whether this generator came to a forked child from its parent (then, with a configured
        worker id, it refuses to run; with a held one it takes a worker id of its own)."""
        return self._forked

    def _now_units(self, reading: int | None = None) -> int:
        """The clock's time unit (``reading``: a reading already taken, so one id reads the clock once)."""
        units = ((self._clock() if reading is None else reading) // 1_000_000 - self.epoch_ms) // self.time_unit_ms
        if units < 0:
            raise ClockMovedBackwardsError(f"the clock reads a time before this generator's epoch ({self.epoch_ms} ms)")
        return units

    def _wait_until_after(self, units: int) -> int:
        """Sleep until the clock is past ``units``; return the new reading."""
        now = self._now_units()
        while now <= units:
            self._sleep(self.time_unit_ms / 1000 / 4)
            now = self._now_units()
        return now

    def __call__(self) -> int:
        return self.next_id()

    def next_id(self) -> int:
        """Return the next id (waits at most until the clock reaches the next time unit)."""
        if not _MARK[0]:  # check_fork() inlined: a forked child resets before its first id
            randomness.after_fork()
        source, t = self.source, None
        if source is None:
            # A configured worker id, in the time unit of the last id: the next sequence number,
            # nothing else to decide.  The clock's raw reading is compared with the unit's first
            # and last nanosecond (kept by _stamp), not divided into units; anything else (a new
            # unit, the sequence full, a clock behind, a forked child) takes the general path.
            lock = self._lock
            lock.acquire()
            try:
                t = self._clock()  # under the lock: no other thread stamps a later unit after this reading
                if self._unit_start_ns <= t < self._unit_end_ns:
                    sequence = self._sequence + 1
                    if sequence <= self._sequence_max:
                        self._sequence = sequence
                        self._issued += 1
                        return self._unit_head | sequence
            finally:
                lock.release()
        return self._next_general(source, t)

    def _next_general(self, source: WorkerSource | None, reading: int | None = None) -> int:
        if source is not None:
            if self._forked:  # a child: the parent's worker id is not ours (the source forgot it); take our own
                self._forked = False
            if not source.fresh(self._acquisition):
                self._refresh(source)
        with self._lock:
            if self._forked:
                raise ForkedGeneratorError(
                    f"this Snowflake (worker_id={self.worker_id}, datacenter_id={self.datacenter_id}) "
                    "was created before os.fork(); the child would repeat the parent's ids. "
                    "Create a Snowflake with its own worker id in each process."
                )
            now = self._now_units(reading)
            if now < self._last and reading is not None:  # another thread stamped since: read again
                now = self._now_units()
            if now < self._last:
                behind_ms = (self._last - now) * self.time_unit_ms
                if behind_ms > self.rollback_tolerance_ms:
                    raise ClockMovedBackwardsError(
                        f"the clock moved back by {behind_ms} ms; tolerance is "
                        f"{self.rollback_tolerance_ms} ms (rollback_tolerance_ms)"
                    )
                now = self._wait_until_after(self._last - 1)
            if now == self._last:
                sequence = self._sequence + 1
                if sequence > self._sequence_max:
                    now = self._wait_until_after(self._last)
                    sequence = 0
            else:
                sequence = 0
            if now > self._limit:
                now = self._past_limit(now)
            if now != self._last:
                start_ns = (self.epoch_ms + now * self.time_unit_ms) * 1_000_000
                self._unit_start_ns, self._unit_end_ns = start_ns, start_ns + self.time_unit_ms * 1_000_000
                self._unit_head = (now << self._time_shift) | self._node
            self._last = now
            self._sequence = sequence
            self._issued += 1
            made = (now << self._time_shift) | self._node | sequence
            if self._first_unit < 0:
                self._first_unit = now
            acquisition = self._acquisition
        if self._checked != acquisition and self._columns and source is not None:
            self._check_columns(acquisition)
        return made

    # --- awaitable: the same stamping, the waits off the event loop --------------------------

    async def anext_id(self) -> int:
        """:meth:`next_id` for an event loop.  The wait for the next time unit (a full sequence, a
        clock a little behind) is an ``await asyncio.sleep``; taking the worker id is the source's
        ``ahold()`` where it has one (a lease: awaited on the loop, within the lease's ``timeout``,
        as :meth:`next_id`'s ``hold()``); what else would wait on a store (the first id's column
        check, a mark to move past) runs :meth:`next_id` in a worker thread.  Stamping itself is the
        same code."""
        if self._store_ahead():
            await self._atake("ahold")
            return await asyncio.to_thread(self.next_id)
        while (wait := self._wait_seconds()) > 0:
            await asyncio.sleep(wait)
        return self.next_id()

    async def aprefetch(self) -> None:
        """Take the worker id (and make the first id, whose column check reads the database) in a
        worker thread, so that an ``AsyncSession`` whose column default calls :meth:`next_id` finds
        a held worker id; the renewal thread keeps it.  Costs one id.  A start-up call: it waits out
        the worker id's fence (a new namespace's cold start), which a lazy first id does not."""
        await self._atake("aacquire")
        await asyncio.to_thread(self.next_id)

    async def _atake(self, method: str) -> None:
        """Await the worker id's acquisition where the source can (``method``: ``ahold``, lazy, or
        ``aacquire``, waiting) and holds none now."""
        source = self.source
        acquire = getattr(source, method, None) or getattr(source, "aacquire", None)
        if source is not None and acquire is not None and not self._forked and not source.fresh(self._acquisition):
            await acquire()

    def _store_ahead(self) -> bool:
        """Whether the next id would wait on the worker-id source or the bound columns."""
        source = self.source
        if source is None:
            return False
        if self._forked or not source.fresh(self._acquisition):
            return True
        if self._columns and self._checked != self._acquisition:
            return True
        return self._now_units() > self._limit

    def _wait_seconds(self) -> float:
        """How long the next id would sleep for the clock (0: it can be stamped now).  Read without
        the lock: a thread that stamps meanwhile makes :meth:`next_id` wait the rest, at most a unit."""
        now, last = self._now_units(), self._last
        if now < last and (last - now) * self.time_unit_ms <= self.rollback_tolerance_ms:
            return (last - now) * self.time_unit_ms / 1000
        if now == last and self._sequence >= self._sequence_max:
            return self.time_unit_ms / 4000
        return 0.0

    def _past_limit(self, now: int) -> int:
        """Called (under the lock) when the clock reads past ``_limit``: the time unit to stamp, or a
        refusal.  The limit is the time field's end, and for a held worker id the source's mark."""
        if now > self._time_max:
            raise GeneratorExhaustedError(f"the {self.time_bits}-bit time field is exhausted; choose a later epoch_ms")
        source = self.source
        assert source is not None  # a configured worker id's limit is the time field's end
        mark = source.mark_for(self._acquisition) if self._acquisition >= 0 else None
        if mark is None:
            raise source.lost_error()  # released or taken again since the check in next_id
        limit = self._units_within(mark)  # the renewal thread may have moved it
        if now > limit:
            # The clock reads past the confirmed mark (a step forward, or a pause past a renewal):
            # record a mark past this time unit before stamping it, or refuse if the worker id is gone.
            unit_end_ms = self.epoch_ms + (now + 1) * self.time_unit_ms - 1
            limit = self._units_within(source.extend_mark(unit_end_ms))
        self._limit = limit
        return now

    # --- a held worker id ---------------------------------------------------------------

    def _high_water_ms(self) -> int:
        """The last Unix millisecond of the last time unit this generator used (0 before the first id)."""
        if self._last < 0:
            return 0
        return self.epoch_ms + (self._last + 1) * self.time_unit_ms - 1

    def _units_within(self, mark_ms: int) -> int:
        """The last time unit that ends at or before ``mark_ms``."""
        return min(self._time_max, (mark_ms - self.epoch_ms + 1) // self.time_unit_ms - 1)

    def _stop(self) -> int:
        """Before the worker id is given back: stamp nothing more under it; the last millisecond used."""
        with self._lock:
            self._limit = -1
            self._acquisition = -1
            return self._high_water_ms()

    def _refresh(self, source: WorkerSource) -> None:
        """Read the worker id the source holds (taking one if none is) into the id's fields."""
        held = source.hold()  # worker id, acquisition and mark of one instant
        with self._lock:
            self.worker_id = held.worker_id & ((1 << self.worker_bits) - 1)
            self.datacenter_id = held.worker_id >> self.worker_bits
            self._node = (self.datacenter_id << self._datacenter_shift) | (self.worker_id << self._worker_shift)
            self._acquisition = held.acquisition
            self._limit = self._units_within(held.mark_ms)
            self._clear_since_ms = getattr(held, "clear_since_ms", 0)
            self._first_unit = -1

    def bind_column(self, column: KeyColumn) -> None:
        """Check the key column this generator fills (``snowflake_pk`` and ``SnowflakeField`` call it):
        before the first id of each worker id it holds is used, a key there carrying that worker id,
        stamped since no other holder of its namespace could have (:attr:`Holding.clear_since_ms`)
        and before this holder's first id, is refused with
        :class:`~seqid_orm.errors.WorkerIdConflictError`.  Another allocator fills the column with
        the same worker ids then (a second namespace, or one namespace on two stores), and about
        half the ids of the two would repeat.  Nothing is checked for a configured worker id."""
        if not callable(getattr(column, "with_field", None)) or not isinstance(getattr(column, "label", None), str):
            raise ArgumentTypeError(f"column must be a KeyColumn (label, with_field()), got {type(column).__name__}")
        with self._check_lock:
            if all(c.label != column.label for c in self._columns):
                self._columns = [*self._columns, column]
                self._checked = -1  # the new column is checked at the next id

    def _check_columns(self, acquisition: int) -> None:
        """The worker-id check of :meth:`bind_column` for ``acquisition`` (once; again after a refusal)."""
        with self._check_lock:
            with self._lock:
                if acquisition != self._acquisition or self._checked == acquisition:
                    return  # taken again meanwhile (its own first id checks it), or checked by another thread
                low_unit = -(-(self._clear_since_ms - self.epoch_ms) // self.time_unit_ms)  # the first whole unit
                high_unit = self._first_unit
                field = (self.datacenter_id << self.worker_bits) | self.worker_id
            if 0 <= low_unit < high_unit:
                mask = (1 << (self.worker_bits + self.datacenter_bits)) - 1
                for column in self._columns:
                    found = column.with_field(
                        low_unit << self._time_shift, high_unit << self._time_shift, self._worker_shift, mask, field
                    )
                    if found is not None:
                        raise WorkerIdConflictError(
                            f"{column.label} holds the key {found}, stamped at "
                            f"{self.decode(found).timestamp.isoformat()} with worker id {field}, which no holder of "
                            f"this Snowflake's lease made ({self.source!r}): another allocator fills this column with "
                            "the same worker ids (a second lease namespace, the same namespace on another store, or a "
                            "configured worker_id), and their ids would repeat. Give the column one namespace on one "
                            "store"
                        )
            self._checked = acquisition

    def stats(self) -> SnowflakeStats:
        """This generator now: its worker id, the ids it made, the last one's time, its lease's stats."""
        source = self.source
        lease_stats = getattr(source, "stats", None)
        return SnowflakeStats(
            worker_id=(self.datacenter_id << self.worker_bits) | self.worker_id,
            ids_issued=self._issued,
            last_ms=self._high_water_ms() or None,
            leased=source is not None,
            lease=lease_stats() if callable(lease_stats) else None,
        )

    def close(self) -> None:
        """Give a held worker id back now (a lease is released at exit anyway); nothing for a configured one."""
        if self.source is not None:
            self.source.release()

    def decode(self, snowflake_id: int) -> SnowflakeParts:
        """Split an id made with this generator's profile into its fields."""
        if isinstance(snowflake_id, bool) or not isinstance(snowflake_id, int):
            raise ArgumentTypeError(f"snowflake_id must be an int, got {type(snowflake_id).__name__}")
        if not 0 <= snowflake_id < (1 << 63):
            raise InvalidIDError(f"snowflake_id must be between 0 and 2**63-1, got {snowflake_id}")
        units = snowflake_id >> self._time_shift
        if units > self._time_max:
            raise InvalidIDError(f"snowflake_id {snowflake_id} does not fit this profile's {self.time_bits}-bit time")
        return SnowflakeParts(
            timestamp=ms_to_datetime(self.epoch_ms + units * self.time_unit_ms),
            datacenter_id=(snowflake_id >> self._datacenter_shift) & ((1 << self.datacenter_bits) - 1),
            worker_id=(snowflake_id >> self._worker_shift) & ((1 << self.worker_bits) - 1),
            sequence=snowflake_id & self._sequence_max,
        )

    def at(self, when: _dt.datetime) -> int:
        """An id for the instant ``when`` (a backfill: rows imported with their own times).  Calls for
        the same time unit count on from the call before, so a backfill in time order gets ids in its
        order; a unit's sequence full is :class:`~seqid_orm.errors.GeneratorExhaustedError`.

        The ids carry this generator's worker id, and its live ids of those past instants may already
        exist: give a backfill a worker id of its own (a ``Snowflake`` made for it), which no live
        process holds.  A leased worker id is refused: its lease fences the present, not the past.
        """
        if self.source is not None:
            raise InvalidArgumentError(
                "a leased Snowflake makes no ids for past instants (its lease covers the present only): "
                "backfill with a Snowflake of a worker id no live process holds"
            )
        units = (datetime_to_ms(when, "when") - self.epoch_ms) // self.time_unit_ms
        if not 0 <= units <= self._time_max:
            raise InvalidArgumentError(f"when {when.isoformat()} is outside this profile's time range")
        with self._lock:
            if self._forked:  # the parent counts on with the same worker id: both would make these ids
                raise ForkedGeneratorError(
                    f"this Snowflake (worker_id={self.worker_id}) was created before os.fork(); a child's "
                    "backfill would repeat the parent's ids. Create a Snowflake with its own worker id in each process."
                )
            last_unit, sequence = self._backfill
            sequence = sequence + 1 if units == last_unit else 0
            if sequence > self._sequence_max:
                raise GeneratorExhaustedError(
                    f"{self._sequence_max + 1} ids already made for the time unit of {when.isoformat()} "
                    f"({self.sequence_bits}-bit sequence); no later id fits it"
                )
            self._backfill = (units, sequence)
        return (units << self._time_shift) | self._node | sequence

    def time_bounds(self, start: _dt.datetime, end: _dt.datetime) -> tuple[int, int]:
        """``(low, high)``: the ids of this profile made in ``[start, end)`` lie at or above ``low`` and
        below ``high`` (the first id of each instant), so ``low <= id < high`` is a range on the key's
        index."""
        low, high = self.min_id_at(start), self.min_id_at(end)
        check_span(start, end)
        return low, high

    def min_id_at(self, when: _dt.datetime) -> int:
        """The smallest id any generator of this profile can make at ``when`` (for range queries)."""
        units = (datetime_to_ms(when, "when") - self.epoch_ms) // self.time_unit_ms
        if not 0 <= units <= self._time_max:
            raise InvalidArgumentError(f"when {when.isoformat()} is outside this profile's time range")
        return units << self._time_shift


def _mark_forked() -> None:
    for gen in list(_LIVE):
        gen._forked = True
        gen._lock = threading.Lock()
        gen._unit_start_ns = gen._unit_end_ns = 0  # no fast path: the general one refuses the parent's worker id


on_fork(_mark_forked)  # os.fork(), multiprocessing, and fork() made in C alike
