"""Django migration operations of seqid: the sequential-uuids generators as SQL functions, and a
UUID column moved to the native UUID type with the foreign keys that reference it.

``CreateSequentialUUIDFunctions()`` in a migration's ``operations`` creates
``uuid_sequence_nextval`` and ``uuid_time_nextval`` (and their helper) on PostgreSQL 13+ and
MariaDB 10.10+ (the vendor modules' ``sequential_functions``); unapplying the migration drops them.  On
PostgreSQL they can then be a column's ``db_default``::

    id = models.UUIDField(primary_key=True, db_default=Func(Value(60), Value(65536), function="uuid_time_nextval"))
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db.migrations.operations.base import Operation

from ..schema.online import IN_TRANSACTION_UP_TO_ROWS
from ..vendors import as_storage
from .connection import connection_target, field_target, uuid_field_storage

__all__ = [
    "ATOMIC_UP_TO_ROWS",
    "AddSeqUUIDField",
    "AdoptSeqUUID",
    "BackfillSeqUUID",
    "ConvertUUIDStorage",
    "CreateSequentialUUIDFunctions",
    "CreateTableUnlessThere",
    "RekeyContract",
    "RekeyExpand",
]


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class CreateSequentialUUIDFunctions(Operation):
    """Create the sequential-uuids functions (reversible: unapplying drops them).

    ``storage`` (MariaDB): ``"native"`` for its ``UUID`` type (the prefix then leads the last six
    bytes, which that type compares first), ``"hex"`` for ``char(32)``; default: what Django's
    ``UUIDField`` creates there.
    """

    reversible = True
    reduces_to_sql = True

    storage: str | None = None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs = {} if self.storage is None else {"storage": self.storage}
        return "CreateSequentialUUIDFunctions", [], kwargs

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass  # functions are no part of Django's model state

    def _statements(self, connection: Any, create: bool) -> list[str]:
        # by default the storage of what Django's UUIDField is there (native from Django 5.0 on MariaDB 10.7+)
        storage = uuid_field_storage(connection) if self.storage is None else as_storage(self.storage)
        where = connection_target(connection, storage)
        return where.sequential_functions() if create else where.drop_sequential_functions()

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        for statement in self._statements(schema_editor.connection, create=True):
            schema_editor.execute(statement, params=None)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        for statement in self._statements(schema_editor.connection, create=False):
            schema_editor.execute(statement, params=None)

    def describe(self) -> str:
        return "Create the sequential-uuids functions (uuid_sequence_nextval, uuid_time_nextval)"


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class ConvertUUIDStorage(Operation):
    """Move a model's UUID column (and every column whose foreign key references it) to another storage.

    The case it is for: Django 5.0 gives ``UUIDField`` MariaDB 10.7+'s native ``UUID`` type, but columns
    created before stay ``char(32)``; ``ConvertUUIDStorage("author", "id", from_storage="hex")``
    converts them, values and relationships kept (:mod:`seqid_orm.schema.conversions`).  ``to_storage``
    defaults to the native type; unapplying converts back.  PostgreSQL and MariaDB (SQLite has no UUID
    type, and Django keeps ``char(32)`` there).  It rewrites each table while holding it: above
    :data:`~seqid_orm.schema.conversions.REWRITE_UP_TO_ROWS` rows it is refused, naming the online ways,
    unless ``allow_rewrite=True``.
    """

    reversible = True
    reduces_to_sql = False  # it reads the foreign keys from the database

    model_name: str
    field_name: str
    from_storage: str
    to_storage: str = "native"
    allow_rewrite: bool = False

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {"from_storage": self.from_storage}
        if self.to_storage != "native":
            kwargs["to_storage"] = self.to_storage
        if self.allow_rewrite:
            kwargs["allow_rewrite"] = True
        return "ConvertUUIDStorage", [self.model_name, self.field_name], kwargs

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass  # the field stays a UUIDField: only its column's storage changes

    def _run(self, app_label: str, schema_editor: Any, state: Any, source: str, target: str) -> None:
        from ..schema import rekey
        from ..schema.conversions import (
            REWRITE_UP_TO_ROWS,
            ColumnRef,
            check_rewrite,
            conversion_plan,
            references_to,
            runs_online,
        )
        from ..schema.online import rows_past

        model = state.apps.get_model(app_label, self.model_name)
        table, column = model._meta.db_table, model._meta.get_field(self.field_name).column
        connection = schema_editor.connection
        where = connection_target(connection, as_storage(target))
        fetch = _OnlineIO(connection).fetch
        with connection.cursor() as cursor:
            description = connection.introspection.get_table_description(cursor, table)
            nullable = {c.name: bool(c.null_ok) for c in description}
        found = references_to(fetch, where.vendor, table, column)  # the catalog: every schema's
        references = found if found is not None else _introspected(connection, table, column)
        key = ColumnRef(table, column, nullable[column])
        rows = {
            t: rows_past(fetch, where.vendor, t, REWRITE_UP_TO_ROWS) for t in [table, *(r.table for r in references)]
        }
        online = runs_online(where.vendor, source, where.storage, model._meta.pk.column == column)
        if check_rewrite(where.vendor, table, column, rows, self.allow_rewrite, online=online):
            _rekey_run(
                app_label,
                schema_editor,
                state,
                self,
                "ConvertUUIDStorage, online,",
                lambda io, plan, lock: rekey.convert(io, plan, guard=lock.check),
                unless=lambda io: rekey.converted(io, where.vendor, table),
            )
            return
        # the vendor's quoting: a table of another schema is named with it
        plan = conversion_plan(where, key, references, source, where.rules.quote_identifier)
        for statement in plan:
            schema_editor.execute(statement, params=None)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, to_state, self.from_storage, self.to_storage)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, from_state, self.to_storage, self.from_storage)

    def describe(self) -> str:
        return f"Convert {self.model_name}.{self.field_name} from {self.from_storage} to {self.to_storage} storage"


def _introspected(connection: Any, table: str, column: str) -> list[Any]:
    """The foreign keys to ``column`` of ``table`` that Django's introspection finds (a vendor whose catalog
    seqid does not read: SQLite)."""
    from ..schema.conversions import ForeignKeyRef

    references = []
    with connection.cursor() as cursor:
        for other in connection.introspection.table_names(cursor):
            for name, info in connection.introspection.get_constraints(cursor, other).items():
                if info.get("foreign_key") == (table, column):
                    (fk_column,) = info["columns"]
                    nullable = {
                        c.name: bool(c.null_ok) for c in connection.introspection.get_table_description(cursor, other)
                    }
                    references.append(ForeignKeyRef(name, other, fk_column, nullable[fk_column]))
    return references


#: Up to this many rows (the planner's estimate) a backfill may run inside an atomic migration; a larger
#: table needs ``atomic = False``, so each batch commits and the table stays usable.
ATOMIC_UP_TO_ROWS = IN_TRANSACTION_UP_TO_ROWS


class _OnlineIO:
    """:class:`~seqid_orm.schema.online.OnlineIO` on a Django connection (``:name`` parameters become
    ``%s`` ones, as the other Django executors do)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        from ..calls.binds import positional

        with self.connection.cursor() as cursor:
            cursor.execute(*positional(sql, params))
            return [tuple(row) for row in cursor.fetchall()]

    def run(self, sql: str, params: dict[str, object]) -> int:
        from ..calls.binds import positional

        with self.connection.cursor() as cursor:
            if params:
                cursor.execute(*positional(sql, params))
            else:
                cursor.execute(sql)  # DDL as it is: no %-formatting of a default's SQL
            return int(cursor.rowcount)

    def transaction(self) -> Any:
        from django.db import transaction

        return transaction.atomic(using=self.connection.alias)

    def socket_ends(self) -> tuple[object, object] | None:
        from ..calls.drivers import socket_ends

        self.connection.ensure_connection()
        return socket_ends(self.connection.connection)

    def unprepared(self) -> Any:
        """No server-side prepared statements while the operation runs (see
        :func:`~seqid_orm.calls.drivers.unprepared`: a transaction pooler)."""
        from ..calls.drivers import unprepared

        self.connection.ensure_connection()
        return unprepared(self.connection.connection)


