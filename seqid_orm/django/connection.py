"""Reading a Django database connection in the core registry's terms.

The layout must match the column Django *actually creates*, so the storage is derived from
the field's ``db_type`` on that connection: ``uuid`` (PostgreSQL; MariaDB 10.7+ with Django
5.0+) and ``uniqueidentifier`` (mssql-django) are native UUID columns; ``char(32)`` (MySQL,
SQLite, older Django on MariaDB) and Oracle's ``VARCHAR2(32)`` hold 32 hex digits.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from ..ids.layout import Layout
from ..vendors import Storage, decide_layout, distributed_flavor, normalize_vendor

_NATIVE_TYPES = {"uuid", "uniqueidentifier"}


def vendor_of(connection: Any) -> str:
    """The registry's vendor name for a Django connection (CockroachDB's backend says so itself;
    TiDB and YugabyteDB are read from the server's version string once per connection)."""
    flavor = _flavor(connection)
    return flavor or normalize_vendor(connection.vendor, is_mariadb=_is_mariadb(connection))


def _flavor(connection: Any) -> str | None:
    if connection.vendor not in ("mysql", "postgresql"):
        return None
    cached = getattr(connection, "_seqid_flavor", None)
    if cached is None:
        if connection.vendor == "mysql":
            text = str(connection.mysql_server_info)  # VERSION(), cached by Django
        else:
            with connection.cursor() as cursor:
                cursor.execute("SELECT version()")
                text = str(cursor.fetchone()[0])
        cached = connection._seqid_flavor = distributed_flavor(text) or ""
    return cached or None


def _is_mariadb(connection: Any) -> bool:
    if connection.vendor != "mysql":
        return False
    # Django reads this from the server on first use; it is cached on the connection.
    return bool(connection.mysql_is_mariadb)


def server_version(connection: Any) -> tuple[int, ...] | None:
    """The server version for PostgreSQL, MySQL/MariaDB and SQLite (the library's), else ``None``.

    MariaDB's layouts and every engine's server-side generator depend on it.
    """
    if connection.vendor == "mysql":
        return tuple(connection.mysql_version)
    if connection.vendor == "postgresql":
        number = connection.pg_version  # e.g. 150020; 10.0+ counts major * 10000 + minor
        return (number // 10000, number % 10000)
    if connection.vendor == "sqlite":
        return tuple(connection.Database.sqlite_version_info)
    return None


def storage_of(field: Any, connection: Any) -> Storage:
    """How ``field``'s column holds the UUID on ``connection``."""
    db_type = (field.db_type(connection) or "").lower()
    return Storage.NATIVE if db_type in _NATIVE_TYPES else Storage.HEX


def layout_for_alias(field: Any, alias: str, preferred: Layout | None = None) -> Layout:
    """The layout for ``field`` on database ``alias`` (the core memoises the decision)."""
    connection = connections[alias]
    return decide_layout(
        vendor_of(connection),
        server_version(connection),
        storage_of(field, connection),
        preferred,
        _is_mariadb(connection),
    )
