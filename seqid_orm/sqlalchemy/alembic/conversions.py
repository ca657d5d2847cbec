"""``op.convert_uuid_storage()``: a UUID column, and every foreign key to it, moved to another storage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import renderers
from alembic.operations import MigrateOperation, Operations

from ...errors import InvalidArgumentError
from ...schema.live import declared_storage
from ...vendors import Storage
from ..types import SeqUUID
from ._shared import rendered
from .online import _OnlineIO
from .rekey import _run


@Operations.register_operation("convert_uuid_storage")
@dataclass(eq=False)  # an operation is itself, as Alembic keeps it
class ConvertUUIDStorageOp(MigrateOperation):
    """``op.convert_uuid_storage("author", "id", from_storage="text", to_storage="native")``.

    Moves a UUID column, and every column whose foreign key references it, from one storage to
    another, keeping every value and relationship (:mod:`seqid_orm.schema.conversions`).  ``to_storage``
    defaults to what ``SeqUUID()`` uses on the server (native where there is a UUID type; BLOB on
    SQLite).  Needs a live connection (it reads the foreign keys).  Its reverse converts back.

    The conversion rewrites each table, holding it (PostgreSQL's ``ALTER COLUMN ... TYPE``: no read, no write;
    MariaDB's table copy: no write).  Above :data:`~seqid_orm.schema.conversions.REWRITE_UP_TO_ROWS` rows a
    table's key of UUIDs kept as text made ``uuid`` runs online instead, outside the migration's transaction
    (:func:`seqid_orm.schema.rekey.convert`: its batches commit, under the key's migration lock); another
    conversion is refused there, naming the online ways, unless ``allow_rewrite=True`` (a maintenance window).
    """

    table: str
    column: str
    from_storage: str
    to_storage: str | None = None
    allow_rewrite: bool = False

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
    from ...schema import rekey
    from ...schema.conversions import (
        REWRITE_UP_TO_ROWS,
        ColumnRef,
        check_rewrite,
        conversion_plan,
        references_to,
        runs_online,
    )
    from ...schema.online import rows_past
    from ...vendors import as_storage
    from ..types import dialect_target

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
    fetch = _OnlineIO(conn).fetch
    found = references_to(fetch, where.vendor, operation.table, operation.column)  # the catalog: every schema's
    references = found if found is not None else _introspected(inspector, operation.table, operation.column)
    key = ColumnRef(operation.table, operation.column, nullable[operation.column])
    rows = {
        t: rows_past(fetch, where.vendor, t, REWRITE_UP_TO_ROWS)
        for t in [operation.table, *(r.table for r in references)]
    }
    primary = inspector.get_pk_constraint(operation.table).get("constrained_columns") == [operation.column]
    online = runs_online(where.vendor, source, where.storage, primary)
    if check_rewrite(where.vendor, operation.table, operation.column, rows, operation.allow_rewrite, online=online):
        _run(
            operations,
            operation.table,
            operation.to_storage,
            "convert_uuid_storage, online",
            lambda io, plan, lock: rekey.convert(io, plan, guard=lock.check),
            unless=lambda io: rekey.converted(io, where.vendor, operation.table),
        )
        return
    if where.vendor == "sqlite":
        _convert_sqlite(operations, conn, [key, *references], source, where.storage)
        return
    # the vendor's quoting: a table of another schema is named with it
    for statement in conversion_plan(where, key, references, source, where.rules.quote_identifier):
        operations.execute(statement)


def _introspected(inspector: Any, table_name: str, column: str) -> list[Any]:
    """The foreign keys to ``column`` of ``table_name`` that SQLAlchemy's inspector finds (a vendor whose
    catalog seqid does not read: SQLite)."""
    from ...schema.conversions import ForeignKeyRef

    references = []
    for table in inspector.get_table_names():
        columns = None
        try:
            foreign_keys = inspector.get_foreign_keys(table)
        except sa.exc.NoSuchTableError:  # dropped since it was listed (by another session): nothing refers
            continue
        for fk in foreign_keys:
            if fk["referred_table"] == table_name and fk["referred_columns"] == [column]:
                columns = columns or {c["name"]: c["nullable"] for c in inspector.get_columns(table)}
                (name,) = fk["constrained_columns"]
                options = fk.get("options") or {}
                references.append(
                    ForeignKeyRef(
                        fk["name"] or "", table, name, columns[name], options.get("ondelete"), options.get("onupdate")
                    )
                )
    return references


def _convert_sqlite(operations: Operations, conn: Any, refs: list[Any], source: Any, target: Any) -> None:
    """SQLite: no UUID type, no ALTER COLUMN TYPE, no unhex() before 3.41: rewrite the values in
    Python, then let batch mode re-declare the columns."""
    import uuid

    from ...vendors import Storage

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
    return rendered(autogen_context, "convert_uuid_storage", op)
