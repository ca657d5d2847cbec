"""``bulk_insert``: many rows with seqid keys through each engine's fastest path, in one transaction.

A key made per row costs the client as much as the rest of the row (a Python call, a ``uuid.UUID``,
the driver's escaping); for a bulk load the keys are made in batches
(:meth:`~seqid_orm.CombGenerator.batch`), in the layout of the connection's column, and the rows go
where the server takes them fastest:

* PostgreSQL with psycopg 3: ``COPY ... FROM STDIN (FORMAT BINARY)``, the values in the server's
  binary form (no SQL text, no per-row statement), the keys made while the rows stream;
* MariaDB/MySQL through mysqlclient: multi-row ``INSERT`` statements, each value written as the
  driver's own ``executemany`` writes it, but column by column in C (integer and binary keys as
  their digits, text through the driver's escaping), not row by row in Python; through PyMySQL,
  its ``executemany``, which sends multi-row ``INSERT`` statements too;
* SQLite and anything else: ``executemany``.

Every row is checked and converted (through the columns' own types, as an ``INSERT`` would) before
anything is sent; the rows go in one transaction (a savepoint when the connection is already in one),
so a load that fails leaves no row of it behind.
"""

from __future__ import annotations

import asyncio
from binascii import hexlify
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from operator import attrgetter, itemgetter, methodcaller
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import ArgumentTypeError, InvalidArgumentError
from ..ids.comb import MAX_BATCH, CombGenerator, LazyUUIDs
from ..vendors import Storage, Target
from .columns import column_target
from .types import SeqUUID, TypeID, uuid_int_bytes

__all__ = ["abulk_insert", "bulk_insert"]

#: Rows per ``executemany`` call (``COPY`` streams every row in one).
CHUNK = 10_000


def _table_of(target: Any) -> sa.Table:
    table = getattr(target, "__table__", target)
    if not isinstance(table, sa.Table):
        raise ArgumentTypeError(f"bulk_insert takes a Table or a mapped class, got {type(target).__name__}")
    return table


def _key_column(table: sa.Table) -> sa.Column[Any] | None:
    """The SeqUUID primary key the load fills when the rows do not give it."""
    keys = list(table.primary_key.columns)
    if len(keys) == 1 and isinstance(keys[0].type, SeqUUID) and not isinstance(keys[0].type, TypeID):
        return keys[0]
    return None


