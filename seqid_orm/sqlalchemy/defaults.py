"""Column defaults that generate ids in the layout of the connection they are inserted over.

A SQLAlchemy default that takes one argument receives the execution context, which knows the
dialect (name, MariaDB or not, server version) and the column being filled.  The column type's
:class:`~seqid_orm.vendors.Target` on that dialect (:meth:`SeqUUID.target`, kept per dialect)
says the layout; each default keeps the function that makes its ids per dialect and column kind,
so a row costs a look-up and that call, never a decision.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import ForeignKey, event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.engine.interfaces import ExecutionContext
from sqlalchemy.orm import Mapper, mapped_column
from sqlalchemy.orm.properties import MappedColumn

from ..errors import ArgumentTypeError, InvalidArgumentError
from ..ids.layout import Layout
from ..ids.prefixed import sequence_prefixer
from ..ids.snowflake import Snowflake
from ..ids.text import text_id_kind
from ..ids.typeid import typeid
from ..vendors import Target, distributed_flavor
from .columns import column_target, kept
from .types import SeqUUID, SnowflakeID, SortableText, TicketID, TypeID, dialect_target


def layout_for(dialect: Dialect, type_: SeqUUID | None = None) -> Layout:
    """The layout that ``type_``'s generated values get on ``dialect`` (its target's, see
    :meth:`SeqUUID.target`: the same decision the Django fields read)."""
    return (type_ if type_ is not None else _DEFAULT_TYPE).target(dialect).layout


@event.listens_for(Engine, "engine_connect")
def _read_server(connection: Any) -> None:
    """Once per engine, what only the live server can tell, read on the DBAPI connection (so no
    SQLAlchemy transaction is begun on the caller's behalf):

    * PostgreSQL: is it YugabyteDB?  Only ``version()`` says so.
    * MariaDB 10.7+: in which form does this driver hand a ``UUID`` value over?  Raw bytes cost
      PyMySQL a sixth of the escaping of the 36-character text, 32 hex digits half of it; the
      server takes all three on 10.11, but mysqlclient cannot send bytes for it.  Each form is
      tried and kept only if the server reads it back as the same UUID (else the text stays).
    """
    dialect = connection.dialect
    if dialect.name == "postgresql" and not hasattr(dialect, "seqid_flavor"):
        text = _ask(connection, "SELECT version()") or ""
        dialect.seqid_flavor = distributed_flavor(str(text)) or ""
    elif dialect.name == "mysql" and getattr(dialect, "is_mariadb", False) and not hasattr(dialect, "seqid_uuid_bind"):
        dialect.seqid_uuid_bind = "text"
        if dialect_target(dialect).native_uuid:
            for form, value in (("bytes", _PROBE.bytes), ("hex", _PROBE.hex)):
                if str(_ask(connection, "SELECT CAST(%s AS UUID)", (value,))) == str(_PROBE):
                    dialect.seqid_uuid_bind = form
                    break


_PROBE = uuid.UUID("1189c8a4-1f2e-4a3b-9c4d-5e6f70819203")  # a version 4: stored swapped by MariaDB


def _ask(connection: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """One value from the DBAPI connection, or ``None`` if the server (or driver) refuses.  The
    transaction a driver that is not in autocommit began for it is ended at once: a probe made on a
    connection just checked out must not leave it in a transaction, which behind PgBouncer in
    transaction pooling holds a server connection for as long as the application keeps the connection
    idle (a pod waiting for the migration lock with its migration connection open held one each)."""
    dbapi = connection.connection.dbapi_connection
    try:
        cursor = dbapi.cursor()
        try:
            cursor.execute(sql, params) if params else cursor.execute(sql)
            return cursor.fetchone()[0]
        finally:
            cursor.close()
    except Exception:  # never let a probe break a connection: the safe choice stays
        return None
    finally:
        with contextlib.suppress(Exception):
            dbapi.rollback()  # no SQLAlchemy transaction was begun: nothing of the caller's is in it


_DEFAULT_TYPE = SeqUUID()


#: From this many rows in one statement (``executemany``, the ORM's batched flush), the default
#: reserves the statement's ids with one :meth:`~seqid_orm.ids.comb.CombGenerator.batch` call: a
#: fifth of the cost of making them one by one, and the same ids n calls would have made.
BATCH_FROM_ROWS = 16


def seq_uuid_default(context: ExecutionContext) -> uuid.UUID:
    """Default for a :class:`SeqUUID` column: a new id in the layout of this connection.

    SQLAlchemy calls it once per row and column, with the statement's execution context.  The
    first call in a statement picks the id source and keeps it on the context, so every later row
    costs one dictionary look-up and one call: from :data:`BATCH_FROM_ROWS` rows the source hands
    out ids reserved in one batch (then, should more rows ask, new ones), below that it is the
    layout's generator itself.  The source follows the column as this connection resolves it
    (:func:`~seqid_orm.sqlalchemy.columns.column_target`; once resolved, a one-row statement asks
    :func:`~seqid_orm.sqlalchemy.columns.kept`: one look-up), so a tenant's table gets the keys its own
    column needs.  No exception is raised on the way
    (``getattr`` with a default does not make one), since one costs more than the id.
    """
    memo = getattr(context, "seqid_next", None)
    if memo is not None:
        make = memo.get(context.current_column)  # type: ignore[attr-defined]
        if make is not None:
            return make()  # type: ignore[no-any-return]
    column = getattr(context, "current_column", None)
    connection = getattr(context, "root_connection", None)
    if column is not None and connection is not None and len(getattr(context, "compiled_parameters", None) or ()) < 2:
        known = kept(connection, column)  # a one-row statement (an ORM flush) on a connection that resolved it
        if known is not None:
            return known.make()
    return _first_in_statement(context)


def _first_in_statement(context: ExecutionContext) -> uuid.UUID:
    """The first id of a column in a statement: choose its source, and keep it on the context
    when more rows will ask for it."""
    column = getattr(context, "current_column", None)
    connection = getattr(context, "root_connection", None)
    known = kept(connection, column) if column is not None and connection is not None else None
    if known is not None:  # resolved on this connection before: one look-up
        where, make = known.target, known.make
    else:
        where = _column_target(context, column)
        make = where.generator.id_function  # the closure: forks reset its state in place
    rows = len(getattr(context, "compiled_parameters", None) or ())
    if rows < 2 or column is None:
        return make()
    if rows >= BATCH_FROM_ROWS:
        # The reserved ids first, then fresh ones should more rows ask than were counted.
        batch = where.generator.batch(rows)
        make = itertools.chain(batch, iter(make, None)).__next__
    memo = getattr(context, "seqid_next", None)
    if memo is None:
        with contextlib.suppress(AttributeError):  # a context taking no attributes: no memo
            context.seqid_next = memo = {}  # type: ignore[attr-defined]
    if memo is not None:
        memo[column] = make
    return make()


def _column_target(context: ExecutionContext, column: Any) -> Target:
    """The target of the column a default fills, as the statement's own connection resolves it
    (:func:`~seqid_orm.sqlalchemy.columns.column_target`), the type's alone without one."""
    connection = getattr(context, "root_connection", None)
    if column is not None and connection is not None:
        return column_target(connection, column)
    seq_type = column.type if column is not None and isinstance(column.type, SeqUUID) else _DEFAULT_TYPE
    return seq_type.target(context.dialect)


def seq_uuid_pk(
    storage: str | None = None,
    layout: Layout | str | None = None,
    *,
    generate: str = "python",
    **column_kw: Any,
) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SeqUUID` primary key with its connection-aware default.

    ``generate="python"`` (default): this process makes the id, in the layout of the
    connection; it exists after the flush (as with an integer key), or at construction with
    :func:`assign_ids_on_init`.  ``generate="database"``: a server default
    (:class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID`) makes it, so rows travel without a key,
    like an identity column; the ORM reads it back with ``RETURNING`` (PostgreSQL, MariaDB
    10.5+, SQLite 3.35+).  ``layout`` applies to Python-made ids only.
    """
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault(*key_default(storage, layout, generate))
    return mapped_column(SeqUUID(storage=storage, layout=layout), **column_kw)


def typeid_pk(prefix: str, storage: str | None = None, **column_kw: Any) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`~seqid_orm.sqlalchemy.TypeID` primary key of type ``prefix``:
    each new key a TypeID of a :func:`~seqid_orm.uuid7`, in Python and JSON as its text
    (``Mapped[str]``)."""
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("default", functools.partial(typeid, prefix))
    return mapped_column(TypeID(prefix, storage=storage), **column_kw)


