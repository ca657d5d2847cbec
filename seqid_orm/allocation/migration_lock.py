"""A migration lock for several pods: one run of the migrations at a time, whatever pooler is between.

Kubernetes starts several pods of a release at once, and each runs ``alembic upgrade head`` or
``manage.py migrate``.  Ecto, ActiveRecord and golang-migrate take a lock first; the hand-written
Python ones take a session's advisory lock, which transaction pooling breaks (the lock strands on a
pooled server connection and every later pod waits behind it).  :class:`MigrationLock` is a lease on a
row (:mod:`.stores.lock_sql`): taken where nobody holds it or its holder's lease expired, renewed from a
daemon thread while held, given back at the end.  So:

* it holds through PgBouncer in any pooling mode, on PostgreSQL, MariaDB and SQLite alike (every
  statement is one short transaction of the lock's own connection, never the migration's);
* a holder that dies lets go within one ``ttl`` (its row expires by the database's clock);
* a holder frozen past its ``ttl`` (SIGSTOP, a paused VM) loses it, and stops at its next
  :meth:`MigrationLock.check` (before each step of seqid's operations, before each migration of
  Django's ``migrate``) with :class:`~seqid_orm.errors.MigrationLockLostError`;
* another run waits while the holder lives, saying who holds it, up to ``wait`` seconds, then raises
  :class:`~seqid_orm.errors.MigrationLockTimeoutError` naming the holder.

SQLite's file has one writer, which a migration holds for its whole run, so no row could be renewed
there: its lock is :class:`FileLock`, the kernel's lock on the database file.

The renewal's outcome is :func:`.renewal.decide`'s and its validity :meth:`.lease_life.Timing.valid_until`'s,
the worker lease's own rules.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` (its
names' bound) and this package's ``lease_life``, ``renewal`` and ``stores`` (its lock rows).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from ..errors import AllocationError, MigrationLockLostError, MigrationLockTimeoutError
from ..ids.validate import check_seconds
from ..vendors import bounded_name
from .lease_life import Event, Timing
from .renewal import decide, renewal_deadline
from .stores import lock_target, open_lock_store
from .stores.base import check_name
from .stores.lock_sql import LockHolder

__all__ = [
    "LOCKED_VENDORS",
    "FileLock",
    "LockStore",
    "MigrationLock",
    "NoLock",
    "column_lock",
    "holder_here",
    "locked",
    "wait_for",
]

log = logging.getLogger("seqid_orm.migrations")

#: How often a waiting run says who holds the lock.
SAY_EVERY = 30.0


class LockStore(Protocol):
    """Where the lock's row lives (:class:`~.stores.sqlalchemy.SQLAlchemyLockStore`,
    :class:`~.stores.django.DjangoLockStore`): every call one short statement of the store's own
    connection, bounded by its time-out."""

    label: str

    def take(self, name: str, holder: str, token: str, ttl_ms: int) -> bool: ...

    def renew(self, name: str, token: str, ttl_ms: int) -> bool: ...

    def release(self, name: str, token: str) -> None: ...

    def holder(self, name: str) -> LockHolder | None: ...

    def close(self) -> None: ...


def holder_here(what: str) -> str:
    """Who this process is, as a lock's row says it: ``what`` runs, on which host, in which process."""
    return f"{what} on {socket.gethostname()} pid {os.getpid()}"


