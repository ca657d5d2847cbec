"""``op.adopt_seqid_keys()`` and its undo ``op.drop_seqid_record()``: an adoption decided once by the
migration that swaps the key and recorded in the column's comment; autogenerate writes it for a swapped
key and keeps the record out of its comment comparison."""

from __future__ import annotations

from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from alembic.autogenerate import comparators, renderers
from alembic.operations import MigrateOperation, Operations, ops

from ...errors import InvalidArgumentError
from ...ids.adopted import recognise, record_comment, record_of, without_record
from ...schema.adoption import Adoption, adopt
from ...schema.live import ColumnName, read_column, uuids_of
from ..columns import storage_fix
from ..types import SeqUUID
from ._shared import _AFTER_ALEMBIC, rendered


@Operations.register_operation("adopt_seqid_keys")
@dataclass(eq=False)  # an operation is itself, as Alembic keeps it
class AdoptSeqIDKeysOp(MigrateOperation):
    """``op.adopt_seqid_keys("invoice", "id")``: decide once, with the migration's view of the whole
    column, how seqid's keys sort after the keys a column already holds, and record it in the schema
    (:mod:`seqid_orm.schema.adoption`).

    Autogenerate writes it (with this module imported in ``env.py``) for a ``SeqUUID`` column of a table
    that holds keys seqid did not make and has no record yet: the migration that swaps the key.  Every
    process, role and tenant then reads the record instead of judging the rows it happens to see.  On
    PostgreSQL the record is the column's comment (``[seqid adopted=N]``, beside any comment it has);
    elsewhere plain keys are right whatever the rows, and the operation checks the column's values
    against the type's storage and records nothing.  Needs a live connection, and a role that reads
    every row (the table's owner).  Its reverse removes the record.
    """

    table: str
    column: str
    storage: str | None = None
    schema: str | None = None
    comment: str | EllipsisType | None = ...
    """The column's own words beside the record, where the migration changes them too (``...``: kept)."""

    @classmethod
    def adopt_seqid_keys(
        cls,
        operations: Operations,
        table: str,
        column: str,
        storage: str | None = None,
        schema: str | None = None,
        comment: str | EllipsisType | None = ...,
    ) -> None:
        operations.invoke(cls(table, column, storage, schema, comment))

    def reverse(self) -> DropSeqIDRecordOp:
        return DropSeqIDRecordOp(self.table, self.column, self.storage, self.schema)

    def to_diff_tuple(self) -> tuple[str, str | None, str, str]:
        """What ``alembic.autogenerate.compare_metadata`` lists for it."""
        name = "drop_seqid_record" if isinstance(self, DropSeqIDRecordOp) else "adopt_seqid_keys"
        return (name, self.schema, self.table, self.column)


@Operations.register_operation("drop_seqid_record")
class DropSeqIDRecordOp(AdoptSeqIDKeysOp):
    """``op.drop_seqid_record("invoice", "id")``: undo :class:`AdoptSeqIDKeysOp` (the record goes, the
    column's own comment stays)."""

    @classmethod
    def drop_seqid_record(
        cls, operations: Operations, table: str, column: str, storage: str | None = None, schema: str | None = None
    ) -> None:
        operations.invoke(cls(table, column, storage, schema))

    def reverse(self) -> AdoptSeqIDKeysOp:  # type: ignore[override]
        return AdoptSeqIDKeysOp(self.table, self.column, self.storage, self.schema)


def _adopt(
    conn: Any,
    table: str,
    column: str,
    storage: str | None,
    schema: str | None,
    comment: str | EllipsisType | None = ...,
) -> Adoption:
    from ..columns import _fetcher, forget_columns

    where = SeqUUID(storage).target(conn.dialect)
    done = adopt(
        where,
        ColumnName(table, column, schema),
        _fetcher(conn),
        conn.exec_driver_sql,
        lambda found: storage_fix(table, column, found),
        comment,
    )
    forget_columns(conn.dialect)  # this process reads the record from now on
    return done


@Operations.implementation_for(AdoptSeqIDKeysOp)
def _adopt_seqid_keys(operations: Operations, operation: AdoptSeqIDKeysOp) -> None:
    if operations.get_context().as_sql:
        raise InvalidArgumentError("adopt_seqid_keys reads the column's keys: run it online")
    conn = operations.get_bind()
    _adopt(conn, operation.table, operation.column, operation.storage, operation.schema, operation.comment)