def key_default(storage: str | None, layout: Layout | str | None, generate: str) -> tuple[str, Any]:
    """The column keyword that makes a seqid UUID key, for :func:`seq_uuid_pk` and SQLModel's
    ``seq_uuid_field``: ``("default", seq_uuid_default)`` or, with ``generate="database"``,
    ``("server_default", DatabaseSeqUUID(storage))``."""
    if generate not in ("python", "database"):
        raise InvalidArgumentError(f"generate must be 'python' or 'database', got {generate!r}")
    if generate == "python":
        return "default", seq_uuid_default
    if layout is not None:
        raise InvalidArgumentError("layout= applies to ids made in Python; the database's generator fixes its own")
    from .server import DatabaseSeqUUID

    return "server_default", DatabaseSeqUUID(storage)


def seq_uuid_fk(
    target: str | Any,
    storage: str | None = None,
    **column_kw: Any,
) -> MappedColumn[Any]:
    """``mapped_column`` for a foreign key to a seqid UUID key, with the same storage.

    (A plain ``Mapped[uuid.UUID]`` annotation would give SQLAlchemy's own ``Uuid`` type,
    whose storage differs from :class:`SeqUUID` on several dialects; or map ``uuid.UUID`` to
    ``SeqUUID()`` in the declarative base's ``type_annotation_map``.)
    """
    fk_kw = {k: column_kw.pop(k) for k in ("ondelete", "onupdate") if k in column_kw}
    return mapped_column(SeqUUID(storage=storage), ForeignKey(target, **fk_kw), **column_kw)


