"""``op.rekey_expand()`` and ``op.rekey_contract()``: a table's key of integers or of UUIDs kept as
text (PostgreSQL, MariaDB 10.7+) changed to a seqid key, with every foreign key to it, in two migrations of two
releases (:mod:`seqid_orm.schema.rekey`), and their ways back, ``op.rekey_undo_contract()`` and
``op.rekey_undo_expand()``.

Release N ships the migration with ``op.rekey_expand("author")``; its code still writes the old keys, and the
database keeps the new columns in step meanwhile.  Release N+1 ships the model with ``seq_uuid_pk()`` and the
migration with ``op.rekey_contract("author")``, run once no process of release N writes (a post-deployment
migration).  Both run outside the migration's transaction (their batches commit), under the column's
migration lock (two pods take turns), and each is finished by running it again after a kill.  Autogenerate
writes both, as two revisions (:mod:`.rewrites`).  On SQLite (integer keys) the expand changes nothing and the
contract makes the tables again in one transaction (:mod:`seqid_orm.schema.rebuild`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alembic.autogenerate import renderers
from alembic.operations import MigrateOperation, Operations

from ...errors import InvalidArgumentError
from ..types import SeqUUID
from ._shared import rendered
from .online import _OnlineIO, _operation_lock, _outside_the_transaction


def _plan(conn: Any, table: str, storage: str | None) -> Any:
    """The re-keying of ``table`` as the catalog says, for the keys ``SeqUUID(storage)`` makes on ``conn``."""
    from ...schema import rekey

    type_ = SeqUUID(storage=storage)
    return rekey.plan_for(_OnlineIO(conn), type_.target(conn.dialect), table, str(type_.compile(dialect=conn.dialect)))


def _rebuild_sqlite(operations: Operations, table: str, storage: str | None, *, forwards: bool) -> None:
    """SQLite's form of the contract step, or of its way back (:mod:`seqid_orm.schema.rebuild`): the key's table
    and every table that references it made again of their own text with the columns' new type (not Alembic's
    batch mode, whose reflection loses each foreign key's ``ON DELETE`` there), each key and foreign key's value
    made the other, the foreign keys checked, in one transaction with SQLite's foreign keys off (so that making
    a table again is no ``DELETE`` that cascades); their setting is given back after.  Integer keys: the way
    back declares them ``INTEGER`` (the rowid; ``AUTOINCREMENT`` again where they had it, with the table's
    high-water mark: :func:`seqid_orm.vendors.sqlite.retyped`), the integer read out of each key."""
    import sqlalchemy as sa

    from ...errors import MigrationRefusedError
    from ...schema import rebuild

    conn = operations.get_bind()
    type_ = SeqUUID(storage=storage)
    where = type_.target(conn.dialect)
    key = sa.inspect(conn).get_pk_constraint(table)["constrained_columns"]
    if len(key) != 1:
        raise MigrationRefusedError(f"{table}'s key is of {len(key)} columns: seqid changes keys of one column")
    io = _OnlineIO(conn)
    columns = [(table, key[0]), *rebuild.followed(io, "sqlite", table, key[0])]  # a keyed child's children too
    declared = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns(table)}
    if forwards and not isinstance(declared[key[0]], sa.Integer):
        raise MigrationRefusedError(
            f"{table}.{key[0]} is {declared[key[0]]}: on SQLite op.rekey_contract changes integer keys (UUIDs kept "
            "as text: op.convert_uuid_storage)"
        )
    rebuild.refuse(io, "sqlite", columns, "integer", where.layout, forwards=forwards)
    raw: Any = conn.connection.driver_connection
    convert = rebuild.converter("integer", where.layout, where.storage, forwards=forwards)
    raw.create_function(rebuild.FUNCTION, 1, convert, deterministic=True)
    if raw.in_transaction:  # the migration's: SQLite turns foreign keys off only outside one (and Alembic's
        raw.commit()  # SQLite DDL is not transactional: the next statement would have committed it anyway)
    keys_on = conn.exec_driver_sql("PRAGMA foreign_keys").scalar()
    conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
    new_type = str(type_.compile(dialect=conn.dialect)) if forwards else "INTEGER"  # the rowid's type
    types: dict[str, dict[str, str]] = {}
    for t, c in columns:
        types.setdefault(t, {})[c] = new_type

    def remake() -> None:
        rebuild.make_again(io, "sqlite", types, (table, key[0]))

    try:
        raw.execute("BEGIN")
        try:
            rebuild.rewrite(io, "sqlite", columns, remake, forwards=forwards)
        except BaseException:
            raw.rollback()
            raise
        raw.commit()
    finally:
        if keys_on:
            conn.exec_driver_sql("PRAGMA foreign_keys = ON")


def _run(operations: Operations, table: str, storage: str | None, what: str, step: Any, unless: Any = None) -> None:
    """``step(io, plan, lock)`` outside the migration's transaction, under the key column's migration lock;
    nothing where ``unless(io)`` says it is done."""
    if operations.get_context().as_sql:
        raise InvalidArgumentError(f"{what} reads the table and fills its rows: run it online")
    if operations.get_bind().dialect.name == "sqlite" and what in _ON_SQLITE:
        forwards = _ON_SQLITE[what]
        if forwards is not None:
            _rebuild_sqlite(operations, table, storage, forwards=forwards)
        return
    with _outside_the_transaction(operations) as free:
        if free is None:
            raise InvalidArgumentError(
                f"{what} commits its batches: run the migration in a transaction Alembic begins (env.py's "
                "context.begin_transaction() on a connection not already in a transaction)"
            )
        io = _OnlineIO(free)
        if unless is not None and unless(io):
            return
        plan = _plan(free, table, storage)
        with io.unprepared(), _operation_lock(free, plan.parent(), what) as lock:
            step(io, plan, lock)


#: What each operation does on SQLite (one writer, every change a table copy): the expands nothing, the contract
#: and its way back a rebuild of the tables, forwards or back.
_ON_SQLITE = {"rekey_expand": None, "rekey_undo_expand": None, "rekey_contract": True, "rekey_undo_contract": False}


@Operations.register_operation("rekey_expand")
@dataclass(eq=False)  # an operation is itself, as Alembic keeps it
class RekeyExpandOp(MigrateOperation):
    """``op.rekey_expand("author")``: the expand step of changing ``author``'s key (integers or UUIDs as text)
    to a seqid key with every foreign key to it (release N: its code writes the old keys meanwhile).  Its
    reverse is ``op.rekey_undo_expand``."""

    table: str
    storage: str | None = None
    batch_size: int | None = None

    @classmethod
    def rekey_expand(
        cls, operations: Operations, table: str, storage: str | None = None, batch_size: int | None = None
    ) -> None:
        operations.invoke(cls(table, storage, batch_size))

    def reverse(self) -> MigrateOperation:
        return RekeyUndoExpandOp(self.table, self.storage)


@Operations.register_operation("rekey_undo_expand")
@dataclass(eq=False)
class RekeyUndoExpandOp(MigrateOperation):
    """``op.rekey_undo_expand("author")``: what ``rekey_expand`` made, dropped."""

    table: str
    storage: str | None = None

    @classmethod
    def rekey_undo_expand(cls, operations: Operations, table: str, storage: str | None = None) -> None:
        operations.invoke(cls(table, storage))

    def reverse(self) -> MigrateOperation:
        return RekeyExpandOp(self.table, self.storage)


@Operations.register_operation("rekey_contract")
@dataclass(eq=False)
class RekeyContractOp(MigrateOperation):
    """``op.rekey_contract("author")``: the contract step (release N+1, once no process of release N writes):
    the seqid column becomes the key and each foreign key's column, by the vendor's short steps.  Its reverse
    is ``op.rekey_undo_contract``."""

    table: str
    storage: str | None = None

    @classmethod
    def rekey_contract(cls, operations: Operations, table: str, storage: str | None = None) -> None:
        operations.invoke(cls(table, storage))

    def reverse(self) -> MigrateOperation:
        return RekeyUndoContractOp(self.table, self.storage)


@Operations.register_operation("rekey_undo_contract")
@dataclass(eq=False)
class RekeyUndoContractOp(MigrateOperation):
    """``op.rekey_undo_contract("author")``: the old key and foreign keys again."""

    table: str
    storage: str | None = None

    @classmethod
    def rekey_undo_contract(cls, operations: Operations, table: str, storage: str | None = None) -> None:
        operations.invoke(cls(table, storage))

    def reverse(self) -> MigrateOperation:
        return RekeyContractOp(self.table, self.storage)


@Operations.implementation_for(RekeyExpandOp)
def _rekey_expand(operations: Operations, operation: RekeyExpandOp) -> None:
    from ...schema import rekey

    _run(
        operations,
        operation.table,
        operation.storage,
        "rekey_expand",
        lambda io, plan, lock: rekey.expand(io, plan, batch_size=operation.batch_size, guard=lock.check),
    )


@Operations.implementation_for(RekeyUndoExpandOp)
def _rekey_undo_expand(operations: Operations, operation: RekeyUndoExpandOp) -> None:
    from ...schema import rekey

    _run(
        operations,
        operation.table,
        operation.storage,
        "rekey_undo_expand",
        lambda io, p, lock: rekey.undo_expand(io, p),
    )


@Operations.implementation_for(RekeyContractOp)
def _rekey_contract(operations: Operations, operation: RekeyContractOp) -> None:
    from ...schema import rekey

    _run(
        operations,
        operation.table,
        operation.storage,
        "rekey_contract",
        lambda io, plan, lock: rekey.contract(io, plan, guard=lock.check),
    )


@Operations.implementation_for(RekeyUndoContractOp)
def _rekey_undo_contract(operations: Operations, operation: RekeyUndoContractOp) -> None:
    from ...schema import rekey

    _run(
        operations,
        operation.table,
        operation.storage,
        "rekey_undo_contract",
        lambda io, p, lock: rekey.undo_contract(io, p),
    )


for _op, _name in (
    (RekeyExpandOp, "rekey_expand"),
    (RekeyUndoExpandOp, "rekey_undo_expand"),
    (RekeyContractOp, "rekey_contract"),
    (RekeyUndoContractOp, "rekey_undo_contract"),
):
    renderers.dispatch_for(_op)(lambda context, op, _name=_name: rendered(context, _name, op, positional=1))