@Operations.implementation_for(DropSeqIDRecordOp)
def _drop_seqid_record(operations: Operations, operation: DropSeqIDRecordOp) -> None:
    from ...schema.adoption import unrecord
    from ..columns import _fetcher, forget_columns

    if operations.get_context().as_sql:
        raise InvalidArgumentError("drop_seqid_record reads the column's comment: run it online")
    conn = operations.get_bind()
    where = SeqUUID(operation.storage).target(conn.dialect)
    name = ColumnName(operation.table, operation.column, operation.schema)
    if unrecord(where, name, _fetcher(conn), conn.exec_driver_sql):
        forget_columns(conn.dialect)


@renderers.dispatch_for(AdoptSeqIDKeysOp)
def _render_adopt(autogen_context: Any, op: AdoptSeqIDKeysOp) -> str:
    name = "drop_seqid_record" if isinstance(op, DropSeqIDRecordOp) else "adopt_seqid_keys"
    return rendered(autogen_context, name, op)


def _keep_the_record(
    autogen_context: Any,
    alter_column_op: Any,
    schema: str | None,
    tname: str,
    cname: str,
    conn_col: Any,
    metadata_col: Any,
) -> None:
    """Autogenerate (and ``compare_metadata``, which tools such as pytest-alembic call): the adoption's
    record in a column's comment (``[seqid adopted=N]``), which the metadata does not know, is no change
    to write; a change of the comment's own words keeps the record beside them.  Runs after Alembic's own
    comment comparison."""
    recorded = record_of(getattr(conn_col, "comment", None))
    if recorded is None or alter_column_op.modify_comment is False:
        return
    if without_record(conn_col.comment) == (metadata_col.comment or None):
        alter_column_op.modify_comment = False
    else:
        alter_column_op.modify_comment = record_comment(metadata_col.comment or None, recorded)


comparators.dispatch_for("column", **_AFTER_ALEMBIC)(_keep_the_record)


@comparators.dispatch_for("table")
def _compare_adoption(
    autogen_context: Any, modify_table_ops: Any, schema: str | None, tname: str, conn_table: Any, metadata_table: Any
) -> None:
    """Autogenerate: a ``SeqUUID`` column of a table that is there already and holds keys seqid did not
    make, with no record of an adoption, gets :class:`AdoptSeqIDKeysOp` (the swap's migration).  A new
    table, an empty column, or one of seqid's own plain keys needs none."""
    connection = getattr(autogen_context, "connection", None)
    if conn_table is None or metadata_table is None or connection is None:
        return
    from ..columns import _fetcher

    for column in metadata_table.columns:
        if not isinstance(column.type, SeqUUID) or column.name not in conn_table.columns:
            continue
        where = column.type.target(connection.dialect)
        if not where.rules.INNER_SPLITS_HALF:
            continue
        reading = read_column(where.vendor, ColumnName(tname, column.name, schema), _fetcher(connection))
        if reading.declared is None or reading.record is not None or not reading.top:
            continue
        top = uuids_of(reading.top)
        if where.above_for(top) == 0 and not any(recognise(u.int) for u in top):
            continue  # plain keys are right, as every process judges: seqid's own, or keys below today's
        storage = None if column.type.storage is None else column.type.storage.value
        comment = _take_comment_change(modify_table_ops, column.name)
        modify_table_ops.ops.append(AdoptSeqIDKeysOp(tname, column.name, storage, schema, comment))


def _take_comment_change(modify_table_ops: Any, column: str) -> str | EllipsisType | None:
    """The comment this migration gives ``column`` (``...``: none given), taken off its ``alter_column``:
    the adoption writes it beside the record, after every other change of the column (a comment set after
    the record would drop it)."""
    for op in list(modify_table_ops.ops):
        if isinstance(op, ops.AlterColumnOp) and op.column_name == column and op.modify_comment is not False:
            words: str | None = op.modify_comment or None
            op.modify_comment = False
            if not op.has_changes():
                modify_table_ops.ops.remove(op)
            return words
    return ...