def snowflake_pk(generator: Snowflake, **column_kw: Any) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SnowflakeID` primary key filled by ``generator``.

    A generator whose worker id is leased is bound to the column on the first insert over each
    engine (:meth:`~seqid_orm.ids.snowflake.Snowflake.bind_column`): keys there that another
    allocator stamped with the worker id it holds (a second lease namespace, or the same one on a
    second store) are refused instead of repeated.
    """
    if not isinstance(generator, Snowflake):
        raise ArgumentTypeError(f"generator must be a seqid_orm.Snowflake, got {type(generator).__name__}")
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("autoincrement", False)
    if generator.source is not None:
        column_kw.setdefault("default", _bound_default(generator.next_id, generator.bind_column))
        return mapped_column(SnowflakeID(), **column_kw)
    column_kw.setdefault("default", generator.next_id)
    mapped = mapped_column(SnowflakeID(), **column_kw)
    _watch_duplicates(generator, mapped.column)
    return mapped


log = logging.getLogger("seqid_orm.snowflake")


_told: set[tuple[int, str]] = set()  # (worker field, column) said once a process


def _watch_duplicates(generator: Snowflake, column: Any) -> None:
    """Have ``column``'s unique key watch for a configured Snowflake: two live processes configured
    with the same worker id make the same ids, and nothing but that key can see it (a process cannot
    tell another live process's keys from its own previous run's).  One ``handle_error`` listener on
    every engine (``Engine`` itself, so no insert pays for it and no engine is missed); a duplicate
    of this column's key then logs, once a process, that the worker id is shared, and says so in the
    ``IntegrityError``'s notes (Python 3.11+).  The error itself stays SQLAlchemy's."""
    field = (generator.datacenter_id << generator.worker_bits) | generator.worker_id

    def on_error(ctx: Any) -> None:
        statement = getattr(getattr(ctx.execution_context, "compiled", None), "statement", None)
        table: Any = getattr(column, "table", None)  # the column joins its table when its class is mapped
        if table is None or getattr(statement, "table", None) is not table:
            return
        if not _duplicate_key(ctx.original_exception, column):
            return
        label = f"{column.table.name}.{column.name}"
        message = (
            f"seqid: a duplicate key in {label}, which Snowflake(worker_id={generator.worker_id}) fills: a configured "
            "worker id is used by another live process, and the two make the same ids. Lease it instead "
            "(Snowflake(worker_id=WorkerLease(url, namespace))) or give each process a worker id of its own"
        )
        if (field, label) not in _told:
            _told.add((field, label))
            log.warning("%s", message, extra={"seqid_worker_id": generator.worker_id, "seqid_column": label})
        exc = ctx.sqlalchemy_exception
        if exc is not None and hasattr(exc, "add_note"):
            exc.add_note(message)

    event.listen(Engine, "handle_error", on_error)


def _duplicate_key(error: BaseException, column: Any) -> bool:
    """Whether ``error`` is the driver's unique violation of ``column``'s key: PostgreSQL's 23505 on
    the table's primary key constraint, MariaDB's 1062 on ``PRIMARY``, SQLite's "UNIQUE constraint
    failed: table.column"."""
    text = str(error)
    diag = getattr(error, "diag", None)  # psycopg 3, psycopg2
    if getattr(error, "sqlstate", None) == "23505" or getattr(error, "pgcode", None) == "23505":
        constraint = getattr(diag, "constraint_name", None)
        primary = column.table.primary_key.name or f"{column.table.name}_pkey"
        return constraint == primary if column.primary_key else constraint is not None and column.name in constraint
    args = getattr(error, "args", ())
    if args and args[0] == 1062:  # MariaDB/MySQL: Duplicate entry '...' for key 'PRIMARY'
        return column.primary_key and ("'PRIMARY'" in text or ".PRIMARY'" in text)
    return f"UNIQUE constraint failed: {column.table.name}.{column.name}" in text


def ticket_pk(sequence: Callable[[], int], **column_kw: Any) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`TicketID` primary key drawn from a ticket ``sequence``.

    ``sequence`` is a :class:`~seqid_orm.allocation.tickets.TicketSequence` (or any callable returning the
    next int): the key is drawn in Python, in the insert's own process, so rows carry it like an
    identity column's value but it is known before the flush.

    A ``TicketSequence`` is bound to the column on the first insert over each engine
    (:meth:`~seqid_orm.allocation.tickets.TicketSequence.bind_floor`): a counter that is behind the keys
    already in the table (created anew, restored from a backup) is then refused instead of
    handing them out again.
    """
    next_id = getattr(sequence, "next_id", sequence)
    if not callable(next_id):
        raise ArgumentTypeError(f"sequence must be a TicketSequence or a callable, got {type(sequence).__name__}")
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("autoincrement", False)
    bind_floor = getattr(sequence, "bind_floor", None)
    if bind_floor is not None:
        column_kw.setdefault("default", _bound_default(next_id, bind_floor, getattr(sequence, "next_ids", None)))
    else:
        column_kw.setdefault("default", next_id)
    return mapped_column(TicketID(), **column_kw)


def _bound_default(
    next_id: Callable[[], int],
    bind_floor: Callable[[Any], None],
    next_ids: Callable[[int], list[int]] | None = None,
) -> Callable[[ExecutionContext], int]:
    """A default that binds its generator (a ticket sequence's floor, a leased Snowflake's worker-id
    check) to the column and engine it fills before its first id there.

    With ``next_ids`` (a :class:`~seqid_orm.allocation.tickets.TicketSequence`'s), the default also
    answers ``default.seqid_many(context, count)``: a load's ``count`` ids in one call, which
    :func:`~seqid_orm.sqlalchemy.bulk_insert` takes instead of a call a row (a reserved block is a
    range: it is handed over as one)."""
    from ..allocation.stores.sqlalchemy import ColumnFloor

    bound: set[tuple[int, int]] = set()  # (engine, column) pairs already bound; one look-up a row

    def bind(context: ExecutionContext) -> None:
        column = context.current_column  # type: ignore[attr-defined]
        engine = context.engine
        key = (id(engine), id(column))
        if key not in bound:
            bind_floor(ColumnFloor(engine, column))
            bound.add(key)

    def default(context: ExecutionContext) -> int:
        bind(context)
        return next_id()

    if next_ids is not None:
        many = next_ids

        def seqid_many(context: ExecutionContext, count: int) -> list[int]:
            bind(context)
            step = 1 << 20  # next_ids takes up to 2**24 at a call
            return [i for start in range(0, count, step) for i in many(min(step, count - start))]

        default.seqid_many = seqid_many  # type: ignore[attr-defined]
    return default


def prefixed_uuid_default(
    counter: Callable[[], int], block_size: int = 65536, block_count: int = 65536
) -> Callable[[ExecutionContext], uuid.UUID]:
    """A column default making wrapping-prefix UUIDs (``uuid_sequence_nextval``) from ``counter``.

    ``counter`` is typically a :class:`~seqid_orm.allocation.tickets.TicketSequence`: the prefix then follows
    a counter shared by every process, without a database sequence object, and it is placed where
    the connection's database compares first (SQL Server's last six bytes, say).  The arguments are
    checked here; the placement is decided once per dialect and column type, then kept.
    """
    next_value = getattr(counter, "next_id", counter)
    if not callable(next_value):
        raise ArgumentTypeError(f"counter must be a TicketSequence or a callable, got {type(counter).__name__}")
    sequence_prefixer(block_size, block_count)  # validate now, not at the first insert
    makers: dict[tuple[int, object, object], Callable[[int], uuid.UUID]] = {}

    def default(context: ExecutionContext) -> uuid.UUID:
        dialect = context.dialect
        column = context.current_column  # type: ignore[attr-defined]
        key = (id(dialect), column.type, dialect.server_version_info)
        make = makers.get(key)
        if make is None:
            seq_type = column.type if isinstance(column.type, SeqUUID) else _DEFAULT_TYPE
            make = makers[key] = sequence_prefixer(block_size, block_count, seq_type.target(dialect).prefix_layout)
        return make(next_value())

    return default


def prefixed_uuid_pk(
    counter: Callable[[], int],
    block_size: int = 65536,
    block_count: int = 65536,
    storage: str | None = None,
    **column_kw: Any,
) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SeqUUID` key with a wrapping prefix drawn from ``counter``."""
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("default", prefixed_uuid_default(counter, block_size, block_count))
    return mapped_column(SeqUUID(storage=storage), **column_kw)


def sortable_text_pk(kind: str = "bsv", **column_kw: Any) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SortableText` primary key (``"bsv"`` or ``"base32"``)."""
    type_ = SortableText(kind)
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("default", text_id_kind(kind)[1])
    return mapped_column(type_, **column_kw)