def _key_fields(model: Any) -> list[Any]:
    """The fields of ``model``'s primary key: several for Django 5.2's ``CompositePrimaryKey``."""
    return list(getattr(model._meta, "pk_fields", None) or [model._meta.pk])


def _online_column(model: Any, field: Any, connection: Any, from_field: str | None) -> Any:
    """The :class:`~seqid_orm.schema.online.OnlineColumn` of ``field`` on ``model``'s table."""
    from ..schema.online import OnlineColumn

    where = field_target(field, connection)
    keys = _key_fields(model)
    stamp = model._meta.get_field(from_field).column if from_field else None
    return OnlineColumn(
        vendor=where.vendor,
        table=model._meta.db_table,
        column=field.column,
        keys=tuple(k.column for k in keys),
        column_type=str(field.db_type(connection)),
        default_sql=where.server_default.sql,
        storage=where.storage,
        layout=where.layout,
        stamp=stamp,
        key_casts=tuple(str(k.rel_db_type(connection)) for k in keys),  # an AutoField's type, no serial
        unique=bool(field.unique),
        nullable=bool(field.null),
    )


def _operation_lock(connection: Any, column: Any, what: str) -> Any:
    """The lock of one table's column (:func:`~seqid_orm.allocation.migration_lock.column_lock`), on a
    connection of its own to the same database."""
    from ..allocation.migration_lock import column_lock

    return column_lock(connection, column.table, column.column, what)


