"""seqid's tables as operations: ``op.create_ticket_table()``, ``op.drop_ticket_table()``,
``op.create_lease_table()``, ``op.drop_lease_table()``, and autogenerate's ``create_table`` of them
rewritten as those (GeoAlchemy2's arrangement for its spatial operations)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import renderers
from alembic.operations import MigrateOperation, Operations, ops

from ...allocation.stores.base import LEASE_TABLE, TICKET_TABLE
from ...allocation.stores.sqlalchemy import lease_columns, ticket_columns
from ._shared import _IMPORT, writer


class _TableOp(MigrateOperation):
    """Create or drop one of seqid's tables (``kind``: "tickets" or "leases")."""

    kind = ""
    default_name = ""
    create = True

    def __init__(self, table_name: str | None = None, schema: str | None = None) -> None:
        self.table_name = table_name or self.default_name
        self.schema = schema

    def reverse(self) -> _TableOp:
        return _OPS[(self.kind, not self.create)](self.table_name, self.schema)

    def columns(self) -> list[sa.Column[Any]]:
        return ticket_columns() if self.kind == "tickets" else lease_columns()


@Operations.register_operation("create_ticket_table")
class CreateTicketTableOp(_TableOp):
    """``op.create_ticket_table(table_name="seqid_tickets", schema=None)``."""

    kind, default_name, create = "tickets", TICKET_TABLE, True

    @classmethod
    def create_ticket_table(
        cls, operations: Operations, table_name: str = TICKET_TABLE, schema: str | None = None
    ) -> None:
        """Create the table ticket sequences keep their counters in."""
        operations.invoke(cls(table_name, schema))


@Operations.register_operation("drop_ticket_table")
class DropTicketTableOp(_TableOp):
    """``op.drop_ticket_table(table_name="seqid_tickets", schema=None)``."""

    kind, default_name, create = "tickets", TICKET_TABLE, False

    @classmethod
    def drop_ticket_table(
        cls, operations: Operations, table_name: str = TICKET_TABLE, schema: str | None = None
    ) -> None:
        """Drop the ticket table (every sequence's counter goes with it)."""
        operations.invoke(cls(table_name, schema))


@Operations.register_operation("create_lease_table")
class CreateLeaseTableOp(_TableOp):
    """``op.create_lease_table(table_name="seqid_worker_leases", schema=None)``."""

    kind, default_name, create = "leases", LEASE_TABLE, True

    @classmethod
    def create_lease_table(
        cls, operations: Operations, table_name: str = LEASE_TABLE, schema: str | None = None
    ) -> None:
        """Create the table worker-id leases live in."""
        operations.invoke(cls(table_name, schema))


@Operations.register_operation("drop_lease_table")
class DropLeaseTableOp(_TableOp):
    """``op.drop_lease_table(table_name="seqid_worker_leases", schema=None)``."""

    kind, default_name, create = "leases", LEASE_TABLE, False

    @classmethod
    def drop_lease_table(cls, operations: Operations, table_name: str = LEASE_TABLE, schema: str | None = None) -> None:
        """Drop the lease table (the high-water marks go with it)."""
        operations.invoke(cls(table_name, schema))


_OPS: dict[tuple[str, bool], type[_TableOp]] = {
    (op.kind, op.create): op for op in (CreateTicketTableOp, DropTicketTableOp, CreateLeaseTableOp, DropLeaseTableOp)
}
_OP_NAMES = {
    CreateTicketTableOp: "create_ticket_table",
    DropTicketTableOp: "drop_ticket_table",
    CreateLeaseTableOp: "create_lease_table",
    DropLeaseTableOp: "drop_lease_table",
}


def _run(operations: Operations, operation: _TableOp) -> None:
    if operation.create:
        operations.create_table(operation.table_name, *operation.columns(), schema=operation.schema)
    else:
        operations.drop_table(operation.table_name, schema=operation.schema)


def _render(autogen_context: Any, op: _TableOp) -> str:
    autogen_context.imports.add(_IMPORT)  # registers the operations when the migration runs
    args = []
    if op.table_name != op.default_name:
        args.append(f"table_name={op.table_name!r}")
    if op.schema is not None:
        args.append(f"schema={op.schema!r}")
    return f"op.{_OP_NAMES[type(op)]}({', '.join(args)})"


for _op in _OPS.values():
    Operations.implementation_for(_op)(_run)
    renderers.dispatch_for(_op)(_render)


def _seqid_kind(info: dict[str, Any] | None) -> str | None:
    kind = (info or {}).get("seqid")
    return kind if kind in ("tickets", "leases") else None


@writer.rewrites(ops.CreateTableOp)
def _create_table_as_seqid_op(context: Any, revision: Any, op: ops.CreateTableOp) -> Any:
    kind = _seqid_kind(op.info)
    return op if kind is None else _OPS[(kind, True)](op.table_name, op.schema)


@writer.rewrites(ops.DropTableOp)
def _drop_table_as_seqid_op(context: Any, revision: Any, op: ops.DropTableOp) -> Any:
    kind = _seqid_kind(op.info)
    return op if kind is None else _OPS[(kind, False)](op.table_name, op.schema)
