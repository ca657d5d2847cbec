"""Ticket server and worker-id leases on a SQL database, through SQLAlchemy (PostgreSQL,
MariaDB/MySQL, SQLite; SQL Server and Oracle by the same statements, compiled only).

Each reservation is one statement on this store's *own* engine, in autocommit: it never joins a
caller's transaction, so a business transaction that drew ids and is still open holds no lock
on the ticket row (the warning in the comments on Flickr's ticket servers: a row lock held until
the business commit serialises every writer).  The statements, per vendor, are
:mod:`.ticket_sql`'s and :mod:`.lease_sql`'s, shared with the Django store; this module brings
the engines and connections, and is the door of the one SQL store runner (:mod:`.runner`: the
deadlines, the tries, the error translation), which the Django store runs its calls through too.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.vendors`
(its rules), SQLAlchemy, psycopg (its client-side cursor) and this package's ``base``, ``binds``,
``deadline``, ``lease_sql``, ``lock_sql``, ``runner``, ``ticket_sql`` and ``urls``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:  # sqlalchemy.ext.asyncio is imported where a loop runs, not by every store
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ...calls.binds import pyformat
from ...calls.steps import PerLoop, Steps, adrive, drive
from ...errors import InvalidArgumentError
from ...vendors import call_bounds, is_conflict
from . import lease_sql, lock_sql
from .base import (
    LEASE_TABLE,
    NAME_LENGTH,
    TICKET_TABLE,
    TOKEN_LENGTH,
    LeaseRow,
    TicketRow,
    hide_password,
    split_state_loss_option,
)
from .runner import Facts, SQLRunner
from .ticket_sql import SQLTicketStore, TicketSQL, ticket_sql
from .ticket_sql import rows as ticket_sql_rows
from .urls import psycopg_typed_options

__all__ = [
    "ColumnFloor",
    "SQLAlchemyExecutor",
    "SQLAlchemyLeaseStore",
    "SQLAlchemyLockStore",
    "SQLAlchemyTicketStore",
    "create_engine_for",
    "driver_deadlines",
    "lease_columns",
    "lease_table",
    "lock_table",
    "sa_column_of",
    "ticket_columns",
    "ticket_table",
]


def ticket_table(metadata: sa.MetaData, name: str = TICKET_TABLE) -> sa.Table:
    """The ticket table on ``metadata`` (the same shape as the Django model and the Alembic op).

    Add it to your application's metadata to let Alembic autogenerate create it (rendered as
    ``op.create_ticket_table()`` by :data:`seqid_orm.sqlalchemy.alembic.writer`).
    """
    existing = metadata.tables.get(name)
    if existing is not None:
        return existing
    return sa.Table(name, metadata, *ticket_columns(), info={"seqid": "tickets"})


def ticket_columns() -> list[sa.Column[Any]]:
    """New column objects of the ticket table (one set per table or Alembic operation)."""
    return [
        sa.Column("name", sa.String(NAME_LENGTH), primary_key=True),
        sa.Column("next_value", sa.BigInteger, nullable=False),
        sa.Column("step", sa.BigInteger, nullable=False),
        sa.Column("value_offset", sa.BigInteger, nullable=False),
    ]


def lease_table(metadata: sa.MetaData, name: str = LEASE_TABLE) -> sa.Table:
    """The worker-lease table on ``metadata`` (for Alembic: ``op.create_lease_table()``)."""
    existing = metadata.tables.get(name)
    if existing is not None:
        return existing
    return sa.Table(name, metadata, *lease_columns(), info={"seqid": "leases"})


def lease_columns() -> list[sa.Column[Any]]:
    """New column objects of the worker-lease table."""
    return [
        sa.Column("namespace", sa.String(NAME_LENGTH), primary_key=True),
        sa.Column("worker_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("token", sa.String(TOKEN_LENGTH), nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("last_timestamp", sa.BigInteger, nullable=False),
    ]


def lock_table(metadata: sa.MetaData, name: str = lock_sql.LOCK_TABLE) -> sa.Table:
    """The migration lock's table on ``metadata`` (made by the lock at its first use, not by a migration:
    it is what the migrations wait on)."""
    existing = metadata.tables.get(name)
    if existing is not None:
        return existing
    return sa.Table(
        name,
        metadata,
        sa.Column("name", sa.String(NAME_LENGTH), primary_key=True),
        sa.Column("holder", sa.String(lock_sql.HOLDER_LENGTH), nullable=False),
        sa.Column("token", sa.String(TOKEN_LENGTH), nullable=False),
        sa.Column("acquired_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        info={"seqid": "migration-lock"},
    )


_DEFAULT_TIMEOUT = 5.0
_T = TypeVar("_T")


def create_engine_for(url: str, connect_timeout: float = _DEFAULT_TIMEOUT, timeout: float = _DEFAULT_TIMEOUT) -> Engine:
    """An engine of the store's own (autocommit, connect, lock and read time-outs), so allocation
    never shares a connection or a transaction with the application.  No pre-ping: a reservation
    on a connection the server dropped is retried once on a fresh one instead (one round trip, not two).

    PostgreSQL's time-outs are not here: they travel with each statement (:func:`~seqid_orm.vendors.call_bounds`), which
    a pooler in transaction mode keeps.  Driver options in the URL's query reach the driver with
    their types (:func:`_typed_query`).
    """
    parsed, typed = _typed_query(sa.make_url(url))
    connect_args = {**_connect_args(parsed, connect_timeout, timeout), **typed}
    return sa.create_engine(parsed, isolation_level="AUTOCOMMIT", pool_size=2, connect_args=connect_args)


def _typed_query(url: sa.URL) -> tuple[sa.URL, dict[str, Any]]:
    """``url`` without the driver options that must not stay text, and those options typed
    (:func:`~.urls.psycopg_typed_options`)."""
    if url.get_backend_name() != "postgresql" or url.get_driver_name() not in ("psycopg", "psycopg_async"):
        return url, {}
    query = {name: raw if isinstance(raw, str) else raw[-1] for name, raw in url.query.items()}
    typed = psycopg_typed_options(query)
    return url.difference_update_query(typed), typed


#: The PostgreSQL drivers whose statements carry their time-outs (:func:`~seqid_orm.vendors.call_bounds`): they can send
#: several statements with parameters in one message (client-side binding).  asyncpg and pg8000
#: cannot; their statements go without, as SQLite's do.
_BOUNDED_DRIVERS = ("psycopg", "psycopg2")


# The asynchronous twin of a synchronous driver, where one exists and is installed: psycopg 3 is
# both (SQLAlchemy picks its async dialect for create_async_engine); PyMySQL's is aiomysql.
# psycopg2 and mysqlclient have none.  The twin's SQLAlchemy driver name is its module's.
# SQLite is awaited through the blocking driver in a worker thread, not aiosqlite: SQLAlchemy's
# aiosqlite adapter awaits a statement's execute and its fetch apart, and SQLite holds the file's
# write lock while an UPDATE ... RETURNING is unfetched, so a loop closed between the two left the
# file locked for every other connection (seen in CI under asyncio's debug mode).  A worker thread
# finishes its statement whatever becomes of the loop; SQLite has no network to await anyway.
_ASYNC_TWIN = {"psycopg": "psycopg", "pymysql": "aiomysql"}


def async_url_for(url: str) -> sa.URL | None:
    """The URL of ``url``'s database through an asynchronous driver, or ``None`` where its driver
    has no asynchronous twin installed (the store's async methods then use a worker thread)."""
    parsed = sa.make_url(url)
    driver = _ASYNC_TWIN.get(parsed.get_driver_name())
    if driver is None:
        return None
    try:
        __import__(driver)
        __import__("greenlet")  # SQLAlchemy's asyncio bridge
    except ImportError:
        return None
    return parsed.set(drivername=f"{parsed.get_backend_name()}+{driver}")


def create_async_engine_for(url: sa.URL, connect_timeout: float, timeout: float) -> AsyncEngine:
    """:func:`create_engine_for` through the asynchronous driver of ``url`` (:func:`async_url_for`),
    for one event loop: its pooled connections belong to that loop, and a store keeps one engine per
    loop, disposed on the loop at its shutdown (:class:`~.steps.PerLoop`).  A connection per call
    instead cost 6.0 ms a reservation against 0.7 ms pooled (PostgreSQL here, psycopg)."""
    from sqlalchemy.ext.asyncio import create_async_engine

    url, typed = _typed_query(url)
    connect_args = {**_connect_args(url, connect_timeout, timeout), **typed}
    return create_async_engine(url, isolation_level="AUTOCOMMIT", pool_size=2, connect_args=connect_args)


def driver_deadlines(url: sa.URL, connect_timeout: float, timeout: float) -> dict[str, Any]:
    """The driver's own connect and read time-outs for ``url`` (``connect_args``): what bounds a
    connection to a server that accepts TCP and never answers, where the driver gives one (libpq's
    ``connect_timeout`` covers the whole start-up, PyMySQL's and mysqlclient's the handshake; their
    ``read_timeout`` each reply).  The stores and ``seqid doctor`` read it here."""
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if backend == "postgresql" and driver in ("psycopg", "psycopg2", "psycopg_async"):
        return {"connect_timeout": max(2, math.ceil(connect_timeout))}  # libpq's minimum is 2 s
    if backend in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb", "aiomysql"):
        deadlines: dict[str, Any] = {"connect_timeout": max(1, math.ceil(connect_timeout))}
        if driver != "aiomysql":  # which has no read time-out: the store's asyncio deadline bounds a read
            deadlines["read_timeout"] = max(1, math.ceil(timeout))
        return deadlines
    if backend == "sqlite":
        return {"timeout": timeout}  # the wait for another connection's lock (Python's default: 5 s)
    return {}


def _connect_args(url: sa.URL, connect_timeout: float, timeout: float) -> dict[str, Any]:
    """The driver's own time-outs and session settings for a store's connections (sync or async driver)."""
    backend, driver = url.get_backend_name(), url.get_driver_name()
    connect_args = driver_deadlines(url, connect_timeout, timeout)
    if backend == "postgresql" and driver in ("psycopg", "psycopg_async"):
        # no server-side prepared statements on seqid's connections: behind a pooler in
        # transaction mode, one client's statement was bound on another's server connection
        connect_args["prepare_threshold"] = None
    elif backend in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb", "aiomysql"):
        connect_args["init_command"] = f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(timeout))}"
    # SQLite's lock wait (driver_deadlines): many processes, one writer; each call then sets the
    # wait to what is left of its deadline (vendors.call_bounds)
    return connect_args