def assign_ids_on_init(mapped_class: type, bind: Engine) -> Callable[..., None]:
    """Opt-in: give new objects of ``mapped_class`` (and subclasses) their id at construction.

    The layout is decided for ``bind`` (connecting once if it has not yet seen the server),
    so ``obj.id`` is known before ``session.add`` and ``flush``.  Returns the event listener,
    which ``sqlalchemy.event.remove(mapped_class, "init", listener)`` takes off again.
    """
    from sqlalchemy import inspect

    mapper: Mapper[Any] = inspect(mapped_class)
    columns = [(c, c.type) for c in mapper.primary_key if isinstance(c.type, SeqUUID)]
    if not columns:
        raise ArgumentTypeError(f"{mapped_class.__name__} has no SeqUUID primary-key column")
    with bind.connect() as conn:  # the server's version, and each key column as it is there
        makers = {c.key: column_target(conn, c).generator.id_function for c, _ in columns}
    attrs = {c.key: mapper.get_property_by_column(c).key for c, _ in columns}

    def listener(target: Any, args: Any, kwargs: dict[str, Any]) -> None:
        for col_key, attr in attrs.items():
            if kwargs.get(attr) is None:
                kwargs[attr] = makers[col_key]()

    event.listen(mapped_class, "init", listener, propagate=True)
    return listener
