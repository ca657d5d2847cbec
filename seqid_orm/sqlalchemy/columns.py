"""The live column a key is made for (:mod:`seqid_orm.schema.live`), as SQLAlchemy connections see it.

Before the first key a connection makes for a :class:`~seqid_orm.sqlalchemy.SeqUUID` column (an
insert's default, a bulk load, ``assign_ids_on_init``), the column is read on that connection: the
catalog row says which real table the name resolves to there (a tenant's schema under its
``search_path``, or the schema a ``schema_translate_map`` names), its declared type, whether the role
may read its keys, and the adoption's record; then, once per real table and engine, its largest and
smallest keys, whose form must be what the type writes (else
:class:`~seqid_orm.errors.StorageMismatchError`, before the row is written).  The judgement is kept
per real table on the engine's dialect (:class:`~seqid_orm.schema.live.LiveColumns`), and each
pooled connection keeps which real table each name resolved to and the target it judged there
(:class:`~seqid_orm.schema.live.Kept`), so a row pays one look-up (:func:`kept`).

A statement that changes the ``search_path`` (``SET search_path``, ``set_config('search_path', …)``)
through SQLAlchemy clears its connection's names, at once and again when its transaction ends (a
``SET LOCAL`` ends with it); DDL through the engine clears every connection's.  A ``search_path``
changed where SQLAlchemy does not see it (inside a server-side function, on the raw driver
connection) is not followed: call :func:`forget_columns` there.

Any statement that names a table of such a column reads it first too (a ``before_cursor_execute``
listener, once per compiled statement and connection): a look-up of an old key in a column that keeps
another form is refused as the insert is, rather than finding nothing.

The reads go through the driver's own cursor, beside the statement being executed on the same
connection and in its transaction: they start no SQLAlchemy execution of their own.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.sql.util import find_tables

from ..schema.live import ColumnName, Kept, LiveColumns
from ..vendors import Storage, Target
from .types import SeqUUID, dialect_target

__all__ = ["column_target", "forget_columns", "kept", "storage_fix"]

_DEFAULT_TYPE = SeqUUID()
_SEEN = "seqid_seen"  # Connection.info: {ColumnName: real table}, with the DDL generation it was made under
_PATH_CHANGED = "seqid_path_changed"  # Connection.info: a search_path statement ran in this transaction


def storage_fix(table: str, column: str, found: Storage) -> str:
    """What a user does about a SQLAlchemy column that holds ``found``: the two ways out."""
    return (
        f'Declare the storage it has: seq_uuid_pk(storage="{found.value}") (or SeqUUID(storage="{found.value}")); '
        f"or convert it to this type's storage in an Alembic migration: "
        f'op.convert_uuid_storage("{table}", "{column}", from_storage="{found.value}") '
        "(seqid_orm.sqlalchemy.alembic's writer makes autogenerate write it)."
    )


def live_columns(dialect: Dialect) -> LiveColumns:
    """The judgements of the engine ``dialect`` belongs to (one dialect per engine)."""
    known: LiveColumns | None = dialect.__dict__.get("seqid_live")
    if known is None:
        known = dialect.seqid_live = LiveColumns()  # type: ignore[attr-defined]
    return known


_generations = itertools.count(1)


def _seen(connection: Connection) -> dict[Any, Any]:
    """The names this pooled connection resolved, made anew after DDL through its engine."""
    dialect = connection.dialect
    generation = dialect.__dict__.get("seqid_ddl", 0)
    seen: dict[Any, Any] | None = connection.info.get(_SEEN)
    if seen is None or seen.get(None) != generation:
        seen = connection.info[_SEEN] = {None: generation}
    return seen


def column_name(column: Any, connection: Connection | None = None) -> ColumnName | None:
    """The name of ``column`` (a ``Column`` of a ``Table``) as this connection's statements use it: its
    table's schema through the connection's ``schema_translate_map``.  ``None`` for a migration's
    lightweight ``table()``, which names no table to read."""
    table = getattr(column, "table", None)
    if not isinstance(table, sa.Table):
        return None
    schema = table.schema
    translate = connection.get_execution_options().get("schema_translate_map") if connection is not None else None
    if translate and schema in translate:
        schema = translate[schema]
    return ColumnName(table.name, column.name, schema)


def column_target(connection: Connection, column: Any) -> Target:
    """The :class:`~seqid_orm.vendors.Target` of ``column`` (a ``Column`` of a ``Table``) on the table its
    name resolves to over ``connection`` (see the module docstring).

    Raises :class:`~seqid_orm.errors.StorageMismatchError` when the column holds its UUIDs in another
    form than its type writes, and :class:`~seqid_orm.errors.ColumnReadError` when reading it failed.
    A column whose table is not there yet is judged by its type alone, and read again next time.
    """
    dialect = connection.dialect
    type_ = column.type if isinstance(getattr(column, "type", None), SeqUUID) else _DEFAULT_TYPE
    where = dialect_target(dialect, type_.storage, type_.layout)
    name = column_name(column, connection)
    if name is None:
        return where
    return live_columns(dialect).target(
        where,
        name,
        _fetcher(connection),
        _seen(connection),
        lambda found: storage_fix(name.table, name.column, found),
        key=column,
        translate=_translation(connection),
    )


def _translation(connection: Connection) -> dict[Any, Any] | None:
    """The connection's ``schema_translate_map`` now, a copy (what the user's dict says later is not this)."""
    translate = connection.get_execution_options().get("schema_translate_map")
    return dict(translate) if translate else None


def kept(connection: Connection, column: Any) -> Kept | None:
    """What :func:`column_target` left for ``column`` on ``connection`` while it is good (the same DDL
    generation, schema translation and time, :class:`~seqid_orm.schema.live.Kept`), else ``None``: a row's
    default asks this first, one look-up where the resolution is 14 calls."""
    seen = connection.info.get(_SEEN)
    if seen is None or seen.get(None) != connection.dialect.__dict__.get("seqid_ddl", 0):
        return None
    hit: Kept | None = seen.get(column)
    if hit is None or time.monotonic() >= hit.until:
        return None
    return hit if hit.translate == (connection.get_execution_options().get("schema_translate_map") or None) else None


def _fetcher(connection: Connection) -> Any:
    """Runs one statement on the connection's DBAPI connection and returns its rows."""
    dbapi_connection = connection.connection.dbapi_connection
    dialect = connection.dialect

    def fetch(statement: str) -> list[Any]:
        cursor = dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            # SQLAlchemy's asyncpg cursor reloads asyncpg's type and statement caches when DDL ran
            # through the engine since its connection last did (sqlalchemy/dialects/postgresql/
            # asyncpg.py, _check_type_cache_invalidation): the execution context hands every cursor
            # the dialect's mark; a cursor made here must carry it too, or a table re-created with
            # another column type answers InvalidCachedStatementError
            mark = getattr(dialect, "_invalidate_schema_cache_asof", None)
            if mark is not None and hasattr(cursor, "_invalidate_schema_cache_asof"):
                cursor._invalidate_schema_cache_asof = mark  # type: ignore[union-attr]
            cursor.execute(statement)
            return list(cursor.fetchall())
        finally:
            cursor.close()

    return fetch


