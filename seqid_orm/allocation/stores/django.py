"""Ticket server and worker-id leases on a Django database alias, through a connection of their own.

Django hands every thread one connection per alias, and that is the connection a view's
``transaction.atomic()`` block runs on.  Reserving values there would hold the ticket row's lock
until the view commits, serialising every writer; so this store opens a *second* connection
for the alias (``connections.create_connection``), in autocommit, shared by the process's
threads under a lock.  The SQL is the SQLAlchemy store's: :mod:`.ticket_sql` and :mod:`.lease_sql`.

The table is the ``seqid_orm.django`` app's migration (add ``"seqid_orm.django"`` to
``INSTALLED_APPS`` and run ``migrate``); it has the shape of the SQLAlchemy/Alembic one, so
Django and SQLAlchemy processes can share a sequence.

Its calls go through :mod:`.runner`, the one SQL store runner the SQLAlchemy store uses too: this
module is its door onto Django's API (a connection, its errors) and its executor (:class:`DjangoExecutor`).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.ids`,
:mod:`seqid_orm.vendors` (its rules), Django and this package's ``base``, ``binds``, ``lease_sql``,
``lock_sql``, ``runner`` and ``ticket_sql``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import Error, IntegrityError, InterfaceError, OperationalError, connections

from ...calls.binds import positional
from ...calls.steps import Steps, drive
from ...errors import InvalidArgumentError
from ...ids.validate import check_seconds
from ...vendors import is_conflict
from . import lease_sql, lock_sql
from .base import LEASE_TABLE, TICKET_TABLE, LeaseStore, TicketRow, TicketStore
from .runner import Facts, SQLRunner
from .ticket_sql import SQLTicketStore, TicketSQL, ticket_sql
from .ticket_sql import rows as ticket_sql_rows

_T = TypeVar("_T")

__all__ = ["DjangoExecutor", "DjangoLeaseStore", "DjangoLockStore", "DjangoTicketStore"]

#: The vendors whose ticket statements Django can run (Oracle's needs an out bind: SQLAlchemy only).
_TICKET_VENDORS = ("postgresql", "sqlite", "mysql", "microsoft")

# Connections inherited from a parent process: never closed nor collected here (closing would
# end the parent's session on the shared socket).
_INHERITED: list[Any] = []


class _OwnConnection:
    """A Django connection for ``alias`` that is this store's alone, in autocommit: the store's
    :class:`~.runner.Door`, handed to one call at a time by its runner's lock."""

    def __init__(self, alias: str) -> None:
        if alias not in connections.settings:
            raise InvalidArgumentError(f"no Django database {alias!r} in settings.DATABASES")
        self.alias = alias
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

    def open(self, left: float) -> Any:
        conn = self.get()  # its connect bounded by the database's OPTIONS (connect_timeout)
        conn.ensure_connection()
        return conn

    def done(self, conn: Any) -> None:
        """The connection stays the store's (its runner's lock hands it to the next call)."""

    def call(self, conn: Any, body: Callable[[Any, str], _T], prefix: str, left: float) -> _T:
        return body(conn, prefix)

    def facts(self, conn: Any) -> Facts:
        if conn.vendor == "postgresql":
            # not a session setting: behind PgBouncer in transaction pooling the session is whichever
            # server connection the pooler picked, and a SET stays there for the application's next
            # statements; SET LOCAL in the statement's own message instead, where Django binds on the
            # client (psycopg2 always, psycopg 3 unless OPTIONS["server_side_binding"])
            client_side = not conn.settings_dict.get("OPTIONS", {}).get("server_side_binding")
            return Facts(conn.vendor, conn.connection, one_message=client_side)
        # a session of the store's own: the database's waits are bounded by session settings
        return Facts(conn.vendor, conn.connection, own_session=True)

    def execute(self, conn: Any, sql: str) -> None:
        with conn.cursor() as cursor:
            cursor.execute(sql)

    def discard(self, conn: Any) -> None:
        if conn is self.connection:  # the next call opens a fresh one
            self.connection = None
        with contextlib.suppress(Exception):
            conn.close()

    def close(self) -> None:
        """Close the store's connection, if it has one (the store's ``close``)."""
        if self.connection is not None:
            self.discard(self.connection)

    def dropped(self, exc: Exception) -> bool:
        # the server dropped this long-lived connection (wait_timeout, restart), or another node won
        return isinstance(exc, (OperationalError, InterfaceError))

    def is_error(self, exc: Exception) -> bool:
        return isinstance(exc, Error)

    def cause(self, exc: Exception) -> BaseException:
        return exc

    def after_fork(self) -> None:
        if self.connection is not None:
            _INHERITED.append(self.connection)
            self.connection = None


class _DjangoStore:
    """What the ticket and lease stores share: their connection (:class:`_OwnConnection`) and the
    runner of their calls (:class:`~.runner.SQLRunner`)."""

    what = "store"

    def __init__(self, alias: str, table_name: str, timeout: float) -> None:
        self.label = f"Django database {alias!r}"
        self.alias = alias
        self.table_name = table_name
        self._own = _OwnConnection(alias)
        timeout = check_seconds("timeout", timeout, 0.1, 3600.0)
        self._runner = SQLRunner(self._own, timeout, self.what, self.label, threading.Lock())

    def after_fork(self) -> None:
        self._runner.after_fork()
        self._own.after_fork()

    def close(self) -> None:
        with self._runner.alone():
            self._own.close()