class MigrationLock(Timing):
    """The lock ``name`` in ``store`` (see the module docstring); ``with lock:`` holds it.

    ``ttl``: how long the row is held without a renewal (a dead holder's lock is free after it);
    ``wait``: the longest :meth:`acquire` waits for another holder (``None``: as long as that holder
    lives and renews); ``holder``: what this run is, as others' messages name it."""

    def __init__(
        self,
        store: LockStore,
        name: str,
        *,
        ttl: float = 15.0,
        wait: float | None = None,
        holder: str | None = None,
        poll: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.store = store
        self.name = check_name(name, "migration lock name")
        self.ttl = check_seconds("ttl", ttl, 1.0, 86400.0)
        self.clock_tolerance = 0.0  # the store's clock alone counts a lock's lease (Timing)
        self.wait = None if wait is None else check_seconds("wait", wait, 0.0, 7 * 86400.0)
        self.holder = holder or holder_here("a migration")
        self.poll = check_seconds("poll", poll, 0.01, 60.0)
        self._monotonic, self._sleep = monotonic, sleep
        self._token: str | None = None
        self._valid_until = float("-inf")
        self._lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_column(cls, store: LockStore, table: str, column: str, what: str) -> MigrationLock:
        """The lock of one table's column, which seqid's online operations take (``what``: the
        operation, as others' messages name it): two pods running the same migration take turns."""
        name = "".join(
            c if (c.isalnum() and c.isascii()) or c in "_.:-" else "_"
            for c in bounded_name("online:", table.lower(), column.lower())
        )
        return cls(store, name, holder=holder_here(f"{what} {table}.{column}"))

    @property
    def held(self) -> bool:
        """Whether this run holds the lock now (taken, renewed in time, not given back)."""
        return self._token is not None and not self._lost and self._monotonic() < self._valid_until

    def acquire(self) -> MigrationLock:
        """Take the lock, waiting while another run holds it (see ``wait``)."""
        if self._token is not None:
            return self
        token = secrets.token_hex(16)
        ttl_ms = self.ttl_ms
        sent = wait_for(
            lambda: self.store.take(self.name, self.holder, token, ttl_ms),
            lambda: self._describe(self.store.holder(self.name)),
            f"the migration lock {self.name!r} in {self.store.label}",
            self.wait,
            self.poll,
            f"end that process (its lease then ends within {self.ttl:g} s)",
            self._monotonic,
            self._sleep,
        )
        self._token, self._lost = token, False
        self._valid_until = self.valid_until(sent)
        log.info("seqid: took the migration lock %r (%s)", self.name, self.holder)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, args=(self._stop,), daemon=True, name="seqid-lock")
        self._thread.start()
        return self

    def check(self) -> None:
        """Raise :class:`~seqid_orm.errors.MigrationLockLostError` unless this run still holds the lock:
        called before each step, so a run that lost it (frozen past its ``ttl``) changes nothing more."""
        if not self.held:
            raise MigrationLockLostError(
                f"the migration lock {self.name!r} was not renewed within its ttl of {self.ttl:g} s (this process "
                "was stopped or the database did not answer), so another run may hold it now: this run stops "
                "before its next step; run the migrations again once the other run has ended"
            )

    def release(self) -> None:
        """Give the lock back (its renewals stop first); a lock not held is left alone."""
        token, self._token = self._token, None
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.ttl)
        if token is None:
            return
        try:
            self.store.release(self.name, token)
        except AllocationError as exc:  # its row expires by itself within the ttl
            log.warning(
                "seqid: could not give the migration lock %r back (%s); it expires within %g s",
                self.name,
                exc,
                self.ttl,
            )

    def __enter__(self) -> MigrationLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _renew_loop(self, stop: threading.Event) -> None:
        interval = self.renewal_interval()
        while not stop.wait(interval):
            token = self._token
            if token is None:
                return
            sent = self._monotonic()
            bound = renewal_deadline(self._valid_until, self._monotonic)  # what is left of the lock's validity
            try:
                with bound.passed_down() if bound is not None else contextlib.nullcontext():
                    answer: bool | None = self.store.renew(self.name, token, self.ttl_ms)
            except AllocationError as exc:  # the store did not answer: try again while the lock is valid
                log.warning("seqid: the migration lock %r could not be renewed: %s", self.name, exc)
                answer = None
            if stop.is_set():
                return
            outcome = decide(answer, sent, self._monotonic(), self.ttl, self._valid_until)
            if outcome is Event.RENEWED:
                self._valid_until = self.valid_until(sent)
            elif outcome is Event.LOST:
                self._lost = True
                log.error("seqid: lost the migration lock %r (not renewed within %g s)", self.name, self.ttl)
                return
            interval = self.next_renewal_in(outcome, self._valid_until, self._monotonic())

    def _describe(self, found: LockHolder | None) -> str:
        if found is None:
            return "its holder let go a moment ago"
        return (
            f"held by {found.holder} for {found.held_for_ms / 1000:.0f} s, its lease ending in "
            f"{max(found.expires_in_ms, 0) / 1000:.0f} s unless renewed (a live holder renews it)"
        )


