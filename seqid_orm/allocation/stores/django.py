"""Ticket server and worker-id leases on a Django database alias, through a connection of their own.

Django hands every thread one connection per alias, and that is the connection a view's
``transaction.atomic()`` block runs on.  Reserving values there would hold the ticket row's lock
until the view commits, serialising every writer; so this store opens a *second* connection
for the alias (``connections.create_connection``), in autocommit, shared by the process's
threads under a lock.  The SQL is the SQLAlchemy store's: :mod:`.ticket_sql` and :mod:`.lease_sql`.

The table is the ``seqid_orm.django`` app's migration (add ``"seqid_orm.django"`` to
``INSTALLED_APPS`` and run ``migrate``); it has the shape of the SQLAlchemy/Alembic one, so
Django and SQLAlchemy processes can share a sequence.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` (its
rules), Django and this package's
``base``, ``deadline``, ``lease_sql``, ``retry``, ``steps`` and ``ticket_sql``.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connections

from ...errors import BackendUnavailableError, InvalidArgumentError, StoreTimeoutError
from ...ids.validate import check_seconds
from ...vendors import is_lock_timeout
from . import lease_sql
from .base import LEASE_TABLE, TICKET_TABLE, LeaseStore, TicketRow, TicketStore, is_conflict
from .deadline import watch
from .retry import CONNECTION, Deadline
from .steps import Steps, call, drive
from .ticket_sql import SQLTicketStore, TicketSQL, ticket_sql
from .ticket_sql import rows as ticket_sql_rows

_T = TypeVar("_T")

__all__ = ["DjangoExecutor", "DjangoLeaseStore", "DjangoTicketStore"]

#: The vendors whose ticket statements Django can run (Oracle's needs an out bind: SQLAlchemy only).
_TICKET_VENDORS = ("postgresql", "sqlite", "mysql", "microsoft")

# Connections inherited from a parent process: never closed nor collected here (closing would
# end the parent's session on the shared socket).
_INHERITED: list[Any] = []


class _OwnConnection:
    """A Django connection for ``alias`` that is this store's alone, shared by its threads under a lock,
    and every call on it within ``timeout`` seconds (:meth:`call`)."""

    def __init__(self, alias: str, timeout: float, what: str, label: str) -> None:
        if alias not in connections.settings:
            raise InvalidArgumentError(f"no Django database {alias!r} in settings.DATABASES")
        self.alias = alias
        self.timeout = check_seconds("timeout", timeout, 0.1, 3600.0)
        self.what, self.label = what, label
        self.lock = threading.Lock()
        self.connection: Any = None

    def get(self) -> Any:
        if self.connection is None:
            conn = connections.create_connection(self.alias)
            if conn.vendor == "sqlite" and conn.is_in_memory_db():
                raise InvalidArgumentError(
                    f"Django database {self.alias!r} is an in-memory SQLite database (Django's default test "
                    "database): a second connection to it cannot wait for its write lock, so seqid's own "
                    f"connection would fail at random. Give it a file (DATABASES[{self.alias!r}]['TEST']['NAME'] "
                    "= 'test.sqlite3'), or draw from another alias or url="
                )
            conn.inc_thread_sharing()
            self.connection = conn
        return self.connection

    def call(self, body: Callable[[Any], _T]) -> _T:
        """``body(conn)`` on the store's connection within the store's deadline and with its retry
        policy (:data:`~.retry.CONNECTION`), as the SQLAlchemy store runs its calls.

        The lock is waited for at most that long, the database's own lock waits are bounded by what
        is left of it (:func:`_bounds`), and the connection's socket is shut down when it passes
        (:mod:`.deadline`): :class:`StoreTimeoutError`, never a wait without end (a row another
        transaction holds with ``SELECT ... FOR UPDATE`` held a call, and every call after it, for
        good).  A connection the server dropped is tried again on a fresh one; the database's other
        answers are :class:`BackendUnavailableError`, the one translation here."""
        deadline = Deadline.within(self.timeout)  # or the caller's, passed down, where it ends sooner
        if not self.lock.acquire(timeout=max(0.0, deadline.left())):
            raise self.timed_out()
        try:
            tries = CONNECTION.steps(lambda left: call(self._once, body, left), _again, deadline, self.timed_out)
            done: _T = drive(tries, None)
            return done
        except DatabaseError as exc:
            raise (self.timed_out() if is_lock_timeout(exc) else _unavailable(self.what, self.label, exc)) from exc
        finally:
            self.lock.release()

    def _once(self, body: Callable[[Any], _T], left: float) -> _T:
        """One try of :meth:`call`, with ``left`` seconds."""
        conn = self.get()
        try:
            conn.ensure_connection()
            with watch(conn.connection, left) as alarm:
                try:
                    _bounds(conn, left, self.timeout)
                    return body(conn)
                except Exception:
                    if alarm is not None and alarm.fired:
                        self.discard()  # its socket is shut: never used again
                        raise self.timed_out() from None
                    raise
        except (OperationalError, InterfaceError) as exc:
            if _again(exc):
                # the server dropped this long-lived connection (wait_timeout, restart): the next try opens
                # a fresh one; values the lost statement reserved are only a gap
                self.discard()
            raise

    def timed_out(self) -> StoreTimeoutError:
        return StoreTimeoutError(
            f"{self.what} {self.label} did not answer within {self.timeout:g} s (a lock held elsewhere, a stalled "
            "server or network); its connection was closed"
        )

    def discard(self) -> None:
        conn, self.connection = self.connection, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def after_fork(self) -> None:
        self.lock = threading.Lock()
        if self.connection is not None:
            _INHERITED.append(self.connection)
            self.connection = None


def _bounds(conn: Any, left: float, timeout: float) -> None:
    """Bound the database's own waits on the store's connection (its alone, in autocommit, so a
    session setting is this call's): PostgreSQL's ``lock_timeout`` to what is left of the deadline and
    ``statement_timeout`` above it (:func:`~.sqlalchemy.pg_bounds`' figures), InnoDB's lock wait in whole
    seconds, SQLite's busy wait."""
    ms = max(1, int(left * 1000))
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(f"SET lock_timeout = {ms}; SET statement_timeout = {max(1, math.ceil(2 * timeout * 1000))}")
        elif conn.vendor == "mysql":
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(left))}")
        elif conn.vendor == "sqlite":
            cursor.execute(f"PRAGMA busy_timeout = {ms}")


