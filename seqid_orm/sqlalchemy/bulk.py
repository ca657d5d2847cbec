"""``bulk_insert``: many rows with seqid keys through each engine's fastest path, in one transaction.

A key made per row costs the client as much as the rest of the row (a Python call, a ``uuid.UUID``,
the driver's escaping); for a bulk load the keys are made in one :meth:`~seqid_orm.CombGenerator.batch`
call, in the layout of the connection's column, and the rows go where the server takes them fastest:

* PostgreSQL with psycopg 3: ``COPY ... FROM STDIN (FORMAT BINARY)``, the values in the server's
  binary form (no SQL text, no per-row statement);
* MariaDB/MySQL: ``executemany``, which PyMySQL and mysqlclient send as multi-row ``INSERT``
  statements;
* SQLite and anything else: ``executemany``.

Every row is checked and converted (through the columns' own types, as an ``INSERT`` would) before
anything is sent; the rows go in one transaction (a savepoint when the connection is already in one),
so a load that fails leaves no row of it behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import ArgumentTypeError, InvalidArgumentError
from .types import SeqUUID

__all__ = ["bulk_insert"]

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
    if len(keys) == 1 and isinstance(keys[0].type, SeqUUID):
        return keys[0]
    return None


def _checked_rows(table: sa.Table, rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[Mapping[str, Any]]]:
    """The column names the rows give (the same for every row) and the rows, refused before anything is sent."""
    listed = list(rows)
    for number, row in enumerate(listed):
        if not isinstance(row, Mapping):
            raise ArgumentTypeError(f"row {number} is a {type(row).__name__}, not a mapping of column names to values")
    if not listed:
        return [], []
    names = list(listed[0])
    unknown = [n for n in names if not isinstance(n, str) or n not in table.c]
    if unknown:
        raise InvalidArgumentError(f"{table.name} has no column {', '.join(map(repr, unknown))}")
    expected = set(names)
    for number, row in enumerate(listed):
        if set(row) != expected:
            raise InvalidArgumentError(
                f"row {number} gives columns {sorted(row)}, not {sorted(expected)}: every row must give the same ones"
            )
    return names, listed


class _DefaultContext:
    """What a column default callable reads of SQLAlchemy's execution context (the dialect, the column)."""

    def __init__(self, dialect: Any, column: sa.Column[Any]) -> None:
        self.dialect, self.current_column, self.compiled_parameters = dialect, column, ()


def bulk_insert(
    connection: Connection, table: Any, rows: Iterable[Mapping[str, Any]], *, make_keys: bool = True
) -> list[Any]:
    """Insert ``rows`` (mappings of column names to values) into ``table``; the keys, in row order.

    ``table`` is a ``Table`` or a mapped class.  When the rows do not give its primary key and that key
    is a :class:`~seqid_orm.sqlalchemy.SeqUUID`, the keys are made in one batch in the layout of this
    connection's column (``make_keys=False`` leaves them to the column's server default, such as
    ``DatabaseSeqUUID``; the keys returned are then ``None``).  Other columns the rows leave out get
    their Python ``default``, as an ``INSERT`` gives them.  Values go through the columns' types, so a
    bad one raises the error an ``INSERT`` would, before any row is sent.  One transaction (a savepoint
    inside a transaction the caller began): a failure leaves none of these rows.  The caller commits
    (``engine.begin()``).
    """
    if not isinstance(connection, Connection):
        raise ArgumentTypeError(f"bulk_insert takes a SQLAlchemy Connection, got {type(connection).__name__}")
    table = _table_of(table)
    names, listed = _checked_rows(table, rows)
    if not listed:
        return []
    key = _key_column(table)
    keys: list[Any]
    if key is not None and key.name not in names and make_keys:
        key_type: SeqUUID = key.type  # type: ignore[assignment]
        keys = key_type.target(connection.dialect).generator.batch(len(listed))
        names = [key.name, *names]
        listed = [{key.name: k, **row} for k, row in zip(keys, listed, strict=True)]
    else:
        keys = [row.get(key.name) if key is not None else None for row in listed]
    defaulted = [c for c in table.columns if c.name not in names and c.default is not None]
    if key is not None and not make_keys:
        defaulted = [c for c in defaulted if c is not key]
    if defaulted:  # what an INSERT would give the columns the rows leave out
        names = [*names, *(c.name for c in defaulted)]
        listed = [{**row, **{c.name: _default(connection, c) for c in defaulted}} for row in listed]
        if key is not None and key in defaulted:
            keys = [row[key.name] for row in listed]
    columns = [table.c[n] for n in names]
    converted = _converted(connection, columns, listed)  # every value checked before anything is sent
    with connection.begin_nested() if connection.in_transaction() else connection.begin():
        if connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg":
            _copy(connection, table, columns, converted)
        else:
            _executemany(connection, table, columns, converted)
    return keys