class DjangoTicketStore(_DjangoStore, SQLTicketStore):
    """A ticket server on Django database ``alias``: see the module docstring."""

    what = "ticket server"

    def __init__(self, alias: str = "default", table_name: str = TICKET_TABLE, *, timeout: float = 5.0) -> None:
        super().__init__(alias, table_name, timeout)

    def _sql(self, conn: Any) -> TicketSQL:
        if conn.vendor not in _TICKET_VENDORS:
            raise InvalidArgumentError(
                f"ticket sequences through Django support PostgreSQL, MySQL/MariaDB, SQLite and SQL Server, "
                f"not {conn.vendor!r}; give TicketField a SQLAlchemy or Redis url= instead"
            )
        return ticket_sql(conn.vendor, conn.ops.quote_name(self.table_name))

    def _with_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        return self._runner.run(lambda conn, bounds: drive(steps_of(self._sql(conn)), DjangoExecutor(conn, bounds)))

    def rows(self) -> list[TicketRow]:
        def read(conn: Any, _: str) -> list[TicketRow]:
            if self.table_name not in conn.introspection.table_names():
                return []
            return drive(ticket_sql_rows(self._sql(conn)), DjangoExecutor(conn))

        return self._runner.run(read)


class DjangoLeaseStore(_DjangoStore, lease_sql.SQLLeaseStore):
    """Worker-id leases in the ``seqid_worker_leases`` table of Django database ``alias``.

    The statements are :mod:`seqid_orm.allocation.stores.lease_sql`'s, run on a connection of the store's
    own (never the request's), in autocommit.
    """

    what = "lease store"

    def __init__(self, alias: str = "default", table_name: str = LEASE_TABLE, *, timeout: float = 5.0) -> None:
        super().__init__(alias, table_name, timeout)

    def _run(self, steps_of: Callable[[lease_sql.LeaseSQL], Steps[Any]]) -> Any:
        def run(conn: Any, bounds: str) -> Any:
            sql = lease_sql.lease_sql(conn.vendor, conn.ops.quote_name(self.table_name))
            return drive(steps_of(sql), DjangoExecutor(conn, bounds))

        return self._runner.run(run)


class DjangoLockStore(_DjangoStore, lock_sql.SQLLockStore):
    """The migration lock's rows (:mod:`seqid_orm.allocation.stores.lock_sql`) on Django database
    ``alias``, through a connection of the store's own (never the one ``migrate`` runs on), in
    autocommit.  Its table is made at its first use (``CREATE TABLE IF NOT EXISTS``): it is what the
    migrations wait on, so no migration can make it."""

    what = "migration lock store"

    def __init__(self, alias: str = "default", table_name: str = lock_sql.LOCK_TABLE, *, timeout: float = 5.0) -> None:
        super().__init__(alias, table_name, timeout)
        self._ready = False

    def _run(self, steps_of: Callable[[lock_sql.LockSQL], Steps[Any]]) -> Any:
        def run(conn: Any, bounds: str) -> Any:
            sql = lock_sql.lock_sql(conn.vendor, conn.ops.quote_name(self.table_name))
            if not self._ready:
                with conn.cursor() as cursor:
                    cursor.execute(sql.create)
                self._ready = True
            return drive(steps_of(sql), DjangoExecutor(conn, bounds))

        return self._runner.run(run)


class DjangoExecutor:
    """:class:`~seqid_orm.allocation.stores.lease_sql.Executor` on a Django connection (also what
    ``manage.py seqid_doctor`` reads through).

    ``:name`` parameters become positional ``%s`` ones, which every Django backend takes.  With ``bounds``
    (a prefix of :func:`~seqid_orm.vendors.call_bounds`) each statement goes in one message after its
    time-outs, and its own result is read (the last of the message's).
    """

    def __init__(self, conn: Any, bounds: str | None = None) -> None:
        self.conn = conn
        self.bounds = bounds or None

    def _execute(self, cursor: Any, sql: str, params: dict[str, object]) -> None:
        statement, args = positional(sql, params)
        if self.bounds is None:
            cursor.execute(statement, args)
            return
        cursor.execute(self.bounds + statement, args)
        if any(k.__module__.startswith("psycopg.") for k in type(cursor.cursor).__mro__):
            while cursor.nextset():  # psycopg 3 stands on the first result (Django's cursors subclass its own)
                pass

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cursor:
            self._execute(cursor, sql, params)
            return [tuple(r) for r in cursor.fetchall()]

    def run(self, sql: str, params: dict[str, object]) -> int:
        try:
            with self.conn.cursor() as cursor:
                self._execute(cursor, sql, params)
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
            cursor.execute(*positional(sql, params))
            changed = int(cursor.rowcount)
            return (changed, int(cursor.lastrowid)) if changed else (0, None)


if TYPE_CHECKING:  # mypy holds both stores to the protocols the core calls (a lease store once lost close())
    _ticket_store: type[TicketStore] = DjangoTicketStore
    _lease_store: type[LeaseStore] = DjangoLeaseStore
