"""``op.add_seqid_column()`` and its drop: a key column added to a table in use (online on PostgreSQL and
MariaDB, :mod:`seqid_orm.schema.online`), under the migration lock (:func:`migration_lock`, for ``env.py``);
autogenerate's ``add_column`` of such a column rewritten as it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import comparators, renderers
from alembic.operations import MigrateOperation, Operations, ops

from ...errors import InvalidArgumentError
from ..server import DatabaseSeqUUID
from ..types import SeqUUID
from ._shared import _AFTER_ALEMBIC, rendered


@Operations.register_operation("add_seqid_column")
@dataclass(eq=False)  # an operation is itself, as Alembic keeps it
class AddSeqIDColumnOp(MigrateOperation):
    """``op.add_seqid_column("event", "seq_id", from_timestamp="created_at")``: adopt seqid on a table.

    Adds a ``SeqUUID`` column, fills it for the existing rows (from ``from_timestamp`` with
    :func:`~seqid_orm.comb_at`, so old rows sort by the time they were made, else with new ids in
    key order), makes it ``NOT NULL`` and unique, and gives it a database default
    (:class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID`), so inserts from code that does not know the column
    (the application's old code in a rolling deploy, other programs) get one too; ``server_default=False``
    drops that default at the end.  Naive timestamps are read as UTC.  Reversed by dropping the column.
    Needs a live connection (it reads and writes the rows).

    On PostgreSQL and MariaDB it runs **online** (:mod:`seqid_orm.schema.online`): outside the
    migration's transaction (Alembic's ``autocommit_block``, so the migration must run in a transaction
    Alembic begins, as ``env.py``'s ``context.begin_transaction()`` does), the column added without a
    rewrite, the rows filled in batches of ``batch_size`` that each commit, the unique index built
    without blocking writes, ``NOT NULL`` reached without a long lock, every DDL statement waiting for its
    lock half a second at most and tried again; a run killed anywhere and run again goes on where it
    stopped; a run that finds the work done (another pod's) changes nothing, and two at once take turns
    (a :class:`~seqid_orm.allocation.migration_lock.MigrationLock` per table and column).  Every check
    that can refuse runs before the first change (:class:`~seqid_orm.errors.MigrationRefusedError`).
    Batches are sized by time unless ``batch_size`` fixes them; ``fire_triggers=False`` keeps the
    table's row triggers from firing for the backfill's writes (PostgreSQL, a role allowed to set
    ``session_replication_role``; refused elsewhere).  ``online=False`` runs the old single-transaction
    form, which is what SQLite always gets.

    Autogenerate writes it for a ``SeqUUID`` column that is not nullable, added to a table that is there
    already (Alembic's own ``add_column`` would need every row's value at once); ``unique=False`` for a
    column the metadata does not declare unique.
    """

    table: str
    column: str
    from_timestamp: str | None = None
    storage: str | None = None
    server_default: bool = True
    batch_size: int | None = None
    online: bool | None = None
    unique: bool = True
    fire_triggers: bool = True

    @classmethod
    def add_seqid_column(
        cls,
        operations: Operations,
        table: str,
        column: str,
        from_timestamp: str | None = None,
        storage: str | None = None,
        server_default: bool = True,
        batch_size: int | None = None,
        online: bool | None = None,
        unique: bool = True,
        fire_triggers: bool = True,
    ) -> None:
        operations.invoke(
            cls(table, column, from_timestamp, storage, server_default, batch_size, online, unique, fire_triggers)
        )

    def reverse(self) -> MigrateOperation:
        return DropSeqIDColumnOp(self.table, self.column, self.unique)

    def to_diff_tuple(self) -> tuple[str, None, str, str]:
        """What ``alembic.autogenerate.compare_metadata`` lists for it."""
        return ("add_seqid_column", None, self.table, self.column)


@Operations.register_operation("drop_seqid_column")
@dataclass(eq=False)
class DropSeqIDColumnOp(MigrateOperation):
    """``op.drop_seqid_column("event", "seq_id")``: undo :class:`AddSeqIDColumnOp` (its unique
    constraint, unless ``unique=False``, then the column; in batch mode, which SQLite needs for both)."""

    table: str
    column: str
    unique: bool = True

    @classmethod
    def drop_seqid_column(cls, operations: Operations, table: str, column: str, unique: bool = True) -> None:
        operations.invoke(cls(table, column, unique))

    def reverse(self) -> MigrateOperation:
        return AddSeqIDColumnOp(self.table, self.column, unique=self.unique)

    def to_diff_tuple(self) -> tuple[str, None, str, str]:
        """What ``alembic.autogenerate.compare_metadata`` lists for it."""
        return ("drop_seqid_column", None, self.table, self.column)


@contextlib.contextmanager
def migration_lock(
    connectable: Any, name: str = "alembic", *, wait: float | None = None, ttl: float = 15.0
) -> Iterator[Any]:
    """One ``alembic upgrade`` at a time across pods, whatever pooler is between: ``env.py``::

        from seqid_orm.sqlalchemy.alembic import migration_lock

        with migration_lock(connectable) as lock, connectable.connect() as connection:
            context.configure(connection=connection, target_metadata=target_metadata,
                              on_version_apply=lambda **kw: lock.check())
            with context.begin_transaction():
                context.run_migrations()

    The lock first: a pod that waits holds no connection meanwhile.  The other pods wait while the holder
    lives (up to ``wait`` seconds, then :class:`~seqid_orm.errors.MigrationLockTimeoutError` naming it),
    then find nothing left to do.  A lease
    on a row of ``seqid_migration_locks`` (:class:`~seqid_orm.allocation.migration_lock.MigrationLock`),
    on connections of ``connectable``'s engine, not the migration's: a session advisory lock strands on a
    pooled server connection behind PgBouncer in transaction pooling.  A holder that dies lets go within
    ``ttl`` seconds; one frozen past it loses the lock, and ``lock.check()`` stops it after the migration
    it was in.  SQLite: a lock on the database file (:class:`~seqid_orm.allocation.migration_lock.FileLock`);
    an in-memory database has one process and needs none."""
    from ...allocation.migration_lock import holder_here, locked

    with locked(connectable, name, holder=holder_here("alembic upgrade"), wait=wait, ttl=ttl) as lock:
        yield lock


@Operations.implementation_for(DropSeqIDColumnOp)
def _drop_seqid_column(operations: Operations, operation: DropSeqIDColumnOp) -> None:
    from ...schema.online import ONLINE_VENDORS, drop_column, unique_name

    conn = operations.get_bind()
    if not operations.get_context().as_sql and SeqUUID().target(conn.dialect).vendor in ONLINE_VENDORS:
        with _outside_the_transaction(operations) as free:
            if free is not None:  # each statement's lock waited for briefly and tried again, as adding it
                added = AddSeqIDColumnOp(operation.table, operation.column, unique=operation.unique)
                column = _online_column(free, added, SeqUUID())
                with _OnlineIO(free).unprepared(), _operation_lock(free, column, "drop_seqid_column"):
                    drop_column(_OnlineIO(free), column)
                return
    with operations.batch_alter_table(operation.table) as batch:
        if operation.unique:
            batch.drop_constraint(unique_name(operation.table, operation.column), type_="unique")
        batch.drop_column(operation.column)


@renderers.dispatch_for(AddSeqIDColumnOp)
def _render_add_seqid_column(autogen_context: Any, op: AddSeqIDColumnOp) -> str:
    hint = "" if op.from_timestamp else "  # from_timestamp='<a column of each row's time>' keys old rows in that order"
    return rendered(autogen_context, "add_seqid_column", op, last=("from_timestamp",)) + hint


@renderers.dispatch_for(DropSeqIDColumnOp)
def _render_drop_seqid_column(autogen_context: Any, op: DropSeqIDColumnOp) -> str:
    return rendered(autogen_context, "drop_seqid_column", op)


@Operations.implementation_for(AddSeqIDColumnOp)
def _add_seqid_column(operations: Operations, operation: AddSeqIDColumnOp) -> None:
    from ...schema.online import ONLINE_VENDORS, add_column, choose_form

    if operations.get_context().as_sql:
        raise InvalidArgumentError("add_seqid_column fills the existing rows: run it online")
    conn = operations.get_bind()
    type_ = SeqUUID(storage=operation.storage)
    vendor = type_.target(conn.dialect).vendor
    if operation.online is False or vendor not in ONLINE_VENDORS:  # before the autocommit block commits anything
        _add_seqid_column_offline(operations, operation, type_)
        return
    with _outside_the_transaction(operations) as free:
        form = choose_form(
            _OnlineIO(conn).fetch,
            vendor,
            operation.table,
            committing=free is not None,  # None: a transaction Alembic did not begin, so cannot commit
            what="add_seqid_column",
            fix="run the migration in a transaction Alembic begins (env.py's context.begin_transaction() on a "
            "connection not already in a transaction), or pass online=False to hold the table for the whole fill",
        )
        if form == "offline":
            _add_seqid_column_offline(operations, operation, type_)
            return
        io = _OnlineIO(free)
        column = _online_column(free, operation, type_)
        with io.unprepared(), _operation_lock(free, column, "add_seqid_column") as lock:
            add_column(
                io,
                column,
                batch_size=operation.batch_size,
                keep_default=operation.server_default,
                fire_triggers=operation.fire_triggers,
                guard=lock.check,
            )


def _operation_lock(conn: Any, column: Any, what: str) -> Any:
    """The lock of one table's column (:func:`~seqid_orm.allocation.migration_lock.column_lock`), on
    connections of the engine's own."""
    from ...allocation.migration_lock import column_lock

    return column_lock(conn.engine, column.table, column.column, what)


@contextlib.contextmanager
def _outside_the_transaction(operations: Operations) -> Any:
    """A connection that commits each statement: where the server's DDL is transactional (PostgreSQL),
    Alembic's ``autocommit_block``, which commits the migration's transaction first (so a lock it took is
    not waited for), or ``None`` where that transaction is not Alembic's to commit (a connection begun
    outside ``env.py``'s ``context.begin_transaction()``); where DDL commits by itself anyway (MariaDB,
    MySQL), a connection of the engine's own in autocommit, once the migration's transaction is committed as
    its next DDL would commit it: the metadata locks of what it read would hold that connection's DDL."""
    conn = operations.get_bind()
    if not operations.get_context().impl.transactional_ddl:
        conn.exec_driver_sql("COMMIT")
        with conn.engine.connect() as free:
            yield free.execution_options(isolation_level="AUTOCOMMIT")
        return
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(operations.get_context().autocommit_block())
    except (AssertionError, AttributeError):
        yield None
        return
    with stack:
        yield operations.get_bind()


def _online_column(conn: Any, operation: AddSeqIDColumnOp, type_: SeqUUID) -> Any:
    """The :class:`~seqid_orm.schema.online.OnlineColumn` of ``operation`` on ``conn``'s server."""
    from ...schema.online import OnlineColumn

    dialect = conn.dialect
    where = type_.target(dialect)
    inspector = sa.inspect(conn)
    keys = tuple(inspector.get_pk_constraint(operation.table)["constrained_columns"])
    declared = {c["name"]: c["type"] for c in inspector.get_columns(operation.table)}
    if operation.from_timestamp and operation.from_timestamp not in declared:
        raise InvalidArgumentError(f"table {operation.table!r} has no column {operation.from_timestamp!r}")
    try:
        casts = tuple(str(declared[k].compile(dialect=dialect)) for k in keys)
    except sa.exc.CompileError:  # a type SQLAlchemy does not know (reflected as NullType): rows listed instead
        casts = ()
    return OnlineColumn(
        vendor=where.vendor,
        table=operation.table,
        column=operation.column,
        keys=keys,
        column_type=str(type_.compile(dialect=dialect)),
        default_sql=where.server_default.sql,
        storage=where.storage,
        layout=where.layout,
        stamp=operation.from_timestamp,
        key_casts=casts,
        unique=operation.unique,
    )


class _OnlineIO:
    """:class:`~seqid_orm.schema.online.OnlineIO` on a SQLAlchemy connection in autocommit."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def socket_ends(self) -> tuple[object, object] | None:
        from ...calls.drivers import socket_ends

        return socket_ends(self.conn.connection.dbapi_connection)

    def unprepared(self) -> Any:
        """No server-side prepared statements while the operation runs (see
        :func:`~seqid_orm.calls.drivers.unprepared`: a transaction pooler)."""
        from ...calls.drivers import unprepared

        return unprepared(self.conn.connection.dbapi_connection)

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.conn.execute(sa.text(sql), params).all()]

    def run(self, sql: str, params: dict[str, object]) -> int:
        if not params:  # DDL: as it is (a default's SQL may hold what text() would read as a parameter)
            return int(self.conn.exec_driver_sql(sql).rowcount)
        return int(self.conn.execute(sa.text(sql), params).rowcount)

    @contextlib.contextmanager
    def transaction(self) -> Any:
        self.conn.exec_driver_sql("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.exec_driver_sql("ROLLBACK")
            raise
        self.conn.exec_driver_sql("COMMIT")


def _add_seqid_column_offline(operations: Operations, operation: AddSeqIDColumnOp, type_: SeqUUID) -> None:
    """The single-transaction form (SQLite, and ``online=False``): every row read, then written, then the
    constraints, all under the migration's transaction."""
    from ...ids.comb import comb_batch
    from ...schema.online import key_of_time, unique_name
    from ..defaults import layout_for

    conn = operations.get_bind()
    layout = layout_for(conn.dialect, type_)
    operations.add_column(operation.table, sa.Column(operation.column, type_, nullable=True))
    inspector = sa.inspect(conn)
    keys = inspector.get_pk_constraint(operation.table)["constrained_columns"]
    if not keys:
        raise InvalidArgumentError(f"table {operation.table!r} has no primary key to find its rows by")
    table = sa.table(operation.table, *(sa.column(k) for k in keys), sa.column(operation.column, type_))
    stamp: sa.ColumnClause[Any] | None = None
    if operation.from_timestamp:  # typed as the database declares it: SQLite hands back text otherwise
        declared = {c["name"]: c["type"] for c in inspector.get_columns(operation.table)}
        if operation.from_timestamp not in declared:
            raise InvalidArgumentError(f"table {operation.table!r} has no column {operation.from_timestamp!r}")
        stamp = sa.column(operation.from_timestamp, declared[operation.from_timestamp])
    if stamp is not None:
        table.append_column(stamp)
    query = sa.select(*(table.c[k] for k in keys), *([stamp] if stamp is not None else []))
    query = query.order_by(*([stamp] if stamp is not None else []), *(table.c[k] for k in keys))
    rows = conn.execute(query).all()
    update = (
        sa.update(table)
        .where(*(table.c[k] == sa.bindparam(f"k_{k}") for k in keys))
        .values({operation.column: sa.bindparam("seqid_value", type_=type_)})
    )
    size = operation.batch_size or 1000
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        fresh = iter(comb_batch(len(chunk), layout))
        params = [
            {
                **{f"k_{k}": row[i] for i, k in enumerate(keys)},
                "seqid_value": key_of_time(row[len(keys)] if stamp is not None else None, layout, fresh),
            }
            for row in chunk
        ]
        if params:
            conn.execute(update, params)
    server = DatabaseSeqUUID(operation.storage) if operation.server_default else None
    with operations.batch_alter_table(operation.table) as batch:
        batch.alter_column(operation.column, existing_type=type_, nullable=False, server_default=server)
        if operation.unique:
            batch.create_unique_constraint(unique_name(operation.table, operation.column), [operation.column])


def _add_online(
    autogen_context: Any, modify_table_ops: Any, schema: str | None, tname: str, conn_table: Any, metadata_table: Any
) -> None:
    """Autogenerate: a ``SeqUUID`` column that is not nullable, added to a table that is there already,
    becomes :class:`AddSeqIDColumnOp` (online on PostgreSQL and MariaDB), taking the unique constraint
    Alembic wrote beside it; its reverse drops both.  Alembic's ``add_column(..., nullable=False)`` needs
    a value for every row at once, which a table with rows does not have, and holds the table while it
    is given.  A column the operation would not make as the metadata declares it (another layout, another
    server default, a constraint of another name, a schema) keeps Alembic's own operations."""
    from ...schema.online import unique_name

    if conn_table is None or metadata_table is None or schema is not None:
        return
    for op in list(modify_table_ops.ops):
        if not isinstance(op, ops.AddColumnOp):
            continue
        column = op.column
        kind, default = column.type, getattr(column.server_default, "arg", None)
        if not isinstance(kind, SeqUUID) or column.nullable or column.primary_key or kind.layout is not None:
            continue
        if column.server_default is not None and not isinstance(default, DatabaseSeqUUID):
            continue
        if isinstance(default, DatabaseSeqUUID) and default.shift is not None:
            continue
        uniques = [
            u
            for u in modify_table_ops.ops
            if isinstance(u, ops.CreateUniqueConstraintOp) and list(u.columns) == [column.name]
        ]
        if any(u.constraint_name not in (None, unique_name(tname, column.name)) for u in uniques):
            continue
        storage = None if kind.storage is None else kind.storage.value
        online = AddSeqIDColumnOp(
            tname, column.name, storage=storage, server_default=default is not None, unique=bool(uniques)
        )
        modify_table_ops.ops[modify_table_ops.ops.index(op)] = online
        for unique in uniques:
            modify_table_ops.ops.remove(unique)


comparators.dispatch_for("table", **_AFTER_ALEMBIC)(_add_online)
