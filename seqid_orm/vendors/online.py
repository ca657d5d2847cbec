"""Adding a key column to a big table while the application keeps reading and writing it: the statements
of each step, per vendor, and the loop that runs them, resumable, with progress (h11's shape: the adapters
hand in the I/O, :class:`OnlineIO`).

What the tools users compare this with (pgroll, strong_migrations, django-pg-zero-downtime-migrations,
gh-ost, MariaDB's online DDL) all do, and what :func:`add_column` does, step by step:

1. **The column, without a rewrite**: ``ADD COLUMN`` nullable, no default (PostgreSQL 11+ and InnoDB's
   ``ALGORITHM=INSTANT`` change only the catalog).
2. **New rows get a key from now on**: the column's database default (:attr:`OnlineColumn.default_sql`,
   the layout's database-made key), set after the column exists, so it is the catalog's alone (a volatile
   default in ``ADD COLUMN`` rewrites a PostgreSQL table); the application's old code, which does not know
   the column, inserts and gets a key.
3. **Existing rows in batches** (:func:`backfill`), each its own short transaction, walking the table by
   its primary key with bounded memory, each row written only while its key is still ``NULL``, the batch's
   last primary key recorded in the same transaction (``seqid_fill_<table>_<column>``), so a run killed at any point and
   run again goes on after it, writing no row twice and missing none.
4. **The unique index without blocking writes**: PostgreSQL's ``CREATE UNIQUE INDEX CONCURRENTLY`` (an
   invalid one a killed run left is dropped first), then ``ADD CONSTRAINT ... UNIQUE USING INDEX``;
   InnoDB's ``ADD UNIQUE INDEX ..., ALGORITHM=INPLACE, LOCK=NONE``.
5. **NOT NULL without a long lock**: PostgreSQL's ``CHECK (c IS NOT NULL) NOT VALID``, ``VALIDATE``
   (reads and writes go on), then ``SET NOT NULL``, which uses the check instead of a scan (12+), and the
   check dropped; InnoDB's ``MODIFY ... NOT NULL, ALGORITHM=INPLACE, LOCK=NONE``.

Every DDL statement waits for its lock at most :data:`LOCK_TIMEOUT_MS` (PostgreSQL's ``lock_timeout``;
MariaDB's ``lock_wait_timeout``, whole seconds) and is tried again after a pause, up to
:data:`DDL_ATTEMPTS`: a busy table delays the migration instead of queueing the application behind it.
PostgreSQL's concurrent index statements are the exception: their lock stops no reader or writer, and
they wait as long as the database's older transactions run (cut short, they leave an invalid index).
What each step locks, and for how long, is in docs/how-to/migrate.md.  SQLite is not changed online (one
writer at a time, and ``ALTER TABLE`` there copies the table): the adapters keep the offline form for it.

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids` and this folder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidArgumentError
from ..ids.comb import comb_at, comb_batch
from ..ids.layout import Layout
from ._base import Storage, is_lock_timeout
from .live import quote_identifier
from .postgresql import reads_every_row

__all__ = [
    "DDL_ATTEMPTS",
    "IN_TRANSACTION_UP_TO_ROWS",
    "LOCK_TIMEOUT_MS",
    "ONLINE_VENDORS",
    "PROGRESS_PREFIX",
    "OnlineColumn",
    "OnlineIO",
    "Progress",
    "add_column",
    "backfill",
    "drop_column",
    "estimate_rows",
    "forget",
    "rows_past",
    "table_rows",
]

log = logging.getLogger("seqid_orm")

#: The vendors whose tables change online; SQLite keeps the offline form.
ONLINE_VENDORS = ("postgresql", "mariadb", "mysql")
#: How long one DDL statement waits for its lock before it gives up and is tried again.
LOCK_TIMEOUT_MS = 500
#: How many times a DDL statement that timed out waiting for its lock is tried, pausing between.
DDL_ATTEMPTS = 60
#: Where a backfill records how far it got: a table of its own per column (this prefix, the table's and the
#: column's names), in the search path's schema, dropped when the column is done.  Not one table shared by
#: every backfill: the first to finish would drop it, or its last row, under another that had just begun.
PROGRESS_PREFIX = "seqid_fill_"
#: Up to this many rows (the planner's estimate) a column may be added and filled inside the migration's
#: own transaction (a Django migration that stays atomic, an Alembic one in a transaction begun outside
#: it): a few seconds at most.  A bigger table needs the batches to commit.
IN_TRANSACTION_UP_TO_ROWS = 10_000


class OnlineIO(Protocol):
    """The adapter's I/O, on a connection that commits each statement by itself (Alembic's
    ``autocommit_block``, a Django migration with ``atomic = False``).  Statements take ``:name``
    parameters (``\\:`` is a colon) and write no ``::``."""

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]: ...

    def run(self, sql: str, params: dict[str, object]) -> int: ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...


@dataclass(frozen=True)
class OnlineColumn:
    """The column to add and fill, as the statements need it."""

    vendor: str
    table: str
    column: str
    keys: tuple[str, ...]
    """The table's primary key, by which the backfill walks it."""
    column_type: str
    """The new column's type as DDL writes it (``uuid``, ``BINARY(16)``...)."""
    default_sql: str
    """The database default that makes the key of every new row (the layout's database-made key)."""
    storage: Storage
    layout: Layout
    stamp: str | None = None
    """A timestamp column: each old row's key is of its time (:func:`~seqid_orm.comb_at`), so the index
    keeps the rows in the order they were made."""
    key_casts: tuple[str, ...] = ()
    """Each key column's type, to read a recorded key back (``bigint``, ``uuid``...)."""
    unique: bool = True
    """Whether the column ends unique (a key: the index that makes a key's look-up an index read)."""
    nullable: bool = False
    """Whether the column may stay ``NULL`` (a Django field with ``null=True``); else it ends ``NOT NULL``."""

    def __post_init__(self) -> None:
        if self.vendor not in ONLINE_VENDORS:
            raise InvalidArgumentError(f"online changes run on {', '.join(ONLINE_VENDORS)}; not {self.vendor}")
        if not self.keys:
            raise InvalidArgumentError(f"table {self.table!r} has no primary key to walk its rows by")

    def q(self, name: str) -> str:
        return quote_identifier(self.vendor, name)

    @property
    def pg(self) -> bool:
        return self.vendor == "postgresql"

    @property
    def index_name(self) -> str:
        return f"uq_{self.table}_{self.column}"

    @property
    def progress_table(self) -> str:
        """The table that records how far this column's backfill got (:data:`PROGRESS_PREFIX`); a name
        past 60 characters ends in a digest of the table's and column's names instead (MariaDB refuses a
        name over 64, PostgreSQL cuts it at 63)."""
        name = f"{PROGRESS_PREFIX}{self.table}_{self.column}"
        if len(name) <= 60:
            return name
        digest = hashlib.sha256(f"{self.table}.{self.column}".encode()).hexdigest()[:12]
        return f"{PROGRESS_PREFIX}{self.table[:36]}_{digest}"

    @property
    def check_name(self) -> str:
        return f"ck_{self.table}_{self.column}_not_null"

    def value(self, u: uuid.UUID) -> object:
        """``u`` as a parameter of this column's storage."""
        if self.storage is Storage.BINARY:
            return u.bytes
        if self.storage is Storage.HEX:
            return u.hex
        if self.storage is Storage.TEXT or not self.pg:  # MariaDB's uuid type reads its text
            return str(u)
        return u