def _checked_columns(table: sa.Table, rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The rows' values column by column (every row gives the same columns), refused before anything is sent.

    Column-wise because the per-row cost of a load is what a bulk path exists to cut: one list
    comprehension per column does in C what a loop over rows and columns does in Python.
    """
    listed = rows if isinstance(rows, list) else list(rows)
    if not all(issubclass(kind, Mapping) for kind in set(map(type, listed))):
        number, row = next((i, r) for i, r in enumerate(listed) if not isinstance(r, Mapping))
        raise ArgumentTypeError(f"row {number} is a {type(row).__name__}, not a mapping of column names to values")
    if not listed:
        return {}
    names = list(listed[0])
    unknown = [n for n in names if not isinstance(n, str) or n not in table.c]
    if unknown:
        raise InvalidArgumentError(f"{table.name} has no column {', '.join(map(repr, unknown))}")
    width = len(names)
    try:
        if set(map(len, listed)) != {width}:
            raise KeyError
        return {name: list(map(itemgetter(name), listed)) for name in names}
    except KeyError:  # some row gives other columns: find the first, for the message
        expected = set(names)
        number, row = next((i, r) for i, r in enumerate(listed) if set(r) != expected)
        raise InvalidArgumentError(
            f"row {number} gives columns {sorted(row)}, not {sorted(expected)}: every row must give the same ones"
        ) from None


class _DefaultContext:
    """What a column default callable reads of SQLAlchemy's execution context (the dialect, the
    column, the engine: ``ticket_pk`` and ``snowflake_pk`` bind their column's floor on it)."""

    def __init__(self, engine: Any, column: sa.Column[Any]) -> None:
        self.engine, self.dialect, self.current_column, self.compiled_parameters = engine, engine.dialect, column, ()


def bulk_insert(
    connection: Connection, table: Any, rows: Iterable[Mapping[str, Any]], *, make_keys: bool = True
) -> Sequence[Any]:
    """Insert ``rows`` (mappings of column names to values) into ``table``; the keys, in row order.

    The keys are a sequence of ``uuid.UUID`` (a :class:`~seqid_orm.ids.comb.LazyUUIDs` when the load
    made them and sent them as bytes: each made when read, none when the caller never reads them).

    ``table`` is a ``Table`` or a mapped class.  When the rows do not give its primary key and that key
    is a :class:`~seqid_orm.sqlalchemy.SeqUUID`, the keys are made in batches in the layout of this
    connection's column (``make_keys=False`` leaves them to the column's server default, such as
    ``DatabaseSeqUUID``; the keys returned are then ``None``).  Other columns the rows leave out get
    their Python ``default``, as an ``INSERT`` gives them.  Values go through the columns' types, so a
    bad one raises the error an ``INSERT`` would, before any row is sent.  One transaction (a savepoint
    inside a transaction the caller began): a failure leaves none of these rows.  The caller commits
    (``engine.begin()``).
    """
    if not isinstance(connection, Connection):
        raise ArgumentTypeError(f"bulk_insert takes a SQLAlchemy Connection, got {type(connection).__name__}")
    load = _prepare(connection.engine, table, rows, make_keys, copy_ok=True, key_target=_key_target(connection, table))
    return _send(connection, load)


def _key_target(connection: Connection, target: Any) -> Target | None:
    """The target of the table's SeqUUID key as the live column says (read once per real table and engine,
    :func:`~seqid_orm.sqlalchemy.columns.column_target`), or ``None`` when it has none."""
    key = _key_column(_table_of(target))
    if key is None:
        return None
    return column_target(connection, key)


async def abulk_insert(
    connection: Any, table: Any, rows: Iterable[Mapping[str, Any]], *, make_keys: bool = True
) -> Sequence[Any]:
    """:func:`bulk_insert` through an ``AsyncConnection`` or ``AsyncSession``, the event loop never
    waiting on anything but the database driver's own awaits.

    Everything before the rows are sent (the checks, the keys, the columns' Python defaults, among
    them a ticket- or lease-keyed column's, which may reserve a block or take a worker id on a store)
    runs in a worker thread; the rows then go through the async driver in one transaction
    (``executemany``; psycopg's binary ``COPY`` is the synchronous driver's path only).
    """
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    if isinstance(connection, AsyncSession):
        connection = await connection.connection()
    if not isinstance(connection, AsyncConnection):
        raise ArgumentTypeError(
            f"abulk_insert takes a SQLAlchemy AsyncConnection or AsyncSession, got {type(connection).__name__}"
        )
    # a key floor made while the defaults run (ticket_pk, snowflake_pk) reads through this loop
    connection.sync_engine.seqid_loop = asyncio.get_running_loop()  # type: ignore[attr-defined]
    key_target = await connection.run_sync(_key_target, table)  # the live column, read through this loop
    load = await asyncio.to_thread(
        _prepare, connection.sync_engine, table, rows, make_keys, copy_ok=False, key_target=key_target
    )
    return await connection.run_sync(_send, load)


@dataclass
class _Load:
    """A load checked and converted, ready to send (made without a connection: only its dialect)."""

    table: sa.Table
    columns: list[sa.Column[Any]]
    converted: list[list[Any]]
    count: int
    make: CombGenerator | None
    copy: bool
    made: Sequence[Any]
    given_keys: Sequence[Any] | None


def _prepare(
    engine: Any,
    target: Any,
    rows: Iterable[Mapping[str, Any]],
    make_keys: bool,
    *,
    copy_ok: bool,
    key_target: Target | None = None,
) -> _Load:
    dialect = engine.dialect
    table = _table_of(target)
    values = _checked_columns(table, rows)
    count = len(next(iter(values.values()))) if values else 0
    key = _key_column(table)
    make: CombGenerator | None = None  # the key column's generator, when the load makes its keys
    if values and key is not None and key.name not in values and make_keys:
        key_type: SeqUUID = key.type  # type: ignore[assignment]
        make = (key_target or key_type.target(dialect)).generator
        values = {key.name: [], **values}  # filled below: during the COPY on PostgreSQL, before it elsewhere
    for column in table.columns if values else ():  # what an INSERT would give the columns the rows leave out
        if column.name not in values and column.default is not None and (column is not key or make_keys):
            values[column.name] = _defaults(engine, column, count)
    columns = [table.c[name] for name in values]
    converted = _converted(dialect, columns, list(values.values()))  # checked before anything is sent
    copy = copy_ok and dialect.name == "postgresql" and dialect.driver == "psycopg"
    made: Sequence[Any] = []
    if make is not None and not copy:
        made, converted[0] = _made_keys(dialect, columns[0], make, count)
    primary = list(table.primary_key.columns)  # the keys the rows gave or their defaults made (tickets, Snowflakes)
    given = values[primary[0].name] if len(primary) == 1 and primary[0].name in values and make is None else None
    return _Load(table, columns, converted, count, make, copy, made, given)


def _send(connection: Connection, load: _Load) -> Sequence[Any]:
    if not load.count:
        return []
    made = load.made
    with connection.begin_nested() if connection.in_transaction() else connection.begin():
        if load.copy:
            made = _copy(connection, load.table, load.columns, load.converted, load.count, load.make)
        else:
            if not _multirow_insert(connection, load.table, load.columns, load.converted):
                _executemany(connection, load.table, load.columns, load.converted)
    if load.make is not None:
        return made
    if load.given_keys is not None:
        return load.given_keys
    return [None] * load.count


def _defaults(engine: Any, column: sa.Column[Any], count: int) -> list[Any]:
    default: Any = column.default
    if default.is_scalar:
        return [default.arg] * count
    if default.is_callable:
        context = _DefaultContext(engine, column)
        many = getattr(default.arg, "seqid_many", None)  # a ticket sequence's block, handed over at once
        if many is not None:
            return list(many(context, count))
        return [default.arg(context) for _ in range(count)]
    raise InvalidArgumentError(f"column {column.name!r} has a SQL default; bulk_insert needs its values given")


def _converted(dialect: Any, columns: list[sa.Column[Any]], values: list[list[Any]]) -> list[list[Any]]:
    """Each column's values as the driver receives them: through its type's bind processor."""
    out = []
    for column, column_values in zip(columns, values, strict=True):
        bind_many = getattr(column.type, "bind_many", None)  # seqid's integer keys check a column at once
        checked = bind_many(column_values) if bind_many is not None else None
        if checked is not None:
            out.append(checked)
            continue
        process = column.type._cached_bind_processor(dialect)
        out.append(column_values if process is None else [v if v is None else process(v) for v in column_values])
    return out


def _made_keys(
    dialect: Any, column: sa.Column[Any], make: CombGenerator, count: int
) -> tuple[Sequence[Any], list[Any]]:
    """``count`` keys from ``make`` for ``column``, and the same keys as the driver receives them.

    Bytes or hex made from the keys' ints where the driver takes those (the keys are then a
    :class:`~seqid_orm.ids.comb.LazyUUIDs`: no ``uuid.UUID`` made unless the caller reads one);
    otherwise ``uuid.UUID`` objects through the column type's bind processor.
    """
    ints = [i for start in range(0, count, MAX_BATCH) for i in make.batch_ints(min(MAX_BATCH, count - start))]
    key_type: SeqUUID = column.type  # type: ignore[assignment]
    if _writes_rows_itself(dialect) and key_type.target(dialect).storage is Storage.NATIVE:
        # MariaDB's uuid takes a key's 16 bytes as an X'...' literal, which the server reads for 1.18x
        # BIGINT identity's time where the 36-character text costs 1.47x (200,000 rows, docs/benchmarks.md)
        return LazyUUIDs(ints), uuid_int_bytes(ints)
    to_driver = key_type._ints_to_driver(dialect)
    if to_driver is not None:
        return LazyUUIDs(ints), to_driver(ints)
    made = list(LazyUUIDs(ints))
    return made, _converted(dialect, [column], [made])[0]


#: PostgreSQL's type oids for ``uuid`` and ``bytea`` (``pg_type``).
_UUID_OID, _BYTEA_OID = 2950, 17
#: Rows made and written per step of a ``COPY`` whose keys the load makes.
_COPY_STEP = 2_000


def _uuid_bytes(values: list[Any]) -> list[Any]:
    """UUIDs as their 16 bytes, ``None`` kept: in ``COPY``'s binary form a ``uuid`` field *is* its 16
    bytes (the server's ``uuid_recv``), and psycopg writes ``bytes`` in C where its ``UUID`` dumper is a
    Python call per value (a fifth of a load's client time)."""
    try:
        return uuid_int_bytes(map(attrgetter("int"), values))
    except AttributeError:  # a None among them
        return [None if v is None else v.int.to_bytes(16, "big") for v in values]


def _dumps_binary(cursor: Any, oid: int) -> bool:
    """Whether psycopg writes this type in ``COPY``'s binary form (it has no binary ``bpchar``,
    ``CHAR(n)``, nor one for types it does not know, such as a user's enum)."""
    from psycopg import ProgrammingError
    from psycopg.pq import Format

    try:
        cursor.adapters.get_dumper_by_oid(oid, Format.BINARY)
    except ProgrammingError:
        return False
    return True


def _copy(
    connection: Connection,
    table: sa.Table,
    columns: list[sa.Column[Any]],
    values: list[list[Any]],
    count: int,
    make: CombGenerator | None,
) -> Sequence[Any]:
    """PostgreSQL: binary ``COPY`` through psycopg, the column types told by the server's catalog; the
    keys ``make`` made (the first column's).  Text ``COPY`` where a column's type has no binary
    form in psycopg: the values as psycopg writes them for their Python types, the keys made first.

    The keys are made step by step while the rows stream, as ints sent as bytes: the server stores
    one step while the client makes the next, where making them all first would leave it idle
    meanwhile (they need no check: they are made in the column's own form).  They are returned as
    :class:`~seqid_orm.ids.comb.LazyUUIDs`, which makes a ``uuid.UUID`` only when one is read.
    """
    from psycopg.types.string import BytesBinaryDumper

    raw: Any = connection.connection.dbapi_connection
    quote = connection.dialect.identifier_preparer.quote
    target = connection.dialect.identifier_preparer.format_table(table)
    made: Sequence[Any] = []
    with raw.cursor() as cursor:
        cursor.execute(
            "SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0",
            (target,),
        )
        catalog = dict(cursor.fetchall())
        oids = [catalog[c.name] for c in columns]
        sql = f"COPY {target} ({', '.join(quote(c.name) for c in columns)}) FROM STDIN"
        dbapi_error = connection.dialect.loaded_dbapi.Error
        if not all(map(partial(_dumps_binary, cursor), oids)):  # CHAR(n), an enum...: the text form
            if make is not None:
                made, first = _made_keys(connection.dialect, columns[0], make, count)
                values = [first, *values[1:]]
            try:
                with cursor.copy(sql) as copy:
                    for row in zip(*values, strict=True):
                        copy.write_row(row)
            except dbapi_error as exc:
                raise sa.exc.DBAPIError.instance(sql, None, exc, dbapi_error) from exc
            return made
        values = [_uuid_bytes(v) if oid == _UUID_OID else v for v, oid in zip(values, oids, strict=True)]
        sql += " (FORMAT BINARY)"
        try:
            with cursor.copy(sql) as copy:
                # psycopg's plain bytes dumper (its C one, which register_dumper picks), not the wrapper
                # psycopg.Binary's type registers for bytea oid, an isinstance call per value in Python
                cursor.adapters.register_dumper(bytes, BytesBinaryDumper)
                copy.set_types([_BYTEA_OID if oid == _UUID_OID else oid for oid in oids])
                write = copy.write_row
                if make is None:
                    for row in zip(*values, strict=True):
                        write(row)
                    return made
                rest, ints = values[1:], []
                for start in range(0, count, _COPY_STEP):
                    step_ints = make.batch_ints(min(_COPY_STEP, count - start))
                    ints += step_ints
                    key_bytes = uuid_int_bytes(step_ints)
                    for row in zip(key_bytes, *(v[start : start + _COPY_STEP] for v in rest), strict=True):
                        write(row)
                made = LazyUUIDs(ints)
        except dbapi_error as exc:  # as SQLAlchemy reports a driver's error: IntegrityError, DataError...
            raise sa.exc.DBAPIError.instance(sql, None, exc, dbapi_error) from exc
    return made


def _executemany(
    connection: Connection, table: sa.Table, columns: list[sa.Column[Any]], values: list[list[Any]]
) -> None:
    """The driver's ``executemany`` of the compiled ``INSERT`` with the values :func:`_converted` already
    put through the column types (``connection.execute`` would convert them a second time: a tenth of a
    MariaDB load); PyMySQL and mysqlclient send it as multi-row ``INSERT`` statements."""
    # compiled for executemany: as a single INSERT it would read back a server-made key with
    # RETURNING, which PyMySQL and mysqlclient cannot batch (they send such a statement row by row)
    compiled = sa.insert(table).compile(
        dialect=connection.dialect, column_keys=[c.key for c in columns], for_executemany=True
    )
    by_key = {c.key: v for c, v in zip(columns, values, strict=True)}
    params: list[Any]
    if compiled.positional:
        params = list(zip(*(by_key[name] for name in compiled.positiontup or ()), strict=True))
    else:
        names = [name for name, bind in compiled.binds.items() if bind.key in by_key]
        columns_in_order = (by_key[compiled.binds[n].key] for n in names)
        params = [dict(zip(names, row, strict=True)) for row in zip(*columns_in_order, strict=True)]
    for start in range(0, len(params), CHUNK):
        connection.exec_driver_sql(compiled.string, params[start : start + CHUNK])


#: The longest multi-row ``INSERT`` :func:`_multirow_insert` sends, in bytes (mysqlclient's own
#: ``executemany`` splits at about 1 MB too; the server's ``max_allowed_packet`` is 16 MB by default).
_STATEMENT_BYTES = 1_000_000


def _writes_rows_itself(dialect: Any) -> bool:
    """Whether :func:`_multirow_insert` writes this dialect's rows (mysqlclient on MariaDB/MySQL)."""
    return dialect.name in ("mysql", "mariadb") and dialect.driver == "mysqldb"


def _multirow_insert(
    connection: Connection, table: sa.Table, columns: list[sa.Column[Any]], values: list[list[Any]]
) -> bool:
    """MariaDB/MySQL through mysqlclient: the rows as multi-row ``INSERT`` statements written here,
    each value as the driver's ``executemany`` writes it, but a column at a time in C.

    Why: the driver writes each value of each row through a Python call (``Connection.literal``),
    so every column a row carries costs about a microsecond per row, and a
    load whose keys the client made (a ticket block, seqid's UUIDs) carried one such column more than
    one whose keys the database made (``AUTO_INCREMENT``).  Here each row is one ``%`` of a format
    made for the columns: a column of ints written by ``%d``, a column of bytes (a ``BINARY(16)`` or
    MariaDB ``uuid`` key) as ``X'...'`` hex literals, a column of text through the driver's own
    escaping (C, over the column); any other
    column (dates, decimals, ``None`` among the values) goes through the driver's ``literal``, value
    by value, as ``executemany`` would.  ``False`` where this does not apply (PyMySQL, whose
    escaping is internal to it; an asyncio driver): the caller runs ``executemany``.
    """
    dialect = connection.dialect
    if not _writes_rows_itself(dialect):
        return False
    raw: Any = connection.connection.dbapi_connection
    writer = _MysqlclientWriter(raw)
    formats, written = [], []
    for column_values in values:
        kinds = set(map(type, column_values))
        if kinds == {int}:  # exactly int: a bool or an IntEnum is the driver's to write
            formats.append(b"%d")
            written.append(column_values)
        elif kinds == {bytes}:
            formats.append(b"X'%b'")
            written.append(list(map(hexlify, column_values)))
        else:
            formats.append(b"%b")
            written.append(writer.text(column_values) if kinds == {str} else list(map(raw.literal, column_values)))
    rows = list(map(b",".join(formats).__mod__, zip(*written, strict=True)))
    preparer = dialect.identifier_preparer
    head = f"INSERT INTO {preparer.format_table(table)} ({', '.join(preparer.quote(c.name) for c in columns)}) VALUES "
    sizes = list(accumulate(map(len, rows)))
    dbapi_error = dialect.loaded_dbapi.Error
    cursor = raw.cursor()
    try:
        start = 0
        while start < len(rows):  # statements of about _STATEMENT_BYTES, one row at least
            end = max(start + 1, bisect_right(sizes, (sizes[start - 1] if start else 0) + _STATEMENT_BYTES, start))
            try:
                cursor.execute(writer.statement(head, rows[start:end]))
            except dbapi_error as exc:
                raise sa.exc.DBAPIError.instance(f"{head}(...) [{end - start} rows]", None, exc, dbapi_error) from exc
            start = end
    finally:
        cursor.close()
    return True


class _MysqlclientWriter:
    """SQL literals as mysqlclient writes them: bytes, text through ``string_literal`` (C)."""

    def __init__(self, raw: Any) -> None:
        self.encoding: str = raw.encoding
        self.escape = raw.string_literal  # bytes in, the quoted and escaped literal out

    def text(self, values: list[str]) -> list[bytes]:
        return list(map(self.escape, map(methodcaller("encode", self.encoding), values)))

    def statement(self, head: str, rows: list[bytes]) -> bytes:
        return head.encode(self.encoding) + b"(" + b"),(".join(rows) + b")"