def _again(exc: Exception) -> bool:
    """Whether a call that failed with ``exc`` is tried again: a connection the server dropped, not a
    lock waited for until the deadline (:func:`~seqid_orm.vendors.is_lock_timeout`)."""
    return isinstance(exc, (OperationalError, InterfaceError)) and not is_lock_timeout(exc)


class DjangoTicketStore(SQLTicketStore):
    """A ticket server on Django database ``alias``: see the module docstring."""

    def __init__(self, alias: str = "default", table_name: str = TICKET_TABLE, *, timeout: float = 5.0) -> None:
        self.label = f"Django database {alias!r}"
        self._own = _OwnConnection(alias, timeout, "ticket server", self.label)
        self.alias = alias
        self.table_name = table_name

    def _sql(self, conn: Any) -> TicketSQL:
        if conn.vendor not in _TICKET_VENDORS:
            raise InvalidArgumentError(
                f"ticket sequences through Django support PostgreSQL, MySQL/MariaDB, SQLite and SQL Server, "
                f"not {conn.vendor!r}; give TicketField a SQLAlchemy or Redis url= instead"
            )
        return ticket_sql(conn.vendor, conn.ops.quote_name(self.table_name))

    def _with_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        return self._own.call(lambda conn: drive(steps_of(self._sql(conn)), DjangoExecutor(conn)))

    def rows(self) -> list[TicketRow]:
        def read(conn: Any) -> list[TicketRow]:
            if self.table_name not in conn.introspection.table_names():
                return []
            return drive(ticket_sql_rows(self._sql(conn)), DjangoExecutor(conn))

        return self._own.call(read)

    def after_fork(self) -> None:
        self._own.after_fork()

    def close(self) -> None:
        with self._own.lock:
            self._own.discard()