def _form(connection: Any, model: Any, what: str) -> str:
    """How the operation runs (:func:`~seqid_orm.schema.online.choose_form`, the one decision of both ORMs):
    online where each batch may commit, which an atomic migration's transaction forbids; there a small
    table (counted) is filled in it, a bigger one refused, naming ``atomic = False``."""
    from ..schema.online import choose_form
    from .connection import vendor_of

    return choose_form(
        _OnlineIO(connection).fetch,
        vendor_of(connection),
        model._meta.db_table,
        committing=not connection.in_atomic_block,
        what=what,
        fix="give the migration atomic = False (class Migration(migrations.Migration): atomic = False)",
    )


def _fill_kwargs(from_field: str | None, batch_size: int | None, fire_triggers: bool = True) -> dict[str, Any]:
    """The backfill's arguments a migration file writes: only those not left at their defaults."""
    kwargs: dict[str, Any] = {}
    if from_field is not None:
        kwargs["from_field"] = from_field
    if batch_size is not None:
        kwargs["batch_size"] = batch_size
    if not fire_triggers:
        kwargs["fire_triggers"] = False
    return kwargs


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class BackfillSeqUUID(Operation):
    """Fill a ``SeqUUIDField`` for existing rows, from a timestamp field when given.

    Rows with a timestamp get :func:`~seqid_orm.comb_at` of it, so they keep the order they were made in;
    rows without one get new ids after them.  Only rows whose key is still ``NULL`` are written.  On
    PostgreSQL and MariaDB it runs online (:func:`seqid_orm.schema.online.backfill`): batches of
    ``batch_size`` walked by the primary key, each its own short transaction that records how far it got
    (run again after a kill, it goes on there), with bounded memory and its progress on the console; a
    table of more than :data:`ATOMIC_UP_TO_ROWS` rows needs the migration's ``atomic = False``.  For the
    whole online column (added, filled, unique, ``NOT NULL``, a default for old code's inserts) use
    :class:`AddSeqUUIDField`.  Unapplying does nothing (unapplying the ``AddField`` removes the column).
    """

    reversible = True
    reduces_to_sql = False

    model_name: str
    field_name: str
    from_field: str | None = None
    batch_size: int | None = None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return "BackfillSeqUUID", [self.model_name, self.field_name], _fill_kwargs(self.from_field, self.batch_size)

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema.online import backfill, forget

        model = to_state.apps.get_model(app_label, self.model_name)
        field = model._meta.get_field(self.field_name)
        connection = schema_editor.connection
        if _form(connection, model, "BackfillSeqUUID") == "offline":
            self._offline(model, field, connection)
            return
        column = _online_column(model, field, connection, self.from_field)
        io = _OnlineIO(connection)
        with io.unprepared():
            backfill(io, column, batch_size=self.batch_size)
            forget(io, column)

    def _offline(self, model: Any, field: Any, connection: Any) -> None:
        """SQLite: every row of the table in the migration's transaction (one writer at a time there)."""
        from ..ids.comb import comb_batch
        from ..schema.online import key_of_time

        layout = field_target(field, connection).layout
        manager = model._base_manager.db_manager(connection.alias)
        order = [self.from_field, "pk"] if self.from_field else ["pk"]
        rows = list(manager.filter(**{f"{field.attname}__isnull": True}).order_by(*order))
        fresh = iter(comb_batch(len(rows), layout))
        for row in rows:
            when = getattr(row, self.from_field) if self.from_field else None
            setattr(row, field.attname, key_of_time(when, layout, fresh))
        manager.bulk_update(rows, [field.name], batch_size=self.batch_size or 1000)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        pass

    def describe(self) -> str:
        source = f" from {self.from_field}" if self.from_field else ""
        return f"Fill {self.model_name}.{self.field_name} for existing rows{source}"


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class AddSeqUUIDField(Operation):
    """``AddSeqUUIDField("visit", "seq_id", SeqUUIDField(unique=True), from_field="created_at")``: adopt
    seqid on a table with rows, online, as Alembic's ``op.add_seqid_column`` does.

    The model gets ``field`` (unique, not null: what the migration's state says); the database gets the
    column in the five steps of :mod:`seqid_orm.schema.online` on PostgreSQL and MariaDB: added without a
    rewrite, a database default for the rows code that does not know the column inserts (it stays), the
    existing rows filled in committed batches (from ``from_field`` with :func:`~seqid_orm.comb_at`, so they
    keep the order they were made in), the unique index built without blocking writes, ``NOT NULL`` without a
    long lock; each DDL statement waits half a second at most for its lock and is tried again.  Needs the
    migration's ``atomic = False`` where the table is big (:data:`ATOMIC_UP_TO_ROWS`); a run killed anywhere
    and run again goes on where it stopped.  On SQLite: the column, the rows and the constraints in the
    migration's transaction.  Unapplying drops the column.
    """

    reversible = True
    reduces_to_sql = False

    model_name: str
    name: str
    field: Any
    from_field: str | None = None
    batch_size: int | None = None
    fire_triggers: bool = True

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (
            "AddSeqUUIDField",
            [self.model_name, self.name, self.field],
            _fill_kwargs(self.from_field, self.batch_size, self.fire_triggers),
        )

    def state_forwards(self, app_label: str, state: Any) -> None:
        state.add_field(app_label, self.model_name.lower(), self.name, self.field, True)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema.online import add_column

        model = to_state.apps.get_model(app_label, self.model_name)
        field = model._meta.get_field(self.name)
        connection = schema_editor.connection
        if _form(connection, model, "AddSeqUUIDField") == "offline":
            self._offline(app_label, schema_editor, from_state, model, field)
            return
        column = _online_column(model, field, connection, self.from_field)
        io = _OnlineIO(connection)
        with io.unprepared(), _operation_lock(connection, column, "AddSeqUUIDField") as lock:
            add_column(io, column, batch_size=self.batch_size, fire_triggers=self.fire_triggers, guard=lock.check)

    def _offline(self, app_label: str, schema_editor: Any, from_state: Any, model: Any, field: Any) -> None:
        _name, _path, args, kwargs = field.deconstruct()
        nullable = field.__class__(*args, **{**kwargs, "null": True, "unique": False, "default": None})
        nullable.set_attributes_from_name(self.name)
        nullable.model = model
        schema_editor.add_field(model, nullable)
        BackfillSeqUUID(self.model_name, self.name, self.from_field, self.batch_size)._offline(
            model, nullable, schema_editor.connection
        )
        schema_editor.alter_field(model, nullable, field)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema.online import ONLINE_VENDORS, drop_column
        from .connection import vendor_of

        model = from_state.apps.get_model(app_label, self.model_name)
        field = model._meta.get_field(self.name)
        connection = schema_editor.connection
        if vendor_of(connection) in ONLINE_VENDORS:
            column = _online_column(model, field, connection, None)
            io = _OnlineIO(connection)
            with io.unprepared(), _operation_lock(connection, column, "AddSeqUUIDField, unapplied"):
                drop_column(io, column)
        else:
            schema_editor.remove_field(model, field)

    def describe(self) -> str:
        source = f" from {self.from_field}" if self.from_field else ""
        return f"Add {self.model_name}.{self.name} and fill it for existing rows{source}, online"


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class AdoptSeqUUID(Operation):
    """Decide once how a ``SeqUUIDField``'s keys sort after the keys its column already holds, and record
    it in the schema (:mod:`seqid_orm.schema.adoption`): every process, role and tenant then reads the
    record instead of judging the rows it can see.

    ``makemigrations`` (with ``seqid_orm.django`` in ``INSTALLED_APPS``) writes it before the
    ``AlterField`` that turns a ``UUIDField`` (or any other field) into a ``SeqUUIDField``: the swap.  On
    PostgreSQL it reads the whole column as the migration's role (the table's owner), decides the adopted
    keys' width from the row count and the largest keys, records it in the column's comment
    (``[seqid adopted=N]``) and creates the function database-made keys of that width call; elsewhere
    plain keys are right whatever the rows, and it checks the column's values against the field's
    storage.  Run per schema where each tenant has one, as the rest of the migration is.  Unapplying
    removes the record.
    """

    reversible = True
    reduces_to_sql = False  # it reads the column's keys

    model_name: str
    field_name: str

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return "AdoptSeqUUID", [self.model_name, self.field_name], {}

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass  # a record in the database, no part of the model's state

    def _column(self, app_label: str, state: Any, schema_editor: Any) -> tuple[Any, Any]:
        """The target the column's keys are read for, and its name, as ``state`` has the field."""
        from ..schema.live import ColumnName

        model = state.apps.get_model(app_label, self.model_name)
        field = model._meta.get_field(self.field_name)
        connection = schema_editor.connection
        where = (
            field_target(field, connection)
            if hasattr(field, "layout")
            else connection_target(connection, uuid_field_storage(connection))
        )
        return where, ColumnName(model._meta.db_table, field.column)

    @staticmethod
    @contextlib.contextmanager
    def _reads(schema_editor: Any) -> Iterator[tuple[Callable[[str], list[Any]], Callable[[str], None]]]:
        """How adoption reads (one cursor of the migration's connection) and writes (the schema editor, so
        ``sqlmigrate`` and collected SQL see it)."""
        with schema_editor.connection.cursor() as cursor:

            def fetch(statement: str) -> list[Any]:
                cursor.execute(statement)
                return list(cursor.fetchall())

            yield fetch, lambda statement: schema_editor.execute(statement, params=None)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema.adoption import adopt
        from .connection import forget_columns, storage_fix

        # the column as the swapped field writes it (the state after the AlterField, where there is one)
        where, name = self._column(app_label, to_state, schema_editor)
        with self._reads(schema_editor) as (fetch, execute):
            done = adopt(where, name, fetch, execute, lambda found: storage_fix(name.table, name.column, found))
        forget_columns(schema_editor.connection.alias)
        if done.recorded:
            print(f"  seqid: {done}")

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema.adoption import unrecord

        where, name = self._column(app_label, from_state, schema_editor)
        with self._reads(schema_editor) as (fetch, execute):
            unrecord(where, name, fetch, execute)

    def describe(self) -> str:
        return f"Record how {self.model_name}.{self.field_name}'s keys sort after the keys it holds"


