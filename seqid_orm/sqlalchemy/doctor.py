"""``seqid doctor URL``: :mod:`seqid_orm.schema.doctor` on a SQLAlchemy connection of its own.

The connection is made read-only before the first read (read-only transactions and a statement
timeout on PostgreSQL and MariaDB/MySQL; SQLite opened with ``mode=ro`` and ``query_only``, with
a deadline enforced by SQLite's progress handler).  Each read is then a transaction of its own
(autocommit): a table holds no lock of the doctor's past its own read (PostgreSQL's ``ACCESS SHARE``,
MariaDB's metadata lock), so a migration's ``ALTER TABLE`` never waits for the doctor's whole run,
nor the application's queries queued behind that ``ALTER`` (one transaction over the run did both, and
deadlocked with a ``DROP TABLE``).  A connection of a caller's engine is closed at the end (invalidated):
its session, read-only with the doctor's time-outs, is never handed back to the caller's pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from ..allocation.stores.sqlalchemy import SQLAlchemyExecutor, driver_deadlines
from ..errors import DatabaseUnavailableError, InvalidArgumentError, SeqIDError
from ..schema.doctor import Finding, StatementDeadline, check_schemas, check_timeout, examine, session_statements
from .types import dialect_server_version, dialect_vendor

__all__ = ["diagnose", "read_only_url"]


def read_only_url(url: str) -> sa.URL:
    """``url`` parsed; a SQLite file URL turned into SQLite's read-only URI form (``mode=ro``), so
    the file is never created or written (a missing file is an error, not an empty database)."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise InvalidArgumentError(f"not a database URL: {url!r} ({exc})") from None
    if parsed.get_backend_name() != "sqlite":
        return parsed
    path = parsed.database or ""
    if path in ("", ":memory:") or path.startswith("file:"):
        raise InvalidArgumentError("seqid doctor reads a SQLite file: sqlite:///path/to/file.db")
    return parsed.set(database=f"file:{path}?mode=ro", query={**parsed.query, "uri": "true"})


#: Seconds a read waits for the server past the statement's own bound before the driver gives it up.
DRIVER_GRACE = 2


def diagnose(
    bind: str | Engine, *, sample: int = 1000, timeout: float = 5.0, schemas: Sequence[str] | None = None
) -> list[Finding]:
    """The doctor's findings for every key column of the database at ``bind`` (a URL or an engine),
    worst first; see :func:`seqid_orm.schema.doctor.examine` (``schemas``: PostgreSQL's schemas
    to read, every one but the system's by default).

    Raises :class:`~seqid_orm.errors.InvalidArgumentError` for a URL that is not one, and
    :class:`~seqid_orm.errors.DatabaseUnavailableError` when the database cannot be reached, opened,
    or read within ``timeout`` seconds per statement.
    """
    check_timeout(timeout)
    check_schemas(schemas)
    owned = isinstance(bind, str)
    if isinstance(bind, str):
        url = sa.make_url(read_only_url(bind))
        # a server that accepts TCP and never answers is given up on too, a little after the statements' own
        # bounds (session_statements), so a read the server ends itself (a lock waited out) keeps the connection
        deadlines = driver_deadlines(url, timeout, timeout)
        if "read_timeout" in deadlines:  # a socket's read time-out (the MySQL drivers'), not a lock wait
            deadlines["read_timeout"] += DRIVER_GRACE
        engine = sa.create_engine(url, poolclass=sa.NullPool, connect_args=deadlines)
    else:
        engine = bind
    label = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect() as conn:
            try:
                return _diagnose(conn, sample, timeout, schemas)
            finally:
                if not owned:
                    conn.invalidate()  # its session is read-only: closed, never back in the caller's pool
    except SeqIDError:
        raise
    except sa.exc.DBAPIError as exc:
        raise DatabaseUnavailableError(f"{label}: {type(exc.orig).__name__}: {exc.orig}") from exc
    except sa.exc.NoSuchModuleError as exc:
        raise InvalidArgumentError(f"{label}: {exc}") from exc
    finally:
        if owned:
            engine.dispose()


def _diagnose(conn: Connection, sample: int, timeout: float, schemas: Sequence[str] | None) -> list[Finding]:
    vendor = dialect_vendor(conn.dialect)
    statements = session_statements(vendor, timeout)  # refuses a vendor the doctor does not read
    for statement in statements:
        conn.exec_driver_sql(statement)
    conn.commit()
    conn.execution_options(isolation_level="AUTOCOMMIT")  # each read its own transaction: see the module docstring
    deadline = StatementDeadline(timeout)
    raw = conn.connection.dbapi_connection
    if vendor == "sqlite":
        deadline.install(raw)
    reads = _Reads(conn, deadline.start)
    try:
        return examine(reads, vendor, dialect_server_version(conn.dialect), sample=sample, schemas=schemas)
    finally:
        conn.rollback()
        if vendor == "sqlite":
            deadline.uninstall(raw)  # the pool may hand this connection to the caller's engine again


class _Reads(SQLAlchemyExecutor):
    """The doctor's reads on ``conn``: a statement the database refuses (a table locked past the
    timeout, one the user may not read) is :class:`DatabaseUnavailableError`, which costs that
    table's line only (:func:`~seqid_orm.schema.doctor.examine`); a connection lost fails the run."""

    def __init__(self, conn: Connection, before: Callable[[], object]) -> None:
        super().__init__(conn)
        self._before = before

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        self._before()
        try:
            return super().fetch(sql, params)
        except sa.exc.DBAPIError as exc:
            if exc.connection_invalidated:
                raise
            raise DatabaseUnavailableError(f"{type(exc.orig).__name__}: {exc.orig}".strip()) from exc

    def recover(self) -> None:
        if self.conn.in_transaction():
            self.conn.rollback()
