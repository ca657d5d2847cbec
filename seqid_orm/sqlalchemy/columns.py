"""The live column a key is made for, read once per engine (:mod:`seqid_orm.vendors.live`).

Before the first key an engine makes for a :class:`~seqid_orm.sqlalchemy.SeqUUID` column (an insert's
default, a bulk load, ``assign_ids_on_init``), the column is read on the connection at hand: its
declared type, which must hold what the type writes (else
:class:`~seqid_orm.errors.StorageMismatchError`, before the row is written), and its largest keys,
which say whether new keys must sort after old ones (an adopted column, :mod:`seqid_orm.ids.adopted`).
The column's :class:`~seqid_orm.vendors.Target` is then kept on the dialect, so a row pays a
dictionary look-up.  A process that drops and re-creates a table under a live engine keeps the
decision it made for the first one: dispose of the engine to read again.

Any statement that names a table of such a column reads it first too (a ``before_cursor_execute``
listener, once per compiled statement): a look-up of an old key in a column that keeps another form
is refused as the insert is, rather than finding nothing.

The reads go through the driver's own cursor, beside the statement being executed on the same
connection and in its transaction: they start no SQLAlchemy execution of their own.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.sql.util import find_tables

from ..vendors import Storage, Target
from ..vendors.live import ColumnReading, judge, read_column
from .types import SeqUUID, dialect_target

__all__ = ["column_target", "forget_columns", "storage_fix"]

_DEFAULT_TYPE = SeqUUID()


def storage_fix(table: str, column: str, found: Storage) -> str:
    """What a user does about a SQLAlchemy column that holds ``found``: the two ways out."""
    return (
        f'Declare the storage it has: seq_uuid_pk(storage="{found.value}") (or SeqUUID(storage="{found.value}")); '
        f"or convert it to this type's storage in an Alembic migration: "
        f'op.convert_uuid_storage("{table}", "{column}", from_storage="{found.value}") '
        "(seqid_orm.sqlalchemy.alembic's writer makes autogenerate write it)."
    )


def _cache(dialect: Dialect) -> dict[Any, tuple[object, Target]]:
    known: dict[Any, tuple[object, Target]] | None = dialect.__dict__.get("seqid_column_targets")
    if known is None:
        known = dialect.seqid_column_targets = {}  # type: ignore[attr-defined]
    return known


def kept_target(dialect: Dialect, column: Any) -> Target | None:
    """The target already read for ``column`` on ``dialect``, if any (under the same server version)."""
    hit = _cache(dialect).get(column)
    if hit is not None and hit[0] is getattr(dialect, "server_version_info", None):
        return hit[1]
    return None


def column_target(dbapi_connection: Any, dialect: Dialect, column: Any) -> Target:
    """The :class:`~seqid_orm.vendors.Target` of ``column`` (a ``Column`` of a ``Table``) on the database
    ``dbapi_connection`` is open to: read once per dialect and kept (see the module docstring).

    Raises :class:`~seqid_orm.errors.StorageMismatchError` when the column holds its UUIDs in another
    form than its type writes.  A column whose table is not there yet is judged by its type alone,
    and read again next time.
    """
    kept = kept_target(dialect, column)
    if kept is not None:
        return kept
    type_ = column.type if isinstance(getattr(column, "type", None), SeqUUID) else _DEFAULT_TYPE
    where = dialect_target(dialect, type_.storage, type_.layout)
    table = getattr(column, "table", None)
    if not isinstance(table, sa.Table):  # a lightweight table() of a migration: no column to read
        return where
    reading = _read(dbapi_connection, where.vendor, table, column.name)
    judged = judge(
        where,
        reading,
        label=f"{table.name}.{column.name}",
        fix=lambda found: storage_fix(table.name, column.name, found),
    )
    if reading.declared is not None:
        _cache(dialect)[column] = (getattr(dialect, "server_version_info", None), judged)
    return judged


def _read(dbapi_connection: Any, vendor: str, table: sa.Table, column: str) -> ColumnReading:
    cursor = dbapi_connection.cursor()

    def fetch(statement: str) -> list[Any]:
        cursor.execute(statement)
        return list(cursor.fetchall())

    try:
        return read_column(vendor, table.name, column, fetch, table.schema)
    finally:
        cursor.close()


@event.listens_for(Engine, "before_cursor_execute")
def _first_use(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
    """Each compiled statement, the first time it runs over an engine, reads the SeqUUID columns of the
    tables it names that the engine has not read yet (:func:`column_target`): a look-up of an old key
    in a column that keeps another form is refused as an insert is, instead of finding nothing.  Then
    the compiled statement (cached by SQLAlchemy, and of one dialect) is marked: a statement run again
    pays a dictionary look-up."""
    compiled = context.compiled
    if compiled is None or "seqid_seen" in compiled.__dict__ or context.isddl:
        return
    dialect = conn.dialect
    for column in _seq_uuid_columns(compiled.statement):
        if kept_target(dialect, column) is None:
            column_target(conn.connection.dbapi_connection, dialect, column)
    compiled.__dict__["seqid_seen"] = True  # a compiled statement belongs to one dialect: read once


def _seq_uuid_columns(statement: Any) -> list[Any]:
    """The SeqUUID columns of the tables (``Table``, not a migration's lightweight ``table()``) a statement names."""
    try:
        tables = find_tables(statement, include_aliases=True, include_joins=True, include_crud=True)
    except Exception:  # a statement shape the traversal does not know: nothing to check
        return []
    return [c for t in tables if isinstance(t, sa.Table) for c in t.columns if isinstance(c.type, SeqUUID)]


def forget_columns(dialect: Dialect) -> None:
    """Forget what was read of every column on ``dialect`` (an engine's ``dialect``): the next key
    reads again.  For tests, and for a process that re-creates a table under a live engine."""
    _cache(dialect).clear()
    dialect.__dict__.pop("seqid_id_functions", None)