class CreateTableUnlessThere(Operation):
    """``create`` (a ``CreateModel``), or keep the table already there: seqid's own migrations.

    A ticket sequence or a worker lease opened with ``create_table=True`` (through a URL, or SQLAlchemy)
    may have made ``seqid_tickets`` or ``seqid_worker_leases`` before ``migrate`` first runs; a plain
    ``CreateModel`` then fails (``relation "seqid_tickets" already exists``).  This creates the table
    where there is none, keeps one that has the columns seqid's stores use (``columns``), and refuses one
    that lacks them, naming them; ``migrate`` prints which it did.  The model's state is ``create``'s
    either way; unapplying drops the table.
    """

    reversible = True
    reduces_to_sql = False  # it reads the database's tables first

    def __init__(self, create: Any, columns: list[str]) -> None:
        self.create = create
        self.columns = list(columns)

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return "CreateTableUnlessThere", [self.create, self.columns], {}

    def state_forwards(self, app_label: str, state: Any) -> None:
        self.create.state_forwards(app_label, state)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        table = to_state.apps.get_model(app_label, self.create.name)._meta.db_table
        connection = schema_editor.connection
        with connection.cursor() as cursor:
            there = table in connection.introspection.table_names(cursor)
            found = {c.name for c in connection.introspection.get_table_description(cursor, table)} if there else set()
        if not there:
            self.create.database_forwards(app_label, schema_editor, from_state, to_state)
            return
        missing = [c for c in self.columns if c not in found]
        if missing:
            from django.core.exceptions import ImproperlyConfigured

            raise ImproperlyConfigured(
                f"table {table} already exists without column(s) {', '.join(missing)}: it is not seqid's; rename "
                "or drop it, then migrate again"
            )
        print(f"  seqid: table {table} already exists (a store made it with create_table=True): kept")

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self.create.database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self) -> str:
        return f"Create model {self.create.name}, or keep its table where a store made it"


