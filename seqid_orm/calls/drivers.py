"""What seqid asks of a DB-API connection it runs statements on, beyond the statements: where its socket
goes, and whether its driver prepares statements on the server.  Read by the migration adapters
(Alembic's and Django's online I/O) and the stores alike (a store's deadline shuts this socket).

May import: the standard library only.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

__all__ = ["socket_ends", "socket_of", "unprepared"]


def socket_of(dbapi_connection: object) -> int | None:
    """The file descriptor of a DB-API connection's socket, where the driver tells it (psycopg 3,
    psycopg2, PyMySQL, mysqlclient); ``None`` for SQLite and drivers that do not."""
    pgconn = getattr(dbapi_connection, "pgconn", None)  # psycopg 3
    if pgconn is not None:
        with contextlib.suppress(Exception):
            fd = int(pgconn.socket)
            return fd if fd >= 0 else None
        return None
    sock = getattr(dbapi_connection, "_sock", None)  # PyMySQL
    if isinstance(sock, socket.socket):
        return sock.fileno()
    fileno = getattr(dbapi_connection, "fileno", None)  # psycopg2, mysqlclient
    if callable(fileno):
        with contextlib.suppress(Exception):
            fd = int(fileno())
            return fd if fd >= 0 else None
    return None


def socket_ends(dbapi_connection: object) -> tuple[object, object] | None:
    """``(local, peer)`` of a DB-API connection's socket, as ``getsockname()`` and ``getpeername()`` give
    them (an ``(address, port, ...)`` tuple over TCP, a path over a Unix socket); ``None`` where the driver
    gives no socket."""
    fd = socket_of(dbapi_connection)
    if fd is None:
        return None
    dup = os.dup(fd)
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return None
    with sock:
        try:
            return sock.getsockname(), sock.getpeername()
        except OSError:
            return None


@contextlib.contextmanager
def unprepared(dbapi_connection: object) -> Iterator[None]:
    """No server-side prepared statements on this connection while inside (psycopg 3 prepares a statement
    it has run ``prepare_threshold`` times, 5 by default): behind PgBouncer in transaction pooling (1.18
    here; 1.21+ tracks them only with ``max_prepared_statements``) the next run of it goes to another
    server connection and fails with ``prepared statement "_pg3_0" does not exist`` (psycopg's docs,
    "Server-side prepared statements").  A client-side setting of the connection object, put back after;
    nothing is sent to the server."""
    if not hasattr(dbapi_connection, "prepare_threshold"):
        yield
        return
    before = dbapi_connection.prepare_threshold
    dbapi_connection.prepare_threshold = None
    try:
        yield
    finally:
        dbapi_connection.prepare_threshold = before
