"""``op.set_seqid_default()``: the database makes a column's keys from now on."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import renderers
from alembic.operations import MigrateOperation, Operations, ops

from ...errors import InvalidArgumentError
from ..server import DatabaseSeqUUID
from ..types import SeqUUID
from ._shared import rendered
from .adoption import _adopt


@Operations.register_operation("set_seqid_default")
@dataclass(eq=False)  # an operation is itself, as Alembic keeps it
class SetSeqIDDefaultOp(MigrateOperation):
    """``op.set_seqid_default("invoice", "id")``: the database makes the column's keys from now on.

    The keys of :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID`, chosen when the migration runs: for the
    server it runs on, and, where the column already holds other keys that new ones would land among
    (random ``uuid4`` keys on PostgreSQL), keys that sort after them (:mod:`seqid_orm.ids.adopted`), read
    from the column's largest keys.  Needs a live connection.  Its reverse drops the default.
    ``shift`` (a ``datetime.timedelta``) moves the clock the default reads, as ``DatabaseSeqUUID(shift=)``.
    """

    table: str
    column: str
    storage: str | None = None
    schema: str | None = None
    shift: datetime.timedelta | None = None

    @classmethod
    def set_seqid_default(
        cls,
        operations: Operations,
        table: str,
        column: str,
        storage: str | None = None,
        schema: str | None = None,
        shift: datetime.timedelta | None = None,
    ) -> None:
        operations.invoke(cls(table, column, storage, schema, shift))

    def reverse(self) -> MigrateOperation:
        return ops.AlterColumnOp(self.table, self.column, schema=self.schema, modify_server_default=None)


@Operations.implementation_for(SetSeqIDDefaultOp)
def _set_seqid_default(operations: Operations, operation: SetSeqIDDefaultOp) -> None:
    if operations.get_context().as_sql:
        raise InvalidArgumentError("set_seqid_default reads the column's keys: run it online")
    conn = operations.get_bind()
    done = _adopt(conn, operation.table, operation.column, operation.storage, operation.schema)
    default: Any = DatabaseSeqUUID(operation.storage, shift=operation.shift)
    if done.above:  # the adopted keys' SQL: the function adopt_seqid_keys made beside the table
        where = SeqUUID(operation.storage).target(conn.dialect).adopted(done.above)
        default = sa.text(where.shifted_default(operation.shift, done.schema).sql)
    operations.alter_column(operation.table, operation.column, server_default=default, schema=operation.schema)


@renderers.dispatch_for(SetSeqIDDefaultOp)
def _render_set_default(autogen_context: Any, op: SetSeqIDDefaultOp) -> str:
    if op.shift is not None:
        autogen_context.imports.add("import datetime")  # the shift renders as datetime.timedelta(...)
    return rendered(autogen_context, "set_seqid_default", op)