def _rekey_run(
    app_label: str,
    schema_editor: Any,
    state: Any,
    operation: Any,
    what: str,
    step: Callable[[Any, Any, Any], None],
    unless: Callable[[Any], bool] | None = None,
) -> None:
    """``step(io, plan, lock)`` of re-keying ``operation.model_name``'s table (as ``state`` has the model) for
    the keys ``operation.field`` makes (a ``SeqUUIDField`` key where it has none), as the catalog says, under
    the key column's migration lock; nothing where ``unless(io)`` says it is done; refused in an atomic
    migration (its batches commit) before any change."""
    from ..errors import MigrationRefusedError
    from ..schema import rekey

    connection = schema_editor.connection
    if connection.in_atomic_block:
        raise MigrationRefusedError(
            f"{what} commits its batches: give the migration atomic = False "
            "(class Migration(migrations.Migration): atomic = False)"
        )
    model = state.apps.get_model(app_label, operation.model_name)
    field = _seqid_key(operation.model_name, getattr(operation, "field", None))
    field.set_attributes_from_name(model._meta.pk.name)
    io = _OnlineIO(connection)
    if unless is not None and unless(io):
        return
    plan = rekey.plan_for(io, field_target(field, connection), model._meta.db_table, str(field.db_type(connection)))
    with io.unprepared(), _operation_lock(connection, plan.parent(), what) as lock:
        step(io, plan, lock)


