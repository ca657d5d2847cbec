"""Alembic helpers: seqid types that render and import, and the ticket table as an operation.

**Types and database-made ids.** Alembic renders a custom type by its ``repr`` with its module
path, but does not add the import, so the migration fails with ``NameError`` when it runs (the
well-known sqlalchemy-utils ``UUIDType`` trap).  Pass :func:`render_item` to ``context.configure``.
It also writes a :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID` server default as itself, not as
the SQL of the server autogenerate ran against: the SQL is chosen when the migration runs, for the
server it runs on (``uuidv7()`` on PostgreSQL 18, an expression on 13-17), as Django's migrations
do.  Offline (``--sql``) no server answers: call :func:`offline_server_version` in
``run_migrations_offline()`` and name the target, ``alembic -x seqid_server_version=16 upgrade head
--sql``.  With ``compare_server_default=compare_server_default`` autogenerate compares such a
default by its generator instead of evaluating it (a new id each time, never equal).

**seqid's tables**: the ticket table (:class:`~seqid_orm.allocation.tickets.TicketSequence`) is created by
``op.create_ticket_table()`` and dropped by ``op.drop_ticket_table()``, the worker-lease table
(:class:`~seqid_orm.allocation.leases.WorkerLease`) by ``op.create_lease_table()`` / ``op.drop_lease_table()``,
all registered when this module is imported.  Put the tables in your metadata
(``ticket_table(Base.metadata)``, ``lease_table(Base.metadata)``) and pass :data:`writer` as
``process_revision_directives``: autogenerate then writes those operations instead of a plain
``create_table``, and a second autogenerate finds nothing to do.
``env.py``::

    from seqid_orm.sqlalchemy.alembic import render_item, writer

    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_item=render_item,
        process_revision_directives=writer,
    )

Keeping the table out of your metadata instead?  Write ``op.create_ticket_table()`` into a
migration yourself and pass ``include_object=include_object`` so autogenerate does not offer to
drop it.  (This is GeoAlchemy2's arrangement for its spatial operations.)
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Iterator
from types import EllipsisType
from typing import Any

try:
    from alembic.autogenerate import comparators, renderers, rewriter
    from alembic.operations import MigrateOperation, Operations, ops
except ImportError as exc:  # say which extra brings it
    raise ImportError("seqid_orm.sqlalchemy.alembic needs Alembic: pip install 'seqid-orm[alembic]'") from exc

import sqlalchemy as sa

from ..allocation.stores.base import LEASE_TABLE, TICKET_TABLE
from ..allocation.stores.sqlalchemy import lease_columns, ticket_columns
from ..errors import InvalidArgumentError
from ..ids.adopted import recognise, record_comment, record_of, without_record
from ..schema.adoption import Adoption, adopt
from ..schema.live import ColumnName, declared_storage, read_column, uuids_of
from ..vendors import Storage
from .columns import storage_fix
from .server import DatabaseSeqUUID
from .types import SeqUUID, SnowflakeID, SortableText, TicketID

__all__ = [
    "AdoptSeqIDKeysOp",
    "ConvertUUIDStorageOp",
    "CreateLeaseTableOp",
    "CreateTicketTableOp",
    "DropLeaseTableOp",
    "DropSeqIDRecordOp",
    "DropTicketTableOp",
    "SetSeqIDDefaultOp",
    "compare_server_default",
    "include_object",
    "migration_lock",
    "offline_server_version",
    "render_item",
    "writer",
]

_SEQID_TYPES = (SeqUUID, SnowflakeID, SortableText, TicketID)
_IMPORT = "import seqid_orm.sqlalchemy.alembic"


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """``render_item`` hook for ``context.configure``; ``False`` leaves other items to Alembic.

    seqid's types render as ``seqid_orm.sqlalchemy.SeqUUID(...)`` with the import they need.  SQLModel's
    own types (``sqlmodel.sql.sqltypes.AutoString`` for every ``str`` field) are left to Alembic, which
    renders them by their module path without importing it; the hook adds ``import sqlmodel``, which
    stock Alembic projects must otherwise write into ``script.py.mako`` by hand.
    """
    if type_ == "type" and isinstance(obj, _SEQID_TYPES):
        autogen_context.imports.add("import seqid_orm.sqlalchemy")
        return f"seqid_orm.sqlalchemy.{obj!r}"
    if type_ == "type" and type(obj).__module__.split(".")[0] == "sqlmodel":
        autogen_context.imports.add("import sqlmodel")
        return False
    if type_ == "server_default" and isinstance(getattr(obj, "arg", None), DatabaseSeqUUID):
        autogen_context.imports.add("import seqid_orm.sqlalchemy")
        if obj.arg.shift is not None:
            autogen_context.imports.add("import datetime")
        return f"seqid_orm.sqlalchemy.{obj.arg!r}"
    return False


def offline_server_version(context: Any) -> None:
    """Tell an offline migration (``--sql``) which server it is written for.

    Call it in ``run_migrations_offline()`` after ``context.configure(...)``; it reads
    ``-x seqid_server_version=16`` (PostgreSQL), ``=mariadb-10.11.5``, ``=8.0.36`` (MySQL) or
    ``=3.45`` (SQLite) and gives the offline dialect that version, so database-made ids get the
    SQL of that server and seqid types the layout of that version.  Without it such a default
    raises :class:`~seqid_orm.errors.UnknownServerVersionError`, naming this remedy.
    """
    value = context.get_x_argument(as_dictionary=True).get("seqid_server_version")
    if value is None:
        return
    dialect = context.get_context().dialect
    text = str(value).strip().lower()
    is_mariadb = text.startswith("mariadb-")
    digits = text.split("-", 1)[1] if is_mariadb else text
    try:
        version = tuple(int(part) for part in digits.split("."))
    except ValueError:
        raise InvalidArgumentError(
            f"-x seqid_server_version={value!r}: expected a version such as 16, 8.0.36 or mariadb-10.11.5"
        ) from None
    dialect.server_version_info = version
    if is_mariadb:
        dialect.is_mariadb = True


def compare_server_default(
    context: Any,
    inspected_column: Any,
    metadata_column: Any,
    inspected_default: str | None,
    metadata_default: Any,
    rendered_metadata_default: str | None,
) -> bool | None:
    """``compare_server_default`` hook: a :class:`DatabaseSeqUUID` default matches the database's
    when that default calls the generator seqid would choose for this server (``None`` leaves every
    other column to Alembic)."""
    element = getattr(metadata_column.server_default, "arg", None)
    if not isinstance(element, DatabaseSeqUUID):
        return None
    if inspected_default is None:
        return True
    found = inspected_default.lower()
    if not any(signature in found for signature in element.signatures(context.dialect)):
        return True
    # a shift added or removed: the default without one must not show a shift's mark
    return element.shift is None and any(mark in found for mark in element.shift_signatures(context.dialect))


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


writer = rewriter.Rewriter()
"""``process_revision_directives``: seqid's tables in the metadata become their own operations
(``op.create_ticket_table()``, ``op.create_lease_table()``); chain your own with ``writer.chain(yours)``."""


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


@Operations.register_operation("create_sequential_uuid_functions")
class CreateSequentialUUIDFunctionsOp(MigrateOperation):
    """``op.create_sequential_uuid_functions(storage=None)``: the sequential-uuids generators as SQL
    functions (PL/pgSQL on PostgreSQL, stored functions on MariaDB; the vendor modules' ``sequential_functions``).

    ``storage`` (MariaDB): the storage of the columns they will fill, which decides where the prefix
    goes (MariaDB's ``UUID`` type compares its last group first); default: the vendor's default.
    """

    def __init__(self, storage: str | None = None, create: bool = True) -> None:
        self.storage = storage
        self.create = create

    @classmethod
    def create_sequential_uuid_functions(cls, operations: Operations, storage: str | None = None) -> None:
        operations.invoke(cls(storage))

    def reverse(self) -> CreateSequentialUUIDFunctionsOp:
        return DropSequentialUUIDFunctionsOp(self.storage, create=False)


@Operations.register_operation("drop_sequential_uuid_functions")
class DropSequentialUUIDFunctionsOp(CreateSequentialUUIDFunctionsOp):
    """``op.drop_sequential_uuid_functions()``."""

    def __init__(self, storage: str | None = None, create: bool = False) -> None:
        super().__init__(storage, create=False)

    @classmethod
    def drop_sequential_uuid_functions(cls, operations: Operations, storage: str | None = None) -> None:
        operations.invoke(cls(storage))

    def reverse(self) -> CreateSequentialUUIDFunctionsOp:
        return CreateSequentialUUIDFunctionsOp(self.storage)


@Operations.implementation_for(CreateSequentialUUIDFunctionsOp)
@Operations.implementation_for(DropSequentialUUIDFunctionsOp)
def _sequential_functions(operations: Operations, operation: CreateSequentialUUIDFunctionsOp) -> None:
    from ..vendors import as_storage
    from .types import dialect_target

    storage = None if operation.storage is None else as_storage(operation.storage)
    where = dialect_target(operations.get_context().dialect, storage)
    statements = where.sequential_functions() if operation.create else where.drop_sequential_functions()
    for statement in statements:
        operations.execute(statement)


@Operations.register_operation("convert_uuid_storage")
class ConvertUUIDStorageOp(MigrateOperation):
    """``op.convert_uuid_storage("author", "id", from_storage="text", to_storage="native")``.

    Moves a UUID column, and every column whose foreign key references it, from one storage to
    another, keeping every value and relationship (:mod:`seqid_orm.schema.conversions`).  ``to_storage``
    defaults to what ``SeqUUID()`` uses on the server (native where there is a UUID type; BLOB on
    SQLite).  Needs a live connection (it reads the foreign keys).  Its reverse converts back.

    The conversion rewrites each table, holding it (PostgreSQL's ``ALTER COLUMN ... TYPE``: no read, no write;
    MariaDB's table copy: no write): above :data:`~seqid_orm.schema.conversions.REWRITE_UP_TO_ROWS` rows it
    is refused, naming the online ways, unless ``allow_rewrite=True``.
    """

    def __init__(
        self, table: str, column: str, from_storage: str, to_storage: str | None = None, allow_rewrite: bool = False
    ) -> None:
        self.table = table
        self.column = column
        self.from_storage = from_storage
        self.to_storage = to_storage
        self.allow_rewrite = allow_rewrite

    @classmethod
    def convert_uuid_storage(
        cls,
        operations: Operations,
        table: str,
        column: str,
        from_storage: str,
        to_storage: str | None = None,
        allow_rewrite: bool = False,
    ) -> None:
        operations.invoke(cls(table, column, from_storage, to_storage, allow_rewrite))

    def reverse(self) -> ConvertUUIDStorageOp:
        if self.to_storage is None:
            raise InvalidArgumentError("give to_storage= to make the conversion reversible")
        return ConvertUUIDStorageOp(self.table, self.column, self.to_storage, self.from_storage, self.allow_rewrite)


@Operations.implementation_for(ConvertUUIDStorageOp)
def _convert_uuid_storage(operations: Operations, operation: ConvertUUIDStorageOp) -> None:
    from ..schema.conversions import REWRITE_UP_TO_ROWS, ColumnRef, ForeignKeyRef, check_rewrite, conversion_plan
    from ..schema.online import rows_past
    from ..vendors import as_storage
    from .types import dialect_target

    if operations.get_context().as_sql:
        raise InvalidArgumentError("convert_uuid_storage reads the foreign keys from the database: run it online")
    conn = operations.get_bind()
    source = as_storage(operation.from_storage)
    to_storage = as_storage(operation.to_storage) if operation.to_storage else None  # None: the engine's best
    where = dialect_target(conn.dialect, to_storage)
    inspector = sa.inspect(conn)
    nullable = {c["name"]: c["nullable"] for c in inspector.get_columns(operation.table)}
    if operation.column not in nullable:
        raise InvalidArgumentError(f"table {operation.table!r} has no column {operation.column!r}")
    references = []
    for table in inspector.get_table_names():
        columns = None
        try:
            foreign_keys = inspector.get_foreign_keys(table)
        except sa.exc.NoSuchTableError:  # dropped since it was listed (by another session): nothing refers
            continue
        for fk in foreign_keys:
            if fk["referred_table"] == operation.table and fk["referred_columns"] == [operation.column]:
                columns = columns or {c["name"]: c["nullable"] for c in inspector.get_columns(table)}
                (name,) = fk["constrained_columns"]
                options = fk.get("options") or {}
                references.append(
                    ForeignKeyRef(
                        fk["name"] or "", table, name, columns[name], options.get("ondelete"), options.get("onupdate")
                    )
                )
    key = ColumnRef(operation.table, operation.column, nullable[operation.column])
    fetch = _OnlineIO(conn).fetch
    rows = {
        t: rows_past(fetch, where.vendor, t, REWRITE_UP_TO_ROWS)
        for t in [operation.table, *(r.table for r in references)]
    }
    check_rewrite(where.vendor, operation.table, operation.column, rows, operation.allow_rewrite)
    if where.vendor == "sqlite":
        _convert_sqlite(operations, conn, [key, *references], source, where.storage)
        return
    quote = conn.dialect.identifier_preparer.quote
    for statement in conversion_plan(where, key, references, source, quote):
        operations.execute(statement)


def _convert_sqlite(operations: Operations, conn: Any, refs: list[Any], source: Any, target: Any) -> None:
    """SQLite: no UUID type, no ALTER COLUMN TYPE, no unhex() before 3.41: rewrite the values in
    Python, then let batch mode re-declare the columns."""
    import uuid

    from ..vendors import Storage

    if Storage.NATIVE in (source, target):
        raise InvalidArgumentError("SQLite has no UUID column type; convert between text, hex and binary there")

    def parse(value: Any) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(value)) if isinstance(value, (bytes, memoryview)) else uuid.UUID(str(value))

    outs: dict[Storage, Callable[[uuid.UUID], object]] = {
        Storage.TEXT: str,
        Storage.HEX: lambda u: u.hex,
        Storage.BINARY: lambda u: u.bytes,
    }
    out = outs[target]
    kinds: dict[Storage, sa.types.TypeEngine[Any]] = {
        Storage.TEXT: sa.CHAR(36),
        Storage.HEX: sa.CHAR(32),
        Storage.BINARY: sa.LargeBinary(),
    }
    # keys match again by the commit; the pragma holds only inside a transaction, which pysqlite
    # opens at the first DML statement: a statement that changes nothing opens it
    first = refs[0]
    conn.execute(sa.text(f'UPDATE "{first.table}" SET "{first.column}" = "{first.column}" WHERE 0'))
    conn.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
    for ref in refs:
        table = sa.table(ref.table, sa.column(ref.column))
        column = table.c[ref.column]
        olds = conn.execute(sa.select(column).distinct().where(column.is_not(None))).scalars().all()
        if olds:  # one executemany: a value of one form never equals one of another, so no row is hit twice
            rewrite = (
                sa.update(table)
                .where(column == sa.bindparam("seqid_old"))
                .values({ref.column: sa.bindparam("seqid_new")})
            )
            conn.execute(rewrite, [{"seqid_old": old, "seqid_new": out(parse(old))} for old in olds])
        with operations.batch_alter_table(ref.table) as batch:
            batch.alter_column(ref.column, type_=kinds[target], existing_nullable=ref.nullable)


@Operations.register_operation("add_seqid_column")
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

    def __init__(
        self,
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
        self.table, self.column, self.from_timestamp = table, column, from_timestamp
        self.storage, self.server_default, self.batch_size, self.online = storage, server_default, batch_size, online
        self.unique, self.fire_triggers = unique, fire_triggers

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
class DropSeqIDColumnOp(MigrateOperation):
    """``op.drop_seqid_column("event", "seq_id")``: undo :class:`AddSeqIDColumnOp` (its unique
    constraint, unless ``unique=False``, then the column; in batch mode, which SQLite needs for both)."""

    def __init__(self, table: str, column: str, unique: bool = True) -> None:
        self.table, self.column, self.unique = table, column, unique

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
    from ..allocation.migration_lock import FileLock, MigrationLock, NoLock, holder_here
    from ..allocation.stores.sqlalchemy import SQLAlchemyLockStore

    engine = getattr(connectable, "engine", connectable)
    holder = holder_here("alembic upgrade")
    if engine.dialect.name == "sqlite":
        path = engine.url.database
        if not path or path == ":memory:" or path.startswith("file::memory:"):
            yield NoLock()
            return
        with FileLock(path, wait=wait, holder=holder) as file_lock:
            yield file_lock
        return
    store = SQLAlchemyLockStore(engine)
    try:
        with MigrationLock(store, name, wait=wait, ttl=ttl, holder=holder) as lock:
            yield lock
    finally:
        store.close()


@Operations.implementation_for(DropSeqIDColumnOp)
def _drop_seqid_column(operations: Operations, operation: DropSeqIDColumnOp) -> None:
    from ..schema.online import ONLINE_VENDORS, drop_column, unique_name

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
    autogen_context.imports.add(_IMPORT)
    args = [repr(op.table), repr(op.column)]
    args += [] if op.storage is None else [f"storage={op.storage!r}"]
    args += [] if op.server_default else ["server_default=False"]
    args += [] if op.unique else ["unique=False"]
    args += [] if op.fire_triggers else ["fire_triggers=False"]
    hint = "" if op.from_timestamp else "  # from_timestamp='<a column of each row's time>' keys old rows in that order"
    stamp = [] if op.from_timestamp is None else [f"from_timestamp={op.from_timestamp!r}"]
    return f"op.add_seqid_column({', '.join(args + stamp)}){hint}"


@renderers.dispatch_for(DropSeqIDColumnOp)
def _render_drop_seqid_column(autogen_context: Any, op: DropSeqIDColumnOp) -> str:
    autogen_context.imports.add(_IMPORT)
    unique = "" if op.unique else ", unique=False"
    return f"op.drop_seqid_column({op.table!r}, {op.column!r}{unique})"


@Operations.implementation_for(AddSeqIDColumnOp)
def _add_seqid_column(operations: Operations, operation: AddSeqIDColumnOp) -> None:
    from ..schema.online import ONLINE_VENDORS, add_column, choose_form

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


@contextlib.contextmanager
def _operation_lock(conn: Any, column: Any, what: str) -> Any:
    """The lock of one table's column (:meth:`~seqid_orm.allocation.migration_lock.MigrationLock.for_column`),
    on connections of the engine's own: two pods running the same migration take turns."""
    from ..allocation.migration_lock import MigrationLock
    from ..allocation.stores.sqlalchemy import SQLAlchemyLockStore

    store = SQLAlchemyLockStore(conn.engine)
    try:
        with MigrationLock.for_column(store, column.table, column.column, what) as lock:
            yield lock
    finally:
        store.close()


@contextlib.contextmanager
def _outside_the_transaction(operations: Operations) -> Any:
    """A connection that commits each statement: where the server's DDL is transactional (PostgreSQL),
    Alembic's ``autocommit_block``, which commits the migration's transaction first (so a lock it took is
    not waited for), or ``None`` where that transaction is not Alembic's to commit (a connection begun
    outside ``env.py``'s ``context.begin_transaction()``); where DDL commits by itself anyway (MariaDB,
    MySQL), a connection of the engine's own in autocommit."""
    conn = operations.get_bind()
    if not operations.get_context().impl.transactional_ddl:
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
    from ..schema.online import OnlineColumn

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
        from ..allocation.stores.drivers import socket_ends

        return socket_ends(self.conn.connection.dbapi_connection)

    def unprepared(self) -> Any:
        """No server-side prepared statements while the operation runs (see
        :func:`~seqid_orm.allocation.stores.drivers.unprepared`: a transaction pooler)."""
        from ..allocation.stores.drivers import unprepared

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
    from ..ids.comb import comb_batch
    from ..schema.online import key_of_time, unique_name
    from .defaults import layout_for

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


@writer.rewrites(ops.AlterColumnOp)
def _alter_column_as_seqid_ops(context: Any, revision: Any, op: ops.AlterColumnOp) -> Any:
    """Autogenerate's change of a seqid key column, as seqid's operations that keep the values right.

    * A type change between two storages of a UUID (``sa.Uuid``'s ``CHAR(32)`` on SQLite to
      ``SeqUUID()``'s BLOB, and back in the downgrade): :class:`ConvertUUIDStorageOp`, which converts
      every value and each foreign key to it.  Alembic's own ``ALTER COLUMN ... TYPE`` cannot run on
      SQLite, and a batch copy would cast the 32 characters to 32 bytes.
    * A :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID` server default added to a column: :class:`SetSeqIDDefaultOp`,
      which reads the column's keys when it runs and, on a column that held other keys, sets the default
      of keys that sort after them.
    """
    out: list[Any] = []
    dialect = context.dialect
    old, new = op.existing_type, op.modify_type
    if new is not None and old is not None and (isinstance(new, SeqUUID) or isinstance(old, SeqUUID)):
        source, target = _storage_of_type(old, dialect), _storage_of_type(new, dialect)
        if source is not None and target is not None and source is not target:
            out.append(ConvertUUIDStorageOp(op.table_name, op.column_name, source.value, target.value))
            op.modify_type = None
    default = getattr(op.modify_server_default, "arg", None)
    if isinstance(default, DatabaseSeqUUID):
        storage = default.seq_type.storage
        out.append(
            SetSeqIDDefaultOp(
                op.table_name, op.column_name, None if storage is None else storage.value, shift=default.shift
            )
        )
        op.modify_server_default = False
    if not out:
        return op
    changes_left = op.modify_type is not None or op.modify_nullable is not None or op.modify_name is not None
    changes_left = changes_left or op.modify_server_default is not False or op.modify_comment is not False
    return [*out, op] if changes_left else out


def _storage_of_type(type_: Any, dialect: Any) -> Storage | None:
    """The UUID storage a column type holds on ``dialect``: a seqid type's own, else what its DDL declares."""
    if isinstance(type_, SeqUUID):
        return type_.storage_for(dialect)
    try:
        return declared_storage(str(type_.compile(dialect=dialect)))
    except sa.exc.CompileError:
        return None


@renderers.dispatch_for(ConvertUUIDStorageOp)
def _render_convert(autogen_context: Any, op: ConvertUUIDStorageOp) -> str:
    autogen_context.imports.add(_IMPORT)
    to = "" if op.to_storage is None else f", to_storage={op.to_storage!r}"
    allow = ", allow_rewrite=True" if op.allow_rewrite else ""
    return f"op.convert_uuid_storage({op.table!r}, {op.column!r}, from_storage={op.from_storage!r}{to}{allow})"


@Operations.register_operation("set_seqid_default")
class SetSeqIDDefaultOp(MigrateOperation):
    """``op.set_seqid_default("invoice", "id")``: the database makes the column's keys from now on.

    The keys of :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID`, chosen when the migration runs: for the
    server it runs on, and, where the column already holds other keys that new ones would land among
    (random ``uuid4`` keys on PostgreSQL), keys that sort after them (:mod:`seqid_orm.ids.adopted`), read
    from the column's largest keys.  Needs a live connection.  Its reverse drops the default.
    ``shift`` (a ``datetime.timedelta``) moves the clock the default reads, as ``DatabaseSeqUUID(shift=)``.
    """

    def __init__(
        self,
        table: str,
        column: str,
        storage: str | None = None,
        schema: str | None = None,
        shift: datetime.timedelta | None = None,
    ) -> None:
        self.table, self.column, self.storage, self.schema, self.shift = table, column, storage, schema, shift

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
    autogen_context.imports.add(_IMPORT)
    storage = "" if op.storage is None else f", storage={op.storage!r}"
    schema = "" if op.schema is None else f", schema={op.schema!r}"
    shift = ""
    if op.shift is not None:
        autogen_context.imports.add("import datetime")
        shift = f", shift={op.shift!r}"
    return f"op.set_seqid_default({op.table!r}, {op.column!r}{storage}{schema}{shift})"


@Operations.register_operation("adopt_seqid_keys")
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

    def __init__(
        self,
        table: str,
        column: str,
        storage: str | None = None,
        schema: str | None = None,
        comment: str | EllipsisType | None = ...,
    ) -> None:
        self.table, self.column, self.storage, self.schema = table, column, storage, schema
        self.comment = comment
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
    from .columns import _fetcher, forget_columns

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
    from ..schema.adoption import unrecord
    from .columns import _fetcher, forget_columns

    if operations.get_context().as_sql:
        raise InvalidArgumentError("drop_seqid_record reads the column's comment: run it online")
    conn = operations.get_bind()
    where = SeqUUID(operation.storage).target(conn.dialect)
    name = ColumnName(operation.table, operation.column, operation.schema)
    if unrecord(where, name, _fetcher(conn), conn.exec_driver_sql):
        forget_columns(conn.dialect)


@renderers.dispatch_for(AdoptSeqIDKeysOp)
def _render_adopt(autogen_context: Any, op: AdoptSeqIDKeysOp) -> str:
    autogen_context.imports.add(_IMPORT)
    storage = "" if op.storage is None else f", storage={op.storage!r}"
    schema = "" if op.schema is None else f", schema={op.schema!r}"
    comment = "" if op.comment is ... else f", comment={op.comment!r}"
    name = "drop_seqid_record" if isinstance(op, DropSeqIDRecordOp) else "adopt_seqid_keys"
    return f"op.{name}({op.table!r}, {op.column!r}{storage}{schema}{comment})"


try:  # Alembic 1.18+: after its own comparators of the same priority
    from alembic.util.langhelpers import DispatchPriority

    _AFTER_ALEMBIC: dict[str, Any] = {"priority": DispatchPriority.LAST}
except ImportError:  # earlier: comparators run in the order they were registered, Alembic's own first
    _AFTER_ALEMBIC = {}


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
    from .columns import _fetcher

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


def _add_online(
    autogen_context: Any, modify_table_ops: Any, schema: str | None, tname: str, conn_table: Any, metadata_table: Any
) -> None:
    """Autogenerate: a ``SeqUUID`` column that is not nullable, added to a table that is there already,
    becomes :class:`AddSeqIDColumnOp` (online on PostgreSQL and MariaDB), taking the unique constraint
    Alembic wrote beside it; its reverse drops both.  Alembic's ``add_column(..., nullable=False)`` needs
    a value for every row at once, which a table with rows does not have, and holds the table while it
    is given.  A column the operation would not make as the metadata declares it (another layout, another
    server default, a constraint of another name, a schema) keeps Alembic's own operations."""
    from ..schema.online import unique_name

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


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """``include_object`` for ``context.configure``: leave seqid's tables that are not in the
    metadata out of autogenerate (so it does not offer to drop a table made by a hand-written
    ``op.create_ticket_table()`` or ``op.create_lease_table()``)."""
    return not (type_ == "table" and reflected and compare_to is None and name in (TICKET_TABLE, LEASE_TABLE))
