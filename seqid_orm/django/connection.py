"""Reading a Django database connection as a :class:`~seqid_orm.vendors.Target`.

The layout must match the column Django *actually creates*, so the storage is read from the
field's ``db_type`` on that connection: ``uuid`` (PostgreSQL; MariaDB 10.7+ with Django 5.0+)
and ``uniqueidentifier`` (mssql-django) are native UUID columns; ``char(32)`` (MySQL, SQLite,
older Django on MariaDB) and Oracle's ``VARCHAR2(32)`` hold 32 hex digits.  Everything else is
the target's decision, made once per database and column kind and kept by the field.

:func:`column_target` reads the live column as well (:mod:`seqid_orm.schema.live`, the layer both
ORMs share): the form its UUIDs are really kept in, which must be the field's, and the adoption's
record (or, without one, its largest keys), which says whether new keys must sort after old ones (a
column that held random keys, :mod:`seqid_orm.ids.adopted`).  The judgement is kept per real table and
database alias; each connection keeps which real table each name resolved to, made anew for a new
database connection, a tenant (``connection.schema_name``) or a ``search_path`` statement.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import models
from django.db.backends.signals import connection_created

from ..schema.live import ColumnName, Kept, LiveColumns
from ..vendors import Storage, Target, distributed_flavor, normalize_vendor, target

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


# One LiveColumns per database alias: the judgements of its real tables (forgotten when the test runner
# changes DATABASES or SEQID, as the fields' kept decisions are).
_LIVE: dict[str, LiveColumns] = {}
_SEEN = "_seqid_seen"  # on a Django connection: {ColumnName: real table}, and the tenant schema it was made for
_PATH_LOCAL = "_seqid_path_local"  # on a Django connection: a transaction-local search_path was set


def live_columns(alias: str) -> LiveColumns:
    """The judgements of database ``alias`` (see :class:`~seqid_orm.schema.live.LiveColumns`)."""
    known = _LIVE.get(alias)
    if known is None:
        known = _LIVE[alias] = LiveColumns()
    return known


def forget_columns(alias: str | None = None) -> None:
    """Forget what was read of the key columns of ``alias`` (every alias by default), and which table
    each name resolved to on each connection: the next key reads again.  For tests, and where a
    connection's ``search_path`` changed where Django does not see it (a server-side function, the
    raw driver connection)."""
    for name in [alias] if alias is not None else list(_LIVE):
        live = _LIVE.get(name)
        if live is not None:
            live.forget()
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        connection.__dict__.pop(_SEEN, None)


def _seen(connection: Any) -> dict[Any, Any]:
    """The names this connection resolved: made anew for each new database connection, for each tenant
    a tenancy library names (``connection.schema_name``: django-tenants and its kin set the
    ``search_path`` from it), after a ``search_path`` statement through Django, and, after a
    transaction-local one (``SET LOCAL``), not kept at all."""
    if connection.__dict__.get(_PATH_LOCAL):
        return {}
    tenant = getattr(connection, "schema_name", None)
    seen: dict[Any, Any] | None = connection.__dict__.get(_SEEN)
    if seen is None or seen[None] != tenant:
        seen = {None: tenant}
        connection.__dict__[_SEEN] = seen
    return seen


def _watch(execute: Any, sql: Any, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """Django's execute wrapper on PostgreSQL connections: a statement that sets the ``search_path``
    makes the connection resolve its names again."""
    if isinstance(sql, str) and len(sql) < 1000 and "search_path" in sql.lower():
        connection = context["connection"]
        connection.__dict__.pop(_SEEN, None)
        low = sql.lower()
        if "local" in low or "set_config" in low:
            connection.__dict__[_PATH_LOCAL] = True
    return execute(sql, params, many, context)


def _new_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    connection.__dict__.pop(_SEEN, None)
    connection.__dict__.pop(_PATH_LOCAL, None)
    if connection.vendor == "postgresql" and _watch not in connection.execute_wrappers:
        connection.execute_wrappers.append(_watch)


connection_created.connect(_new_connection, dispatch_uid="seqid_orm.django.connection")


def kept(connection: Any, key: object) -> Kept | None:
    """What :func:`column_target` left under ``key`` on ``connection`` while it is good (the same
    tenant, no transaction-local ``search_path``, within its time: :class:`~seqid_orm.schema.live.Kept`),
    else ``None``: a row asks this first, one look-up where the resolution is a dozen calls."""
    seen = connection.__dict__.get(_SEEN)
    if seen is None or connection.__dict__.get(_PATH_LOCAL) or seen[None] != getattr(connection, "schema_name", None):
        return None
    hit: Kept | None = seen.get(key)
    return hit if hit is not None and time.monotonic() < hit.until else None


def column_target(field: Any, connection: Any, where: Target | None = None, key: object = None) -> tuple[Target, bool]:
    """The target of ``field``'s column as its name resolves on ``connection`` (``where``: the target its
    values are written for, by default the field's own), and whether the column was read (a table not
    there yet, or a connection that may not reach the database now, a check or a test without one, is
    judged by the field alone, and read again next time).

    Raises :class:`~seqid_orm.errors.StorageMismatchError` for a column whose values are not what the
    field writes, and :class:`~seqid_orm.errors.ColumnReadError` for a read that failed.  With ``key``, a
    judgement kept is left for :func:`kept` under it."""
    if where is None:
        where = field_target(field, connection)
    model = getattr(field, "model", None)
    if model is None or getattr(field, "column", None) is None:
        return where, False
    name = ColumnName(model._meta.db_table, field.column)
    seen = _seen(connection)
    cursors: list[Any] = []
    if name not in seen:
        try:  # a cursor now: whether this database may be reached here at all
            cursors.append(connection.cursor())
        except Exception:  # pytest-django's block on database access, Django's TestCase forbidding an alias
            return where, False  # that is not this test's, a database not there yet: the field alone

    def fetch(statement: str) -> list[Any]:
        if not cursors:
            cursors.append(connection.cursor())
        cursors[0].execute(statement)  # no parameters: the literals are inline, no %-formatting
        return list(cursors[0].fetchall())

    try:
        judged = live_columns(connection.alias).target(
            where, name, fetch, seen, lambda found: storage_fix(name.table, name.column, found), key=key
        )
    finally:
        for cursor in cursors:
            cursor.close()
    return judged, name in seen