def _rebuild_sqlite(
    app_label: str, schema_editor: Any, old_state: Any, new_state: Any, operation: Any, *, forwards: bool
) -> None:
    """SQLite's form of the contract step (:mod:`seqid_orm.schema.rebuild`), or of its way back: the key's table
    and every table that references it made again by Django's schema editor (its ``AlterField``: the models'
    constraints and indexes with them), each key and foreign key's value made the other in the same transaction,
    the foreign keys checked before it commits; a table that references the key with no model here (another
    application's, a table made by raw SQL) made again of its own text with its column of the type Django
    gives a foreign key to the new key (:func:`seqid_orm.schema.rebuild.make_again`, as for Alembic).  Refused
    before any change where a value has no counterpart."""
    from django.db import transaction

    from ..errors import MigrationRefusedError
    from ..schema import rebuild

    connection = schema_editor.connection
    if connection.in_atomic_block:  # Django's editor turns SQLite's foreign keys off only outside a transaction
        raise MigrationRefusedError(
            "RekeyContract makes SQLite's tables again with their foreign keys off, which SQLite allows only "
            "outside a transaction: give the migration atomic = False"
        )
    old_model = old_state.apps.get_model(app_label, operation.model_name)
    new_model = new_state.apps.get_model(app_label, operation.model_name)
    old_pk, new_pk = old_model._meta.pk, new_model._meta.pk
    seq_field, plain = (new_pk, old_pk) if forwards else (old_pk, new_pk)
    kind = "integer" if plain.get_internal_type() in INTEGER_KEY_TYPES else "text"
    target = field_target(seq_field, connection)
    table, column = old_model._meta.db_table, old_pk.column
    io = _OnlineIO(connection)
    columns = [(table, column), *rebuild.followed(io, "sqlite", table, column)]
    made = {m._meta.db_table for m in new_state.apps.get_models(include_auto_created=True)}
    direct = set(rebuild.references(io, "sqlite", table, column))
    # Django makes its models' tables again, where their foreign keys reference the key itself; not these: other
    # tables, and the ones whose key a multi-table child's key is
    loose: dict[str, dict[str, str]] = {}
    for child, child_column in columns[1:]:
        if child not in made or (child, child_column) not in direct:
            loose.setdefault(child, {})[child_column] = str(new_pk.rel_db_type(connection))
    rebuild.refuse(io, "sqlite", columns, kind, target.layout, forwards=forwards)
    # the stored form of the other side's value (not the field's: it reads the column, which is half made)
    convert = rebuild.converter(kind, target.layout, target.storage, forwards=forwards)
    connection.ensure_connection()
    connection.connection.create_function(rebuild.FUNCTION, 1, convert, deterministic=True)
    with transaction.atomic(using=connection.alias):

        def remake() -> None:
            schema_editor.alter_field(old_model, old_pk, new_pk)
            rebuild.make_again(io, "sqlite", loose, (table, column))

        rebuild.rewrite(io, "sqlite", columns, remake, forwards=forwards)


