"""Reading a Django database connection as a :class:`~seqid_orm.vendors.Target`.

The layout must match the column Django *actually creates*, so the storage is read from the
field's ``db_type`` on that connection: ``uuid`` (PostgreSQL; MariaDB 10.7+ with Django 5.0+)
and ``uniqueidentifier`` (mssql-django) are native UUID columns; ``char(32)`` (MySQL, SQLite,
older Django on MariaDB) and Oracle's ``VARCHAR2(32)`` hold 32 hex digits.  Everything else is
the target's decision, made once per database and column kind and kept by the field.

:func:`column_target` reads the live column as well (:mod:`seqid_orm.vendors.live`): the form its
UUIDs are really kept in, which must be the field's, and its largest keys, which say whether new
keys must sort after old ones (a column that held random keys, :mod:`seqid_orm.ids.adopted`).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from ..vendors import Storage, Target, distributed_flavor, live, normalize_vendor, target
from ..vendors.live import ColumnReading, judge

_NATIVE_TYPES = {"uuid", "uniqueidentifier"}


def vendor_of(connection: Any) -> str:
    """The vendor name for a Django connection (CockroachDB's backend says so itself; TiDB and
    YugabyteDB are read from the server's version string once per connection)."""
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
    """How ``field``'s column holds the UUID on ``connection`` (read from the type Django creates)."""
    db_type = (field.db_type(connection) or "").lower()
    return Storage.NATIVE if db_type in _NATIVE_TYPES else Storage.HEX


def uuid_field_storage(connection: Any) -> Storage:
    """The storage of a plain ``UUIDField`` on ``connection``: what a project's existing UUID columns are."""
    return storage_of(models.UUIDField(), connection)


def connection_target(connection: Any, storage: Storage | None = None, layout: Any = None) -> Target:
    """The target of a column with ``storage`` (``None``: the engine's best) on ``connection``."""
    return target(vendor_of(connection), server_version(connection), storage, layout)


def field_target(field: Any, connection: Any) -> Target:
    """The target of ``field``'s column on ``connection`` (the storage its ``db_type`` says)."""
    return connection_target(connection, storage_of(field, connection), getattr(field, "layout", None))


def storage_fix(table: str, column: str, found: Storage) -> str:
    """What a Django user does about a column that holds ``found`` where the field writes another form."""
    return (
        f"Convert the column in a migration: seqid_orm.django.operations.ConvertUUIDStorage(<model>, "
        f'"{column}", from_storage="{found.value}") (the foreign keys to it follow); or keep it and give the field '
        f"the column type {table}.{column} has (a subclass whose db_type() returns it, as Django's release notes "
        "show for char(32) UUIDs on MariaDB)."
    )


def read_column(connection: Any, table: str, column: str) -> ColumnReading | None:
    """What the live column ``table.column`` says on ``connection`` (declared type, largest keys), or
    ``None`` where it could not be read (no database access now: a check, a test without one)."""
    try:
        with connection.cursor() as cursor:

            def fetch(statement: str) -> list[Any]:
                cursor.execute(statement)  # no parameters: the literals are inline, no %-formatting
                return list(cursor.fetchall())

            return live.read_column(vendor_of(connection), table, column, fetch)
    except Exception:  # pytest-django's block on database access, a database not there yet
        return None


def column_target(field: Any, connection: Any, where: Target | None = None) -> tuple[Target, bool]:
    """The target of ``field``'s column as it is on ``connection`` (``where``: the target its values are
    written for, by default the field's own), and whether that is final (the column was read; a table
    not there yet is judged by the field alone, and read again next time).  Raises
    :class:`~seqid_orm.errors.StorageMismatchError` for a column that holds another form."""
    if where is None:
        where = field_target(field, connection)
    model = getattr(field, "model", None)
    if model is None or getattr(field, "column", None) is None:
        return where, False
    table = model._meta.db_table
    reading = read_column(connection, table, field.column)
    if reading is None or reading.declared is None:
        return where, False
    judged = judge(
        where, reading, label=f"{table}.{field.column}", fix=lambda found: storage_fix(table, field.column, found)
    )
    return judged, True