@event.listens_for(Engine, "before_cursor_execute")
def _first_use(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
    """Each compiled statement, the first time it runs on a connection, reads the SeqUUID columns of the
    tables it names that the connection has not resolved yet (:func:`column_target`): a look-up of an
    old key in a column that keeps another form is refused as an insert is, instead of finding
    nothing.  A statement that changes the ``search_path`` clears the connection's names, and DDL
    every connection's."""
    if len(statement) < 1000 and "search_path" in statement.lower():  # inline: it runs for every statement
        conn.info.pop(_SEEN, None)
        conn.info[_PATH_CHANGED] = True
        return
    if context is None:
        return
    if context.isddl:
        dialect = conn.dialect
        dialect.seqid_ddl = dialect.__dict__.get("seqid_ddl", 0) + next(_generations)
        return
    compiled = context.compiled
    if compiled is None:
        return
    seen = conn.info.get(_SEEN)
    done = compiled.__dict__.get("seqid_seen")
    if done is not None and seen is not None and done is seen:
        return
    for column in _seq_uuid_columns(compiled.statement):
        column_target(conn, column)
    compiled.__dict__["seqid_seen"] = conn.info.get(_SEEN)  # this connection's names, resolved


@event.listens_for(Engine, "commit")
@event.listens_for(Engine, "rollback")
def _transaction_end(conn: Any) -> None:
    """A ``SET LOCAL search_path`` ends with its transaction: the names it resolved go with it.  Not on a
    connection invalidated meanwhile (a server that went away): its names went with its DBAPI
    connection, and reading its ``info`` would raise ``PendingRollbackError`` in place of the error
    that ended it, from every engine of a process that imported seqid."""
    if conn.invalidated:
        return
    if conn.info.pop(_PATH_CHANGED, False):
        conn.info.pop(_SEEN, None)


def _seq_uuid_columns(statement: Any) -> list[Any]:
    """The SeqUUID columns of the tables (``Table``, not a migration's lightweight ``table()``) a statement names."""
    try:
        tables = find_tables(statement, include_aliases=True, include_joins=True, include_crud=True)
    except Exception:  # a statement shape the traversal does not know: nothing to check
        return []
    return [c for t in tables if isinstance(t, sa.Table) for c in t.columns if isinstance(c.type, SeqUUID)]


def forget_columns(dialect: Dialect) -> None:
    """Forget what was read of every column on ``dialect`` (an engine's ``dialect``) and which table each
    name resolved to on every connection: the next key reads again.  For tests, and for a process that
    re-creates a table, or changes a connection's ``search_path``, where SQLAlchemy does not see it."""
    live_columns(dialect).forget()
    dialect.seqid_ddl = dialect.__dict__.get("seqid_ddl", 0) + next(_generations)  # type: ignore[attr-defined]