#: Django's integer fields, whose key the rekey operations change (an ``AutoField``'s internal type included).
INTEGER_KEY_TYPES = frozenset(
    f"{kind}{size}Field" for kind in ("", "Positive", "Auto") for size in ("Integer", "BigInteger", "SmallInteger")
) | {"AutoField", "BigAutoField", "SmallAutoField"}


def _seqid_key(model_name: str, field: Any) -> Any:
    """``field`` as the key the contract makes (``SeqUUIDField(primary_key=True)`` when none is given)."""
    if field is None:
        from .fields import SeqUUIDField

        field = SeqUUIDField(primary_key=True, serialize=False)  # as makemigrations writes a model's key
    if not getattr(field, "primary_key", False):
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError(f"the key of {model_name} after its contract step must have primary_key=True")
    return field


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class RekeyExpand(Operation):
    """``RekeyExpand("author")`` in release N's migration (``atomic = False``): the expand step of changing
    ``author``'s key (integers, or UUIDs kept as text; PostgreSQL and MariaDB 10.7+) to a seqid key
    with every foreign key to it, as the catalog has them (other apps' tables, many-to-many tables, the table
    itself) — :mod:`seqid_orm.schema.rekey`.  Release N's models are unchanged: their code writes the old keys,
    and the database keeps the new columns in step.  ``field`` is the key the contract step will make
    (``SeqUUIDField(primary_key=True)`` by default): it decides the keys' layout and storage.  Run again after a
    kill, it goes on where it stopped.  Unapplying drops what it made.  On SQLite it changes nothing (one writer:
    the contract step makes the tables again); where the key cannot change (MySQL) it is refused before any
    change, saying why."""

    reversible = True
    reduces_to_sql = False  # it reads the catalog and fills rows

    model_name: str
    field: Any = None
    batch_size: int | None = None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {}
        if self.field is not None:
            kwargs["field"] = self.field
        if self.batch_size is not None:
            kwargs["batch_size"] = self.batch_size
        return "RekeyExpand", [self.model_name], kwargs

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass  # the new columns are the database's until the contract step: release N's models do not see them

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema import rekey

        if schema_editor.connection.vendor == "sqlite":  # nothing to keep in step: the contract rebuilds
            return
        _rekey_run(
            app_label,
            schema_editor,
            to_state,
            self,
            "RekeyExpand",
            lambda io, plan, lock: rekey.expand(io, plan, batch_size=self.batch_size, guard=lock.check),
        )

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema import rekey

        if schema_editor.connection.vendor == "sqlite":
            return
        _rekey_run(
            app_label,
            schema_editor,
            from_state,
            self,
            "RekeyExpand, unapplied",
            lambda io, p, _: rekey.undo_expand(io, p),
        )

    def describe(self) -> str:
        return f"Add {self.model_name}'s seqid key beside its old key, with every foreign key to it, online"