def _default(connection: Connection, column: sa.Column[Any]) -> Any:
    default: Any = column.default
    if default.is_scalar:
        return default.arg
    if default.is_callable:
        return default.arg(_DefaultContext(connection.dialect, column))
    raise InvalidArgumentError(f"column {column.name!r} has a SQL default; bulk_insert needs its values given")


def _converted(
    connection: Connection, columns: list[sa.Column[Any]], rows: list[Mapping[str, Any]]
) -> list[tuple[Any, ...]]:
    """Each row's values as the driver receives them: through each column type's bind processor."""
    dialect = connection.dialect
    processors = [c.type._cached_bind_processor(dialect) for c in columns]
    names = [c.name for c in columns]
    out = []
    for row in rows:
        out.append(
            tuple(
                value if process is None or value is None else process(value)
                for process, value in ((p, row[n]) for p, n in zip(processors, names, strict=True))
            )
        )
    return out


def _copy(connection: Connection, table: sa.Table, columns: list[sa.Column[Any]], rows: list[tuple[Any, ...]]) -> None:
    """PostgreSQL: binary ``COPY`` through psycopg, the column types told by the server's catalog."""
    raw: Any = connection.connection.dbapi_connection
    quote = connection.dialect.identifier_preparer.quote
    target = connection.dialect.identifier_preparer.format_table(table)
    with raw.cursor() as cursor:
        cursor.execute(
            "SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0",
            (target,),
        )
        oids = dict(cursor.fetchall())
        sql = f"COPY {target} ({', '.join(quote(c.name) for c in columns)}) FROM STDIN (FORMAT BINARY)"
        dbapi_error = connection.dialect.loaded_dbapi.Error
        try:
            with cursor.copy(sql) as copy:
                copy.set_types([oids[c.name] for c in columns])
                for row in rows:
                    copy.write_row(row)
        except dbapi_error as exc:  # as SQLAlchemy reports a driver's error: IntegrityError, DataError...
            raise sa.exc.DBAPIError.instance(sql, None, exc, dbapi_error) from exc


def _executemany(
    connection: Connection, table: sa.Table, columns: list[sa.Column[Any]], rows: list[tuple[Any, ...]]
) -> None:
    """The driver's ``executemany`` of the compiled ``INSERT`` with the values :func:`_converted` already
    put through the column types (``connection.execute`` would convert them a second time: a tenth of a
    MariaDB load); PyMySQL and mysqlclient send it as multi-row ``INSERT`` statements."""
    compiled = sa.insert(table).compile(dialect=connection.dialect, column_keys=[c.key for c in columns])
    order = {c.key: i for i, c in enumerate(columns)}
    params: list[Any]
    if compiled.positional:
        positions = [order[name] for name in compiled.positiontup or ()]
        params = [tuple(row[i] for i in positions) for row in rows]
    else:
        binds = {name: order[bind.key] for name, bind in compiled.binds.items() if bind.key in order}
        params = [{name: row[i] for name, i in binds.items()} for row in rows]
    for start in range(0, len(params), CHUNK):
        connection.exec_driver_sql(compiled.string, params[start : start + CHUNK])
