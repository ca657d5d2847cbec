"""Deadlines for blocking driver calls: a store that stops answering never holds a caller past its timeout.

A server can stall with its sockets open: a process frozen by SIGSTOP, a network that drops
packets, a proxy that stops forwarding, a PostgreSQL commit waiting for a synchronous standby
that does not confirm.  ``statement_timeout`` cannot help there (the server is not the one
answering), TCP keep-alives take minutes, and libpq has no read time-out of its own.  So every
store call runs under a :class:`Watchdog` deadline: when it passes, the connection's socket is
shut down (``shutdown(2)``, which wakes a thread blocked reading it), the driver raises, and the
store reports :class:`~seqid_orm.errors.StoreTimeoutError` instead of the driver's error.  The
shut-down connection is never used again (SQLAlchemy invalidates it as a disconnect).

One daemon thread per process serves every deadline (a heap of due times), so arming one costs a
lock and a heap push, not a thread.  Drivers with a socket time-out of their own (PyMySQL's
``read_timeout``, redis-py's ``socket_timeout``) get that too; the watchdog is what bounds the
ones without (psycopg, and any ``Engine`` a user hands in).

May import: the standard library, :mod:`seqid_orm.calls` (a connection's socket) and :mod:`seqid_orm.ids`
(its fork hook).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

from ...calls.drivers import socket_of
from ...ids.randomness import on_fork

__all__ = ["Alarm", "Watchdog", "watch", "watchdog"]


class Alarm:
    """One armed deadline; :meth:`cancel` disarms it (``False`` if it had already fired)."""

    __slots__ = ("_action", "_lock", "fired", "state")

    def __init__(self, action: Callable[[], object]) -> None:
        self._action = action
        self._lock = threading.Lock()
        self.state = "armed"
        self.fired = False

    def cancel(self) -> bool:
        with self._lock:
            if self.state == "armed":
                self.state = "cancelled"
                return True
            return False

    def _fire(self) -> None:
        with self._lock:
            if self.state != "armed":
                return
            self.state = "fired"
            self.fired = True
            with contextlib.suppress(Exception):  # the connection may be gone already
                self._action()


class Watchdog:
    """Runs an action when a deadline passes, unless the deadline was cancelled first."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Alarm]] = []
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, action: Callable[[], object]) -> Alarm:
        alarm = Alarm(action)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._count), alarm))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="seqid-deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()
        return alarm

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].state != "armed":
                        heapq.heappop(self._heap)  # cancelled: forget it
                    if not self._heap:
                        self._cond.wait(60.0)
                        continue
                    due = self._heap[0][0] - time.monotonic()
                    if due <= 0:
                        alarm = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(due)
            alarm._fire()


_WATCHDOG = Watchdog()


def watchdog() -> Watchdog:
    """The process's watchdog (a new one in a forked child: the parent's thread is not there)."""
    return _WATCHDOG


def _after_fork() -> None:
    global _WATCHDOG
    _WATCHDOG = Watchdog()


on_fork(_after_fork)


def _shutdown(fd: int) -> None:
    """Wake whatever thread reads socket ``fd``: shut the socket down (the fd itself stays the driver's)."""
    dup = os.dup(fd)
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return
    with sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def watch(dbapi_connection: object, seconds: float) -> Iterator[Alarm | None]:
    """Bound what runs inside to ``seconds`` on this connection: past it, its socket is shut down so
    the blocked driver call raises.  Yields the :class:`Alarm` (``.fired`` tells the caller the
    error it sees was the deadline), or ``None`` where the driver gives no socket."""
    fd = socket_of(dbapi_connection)
    if fd is None:
        yield None
        return
    alarm = watchdog().arm(seconds, lambda: _shutdown(fd))
    try:
        yield alarm
    finally:
        alarm.cancel()