@dataclass
class Progress:
    """How far a backfill is: what it says on the console, and what a test reads."""

    done: int = 0
    total: int | None = None
    started: float = field(default_factory=time.monotonic)
    said_at: float = 0.0
    resumed_at: int = 0

    def line(self, label: str) -> str:
        spent = max(time.monotonic() - self.started, 1e-9)
        rate = (self.done - self.resumed_at) / spent
        if self.total:
            share = f" of ~{self.total:,} ({min(self.done / self.total, 1):.0%})"
            left = max(self.total - self.done, 0) / rate if rate else None
            eta = "" if left is None else f", about {_dt.timedelta(seconds=round(left))} left"
        else:
            share, eta = "", ""
        return f"seqid: {label}: {self.done:,} rows{share}, {rate:,.0f} rows/s{eta}"


def _say_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- the DDL steps -------------------------------------------------------------------------------------


def _ddl(
    io: OnlineIO,
    col: OnlineColumn,
    statement: str,
    sleep: Callable[[float], None] = time.sleep,
    *,
    bounded: bool = True,
) -> None:
    """``statement`` with a bounded wait for its lock, tried again after a growing pause while the lock
    is taken (:data:`DDL_ATTEMPTS` times).

    ``bounded=False`` for PostgreSQL's concurrent index statements: their lock (``SHARE UPDATE
    EXCLUSIVE``) stops no reader or writer, so nothing queues behind their wait, and they wait for every
    transaction of the database with an older snapshot to end ("Building Indexes Concurrently", the
    ``CREATE INDEX`` page of PostgreSQL's docs).  A lock timeout there does not spare the application
    anything; it leaves an invalid index behind, whose name the next attempt then finds taken."""
    pause = 0.2
    for attempt in range(1, DDL_ATTEMPTS + 1):
        try:
            if col.pg:
                io.run(f"SET lock_timeout = {LOCK_TIMEOUT_MS if bounded else 0}", {})
            else:
                io.run(f"SET SESSION lock_wait_timeout = {max(1, round(LOCK_TIMEOUT_MS / 1000))}", {})
            io.run(statement, {})
            return
        except Exception as exc:  # the driver's error: a lock timeout is tried again, anything else is the caller's
            if not is_lock_timeout(exc) or attempt == DDL_ATTEMPTS:
                raise
            log.info("seqid: %s waited past its lock timeout (attempt %d); trying again", statement[:80], attempt)
            sleep(pause)
            pause = min(pause * 2, 5.0)
        finally:
            if col.pg:
                io.run("SET lock_timeout = 0", {})