@dataclass(eq=False, repr=False)  # the constructor from the fields; Django's own repr and identity
class RekeyContract(Operation):
    """``RekeyContract("author")`` in release N+1's migration (``atomic = False``), run once no process of
    release N writes: the seqid column becomes the key and each foreign key's column, by short steps
    (:mod:`seqid_orm.schema.rekey`: PostgreSQL one transaction; MariaDB a rebuild that lets writes go on, then a
    swap of names under ``LOCK TABLES``); the old key stays, as ``<column>_int`` (unique: old URLs) or
    ``<column>_text``.  The model's key becomes ``field`` (``SeqUUIDField(primary_key=True)`` by default), so
    every ``ForeignKey`` to it follows.  Unapplying swaps back (refused while rows the new release wrote have
    no old key, naming the ``UPDATE`` that gives them one).  On SQLite the tables are made again in one
    transaction (:mod:`seqid_orm.schema.rebuild`), no old key kept: the way back reads each integer out of its
    key."""

    reversible = True
    reduces_to_sql = False

    model_name: str
    field: Any = None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return "RekeyContract", [self.model_name], {} if self.field is None else {"field": self.field}

    def state_forwards(self, app_label: str, state: Any) -> None:
        model = state.models[app_label, self.model_name.lower()]
        pk = next(name for name, f in model.fields.items() if getattr(f, "primary_key", False))
        state.alter_field(app_label, self.model_name.lower(), pk, _seqid_key(self.model_name, self.field), True)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema import rekey

        if schema_editor.connection.vendor == "sqlite":
            _rebuild_sqlite(app_label, schema_editor, from_state, to_state, self, forwards=True)
            return
        _rekey_run(
            app_label,
            schema_editor,
            from_state,
            self,
            "RekeyContract",
            lambda io, plan, lock: rekey.contract(io, plan, guard=lock.check),
        )

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        from ..schema import rekey

        if schema_editor.connection.vendor == "sqlite":
            _rebuild_sqlite(app_label, schema_editor, from_state, to_state, self, forwards=False)
            return
        _rekey_run(
            app_label,
            schema_editor,
            to_state,
            self,
            "RekeyContract, unapplied",
            lambda io, p, _: rekey.undo_contract(io, p),
        )

    def describe(self) -> str:
        return f"Make {self.model_name}'s seqid key its primary key and every foreign key's, online"