class _Errors:
    """Which of SQLAlchemy's errors is which, for the runner (:class:`~.runner.Door`): both doors'."""

    def dropped(self, exc: Exception) -> bool:
        return isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated

    def is_error(self, exc: Exception) -> bool:
        return isinstance(exc, sa.exc.DBAPIError)

    def cause(self, exc: Exception) -> BaseException:
        return exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc


class _EngineDoor(_Errors):
    """The one SQL store runner's door (:class:`~.runner.Door`) onto a store's engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def open(self, left: float) -> Connection:
        return self.engine.connect()  # bounded by the engine's connect time-out

    def facts(self, conn: Connection) -> Facts:
        return _facts(conn, conn.connection.dbapi_connection)

    def execute(self, conn: Connection, sql: str) -> None:
        conn.exec_driver_sql(sql)

    def call(self, conn: Connection, body: Callable[[Connection, str], _T], prefix: str, left: float) -> _T:
        return body(conn, prefix)

    def discard(self, conn: Connection) -> None:
        conn.invalidate()

    def done(self, conn: Connection) -> None:
        conn.close()


class _AsyncEngineDoor(_Errors):
    """The runner's door onto an asynchronous engine of one event loop: the same connections, facts and
    errors, its methods coroutines the steps of a try await.  A call is also cut off a second past its
    deadline (:data:`_BACKSTOP`) for the drivers that give no socket to shut (aiomysql's streams).
    Cancelling the task instead would make psycopg send PostgreSQL a cancel request over a new connection,
    which a stalled network holds too (14 s measured behind a stalled proxy)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def open(self, left: float) -> AsyncConnection:
        conn = self.engine.connect()
        await asyncio.wait_for(conn.start(), left + _BACKSTOP)
        return conn

    def facts(self, conn: AsyncConnection) -> Facts:
        return _facts(conn, conn.sync_connection.connection.driver_connection)  # type: ignore[union-attr]

    async def execute(self, conn: AsyncConnection, sql: str) -> None:
        await conn.exec_driver_sql(sql)

    async def call(
        self,
        conn: AsyncConnection,
        body: Callable[[AsyncConnection, str | None], Awaitable[_T]],
        prefix: str,
        left: float,
    ) -> _T:
        return await asyncio.wait_for(body(conn, prefix or None), left + _BACKSTOP)

    async def discard(self, conn: AsyncConnection) -> None:
        await conn.invalidate()

    async def done(self, conn: AsyncConnection) -> None:
        await conn.close()


def _facts(conn: Connection | AsyncConnection, dbapi_connection: Any) -> Facts:
    """What the runner decides a call's bounds from: an engine's pool is not the store's alone (the
    application may have handed the engine in, a pooler may share a server connection), so no session
    setting but SQLite's busy wait; psycopg and psycopg2 send the time-outs in each statement's message."""
    return Facts(conn.dialect.name, dbapi_connection, one_message=conn.dialect.driver in _BOUNDED_DRIVERS)


_BACKSTOP = 1.0  # seconds past the deadline an awaited call is cancelled where no socket can be shut


class _OwnEngineStore:
    """What the ticket and lease stores share: an engine of their own in autocommit (or
    connections of a given ``Engine``'s pool, never one the application holds), and their table,
    checked once per store and created on first use unless ``create_table=False``."""

    #: how to create the table, named in the error when it is missing and may not be created
    create_hint = ""
    #: what the store is, as its errors name it
    what = "store"
    #: the store's table on a metadata, by name (:func:`ticket_table`, :func:`lease_table`), and its default name
    table_of: Callable[[sa.MetaData, str], sa.Table]
    table_name = ""

    def __init__(
        self,
        target: str | Engine,
        *,
        table_name: str | None = None,
        create_table: bool = True,
        connect_timeout: float = _DEFAULT_TIMEOUT,
        accept_state_loss: bool = False,
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> None:
        """``table_name``: the store's table (``seqid_tickets`` for tickets, ``seqid_worker_leases`` for
        leases by default); ``timeout``: the longest one call waits on the server (seconds),
        ``connect_timeout`` the longest a connection takes to open."""
        table = type(self).table_of(sa.MetaData(), self.table_name if table_name is None else table_name)
        self.timeout = timeout
        self.engine: Engine
        self._async_url: sa.URL | None = None
        self._aengines: PerLoop[AsyncEngine] = PerLoop(self._new_async_engine, lambda engine: engine.dispose())
        if isinstance(target, Engine):
            self._owned = False
            self.engine = target.execution_options(isolation_level="AUTOCOMMIT")
            self.label = target.url.render_as_string(hide_password=True)
        else:
            self._owned = True
            target, in_url = split_state_loss_option(target)
            accept_state_loss = accept_state_loss or in_url
            try:
                self.engine = create_engine_for(target, min(connect_timeout, timeout), timeout)
            except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"cannot use {hide_password(target)!r} as a store: {exc} (a SQLAlchemy URL: "
                    "dialect+driver://user@host:port/database, with an installed driver and a numeric port)"
                ) from None
            self.label = hide_password(target)
            self._async_url = async_url_for(target)
            self._connect_timeout = min(connect_timeout, timeout)
        self.accept_state_loss = accept_state_loss
        self.runner = SQLRunner(_EngineDoor(self.engine), timeout, self.what, self.label)
        self.table = table
        self._create_table = create_table
        self._ready = False

    def _first_use(self, conn: Connection) -> None:
        """Run before the table check, until one succeeds (a store's own preparation; idempotent)."""

    def prepare(self, conn: Connection) -> None:
        """Check that the table exists (and create it when allowed), until once succeeds.

        No lock: callers that arrive together each check, which is harmless (the ``CREATE`` is
        ``checkfirst`` and a lost race is read as success).  A lock here would be held across the
        statements, and an awaited call runs this through ``AsyncConnection.run_sync``, whose
        statements switch back to the event loop: a second task taking the lock then blocks the
        loop's thread for good (4 of 4 concurrent first ids froze the loop)."""
        if self._ready:
            return
        self._first_use(conn)
        if not sa.inspect(conn).has_table(self.table.name):
            if not self._create_table:
                raise InvalidArgumentError(
                    f"{self.label} has no table {self.table.name!r}; create it with {self.create_hint}, "
                    "or pass create_table=True"
                )
            try:
                self.table.create(conn, checkfirst=True)
            except sa.exc.DBAPIError:
                # another process created it between the check and the CREATE
                if not sa.inspect(conn).has_table(self.table.name):
                    raise
        self._ready = True

    def _on_connection(self, fn: Callable[[Connection, str | None], _T]) -> _T:
        """``fn(conn, prefix)`` on a connection of the store's engine, its table ready, with the one SQL
        store runner's policy (:class:`~.runner.SQLRunner`: the deadline, the tries on a fresh connection,
        the database's own waits bounded, the socket shut at the deadline, the one translation)."""

        def run(conn: Connection, prefix: str) -> _T:
            self.prepare(conn)
            return fn(conn, prefix or None)

        return self.runner.run(run)

    @property
    def native_async(self) -> bool:
        """Whether the awaitable methods run on the event loop through an asynchronous driver (a URL
        whose driver has a twin: psycopg, PyMySQL's aiomysql), rather than the synchronous methods in
        a worker thread (SQLite, psycopg2, mysqlclient, an ``Engine`` handed in)."""
        return self._async_url is not None

    def _new_async_engine(self) -> AsyncEngine:
        assert self._async_url is not None
        return create_async_engine_for(self._async_url, self._connect_timeout, self.timeout)

    async def _aon_connection(self, fn: Callable[[AsyncConnection, str | None], Awaitable[_T]]) -> _T:
        """:meth:`_on_connection` on the event loop: the same try and tries of the one runner, awaited
        through this loop's asynchronous engine (:class:`_AsyncEngineDoor`)."""
        engine = await self._aengines.get()

        async def body(conn: AsyncConnection, prefix: str | None) -> _T:
            await conn.run_sync(self.prepare)
            return await fn(conn, prefix)

        done: _T = await self.runner.arun(_AsyncEngineDoor(engine), body)
        return done

    def after_fork(self) -> None:
        # the parent's sockets stay open for the parent; the child opens its own
        self.engine.dispose(close=False)
        self._aengines.forget()

    def close(self) -> None:
        if self._owned:
            self.engine.dispose()


class SQLAlchemyTicketStore(_OwnEngineStore, SQLTicketStore):
    """A ticket server reached through SQLAlchemy: see the module docstring.

    ``target`` is a URL (the store makes and owns its engine) or an ``Engine`` (the store uses
    connections of its pool, in autocommit, never one the application holds).
    """

    create_hint = (
        "an Alembic migration (op.create_ticket_table()), the Django app seqid_orm.django, `seqid ticket init URL`"
    )
    what = "ticket server"
    table_of = staticmethod(ticket_table)
    table_name = TICKET_TABLE

    # --- TicketStore ---------------------------------------------------------------------

    def _sql(self, conn: Connection | AsyncConnection) -> TicketSQL:
        """The ticket statements for ``conn``'s database, on this store's table."""
        self._check_returning(conn.dialect)
        return ticket_sql(conn.dialect.name, _quoted(conn, self.table))

    def _with_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        return self._on_connection(
            lambda conn, bounds: drive(steps_of(self._sql(conn)), SQLAlchemyExecutor(conn, bounds))
        )

    async def _awith_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        if not self.native_async:
            return await super()._awith_rows(steps_of)

        async def run(conn: AsyncConnection, bounds: str | None) -> _T:
            return await adrive(steps_of(self._sql(conn)), _OnLoop(conn, bounds))

        return await self._aon_connection(run)

    def rows(self) -> list[TicketRow]:
        def read(conn: Connection, bounds: str) -> list[TicketRow]:  # a listing creates nothing
            if not sa.inspect(conn).has_table(self.table.name):
                return []
            return drive(ticket_sql_rows(self._sql(conn)), SQLAlchemyExecutor(conn, bounds or None))

        return self.runner.run(read)

    # --- internals -----------------------------------------------------------------------

    @staticmethod
    def _check_returning(dialect: sa.engine.Dialect) -> None:
        """Refuse a database that cannot return what its ``UPDATE`` wrote (SQLite before 3.35)."""
        if dialect.name == "sqlite" and not dialect.update_returning:
            version = ".".join(map(str, getattr(dialect, "server_version_info", None) or ()))
            raise InvalidArgumentError(
                f"SQLite {version} cannot return an updated value in the same statement (SQLite needs 3.35+); "
                "no atomic ticket allocation"
            )


class SQLAlchemyLeaseStore(_OwnEngineStore, lease_sql.SQLLeaseStore):
    """Worker-id leases in a SQL table, through SQLAlchemy (see :mod:`seqid_orm.allocation.stores.lease_sql`).

    Like the ticket store it uses an engine of its own in autocommit (or connections of a given
    ``Engine``'s pool), creates its table on first use unless ``create_table=False``, and never
    joins the application's transaction.
    """

    create_hint = "op.create_lease_table(), the Django app seqid_orm.django"
    what = "lease store"
    table_of = staticmethod(lease_table)
    table_name = LEASE_TABLE

    def _run(self, steps_of: Callable[[lease_sql.LeaseSQL], Steps[Any]]) -> Any:
        def run(conn: Connection, bounds: str | None) -> Any:
            sql = lease_sql.lease_sql(conn.dialect.name, _quoted(conn, self.table))
            return drive(steps_of(sql), SQLAlchemyExecutor(conn, bounds))

        return self._on_connection(run)

    async def _arun(self, steps_of: Callable[[lease_sql.LeaseSQL], Steps[Any]]) -> Any:
        if not self.native_async:
            return await super()._arun(steps_of)

        async def run(conn: AsyncConnection, bounds: str | None) -> Any:
            sql = lease_sql.lease_sql(conn.dialect.name, _quoted(conn, self.table))
            return await adrive(steps_of(sql), _OnLoop(conn, bounds))

        return await self._aon_connection(run)

    def _has_table(self) -> bool:
        return self.runner.run(lambda conn, _: bool(sa.inspect(conn).has_table(self.table.name)))

    def leases(self, namespace: str) -> list[LeaseRow]:
        return super().leases(namespace) if self._has_table() else []  # a listing creates nothing

    def namespaces(self) -> list[str]:
        return super().namespaces() if self._has_table() else []


class SQLAlchemyLockStore(_OwnEngineStore, lock_sql.SQLLockStore):
    """The migration lock's rows (:mod:`seqid_orm.allocation.stores.lock_sql`) through SQLAlchemy: on
    connections of the engine's pool (or an engine of its own, from a URL) in autocommit, never the
    migration's own connection, whose transactions come and go while the lock is held."""

    create_hint = "create_table=True (the lock makes it at its first use)"
    what = "migration lock store"
    table_of = staticmethod(lock_table)
    table_name = lock_sql.LOCK_TABLE

    def _run(self, steps_of: Callable[[lock_sql.LockSQL], Steps[Any]]) -> Any:
        def run(conn: Connection, bounds: str | None) -> Any:
            sql = lock_sql.lock_sql(conn.dialect.name, _quoted(conn, self.table))
            return drive(steps_of(sql), SQLAlchemyExecutor(conn, bounds))

        return self._on_connection(run)


def _quoted(conn: Connection | AsyncConnection, table: sa.Table) -> str:
    """``table``'s name quoted for ``conn``'s database, as the text statements name it."""
    return conn.dialect.identifier_preparer.quote(table.name)


def _last_result(cursor: Any, driver: str) -> tuple[list[tuple[Any, ...]], int]:
    """The rows (none where it returns none) and the row count of the last statement a cursor ran:
    psycopg 3 stands on the first result of several (its ``SET``), psycopg2 on the last."""
    if driver != "psycopg2":
        while cursor.nextset():
            pass
    return ([tuple(r) for r in cursor.fetchall()] if cursor.description else []), int(cursor.rowcount)


def _as_sqlalchemy_error(
    exc: Exception, statement: str, params: dict[str, object], dialect: sa.engine.Dialect, invalidated: bool
) -> sa.exc.DBAPIError:
    """A driver's error raised outside SQLAlchemy's execution, as SQLAlchemy would have raised it
    (``IntegrityError`` and the others by the driver's class), so the store reads it as always."""
    error = sa.exc.DBAPIError.instance(
        statement, params, exc, dialect.loaded_dbapi.Error, connection_invalidated=invalidated, dialect=dialect
    )
    assert isinstance(error, sa.exc.DBAPIError)  # a DBAPI error in, a DBAPIError out
    return error


class _OnLoop:
    """:class:`SQLAlchemyExecutor` on an ``AsyncConnection``: each statement runs in SQLAlchemy's
    asyncio bridge (``run_sync``), awaited on the loop through the asynchronous driver, by the very
    code the synchronous store runs; with ``bounds`` (:func:`~seqid_orm.vendors.call_bounds`), on psycopg's own
    asynchronous connection, in one message with its time-outs."""

    def __init__(self, conn: AsyncConnection, bounds: str | None = None) -> None:
        self.conn = conn
        self.bounds = bounds

    async def _on(self, method: str, *args: Any) -> Any:
        return await self.conn.run_sync(lambda sync_conn: getattr(SQLAlchemyExecutor(sync_conn), method)(*args))

    async def _bounded(self, sql: str, params: dict[str, object]) -> tuple[list[tuple[Any, ...]], int]:
        import psycopg

        assert self.bounds is not None
        raw = await self.conn.get_raw_connection()
        driver_conn: Any = raw.driver_connection
        statement = self.bounds + pyformat(sql)
        cursor = psycopg.AsyncClientCursor(driver_conn)
        try:
            await cursor.execute(statement, params)
            while cursor.nextset():
                pass
            rows = [tuple(r) for r in await cursor.fetchall()] if cursor.description else []
            return rows, int(cursor.rowcount)
        except psycopg.Error as exc:
            dialect = self.conn.dialect
            invalidated = dialect.is_disconnect(exc, driver_conn, None)  # type: ignore[arg-type]
            if invalidated:
                await self.conn.invalidate(exc)
            raise _as_sqlalchemy_error(exc, statement, params, dialect, invalidated) from exc
        finally:
            with contextlib.suppress(Exception):
                await cursor.close()

    async def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        if self.bounds is not None:
            return (await self._bounded(sql, params))[0]
        found: list[tuple[Any, ...]] = await self._on("fetch", sql, params)
        return found

    async def run(self, sql: str, params: dict[str, object]) -> int:
        if self.bounds is not None:
            try:
                return (await self._bounded(sql, params))[1]
            except sa.exc.DBAPIError as exc:
                return _run_refused(exc)
        return int(await self._on("run", sql, params))

    async def run_last_id(self, sql: str, params: dict[str, object]) -> tuple[int, int | None]:
        found: tuple[int, int | None] = await self._on("run_last_id", sql, params)
        return found

    async def run_returning_into(self, sql: str, params: dict[str, object], out: str) -> Any:
        return await self._on("run_returning_into", sql, params, out)


_FLOOR_TIMEOUT = 30.0  # seconds a worker thread waits for a floor's query on its engine's loop


class ColumnFloor:
    """The keys a ticket sequence or a Snowflake fills in one column, read on ``engine`` (a
    :class:`~seqid_orm.allocation.tickets.KeyFloor` and a :class:`~seqid_orm.ids.snowflake.KeyColumn`):
    ``ticket_pk`` and ``snowflake_pk`` bind one per engine they insert over.

    Each query is an index range scan from a block's first value up (one per process and server),
    on a connection of the engine's pool, never the caller's transaction.

    With ``timeout`` (seconds), a query on PostgreSQL through psycopg or psycopg2 runs in a
    transaction of its own after its time-outs (:func:`~seqid_orm.vendors.call_bounds`): a column whose table another
    session holds locked is an error at the deadline rather than a wait without end (``seqid ticket
    repair --key``).  MariaDB's and MySQL's engines of :func:`create_engine_for` bound a read already.
    """

    def __init__(self, engine: Engine, column: sa.Column[Any], *, timeout: float | None = None) -> None:
        if not isinstance(engine, Engine) or not isinstance(column, sa.Column) or column.table is None:
            raise InvalidArgumentError("ColumnFloor needs an Engine and a Column that belongs to a Table")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise InvalidArgumentError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        self.engine = engine
        self.column = column
        # the application's engine: its time-outs go in each statement's message (PostgreSQL), never a session's
        one_message = engine.dialect.driver in _BOUNDED_DRIVERS
        bounds = (
            None if timeout is None else call_bounds(engine.dialect.name, timeout, timeout, one_message=one_message)
        )
        self._bounds = bounds.prefix if bounds is not None and bounds.prefix else None
        self.label = f"{column.table.name}.{column.name} on {engine.url.render_as_string(hide_password=True)}"
        # An asyncio engine (asyncpg, psycopg's async connection, aiomysql) answers the synchronous
        # API only inside SQLAlchemy's greenlet (an AsyncSession's flush, where this floor is made).
        # From a worker thread (anext_id, the prefetch thread) a query goes to the loop the engine
        # serves, as an await there: the loop is never blocked and the driver stays on its loop.
        # Made in a worker thread (abulk_insert computes defaults there), it finds the loop on the
        # engine, where abulk_insert left it.
        self._loop: asyncio.AbstractEventLoop | None = None
        if getattr(engine.dialect, "is_async", False):
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self._loop = getattr(engine, "seqid_loop", None)

    def _scalar(self, query: sa.Select[Any]) -> Any:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # a thread without a loop: ask the engine's loop
                return asyncio.run_coroutine_threadsafe(self._ascalar(query), loop).result(timeout=_FLOOR_TIMEOUT)
        with self.engine.connect() as conn:
            if self._bounds is None:
                return conn.execute(query).scalar()
            # SET LOCAL holds inside a transaction only: one of its own, also on an autocommit engine
            conn.execution_options(isolation_level="READ COMMITTED")
            with conn.begin():
                conn.exec_driver_sql(self._bounds)
                return conn.execute(query).scalar()

    async def _ascalar(self, query: sa.Select[Any]) -> Any:
        from sqlalchemy.ext.asyncio import AsyncEngine

        async with AsyncEngine(self.engine).connect() as conn:
            return (await conn.execute(query)).scalar()

    def largest(self) -> int | None:
        found = self._scalar(sa.select(sa.func.max(self.column)))
        return None if found is None else int(found)

    def taken_in(self, first: int, last: int, step: int) -> int | None:
        c = self.column
        query = sa.select(sa.func.max(c)).where(c >= first, c <= last)
        if step > 1:
            query = query.where((c - first) % step == 0)
        found = self._scalar(query)
        return None if found is None else int(found)

    def with_field(self, low: int, high: int, shift: int, mask: int, value: int) -> int | None:
        """A key in ``[low, high)`` whose ``(key >> shift) & mask`` is ``value`` (a Snowflake's worker-id
        check, :class:`~seqid_orm.ids.snowflake.KeyColumn`): an index range read, stopping at the first."""
        c = self.column
        query = (
            sa.select(c).where(c >= low, c < high, c.bitwise_and(mask << shift) == value << shift).order_by(c).limit(1)
        )
        found = self._scalar(query)
        return None if found is None else int(found)


def sa_column_of(where: str) -> sa.Column[Any]:
    """The BIGINT key column ``table.column`` (or ``schema.table.column``) as a Column, for
    :class:`ColumnFloor` from a command line."""
    parts = where.split(".")
    if len(parts) not in (2, 3) or not all(parts):
        raise InvalidArgumentError(f"a key column is TABLE.COLUMN or SCHEMA.TABLE.COLUMN, got {where!r}")
    *schema, table, column = parts
    return sa.Table(table, sa.MetaData(), sa.Column(column, sa.BigInteger), schema=schema[0] if schema else None).c[
        column
    ]


def _run_refused(exc: sa.exc.DBAPIError) -> int:
    """What :meth:`SQLAlchemyExecutor.run` makes of a refused statement: 0 rows where another node
    got there first, else the error again."""
    if isinstance(exc, sa.exc.IntegrityError):
        return 0  # an INSERT that met the key another node inserted first
    if is_conflict(exc):
        return 0  # another node (Galera) or transaction took this worker id first
    raise exc


class SQLAlchemyExecutor:
    """:class:`~seqid_orm.allocation.stores.lease_sql.Executor` on one SQLAlchemy connection (also
    what ``seqid doctor`` reads through).  With ``bounds`` (a prefix of :func:`~seqid_orm.vendors.call_bounds`)
    each statement goes to the driver on a cursor that binds on the client, in one message after its time-outs."""

    def __init__(self, conn: Connection, bounds: str | None = None) -> None:
        self.conn = conn
        self.bounds = bounds

    def _bounded(self, sql: str, params: dict[str, object]) -> tuple[list[tuple[Any, ...]], int]:
        assert self.bounds is not None
        conn = self.conn
        driver = conn.dialect.driver
        driver_conn: Any = conn.connection.driver_connection
        statement = self.bounds + pyformat(sql)
        if driver == "psycopg2":
            cursor = driver_conn.cursor()  # binds on the client; keeps the last statement's result
        else:
            import psycopg

            cursor = psycopg.ClientCursor(driver_conn)
        try:
            cursor.execute(statement, params)
            return _last_result(cursor, driver)
        except conn.dialect.loaded_dbapi.Error as exc:
            invalidated = conn.dialect.is_disconnect(exc, driver_conn, cursor)
            if invalidated:
                conn.invalidate(exc)
            raise _as_sqlalchemy_error(exc, statement, params, conn.dialect, invalidated) from exc
        finally:
            with contextlib.suppress(Exception):
                cursor.close()

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        if self.bounds is not None:
            return self._bounded(sql, params)[0]
        return [tuple(r) for r in self.conn.execute(sa.text(sql), params)]

    def run(self, sql: str, params: dict[str, object]) -> int:
        try:
            if self.bounds is not None:
                return self._bounded(sql, params)[1]
            return int(self.conn.execute(sa.text(sql), params).rowcount)
        except sa.exc.DBAPIError as exc:
            return _run_refused(exc)

    def run_last_id(self, sql: str, params: dict[str, object]) -> tuple[int, int | None]:
        """Run ``sql`` (MySQL's ``LAST_INSERT_ID(expr)``): the rows it changed and the value it set,
        from the statement's own OK packet (``lastrowid``), else asked on the same connection."""
        result = self.conn.execute(sa.text(sql), params)
        if not result.rowcount:
            return 0, None
        value = result.lastrowid
        if not value:  # a driver that does not pass it on
            value = self.conn.execute(sa.text("SELECT LAST_INSERT_ID()")).scalar_one()
        return int(result.rowcount), int(value)

    def run_returning_into(self, sql: str, params: dict[str, object], out: str) -> Any:
        """Run ``sql`` with ``:out`` an out bind (Oracle's ``RETURNING ... INTO``): its value, or
        ``None`` where no row matched."""
        stmt = sa.text(sql).bindparams(sa.bindparam(out, isoutparam=True, type_=sa.BigInteger))
        result: Any = self.conn.execute(stmt, params)  # out_parameters: a CursorResult of an out-bind dialect
        return result.out_parameters.get(out) if result.rowcount else None