def wait_for(
    take: Callable[[], bool],
    describe: Callable[[], str],
    what: str,
    wait: float | None,
    poll: float,
    unstick: str,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> float:
    """Try ``take`` until it succeeds, saying who holds ``what`` (``describe``) every :data:`SAY_EVERY`
    seconds, for ``wait`` seconds at most (``None``: as long as it takes); the monotonic time of the try
    that took it.  Past ``wait``: :class:`~seqid_orm.errors.MigrationLockTimeoutError` naming the holder
    and how to end a stuck one (``unstick``).  The one wait of both kinds of migration lock."""
    started = monotonic()
    said = float("-inf")
    while True:
        sent = monotonic()
        if take():
            return sent
        now = monotonic()
        if wait is not None and now - started >= wait:
            raise MigrationLockTimeoutError(
                f"{what} was not free within {now - started:.0f} s: {describe()}. A holder that is stuck keeps "
                f"it while its process lives: {unstick}, or give the wait more time"
            )
        if now - said >= SAY_EVERY:
            log.warning("seqid: waiting for %s: %s", what, describe())
            said = now
        left = float("inf") if wait is None else wait - (now - started)
        sleep(max(0.0, min(poll, left)))


class FileLock:
    """The migration lock of a SQLite database: ``flock(2)`` on the database file itself.

    SQLite has one writer per file, and a migration holds its write transaction for as long as it runs,
    so a lock row there could not be renewed meanwhile.  The processes that share a SQLite file share a
    host, and the kernel's lock ends with its holder, killed or not.  ``flock`` locks an open file, not
    a byte range of it: SQLite's own locks (POSIX ``fcntl`` ranges) neither see it nor are released by
    it.  The holder is named from ``/proc/locks`` where the kernel has one (Linux)."""

    def __init__(self, path: str, *, wait: float | None = None, holder: str | None = None, poll: float = 0.2) -> None:
        self.path = path
        self.wait = None if wait is None else check_seconds("wait", wait, 0.0, 7 * 86400.0)
        self.holder = holder or holder_here("a migration")
        self.poll = check_seconds("poll", poll, 0.01, 60.0)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FileLock:
        import fcntl

        if self._fd is not None:
            return self
        # created where it is not there yet, as SQLite itself would at the first connection (an empty file is an
        # empty database)
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)

        def take() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        try:
            wait_for(take, self._describe, f"the migration lock of {self.path}", self.wait, self.poll, "end it")
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        log.info("seqid: took the migration lock of %s (%s)", self.path, self.holder)
        return self

    def check(self) -> None:
        if self._fd is None:
            raise MigrationLockLostError(f"this run does not hold the migration lock of {self.path}")

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # the flock goes with the last descriptor of its open file

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _describe(self) -> str:
        try:
            st = os.stat(self.path)
            where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
            with open("/proc/locks") as f:
                for line in f:
                    fields = line.split()
                    if "FLOCK" in fields and where in fields:
                        pid = fields[fields.index(where) - 1]
                        return f"held by pid {pid} on this host ({_command_of(pid)})"
        except OSError:
            pass
        return "held by another process on this host"


def _command_of(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"
    except OSError:
        return "?"


class NoLock:
    """The lock of a database only one process can open (SQLite in memory): always held."""

    held = True

    def acquire(self) -> NoLock:
        return self

    def check(self) -> None:
        """Never raises: nothing else can run migrations on this database."""

    def release(self) -> None:
        """Nothing to give back."""

    def __enter__(self) -> NoLock:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


#: The engines whose servers keep the lock's rows (SQLAlchemy's dialect names, Django's vendors).
LOCKED_VENDORS = ("postgresql", "mysql", "mariadb")


@contextlib.contextmanager
def locked(
    target: object, name: str, *, holder: str, wait: float | None = None, ttl: float = 15.0
) -> Iterator[MigrationLock | FileLock | NoLock]:
    """One run of the migrations at a time on the database ``target`` reaches (a SQLAlchemy ``Engine`` or
    ``Connection``, a Django connection), the one rule of both ORMs: a lease on the row ``name`` where the
    server keeps the lock's table (:data:`LOCKED_VENDORS`), on a store of its own closed after; the kernel's
    lock on the database file on SQLite; none for a database in memory (one process) or an engine the
    lock's rows are not written for (SQL Server, Oracle)."""
    vendor, path = lock_target(target)
    if vendor == "sqlite" and path is not None:
        with FileLock(path, wait=wait, holder=holder) as file_lock:
            yield file_lock
    elif vendor in LOCKED_VENDORS:
        store = open_lock_store(target)
        try:
            with MigrationLock(store, name, wait=wait, ttl=ttl, holder=holder) as lock:
                yield lock
        finally:
            store.close()
    else:
        yield NoLock()


@contextlib.contextmanager
def column_lock(target: object, table: str, column: str, what: str) -> Iterator[MigrationLock]:
    """The lock of one table's column (:meth:`MigrationLock.for_column`) that seqid's online operations
    take, on a store of its own on the database ``target`` reaches, closed after: two pods running the same
    migration take turns."""
    store = open_lock_store(target)
    try:
        with MigrationLock.for_column(store, table, column, what) as lock:
            yield lock
    finally:
        store.close()
