"""Ticket server and worker-id leases on a Django database alias, through a connection of their own.

Django hands every thread one connection per alias, and that is the connection a view's
``transaction.atomic()`` block runs on.  Reserving values there would hold the ticket row's lock
until the view commits, serialising every writer; so this store opens a *second* connection
for the alias (``connections.create_connection``), in autocommit, shared by the process's
threads under a lock.  The SQL is the SQLAlchemy store's: :mod:`.ticket_sql` and :mod:`.lease_sql`.

The table is the ``seqid_orm.django`` app's migration (add ``"seqid_orm.django"`` to
``INSTALLED_APPS`` and run ``migrate``); it has the shape of the SQLAlchemy/Alembic one, so
Django and SQLAlchemy processes can share a sequence.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connections

from ...errors import BackendUnavailableError, InvalidArgumentError
from . import lease_sql
from .base import LEASE_TABLE, TICKET_TABLE, LeaseStore, TicketRow, TicketStore, is_conflict
from .steps import Steps, drive
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
    """A Django connection for ``alias`` that is this store's alone, shared by its threads under a lock."""

    def __init__(self, alias: str) -> None:
        if alias not in connections.settings:
            raise InvalidArgumentError(f"no Django database {alias!r} in settings.DATABASES")
        self.alias = alias
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


class DjangoTicketStore(SQLTicketStore):
    """A ticket server on Django database ``alias``: see the module docstring."""

    def __init__(self, alias: str = "default", table_name: str = TICKET_TABLE) -> None:
        self._own = _OwnConnection(alias)
        self.alias = alias
        self.table_name = table_name
        self.label = f"Django database {alias!r}"

    def _sql(self, conn: Any) -> TicketSQL:
        if conn.vendor not in _TICKET_VENDORS:
            raise InvalidArgumentError(
                f"ticket sequences through Django support PostgreSQL, MySQL/MariaDB, SQLite and SQL Server, "
                f"not {conn.vendor!r}; give TicketField a SQLAlchemy or Redis url= instead"
            )
        return ticket_sql(conn.vendor, conn.ops.quote_name(self.table_name))

    def _with_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        with self._own.lock:
            for attempt in (1, 2):
                conn = self._own.get()
                try:
                    return drive(steps_of(self._sql(conn)), DjangoExecutor(conn))
                except (OperationalError, InterfaceError) as exc:
                    # the server dropped this long-lived connection (wait_timeout, restart): once
                    # more on a fresh one; values the lost statement reserved are only a gap
                    self._own.discard()
                    if attempt == 2:
                        raise _unavailable("ticket server", self.label, exc) from exc
                except DatabaseError as exc:  # the server's answer: seqid's error, the one place here
                    raise _unavailable("ticket server", self.label, exc) from exc
        raise AssertionError("unreachable")

    def rows(self) -> list[TicketRow]:
        with self._own.lock:
            conn = self._own.get()
            if self.table_name not in conn.introspection.table_names():
                return []
            return drive(ticket_sql_rows(self._sql(conn)), DjangoExecutor(conn))

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

    def __init__(self, alias: str = "default", table_name: str = LEASE_TABLE) -> None:
        self._own = _OwnConnection(alias)
        self.table_name = table_name
        self.label = f"Django database {alias!r}"

    def _run(self, steps_of: Callable[[lease_sql.LeaseSQL], Steps[Any]]) -> Any:
        with self._own.lock:
            for attempt in (1, 2):
                conn = self._own.get()
                try:
                    sql = lease_sql.lease_sql(conn.vendor, conn.ops.quote_name(self.table_name))
                    return drive(steps_of(sql), DjangoExecutor(conn))
                except (OperationalError, InterfaceError) as exc:
                    self._own.discard()  # a dropped connection: once more on a fresh one
                    if attempt == 2:
                        raise _unavailable("lease store", self.label, exc) from exc
                except DatabaseError as exc:
                    raise _unavailable("lease store", self.label, exc) from exc
        raise AssertionError("unreachable")

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
