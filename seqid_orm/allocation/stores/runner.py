"""One SQL store runner: how a call of the SQLAlchemy store or of the Django store reaches its database.

Both stores run the same statements (:mod:`.ticket_sql`, :mod:`.lease_sql`); before this module each
also wrote its own policy around them (its deadline, the errors it tried again, its lock detection,
its per-vendor session bounds, its socket watch, its error translation), and the two disagreed
(MariaDB's lock wait was a time-out in one, a retry in the other).  The policy is here once; each
store is an adapter, a :class:`Door`, that says how its API opens and drops a connection and which of
its errors is which, as the ``Executor`` of :mod:`seqid_orm.calls.steps` says how it runs a statement.

What one call does (:meth:`SQLRunner.run`): its deadline is the store's bound on one call, or the
caller's passed down where that ends sooner (:meth:`~seqid_orm.calls.retry.Deadline.within`); a door whose connection
threads share is waited for within it; :data:`~seqid_orm.calls.retry.CONNECTION` owns the tries; each try bounds the
database's own waits as :func:`~seqid_orm.vendors.call_bounds` says for the connection the door
describes, and shuts the connection's socket when the deadline passes (:mod:`.deadline`); a connection
the server dropped, or a conflict another node won, is tried again on a fresh connection; what the
database says otherwise is translated once: a lock waited for until the deadline is
:class:`~seqid_orm.errors.StoreTimeoutError`, the rest :class:`~seqid_orm.errors.BackendUnavailableError`.
One try is written once, as steps (:meth:`SQLRunner.attempt`): the blocking path drives it on a door
whose methods block (:meth:`SQLRunner.run`), the awaited path of the SQLAlchemy store awaits it on a door
whose methods are coroutines (:meth:`SQLRunner.arun`), so both discard a connection the same way.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.vendors`
(its rules) and this package's ``deadline``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ...calls.retry import CONNECTION, Deadline
from ...calls.steps import Call, Steps, adrive, drive
from ...errors import AllocationError, BackendUnavailableError, StoreTimeoutError
from ...vendors import CallBounds, call_bounds, is_conflict, is_lock_timeout
from .deadline import watch

__all__ = ["Door", "Facts", "SQLRunner"]

_C = TypeVar("_C")
_T = TypeVar("_T")

#: What an awaited door raises when its backstop cut the call off (a driver with no socket to shut):
#: the deadline passed (``asyncio.TimeoutError`` is ``TimeoutError`` from Python 3.11 on).
_BACKSTOP_ERRORS = (asyncio.TimeoutError, TimeoutError)


@dataclass(frozen=True)
class Facts:
    """What a door tells of one connection, from which the runner decides (the adapter describes, the
    vendors' rules decide, as everywhere in seqid): its vendor (``postgresql``, ``mysql``, ...), its
    DB-API connection (whose socket the deadline shuts), whether its driver sends several statements
    with their parameters in one message, and whether its session is the store's alone."""

    vendor: str
    dbapi_connection: Any
    one_message: bool = False
    own_session: bool = False


class Door(Protocol[_C]):
    """What the runner needs of a database API (SQLAlchemy's, Django's) to run a call on it.  A door of the
    awaited path has the same methods as coroutines (``open``, ``execute``, ``call``, ``discard``, ``done``):
    the steps of a try call them, and :func:`~seqid_orm.calls.steps.adrive` awaits them."""

    def open(self, left: float) -> _C:
        """A connection for one try (a pooled one, or the store's own), within ``left`` seconds where the
        door can bound a connect (its driver's connect time-out bounds it otherwise)."""

    def facts(self, conn: _C) -> Facts:
        """What the runner decides from (:class:`Facts`)."""

    def execute(self, conn: _C, sql: str) -> None:
        """Run one statement of :func:`~seqid_orm.vendors.call_bounds` on ``conn``."""

    def call(self, conn: _C, body: Any, prefix: str, left: float) -> Any:
        """``body(conn, prefix)``, the call itself, with ``left`` seconds."""

    def discard(self, conn: _C) -> None:
        """Never use ``conn`` again: its socket was shut at the deadline, or the server dropped it."""

    def done(self, conn: _C) -> None:
        """The try is over: ``conn`` back to its pool (or kept, where it is the store's own)."""

    def dropped(self, exc: Exception) -> bool:
        """Whether ``exc`` says the server dropped the connection (the next try takes a fresh one)."""

    def is_error(self, exc: Exception) -> bool:
        """Whether ``exc`` is this API's database error (the runner translates it)."""

    def cause(self, exc: Exception) -> BaseException:
        """The driver's own error inside ``exc`` (what a :class:`BackendUnavailableError` names)."""


class SQLRunner(Generic[_C]):
    """Runs a SQL store's calls through ``door`` within ``timeout`` seconds each (see the module
    docstring).  ``lock``: where the door's one connection is shared by threads, the lock that hands it
    to one call at a time; waited for within the call's deadline."""

    def __init__(
        self, door: Door[_C], timeout: float, what: str, label: str, lock: threading.Lock | None = None
    ) -> None:
        self.door, self.timeout, self.what, self.label, self.lock = door, timeout, what, label, lock

    def run(self, body: Callable[[_C, str], _T]) -> _T:
        """``body(conn, prefix)`` on a connection of the door (``prefix``: what each of its statements is
        sent after, :attr:`~seqid_orm.vendors.CallBounds.prefix`), with the call's policy."""
        deadline = Deadline.within(self.timeout)
        if self.lock is not None and not self.lock.acquire(timeout=max(0.0, deadline.left())):
            raise self.timed_out()
        try:
            done: _T = drive(self.tries(lambda left: self.attempt(self.door, body, left), deadline), None)
            return done
        finally:
            if self.lock is not None:
                self.lock.release()

    async def arun(self, door: Any, body: Callable[..., Any]) -> Any:
        """:meth:`run` on the event loop, through ``door``, whose methods are coroutines (an asynchronous
        driver's engine of this loop): the same tries, steps and translation, awaited."""
        return await adrive(self.tries(lambda left: self.attempt(door, body, left)), None)

    def after_fork(self) -> None:
        """A forked child's runner: a lock of its own (the parent's may have been held at the fork)."""
        if self.lock is not None:
            self.lock = threading.Lock()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """No call runs while inside (the door's connection closed under no call of another thread)."""
        if self.lock is None:
            yield
            return
        with self.lock:
            yield

    def tries(self, attempt: Callable[[float], Steps[_T]], deadline: Deadline | None = None) -> Steps[_T]:
        """A call's tries (``attempt(left)``: one try's steps with ``left`` seconds), for a blocking and
        an awaited path alike: :data:`~seqid_orm.calls.retry.CONNECTION` owns the loop within ``deadline`` (by default
        the store's bound or the caller's, :meth:`~seqid_orm.calls.retry.Deadline.within`), and an error of the
        door's API is translated once (:meth:`translated`)."""
        deadline = deadline or Deadline.within(self.timeout)
        try:
            return (yield from CONNECTION.steps(attempt, self.again, deadline, self.timed_out))
        except Exception as exc:
            if self.door.is_error(exc):
                raise self.translated(exc) from exc
            raise

    def attempt(self, door: Any, body: Callable[..., Any], left: float) -> Steps[Any]:
        """One try with ``left`` seconds, written once for the blocking and the awaited door: a connection,
        its socket watched (shut at the deadline), the database's own waits bounded, the call; a failure
        decides once what the connection becomes (:meth:`failed`), a cancellation (a task, the awaited
        path's backstop) discards it, cut off mid-statement; the connection goes back in every case."""
        try:
            conn = yield Call(door.open, (left,))
        except _BACKSTOP_ERRORS:  # an awaited connect cut off at its backstop
            raise self.timed_out() from None
        closing = False
        try:
            facts = door.facts(conn)
            with watch(facts.dbapi_connection, left) as alarm:
                try:
                    bounds = self.bounds(facts, left)
                    for statement in bounds.before:
                        yield Call(door.execute, (conn, statement))
                    return (yield Call(door.call, (conn, body, bounds.prefix, left)))
                except GeneratorExit:  # dropped unfinished (its loop closed): no step may run any more
                    closing = True
                    raise
                except Exception as exc:
                    timed_out = (alarm is not None and alarm.fired) or isinstance(exc, _BACKSTOP_ERRORS)
                    discard, instead = self.failed(exc, timed_out)
                    if discard:
                        yield Call(door.discard, (conn,))
                    if instead is not None:
                        raise instead from None
                    raise
                except BaseException:
                    yield Call(door.discard, (conn,))
                    raise
        finally:
            if not closing:
                yield Call(door.done, (conn,))

    def failed(self, exc: Exception, deadline_passed: bool) -> tuple[bool, Exception | None]:
        """What a try that failed with ``exc`` leaves behind, for a blocking and an awaited try alike: whether
        its connection is discarded (its socket shut at the deadline: never used again; or dropped by the
        server: the next try opens a fresh one, and what it reserved is a gap), and the error to raise in
        ``exc``'s place (``None``: ``exc`` itself)."""
        if deadline_passed:
            return True, self.timed_out()
        return self._dropped(exc), None

    def bounds(self, facts: Facts, left: float) -> CallBounds:
        """The database's own waits for a try with ``left`` seconds, on the connection ``facts`` describes."""
        return call_bounds(
            facts.vendor, left, self.timeout, one_message=facts.one_message, own_session=facts.own_session
        )

    def again(self, exc: Exception) -> bool:
        """Whether a try that failed with ``exc`` is tried again: a connection the server dropped, or a
        conflict another node won (which wrote nothing); never a lock waited for until the deadline."""
        return self._not_a_lock_wait(exc) and (self.door.dropped(exc) or is_conflict(exc))

    def _dropped(self, exc: Exception) -> bool:
        """Whether ``exc`` says the server dropped the connection (not a lock waited out)."""
        return self._not_a_lock_wait(exc) and self.door.dropped(exc)

    def _not_a_lock_wait(self, exc: Exception) -> bool:
        """Whether ``exc`` is this API's database error and not a lock waited out, which no try repeats."""
        return self.door.is_error(exc) and not is_lock_timeout(exc)

    def translated(self, exc: Exception) -> AllocationError:
        """The database's answer as seqid's (the one place a SQL store translates them): a lock waited
        for until the deadline is a time-out; the rest :class:`BackendUnavailableError`, which callers
        fail over on, naming the driver's error (anything else that escapes a call is a bug and
        surfaces as itself)."""
        if is_lock_timeout(exc):
            return self.timed_out()
        cause = self.door.cause(exc)
        return BackendUnavailableError(f"{self.what} {self.label}: {type(cause).__name__}: {cause}")

    def timed_out(self) -> StoreTimeoutError:
        return StoreTimeoutError(
            f"{self.what} {self.label} did not answer within {self.timeout:g} s (a lock held elsewhere, a stalled "
            "server or network, or a synchronous standby that does not confirm); its connection was closed"
        )