class DjangoLeaseStore(lease_sql.SQLLeaseStore):
    """Worker-id leases in the ``seqid_worker_leases`` table of Django database ``alias``.

    The statements are :mod:`seqid_orm.allocation.stores.lease_sql`'s, run on a connection of the store's
    own (never the request's), in autocommit.
    """

    def __init__(self, alias: str = "default", table_name: str = LEASE_TABLE, *, timeout: float = 5.0) -> None:
        self.label = f"Django database {alias!r}"
        self._own = _OwnConnection(alias, timeout, "lease store", self.label)
        self.table_name = table_name

    def _run(self, steps_of: Callable[[lease_sql.LeaseSQL], Steps[Any]]) -> Any:
        def run(conn: Any) -> Any:
            sql = lease_sql.lease_sql(conn.vendor, conn.ops.quote_name(self.table_name))
            return drive(steps_of(sql), DjangoExecutor(conn))

        return self._own.call(run)

    def after_fork(self) -> None:
        self._own.after_fork()

    def close(self) -> None:
        with self._own.lock:
            self._own.discard()


def _unavailable(what: str, label: str, exc: Exception) -> BackendUnavailableError:
    """Django's database error as seqid's (each store's one translation): callers fail over on it;
    anything else that escapes a store call is a bug and surfaces as itself."""
    return BackendUnavailableError(f"{what} {label}: {type(exc).__name__}: {exc}")


_NAMED = re.compile(r"\\?:(\w+)")


class DjangoExecutor:
    """:class:`~seqid_orm.allocation.stores.lease_sql.Executor` on a Django connection (also what
    ``manage.py seqid_doctor`` reads through).

    ``:name`` parameters become positional ``%s`` ones, which every Django backend takes.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @staticmethod
    def _positional(sql: str, params: dict[str, object]) -> tuple[str, list[object]]:
        order: list[object] = []

        def place(match: re.Match[str]) -> str:
            if match.group(0).startswith("\\"):  # ``\:``, a colon (in a quoted identifier), as sa.text() reads it
                return match.group(0)[1:]
            order.append(params[match.group(1)])
            return "%s"

        return _NAMED.sub(place, sql.replace("%", "%%")), order

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cursor:
            cursor.execute(*self._positional(sql, params))
            return [tuple(r) for r in cursor.fetchall()]

    def run(self, sql: str, params: dict[str, object]) -> int:
        try:
            with self.conn.cursor() as cursor:
                cursor.execute(*self._positional(sql, params))
                return int(cursor.rowcount)
        except IntegrityError:
            return 0
        except OperationalError as exc:
            if is_conflict(exc):
                return 0  # another node (Galera) or transaction took this worker id first
            raise

    def run_last_id(self, sql: str, params: dict[str, object]) -> tuple[int, int | None]:
        """Run ``sql`` (MySQL's ``LAST_INSERT_ID(expr)``): the rows it changed and the value it set,
        from the statement's own OK packet, on this connection."""
        with self.conn.cursor() as cursor:
            cursor.execute(*self._positional(sql, params))
            changed = int(cursor.rowcount)
            return (changed, int(cursor.lastrowid)) if changed else (0, None)


if TYPE_CHECKING:  # mypy holds both stores to the protocols the core calls (a lease store once lost close())
    _ticket_store: type[TicketStore] = DjangoTicketStore
    _lease_store: type[LeaseStore] = DjangoLeaseStore