def _index_state(io: OnlineIO, col: OnlineColumn) -> str | None:
    """``"valid"``, ``"invalid"`` (a ``CREATE INDEX CONCURRENTLY`` that did not finish) or ``None``."""
    if col.pg:
        rows = io.fetch(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(:t) AND c.relname = :i",
            {"t": col.q(col.table), "i": col.index_name},
        )
    else:
        rows = io.fetch(
            "SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t "
            "AND INDEX_NAME = :i",
            {"t": col.table, "i": col.index_name},
        )
    if not rows:
        return None
    return "valid" if rows[0][0] else "invalid"


def _is_unique_constraint(io: OnlineIO, col: OnlineColumn) -> bool:
    rows = io.fetch(
        "SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(:t) AND conname = :i",
        {"t": col.q(col.table), "i": col.index_name},
    )
    return bool(rows)


def _column_state(io: OnlineIO, col: OnlineColumn) -> bool | None:
    """``None`` while the column does not exist, else whether it is ``NOT NULL``: one catalog row."""
    if col.pg:
        rows = io.fetch(
            "SELECT attnotnull FROM pg_attribute WHERE attrelid = to_regclass(:t) AND attname = :c "
            "AND NOT attisdropped",
            {"t": col.q(col.table), "c": col.column},
        )
    else:
        rows = io.fetch(
            "SELECT IS_NULLABLE = 'NO' FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = :t AND COLUMN_NAME = :c",
            {"t": col.table, "c": col.column},
        )
    return bool(rows[0][0]) if rows else None


def _has_column(io: OnlineIO, col: OnlineColumn) -> bool:
    return _column_state(io, col) is not None


def _not_null(io: OnlineIO, col: OnlineColumn) -> bool:
    return bool(_column_state(io, col))


def add_column(
    io: OnlineIO,
    col: OnlineColumn,
    *,
    batch_size: int = 1000,
    keep_default: bool = True,
    say: Callable[[str], None] = _say_to_stderr,
    sleep: Callable[[float], None] = time.sleep,
) -> Progress:
    """Add ``col`` online, fill it for the existing rows, make it unique and ``NOT NULL`` (the module
    docstring's five steps; as :attr:`OnlineColumn.unique` and :attr:`OnlineColumn.nullable` say).
    Each step looks first whether an earlier run did it, so a run killed
    anywhere and run again finishes the work.  ``keep_default=False`` drops the database default at the
    end (where every writer sets the column itself).  Returns the backfill's :class:`Progress`."""
    table, column = col.q(col.table), col.q(col.column)
    if not _has_column(io, col):
        instant = "" if col.pg else ", ALGORITHM=INSTANT"
        _ddl(io, col, f"ALTER TABLE {table} ADD COLUMN {column} {col.column_type} NULL{instant}", sleep)
    instant = "" if col.pg else ", ALGORITHM=INSTANT"
    default = col.default_sql if col.pg else f"({col.default_sql})"
    _ddl(io, col, f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {default}{instant}", sleep)
    progress = backfill(io, col, batch_size=batch_size, say=say)
    state = _index_state(io, col) if col.unique else "not wanted"
    index = col.q(col.index_name)
    if col.pg:
        if state == "invalid":  # a killed run's CREATE INDEX CONCURRENTLY
            _ddl(io, col, f"DROP INDEX CONCURRENTLY IF EXISTS {index}", sleep, bounded=False)
            state = None
        if state is None:
            _ddl(io, col, f"CREATE UNIQUE INDEX CONCURRENTLY {index} ON {table} ({column})", sleep, bounded=False)
        if col.unique and not _is_unique_constraint(io, col):
            _ddl(io, col, f"ALTER TABLE {table} ADD CONSTRAINT {index} UNIQUE USING INDEX {index}", sleep)
        if not col.nullable and not _not_null(io, col):
            check = col.q(col.check_name)
            _ddl(io, col, f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {check}", sleep)
            _ddl(io, col, f"ALTER TABLE {table} ADD CONSTRAINT {check} CHECK ({column} IS NOT NULL) NOT VALID", sleep)
            _ddl(io, col, f"ALTER TABLE {table} VALIDATE CONSTRAINT {check}", sleep)
            _ddl(io, col, f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL", sleep)
            _ddl(io, col, f"ALTER TABLE {table} DROP CONSTRAINT {check}", sleep)
        if not keep_default:
            _ddl(io, col, f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT", sleep)
    else:
        if state is None:
            _ddl(
                io, col, f"ALTER TABLE {table} ADD UNIQUE INDEX {index} ({column}), ALGORITHM=INPLACE, LOCK=NONE", sleep
            )
        kept = f" DEFAULT {default}" if keep_default else ""
        if not col.nullable and (not _not_null(io, col) or not keep_default):
            _ddl(
                io,
                col,
                f"ALTER TABLE {table} MODIFY {column} {col.column_type} NOT NULL{kept}, ALGORITHM=INPLACE, LOCK=NONE",
                sleep,
            )
        elif not keep_default:
            _ddl(io, col, f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT, ALGORITHM=INSTANT", sleep)
    forget(io, col)
    return progress


def drop_column(io: OnlineIO, col: OnlineColumn, sleep: Callable[[float], None] = time.sleep) -> None:
    """Undo :func:`add_column`: its unique constraint, the column, and any progress it recorded."""
    table, column = col.q(col.table), col.q(col.column)
    if col.pg:
        _ddl(io, col, f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {col.q(col.index_name)}", sleep)
        _ddl(io, col, f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}", sleep)
    else:
        if _index_state(io, col) is not None:
            _ddl(
                io, col, f"ALTER TABLE {table} DROP INDEX {col.q(col.index_name)}, ALGORITHM=INPLACE, LOCK=NONE", sleep
            )
        if _has_column(io, col):
            _ddl(io, col, f"ALTER TABLE {table} DROP COLUMN {column}, ALGORITHM=INPLACE, LOCK=NONE", sleep)
    forget(io, col)


# --- the backfill ---------------------------------------------------------------------------------------


def _progress_table(io: OnlineIO, col: OnlineColumn) -> str:
    name = col.q(col.progress_table)
    text = "text" if col.pg else "TEXT"
    io.run(
        f"CREATE TABLE IF NOT EXISTS {name} (table_name varchar(255) NOT NULL, column_name varchar(255) NOT NULL, "
        f"last_key {text}, done bigint NOT NULL, PRIMARY KEY (table_name, column_name))",
        {},
    )
    return name


def forget(io: OnlineIO, col: OnlineColumn) -> None:
    """Drop the column's progress table (``IF EXISTS``: no failed statement to abort a PostgreSQL
    transaction the caller is in).  No other backfill's progress is in it."""
    io.run(f"DROP TABLE IF EXISTS {col.q(col.progress_table)}", {})


def _encode_key(values: Sequence[object]) -> str:
    """A primary key, as the progress row keeps it (JSON; bytes as hex)."""
    return json.dumps(
        [{"hex": bytes(v).hex()} if isinstance(v, (bytes, bytearray, memoryview)) else str(v) for v in values]
    )


def _decode_key(text: str) -> list[object]:
    return [bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for v in json.loads(text)]


def _key_param(col: OnlineColumn, i: int, value: object) -> str:
    """The ``i``-th key column's recorded value as SQL of its type (PostgreSQL compares text with no other
    type; MariaDB converts)."""
    if isinstance(value, bytes):
        return f"decode(:k{i}, 'hex')" if col.pg else f"UNHEX(:k{i})"
    cast = col.key_casts[i] if col.pg and i < len(col.key_casts) else None
    return f"CAST(:k{i} AS {cast})" if cast else f":k{i}"


def _rows(io: OnlineIO, col: OnlineColumn, after: list[object] | None, limit: int) -> list[tuple[Any, ...]]:
    keys = ", ".join(col.q(k) for k in col.keys)
    stamp = f", {col.q(col.stamp)}" if col.stamp else ""
    where, params = "", {}
    if after is not None:
        bound = ", ".join(_key_param(col, i, v) for i, v in enumerate(after))
        where = f"WHERE ({keys}) > ({bound})"
        params = {f"k{i}": (v.hex() if isinstance(v, bytes) else v) for i, v in enumerate(after)}
    return io.fetch(f"SELECT {keys}{stamp} FROM {col.q(col.table)} {where} ORDER BY {keys} LIMIT {limit}", params)


def _update(col: OnlineColumn, keys: list[tuple[Any, ...]], values: list[object]) -> tuple[str, dict[str, object]]:
    """One statement writing each row's key (``keys[r]`` gets ``values[r]``), each only where the row's key is
    still ``NULL``.  The batch goes as one parameter or a few, read as a table by the server (PostgreSQL's
    ``unnest`` of arrays, ``JSON_TABLE`` on MariaDB and MySQL), in a statement whose text is the same every
    batch: a ``VALUES`` or ``UNION ALL`` list of the rows is thousands of parameters to bind, parse and plan
    each time, and the backfill took 2.2x (MariaDB) to 2.7x (PostgreSQL) as long.  That list stays for
    keys of types a cast or a JSON document cannot carry."""
    table, column = col.q(col.table), col.q(col.column)
    typed = len(col.key_casts) == len(col.keys)
    if col.pg:
        source, params = _pg_arrays(col, keys, values) if typed else _pg_values(col, keys, values)
        where = " AND ".join(f"{table}.{col.q(k)} = s.k{i}" for i, k in enumerate(col.keys))
        return f"UPDATE {table} SET {column} = s.v FROM {source} WHERE {where} AND {table}.{column} IS NULL", params
    if typed and keys and all(isinstance(v, (int, str, bytes)) for v in keys[0]):
        source, params, hexed = _json_table(col, keys, values)
    else:
        source, params, hexed = _union(col, keys, values), _rowwise(keys, values), set()
    match = " AND ".join(
        f"t.{col.q(k)} = " + (f"UNHEX(s.k{i})" if f"k{i}" in hexed else f"s.k{i}") for i, k in enumerate(col.keys)
    )
    value = "UNHEX(s.v)" if "v" in hexed else "s.v"
    return f"UPDATE {table} t JOIN {source} ON {match} SET t.{column} = {value} WHERE t.{column} IS NULL", params


def _rowwise(keys: list[tuple[Any, ...]], values: list[object]) -> dict[str, object]:
    params = {f"r{r}k{i}": v for r, row in enumerate(keys) for i, v in enumerate(row)}
    params.update({f"r{r}v": v for r, v in enumerate(values)})
    return params


def _pg_arrays(col: OnlineColumn, keys: list[tuple[Any, ...]], values: list[object]) -> tuple[str, dict[str, object]]:
    arrays = [f"CAST(:k{i} AS {cast}[])" for i, cast in enumerate(col.key_casts)]
    arrays.append(f"CAST(:v AS {col.column_type}[])")
    params: dict[str, object] = {f"k{i}": [row[i] for row in keys] for i in range(len(col.keys))}
    params["v"] = values
    names = ", ".join([*(f"k{i}" for i in range(len(col.keys))), "v"])
    return f"unnest({', '.join(arrays)}) AS s({names})", params


def _pg_values(col: OnlineColumn, keys: list[tuple[Any, ...]], values: list[object]) -> tuple[str, dict[str, object]]:
    n_keys = len(col.keys)
    rows = ", ".join(
        "(" + ", ".join([*(f":r{r}k{i}" for i in range(n_keys)), f"CAST(:r{r}v AS {col.column_type})"]) + ")"
        for r in range(len(keys))
    )
    names = ", ".join([*(f"k{i}" for i in range(n_keys)), "v"])
    return f"(VALUES {rows}) AS s({names})", _rowwise(keys, values)


def _json_table(
    col: OnlineColumn, keys: list[tuple[Any, ...]], values: list[object]
) -> tuple[str, dict[str, object], set[str]]:
    """The batch as one JSON document of ``[key..., value]`` rows (bytes as hex, ``UNHEX``-ed back)."""
    n_keys = len(col.keys)
    hexed = {f"k{i}" for i, v in enumerate(keys[0]) if isinstance(v, bytes)} if keys else set()
    hexed |= {"v"} if values and isinstance(values[0], bytes) else set()
    fields = [f"k{i} {'TEXT' if f'k{i}' in hexed else cast} PATH '$[{i}]'" for i, cast in enumerate(col.key_casts)]
    fields.append(f"v TEXT PATH '$[{n_keys}]'")
    document = json.dumps(
        [
            [v.hex() if isinstance(v, bytes) else v for v in (*row, value)]
            for row, value in zip(keys, values, strict=True)
        ]
    )
    return f"JSON_TABLE(:rows, '$[*]' COLUMNS ({', '.join(fields)})) s", {"rows": document}, hexed


def _union(col: OnlineColumn, keys: list[tuple[Any, ...]], values: list[object]) -> str:
    n_keys = len(col.keys)
    selects = " UNION ALL ".join(
        "SELECT " + ", ".join([*(f":r{r}k{i} AS k{i}" for i in range(n_keys)), f":r{r}v AS v"])
        for r in range(len(keys))
    )
    return f"({selects}) s"


def backfill(
    io: OnlineIO,
    col: OnlineColumn,
    *,
    batch_size: int = 1000,
    say: Callable[[str], None] = _say_to_stderr,
    every: float = 2.0,
) -> Progress:
    """Fill ``col`` for the rows that have no key yet, in batches of ``batch_size``, each its own short
    transaction that also records the batch's last primary key; run again after a kill, it goes on from
    there.  Says how far it is on ``say`` every ``every`` seconds and at the end.  The progress row stays
    until :func:`forget` (the end of :func:`add_column`), so a run killed after the batches goes on with
    the next step at once."""
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    name = _progress_table(io, col)
    found = io.fetch(
        f"SELECT last_key, done FROM {name} WHERE table_name = :t AND column_name = :c",
        {"t": col.table, "c": col.column},
    )
    if not found:
        io.run(
            f"INSERT INTO {name} (table_name, column_name, last_key, done) VALUES (:t, :c, NULL, 0)",
            {"t": col.table, "c": col.column},
        )
    after = _decode_key(str(found[0][0])) if found and found[0][0] is not None else None
    progress = Progress(done=int(found[0][1]) if found else 0, total=estimate_rows(io, col))
    progress.resumed_at = progress.done
    if found:
        say(f"seqid: {col.table}.{col.column}: resuming after {progress.done:,} rows")
    n_keys = len(col.keys)
    for chunk in _batches(io, col, after, batch_size):
        fresh = iter(comb_batch(len(chunk), col.layout))
        values: list[object] = []
        for row in chunk:
            when = row[n_keys] if col.stamp else None
            if isinstance(when, _dt.datetime):
                key = comb_at(when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc), col.layout)
            else:  # no timestamp (or NULL): a new id, after the rows that have one
                key = next(fresh)
            values.append(col.value(key))
        last = _encode_key(chunk[-1][:n_keys])
        with io.transaction():
            changed = io.run(*_update(col, [row[:n_keys] for row in chunk], values))
            io.run(
                f"UPDATE {name} SET last_key = :last, done = done + :n WHERE table_name = :t AND column_name = :c",
                {"last": last, "n": changed, "t": col.table, "c": col.column},
            )
        progress.done += changed
        if time.monotonic() - progress.said_at >= every:
            say(progress.line(f"{col.table}.{col.column}"))
            progress.said_at = time.monotonic()
    say(progress.line(f"{col.table}.{col.column}") + " (done)")
    return progress


def _batches(io: OnlineIO, col: OnlineColumn, after: list[object] | None, size: int) -> Iterator[list[tuple[Any, ...]]]:
    while True:
        chunk = _rows(io, col, after, size)
        if not chunk:
            return
        yield chunk
        after = list(chunk[-1][: len(col.keys)])
        after = [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in after]


def estimate_rows(io: OnlineIO, col: OnlineColumn) -> int | None:
    """The planner's row count of ``col``'s table (see :func:`table_rows`)."""
    return table_rows(io.fetch, col.vendor, col.table)


def table_rows(fetch: Callable[[str, dict[str, object]], list[tuple[Any, ...]]], vendor: str, table: str) -> int | None:
    """The planner's row count of ``table`` (PostgreSQL's ``reltuples``, InnoDB's ``TABLE_ROWS``; ``None``
    where it has none yet, or on another vendor): a bound, never a count that would scan the table."""
    if vendor == "postgresql":
        rows = fetch(
            "SELECT CAST(reltuples AS bigint) FROM pg_class WHERE oid = to_regclass(:t)",
            {"t": quote_identifier(vendor, table)},
        )
    elif vendor in ("mariadb", "mysql"):
        rows = fetch(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t",
            {"t": table},
        )
    else:
        return None
    value = rows[0][0] if rows else None
    return int(value) if value is not None and int(value) > 0 else None


def rows_past(
    fetch: Callable[[str, dict[str, object]], list[tuple[Any, ...]]], vendor: str, table: str, limit: int
) -> int | None:
    """``table``'s rows where a refusal turns on ``limit``: the planner's estimate (:func:`table_rows`), and where
    that says more than ``limit``, the rows themselves, counted up to ``limit + 1`` (more than ``limit``
    of them: the estimate again, for a message to say how many).

    An estimate is a sample: InnoDB's ``TABLE_ROWS`` put a table of exactly 100,000 rows at 100,001 (CI), and
    a refusal should be true of the table it names.  The count reads at most ``limit + 1`` entries of an
    index and blocks no writer (a plain ``SELECT``: PostgreSQL's ACCESS SHARE, InnoDB's consistent read).
    A role that may not read the table keeps the estimate; so does one from which row-level security hides
    rows (PostgreSQL), which would count fewer rows than the rewrite touches.
    """
    estimate = table_rows(fetch, vendor, table)
    if estimate is None or estimate <= limit:
        return estimate
    quoted = quote_identifier(vendor, table)
    if vendor == "postgresql":
        [(readable,)] = fetch(reads_every_row("to_regclass(:t)"), {"t": quoted})
        if not readable:
            return estimate
    count = f"SELECT COUNT(*) FROM (SELECT 1 FROM {quoted} LIMIT {int(limit) + 1}) AS seqid_rows"
    try:
        [(rows,)] = fetch(count, {})
    except Exception:  # MariaDB: no SELECT on it (on PostgreSQL no statement fails: checked above)
        # MariaDB's failed statement leaves its transaction as it was; no privilege function to ask first
        # (roles, database- and column-level grants: https://mariadb.com/kb/en/grant/).
        return estimate
    return int(rows) if int(rows) <= limit else estimate  # past the line: the estimate says how far
