"""Adding a key column to a big table while the application keeps reading and writing it: the order of
the steps, the checks made before the first change, and the loop that runs them, resumable, with
progress (h11's shape: the adapters hand in the I/O, :class:`OnlineIO`; every statement is the vendor's,
:class:`~seqid_orm.vendors.OnlineRules`, and nothing here names a vendor).

What the tools users compare this with (pgroll, strong_migrations, django-pg-zero-downtime-migrations,
gh-ost, MariaDB's online DDL) all do, and what :func:`add_column` does, step by step:

0. **Decide before changing** (:func:`check`): every check that can refuse runs before the first
   change (a unique key on a partitioned table, triggers that cannot be held back, a role's time-out
   that would cut the index build short on a session that is not the operation's own), and the
   progress table is created first, so a role that may not create it changes nothing.
1. **The column, without a rewrite**: ``ADD COLUMN`` nullable, no default (PostgreSQL 11+ and InnoDB's
   ``ALGORITHM=INSTANT`` change only the catalog).
2. **New rows get a key from now on**: the column's database default (:attr:`OnlineColumn.default_sql`,
   the layout's database-made key), set after the column exists, so it is the catalog's alone (a volatile
   default in ``ADD COLUMN`` rewrites a PostgreSQL table); the application's old code, which does not know
   the column, inserts and gets a key.
3. **Existing rows in batches** (:func:`backfill`), each its own short transaction, walking the table by
   its primary key with bounded memory, each row written only while its key is still ``NULL``, the batch's
   last primary key recorded in the same transaction (``seqid_fill_<table>_<column>``), so a run killed at
   any point and run again goes on after it, writing no row twice and missing none.  Batches are sized by
   time (:data:`BATCH_SECONDS`), so the fill costs little more than the same ``UPDATE`` in one transaction
   while no row stays locked for long.
4. **The unique index without blocking writes**: PostgreSQL's ``CREATE UNIQUE INDEX CONCURRENTLY`` (an
   invalid one a killed run left is dropped first), then ``ADD CONSTRAINT ... UNIQUE USING INDEX``;
   InnoDB's ``ADD UNIQUE INDEX ..., ALGORITHM=INPLACE, LOCK=NONE``.
5. **NOT NULL without a long lock**: PostgreSQL's ``CHECK (c IS NOT NULL) NOT VALID``, ``VALIDATE``
   (reads and writes go on), then ``SET NOT NULL``, which uses the check instead of a scan (12+), and the
   check dropped; InnoDB's ``MODIFY ... NOT NULL, ALGORITHM=INPLACE, LOCK=NONE``.

Every DDL statement waits for its lock at most :data:`LOCK_TIMEOUT_MS` and is tried again after a pause,
up to :data:`DDL_ATTEMPTS`: a busy table delays the migration instead of queueing the application behind
it.  That bound, and a statement time-out lifted for the long statements, are the statement's own
(PostgreSQL's ``SET LOCAL`` in its transaction, MariaDB's ``SET STATEMENT ... FOR``): no session setting
is left on a connection a transaction pooler hands to the application next.  PostgreSQL's concurrent index
statements run outside any transaction and wait as long as the database's older transactions run (cut
short, they leave an invalid index); where the role or database gives them a time-out, it is lifted only
on a session that is the operation's own (:func:`owns_session`), else the operation is refused
before it changes anything.  What each step locks, and for how long, is in docs/how-to/migrate.md.
SQLite is not changed online (one writer at a time, and ``ALTER TABLE`` there copies the table): the
adapters keep the offline form for it.

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..calls.retry import Retry
from ..calls.steps import Steps, drive
from ..errors import InvalidArgumentError, MigrationRefusedError
from ..ids.comb import comb_at, comb_batch
from ..ids.layout import Layout
from ..vendors import (
    VENDORS,
    OnlineRules,
    Step,
    Storage,
    TableFacts,
    bounded_name,
    is_conflict,
    is_lock_timeout,
    rules_for,
)

__all__ = [
    "BATCH_SECONDS",
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
    "bounded_name",
    "check",
    "choose_form",
    "drop_column",
    "estimate_rows",
    "forget",
    "inspect",
    "key_of_time",
    "lifted_for",
    "owns_session",
    "refill",
    "rows_counted",
    "rows_past",
    "table_rows",
    "unique_name",
]

log = logging.getLogger("seqid_orm")

#: The vendors whose tables change online (those whose rules have :attr:`~seqid_orm.vendors.VendorRules.ONLINE`);
#: SQLite keeps the offline form.
ONLINE_VENDORS = tuple(v for v in VENDORS if rules_for(v).ONLINE is not None)
#: How long one DDL statement waits for its lock before it gives up and is tried again.
LOCK_TIMEOUT_MS = 500
#: How many times a DDL statement that timed out waiting for its lock is tried, pausing between.
DDL_ATTEMPTS = 60
#: The policy of a DDL statement that waited its lock out: tried again after 0.2 s, doubling, 5 s at most.
DDL_LOCK = Retry(DDL_ATTEMPTS, delay=0.2, backoff=2.0, max_delay=5.0, why="a table another session held")
#: The policy of a concurrent step the server chose in a deadlock: PostgreSQL's ``CREATE INDEX CONCURRENTLY``
#: waits for every older transaction, an automatic ANALYZE of the table among them, which may wait for the
#: build's own lock (found on PostgreSQL 18 beside a freshly filled table); its invalid index dropped, again.
CONCURRENT_DEADLOCK = Retry(3, delay=0.5, backoff=2.0, max_delay=2.0, why="a concurrent build chosen in a deadlock")
#: Where a backfill records how far it got: a table of its own per column (this prefix, the table's and the
#: column's names), in the search path's schema, dropped when the column is done.  Not one table shared by
#: every backfill: the first to finish would drop it, or its last row, under another that had just begun.
PROGRESS_PREFIX = "seqid_fill_"
#: Up to this many rows (counted) a column may be added and filled inside the migration's own transaction
#: (a Django migration that stays atomic, an Alembic one in a transaction begun outside it): a few seconds
#: at most.  A bigger table needs the batches to commit.
IN_TRANSACTION_UP_TO_ROWS = 10_000
#: How long one batch of the backfill should take: its rows stay locked until it commits, so an application
#: writing one of them waits at most about this long, and fewer, larger batches cost fewer round trips.
BATCH_SECONDS = 0.25
#: The first batch of a fill sized by time, and the largest (its keys are held in memory).
FIRST_BATCH, LARGEST_BATCH = 1000, 50_000


class OnlineIO(Protocol):
    """The adapter's I/O, on a connection that commits each statement by itself (Alembic's
    ``autocommit_block``, a Django migration with ``atomic = False``).  Statements take ``:name``
    parameters (``\\:`` is a colon) and write no ``::``."""

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]: ...

    def run(self, sql: str, params: dict[str, object]) -> int: ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def socket_ends(self) -> tuple[object, object] | None:
        """``(local, peer)`` of the connection's socket (``getsockname()``, ``getpeername()``), or ``None``
        where the driver gives no socket: what tells a session of the operation's own (:func:`owns_session`)."""


def unique_name(table: str, column: str) -> str:
    """The name of the unique constraint (and index) an online column gets."""
    return bounded_name("uq_", table, column)


def key_of_time(when: object, layout: Layout, fresh: Iterator[uuid.UUID]) -> uuid.UUID:
    """An existing row's key: of its time where it has one (:func:`~seqid_orm.comb_at`, naive read as
    UTC), so the index keeps the rows in the order they were made, else the next of ``fresh``, after them.
    The one rule of every backfill, online and offline, of both ORMs."""
    if isinstance(when, _dt.datetime):
        return comb_at(when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc), layout)
    return next(fresh)


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
    default_sql: str | None
    """The database default that makes the key of every new row (the layout's database-made key); ``None``
    for none (a re-keyed table's column, which a trigger keeps in step instead)."""
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
    key_sql: str | None = None
    """SQL of an old row's key made by the server from the row itself (a re-keyed row's integer,
    :mod:`.rekey`), which the backfill writes instead of a key of its time."""
    server_keys: bool = True
    """Whether the server makes the old rows' keys where it can (:meth:`~seqid_orm.vendors.OnlineRules.key_at`:
    a batch is then one ``UPDATE`` of a key range, and costs about what the same ``UPDATE`` does in one
    transaction); ``False``: Python makes them and each batch sends them, as where the server cannot."""

    def __post_init__(self) -> None:
        if self.vendor not in ONLINE_VENDORS:
            raise InvalidArgumentError(f"online changes run on {', '.join(ONLINE_VENDORS)}; not {self.vendor}")
        if not self.keys:
            raise InvalidArgumentError(f"table {self.table!r} has no primary key to walk its rows by")

    @property
    def rules(self) -> OnlineRules:
        rules = rules_for(self.vendor).ONLINE
        assert rules is not None  # checked when made
        return rules

    def q(self, name: str) -> str:
        return self.rules.quote(name)

    @property
    def index_name(self) -> str:
        return unique_name(self.table, self.column)

    @property
    def progress_table(self) -> str:
        """The table that records how far this column's backfill got (:data:`PROGRESS_PREFIX`)."""
        return bounded_name(PROGRESS_PREFIX, self.table, self.column)

    @property
    def check_name(self) -> str:
        return bounded_name("ck_", self.table, f"{self.column}_not_null")

    def value(self, u: uuid.UUID) -> object:
        """``u`` as a parameter of this column's storage."""
        return self.rules.param(self.storage, u)


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


# --- what the table is, and what may be done to it -------------------------------------------------------


def inspect(io: OnlineIO, col: OnlineColumn) -> TableFacts:
    """What the catalog says of ``col``'s table now: the facts every step and check reads."""
    reads = col.rules.fact_reads(col.table, col.column, col.index_name)
    column = io.fetch(*reads["column"])
    index = io.fetch(*reads["index"])
    keys = io.fetch(*reads["partition_key"])
    return TableFacts(
        column_present=bool(column),
        not_null=bool(column and column[0][0]),
        index=("valid" if index[0][0] else "invalid") if index else None,
        constraint=bool(io.fetch(*reads["constraint"])),
        partition_key=tuple(str(k) for (k,) in keys) if keys else None,
    )


def _finished(col: OnlineColumn, facts: TableFacts) -> bool:
    """Whether an earlier run (another pod's) left nothing to do."""
    indexed = not col.unique or (facts.index == "valid" and facts.constraint)
    return facts.column_present and (facts.not_null or col.nullable) and indexed


def _long_settings(io: OnlineIO, col: OnlineColumn) -> dict[str, str]:
    """The session settings that would cut this operation's concurrent steps short (read in a
    transaction: through a pooler, on the server connection a statement of this client gets)."""
    found = {}
    with io.transaction():
        for name in col.rules.LONG_STATEMENT_SETTINGS:
            [(value,)] = io.fetch(col.rules.setting(name), {})
            if str(value) not in ("0", "0ms", "0s", ""):
                found[name] = str(value)
    return found


def check(io: OnlineIO, col: OnlineColumn, facts: TableFacts, *, fire_triggers: bool = True) -> dict[str, str]:
    """Every refusal of :func:`add_column`, made before it changes anything
    (:class:`~seqid_orm.errors.MigrationRefusedError` names what to change); returns the session
    settings its concurrent steps must run without (lifted on the operation's own session)."""
    label = f"{col.table}.{col.column}"
    ask = col.rules.may_alter(col.table)
    if ask is not None and not facts.column_present:
        [(allowed,)] = io.fetch(*ask) or [(None,)]
        if not allowed:
            raise MigrationRefusedError(
                f"{label}: this role may not alter {col.table} (PostgreSQL lets only the table's owner, a member "
                "of the owning role or a superuser do so): run the migration as the table's owner"
            )
    if col.unique and facts.partition_key is not None and facts.index is None:
        raise MigrationRefusedError(
            f"{label}: {col.table} is partitioned (by {', '.join(facts.partition_key)}), and a unique index on a "
            "partitioned table must contain the partition key, so no index can make this column unique across "
            "partitions; add it with unique=False (its keys are still unique as they are made), or add the "
            "partition key to the key yourself"
        )
    if not fire_triggers:
        if not col.rules.TRIGGERS_CAN_WAIT:
            raise MigrationRefusedError(
                f"{label}: this database has no switch that keeps a table's triggers from firing for one "
                "transaction; the backfill fires each row trigger once per row (fire_triggers=True), or drop "
                "the triggers for the migration yourself"
            )
        [(allowed,)] = io.fetch(col.rules.triggers_privilege(), {})
        if not allowed:
            raise MigrationRefusedError(
                f"{label}: fire_triggers=False sets session_replication_role for each batch, which this role may "
                "not (a superuser may, or GRANT SET ON PARAMETER session_replication_role TO it, PostgreSQL 15+)"
            )
    settings = _long_settings(io, col)
    for name, value in settings.items():
        log.warning(
            "seqid: %s: this session's %s (%s) does not bound seqid's own statements: each sets its own "
            "(a lock wait of %d ms, no statement time-out) for its transaction",
            label,
            name,
            value,
            LOCK_TIMEOUT_MS,
        )
    concurrent = col.unique and facts.index != "valid" and any(s.concurrent for s in _unique_steps(col, facts))
    if not concurrent:
        return {}
    return lifted_for(io, col, "the unique index's concurrent build", settings)


def lifted_for(io: OnlineIO, col: OnlineColumn, what: str, settings: dict[str, str] | None = None) -> dict[str, str]:
    """The session's time-outs (set for the role or database: ``settings``, else read) that would cancel ``what``
    (a concurrent step, which no transaction's ``SET LOCAL`` reaches): lifted for it on the operation's own
    session; refused before any change (:class:`~seqid_orm.errors.MigrationRefusedError`) where the session is
    not the operation's own, since seqid changes no session it does not own."""
    settings = _long_settings(io, col) if settings is None else settings
    if settings and not owns_session(io, col):
        shown = ", ".join(f"{k}={v}" for k, v in settings.items())
        raise MigrationRefusedError(
            f"{col.table}.{col.column}: this session has {shown} (set for the role or database), which would cancel "
            f"{what}, and the connection's session is not this migration's own (a transaction pooler such as "
            "PgBouncer hands it to other clients, so seqid will not change it): run the migration on a direct "
            "connection to the server, or set the time-out to 0 for the migration's role "
            f"(ALTER ROLE ... SET {next(iter(settings))} = 0) while it runs"
        )
    return settings


def owns_session(io: OnlineIO, col: OnlineColumn) -> bool:
    """Whether the server session under ``io``'s connection is the operation's own, so that a session
    setting changed and put back reaches no other client: the server sees this very socket as its client
    (a direct connection).  ``False`` behind a pooler or a proxy, or where the adapter cannot tell."""
    ends = io.socket_ends()
    if ends is None:
        return False
    with io.transaction():  # one server connection for the read, whatever pools between
        row = io.fetch(col.rules.client_view(), {})[0]
    return col.rules.is_client(ends, row)


def _unique_steps(col: OnlineColumn, facts: TableFacts) -> list[Step]:
    return col.rules.unique_steps(col.q(col.table), col.q(col.column), col.q(col.index_name), facts)


# --- running a step ----------------------------------------------------------------------------------


def _run_step(
    io: OnlineIO,
    col: OnlineColumn,
    step: Step,
    sleep: Callable[[float], None] = time.sleep,
    lifted: dict[str, str] | None = None,
) -> None:
    """``step`` with a bounded wait for its lock, tried again after a growing pause while the lock is
    taken (:data:`DDL_ATTEMPTS` times); a concurrent step alone, outside a transaction, with ``lifted``
    (the role's time-outs) set to 0 for it on the operation's own session and put back after.

    A concurrent index build's lock (``SHARE UPDATE EXCLUSIVE``) stops no reader or writer, so nothing
    queues behind its wait, and it waits for every transaction of the database with an older snapshot to
    end ("Building Indexes Concurrently", the ``CREATE INDEX`` page of PostgreSQL's docs): a time-out there
    spares the application nothing and leaves an invalid index, whose name the next attempt finds taken."""
    if step.concurrent:

        def build(left: float) -> Steps[None]:
            _concurrently(io, col, step.statement, lifted or {})
            return
            yield  # a generator of no step: the policy's loop runs it

        def chosen(exc: Exception) -> bool:
            if step.undo is None or not is_conflict(exc):
                return False
            log.info("seqid: %s was chosen in a deadlock; its leftovers cleared, trying again", step.statement[:80])
            _concurrently(io, col, step.undo, lifted or {})
            return True

        drive(CONCURRENT_DEADLOCK.steps(build, chosen), None, sleep=sleep)
        return
    bounded = col.rules.bounded(step.statement, LOCK_TIMEOUT_MS)

    def attempt(left: float) -> Steps[None]:
        try:
            with io.transaction() if bounded.in_transaction else contextlib.nullcontext():
                for statement in (*bounded.statements, *step.more):
                    io.run(statement, {})
        finally:
            for statement in (*bounded.after, *step.after):
                io.run(statement, {})
        return
        yield  # a generator of no step: the policy's loop runs it

    def waited(exc: Exception) -> bool:
        if is_lock_timeout(exc):
            log.info("seqid: %s waited past its lock timeout; trying again", step.statement[:80])
            return True
        return False

    drive(DDL_LOCK.steps(attempt, waited), None, sleep=sleep)


def _concurrently(io: OnlineIO, col: OnlineColumn, statement: str, lifted: dict[str, str]) -> None:
    for name in lifted:
        log.warning(
            "seqid: %s runs without this session's %s (%s), which would cancel it; put back after",
            statement[:60],
            name,
            lifted[name],
        )
        io.run(col.rules.set_session(name, "0"), {})
    try:
        io.run(statement, {})
    finally:
        for name, value in lifted.items():
            io.run(col.rules.set_session(name, value), {})


# --- the operation ---------------------------------------------------------------------------------------


def add_column(
    io: OnlineIO,
    col: OnlineColumn,
    *,
    batch_size: int | None = None,
    keep_default: bool = True,
    fire_triggers: bool = True,
    say: Callable[[str], None] = _say_to_stderr,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[], None] = lambda: None,
    before_fill: Callable[[], None] = lambda: None,
) -> Progress:
    """Add ``col`` online, fill it for the existing rows, make it unique and ``NOT NULL`` (the module
    docstring's steps; as :attr:`OnlineColumn.unique` and :attr:`OnlineColumn.nullable` say).
    Each step looks first whether an earlier run did it, so a run killed anywhere and run again
    finishes the work, and a run that finds it done (another pod's) changes nothing.  ``keep_default=False``
    drops the database default at the end (where every writer sets the column itself);
    ``fire_triggers=False`` keeps the table's row triggers from firing for the backfill's writes (refused
    before any change where the database or the role cannot).  ``batch_size``: a fixed number of rows a
    batch, else sized by time.  ``guard`` runs before each step and batch, and raises to stop the run (a
    migration lock this run no longer holds).  ``before_fill`` runs once the column is there, before the
    backfill (what keeps the application's writes in step from then on, where no default does).  Returns
    the backfill's :class:`Progress`."""
    rules = col.rules
    table, column = col.q(col.table), col.q(col.column)
    facts = inspect(io, col)
    lifted = check(io, col, facts, fire_triggers=fire_triggers)
    if _finished(col, facts):
        say(f"seqid: {col.table}.{col.column}: already added, filled and constrained; nothing to do")
        forget(io, col)
        return Progress(done=0)

    def step(change: Step) -> None:
        guard()
        _run_step(io, col, change, sleep, lifted)

    _progress_table(io, col)  # before the first change: a role that may not create it changes nothing
    if not facts.column_present:
        try:
            step(Step(rules.add_column(table, column, col.column_type)))
        except Exception:  # the first change refused: nothing of this run is left behind
            forget(io, col)
            raise
    if col.default_sql is not None:
        step(Step(rules.set_default(table, column, col.default_sql)))
    before_fill()
    progress = Progress(done=0)
    if not facts.not_null:  # a column already NOT NULL holds no row to fill
        progress = backfill(io, col, batch_size=batch_size, fire_triggers=fire_triggers, say=say, guard=guard)
    if col.unique:
        for change in _unique_steps(col, inspect(io, col)):
            step(change)
    if not col.nullable and not inspect(io, col).not_null:
        default = col.default_sql if keep_default else None
        for change in rules.not_null_steps(table, column, col.column_type, col.q(col.check_name), default):
            step(change)
    if not keep_default and col.default_sql is not None:
        step(Step(rules.drop_default(table, column)))
    forget(io, col)
    return progress


def drop_column(io: OnlineIO, col: OnlineColumn, sleep: Callable[[float], None] = time.sleep) -> None:
    """Undo :func:`add_column`: its unique constraint, the column, and any progress it recorded (the one
    command that takes back a run stopped anywhere)."""
    facts = inspect(io, col)
    for step in col.rules.drop_steps(col.q(col.table), col.q(col.column), col.q(col.index_name), facts):
        _run_step(io, col, step, sleep)
    forget(io, col)


# --- the backfill ---------------------------------------------------------------------------------------


def _progress_table(io: OnlineIO, col: OnlineColumn) -> str:
    name = col.q(col.progress_table)
    statement = (
        f"CREATE TABLE IF NOT EXISTS {name} (table_name varchar(255) NOT NULL, column_name varchar(255) NOT NULL, "
        f"last_key {col.rules.text_type()}, done bigint NOT NULL, PRIMARY KEY (table_name, column_name))"
    )
    _run_step(io, col, Step(statement))
    return name


def forget(io: OnlineIO, col: OnlineColumn) -> None:
    """Drop the column's progress table (``IF EXISTS``: no failed statement to abort a PostgreSQL
    transaction the caller is in).  No other backfill's progress is in it."""
    _run_step(io, col, Step(f"DROP TABLE IF EXISTS {col.q(col.progress_table)}"))


def _encode_key(values: Sequence[object]) -> str:
    """A primary key, as the progress row keeps it (JSON; bytes as hex)."""
    return json.dumps(
        [{"hex": bytes(v).hex()} if isinstance(v, (bytes, bytearray, memoryview)) else str(v) for v in values]
    )


def _decode_key(text: str) -> list[object]:
    return [bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for v in json.loads(text)]


def _past(col: OnlineColumn, after: list[object] | None) -> tuple[str, dict[str, object]]:
    """``WHERE`` (with its parameters) of the rows after the key ``after`` (every row where ``None``)."""
    if after is None:
        return "", {}
    condition, params = col.rules.key_compare([col.q(k) for k in col.keys], col.key_casts, after, ">", "k")
    return f"WHERE {condition}", params


def _rows(io: OnlineIO, col: OnlineColumn, after: list[object] | None, limit: int) -> list[tuple[Any, ...]]:
    keys = ", ".join(col.q(k) for k in col.keys)
    stamp = f", {col.q(col.stamp)}" if col.stamp else ""
    where, params = _past(col, after)
    return io.fetch(f"SELECT {keys}{stamp} FROM {col.q(col.table)} {where} ORDER BY {keys} LIMIT {limit}", params)


def _last_of_batch(io: OnlineIO, col: OnlineColumn, after: list[object] | None, size: int) -> list[object] | None:
    """The key of the ``size``-th row after ``after`` (an index read, no row sent), or of the last row
    where fewer are left; ``None`` where none is."""
    keys = ", ".join(col.q(k) for k in col.keys)
    where, params = _past(col, after)
    table = col.q(col.table)
    found = io.fetch(f"SELECT {keys} FROM {table} {where} ORDER BY {keys} LIMIT 1 OFFSET {size - 1}", params)
    if not found:
        descending = ", ".join(f"{col.q(k)} DESC" for k in col.keys)
        found = io.fetch(f"SELECT {keys} FROM {table} {where} ORDER BY {descending} LIMIT 1", params)
    return [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in found[0]] if found else None


def _server_update(
    col: OnlineColumn, made: str, after: list[object] | None, last: list[object]
) -> tuple[str, dict[str, object]]:
    """One statement giving every row of the key range ``(after, last]`` whose key is still ``NULL`` the key
    the server makes (``made``): no row leaves the server and none comes back."""
    where, params = _past(col, after)
    upto, more = col.rules.key_compare([col.q(k) for k in col.keys], col.key_casts, last, "<=", "u")
    column = col.q(col.column)
    joined = f"{where} AND {upto}" if where else f"WHERE {upto}"
    return f"UPDATE {col.q(col.table)} SET {column} = {made} {joined} AND {column} IS NULL", {**params, **more}


def refill(io: OnlineIO, col: OnlineColumn, stale: str, *, size: int = 10_000) -> int:
    """Every row of ``col``'s table where ``stale`` (SQL over the row) holds given its key again (the
    column's :attr:`~OnlineColumn.key_sql`), walked by the primary key in short statements of ``size`` rows,
    each its own transaction: the rows a writer changed where no trigger saw it (InnoDB's foreign key
    cascades fire none).  Returns how many rows it wrote."""
    assert col.key_sql is not None
    after: list[object] | None = None
    written = 0
    while True:
        last = _last_of_batch(io, col, after, size)
        if last is None:
            return written
        where, params = _past(col, after)
        upto, more = col.rules.key_compare([col.q(k) for k in col.keys], col.key_casts, last, "<=", "u")
        joined = f"{where} AND {upto}" if where else f"WHERE {upto}"
        with io.transaction():
            written += io.run(
                f"UPDATE {col.q(col.table)} SET {col.q(col.column)} = {col.key_sql} {joined} AND {stale}",
                {**params, **more},
            )
        after = last


def _made_by_server(col: OnlineColumn) -> str | None:
    """The SQL of an old row's key made by the server from the row itself (its time's key, or where it has
    none, the column's own default: a key of now, after them), or ``None`` where the server cannot
    make the key of a time in this column's layout (then Python makes the keys)."""
    if col.key_sql is not None:
        return col.key_sql
    if not col.server_keys:
        return None
    if col.stamp is None:
        return col.default_sql
    stamp = col.q(col.stamp)
    at = col.rules.key_at(col.storage, col.layout, stamp)
    if at is None:
        return None
    return f"CASE WHEN {stamp} IS NULL THEN {col.default_sql} ELSE {at} END"


def _update(col: OnlineColumn, keys: list[tuple[Any, ...]], values: list[object]) -> tuple[str, dict[str, object]]:
    """One statement writing each row's key (``keys[r]`` gets ``values[r]``), each only where the row's key is
    still ``NULL``, as the vendor batches it (one parameter read as a table where it can)."""
    typed = col.key_casts if len(col.key_casts) == len(col.keys) else ()
    quoted = [col.q(k) for k in col.keys]
    return col.rules.batch_update(col.q(col.table), col.q(col.column), quoted, typed, col.column_type, keys, values)


class _BatchSize:
    """The next batch's size: fixed where the caller gave one, else grown or shrunk so a batch takes about
    :data:`BATCH_SECONDS` (doubling under half of it, halving over twice it), within
    [:data:`FIRST_BATCH` / 10, :data:`LARGEST_BATCH`]."""

    def __init__(self, fixed: int | None) -> None:
        if fixed is not None and (isinstance(fixed, bool) or not isinstance(fixed, int) or fixed < 1):
            raise InvalidArgumentError(f"batch_size must be a positive int, got {fixed!r}")
        self.fixed = fixed
        self.size = fixed or FIRST_BATCH

    def took(self, seconds: float) -> None:
        if self.fixed is not None:
            return
        if seconds < BATCH_SECONDS / 2:
            self.size = min(self.size * 2, LARGEST_BATCH)
        elif seconds > BATCH_SECONDS * 2:
            self.size = max(self.size // 2, FIRST_BATCH // 10)


def backfill(
    io: OnlineIO,
    col: OnlineColumn,
    *,
    batch_size: int | None = None,
    fire_triggers: bool = True,
    say: Callable[[str], None] = _say_to_stderr,
    every: float = 2.0,
    guard: Callable[[], None] = lambda: None,
) -> Progress:
    """Fill ``col`` for the rows that have no key yet, in batches (``batch_size`` rows each, or sized by
    time), each its own short transaction that also records the batch's last primary key; run again after
    a kill, it goes on from there.  Says how far it is on ``say`` every ``every`` seconds and at the end.
    The progress row stays until :func:`forget` (the end of :func:`add_column`), so a run killed after the
    batches goes on with the next step at once.  ``fire_triggers=False``: each batch holds the table's row
    triggers back (the caller checked it may, :func:`check`)."""
    sizes = _BatchSize(batch_size)
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
    hold = () if fire_triggers else (col.rules.hold_triggers(),)
    made = _made_by_server(col)
    while True:
        guard()
        started = time.monotonic()
        if made is not None:  # the server makes each row's key from the row: the batch is a key range
            last = _last_of_batch(io, col, after, sizes.size)
            if last is None:
                break
            update = _server_update(col, made, after, last)
        else:  # Python makes the keys, and the batch sends them
            chunk = _rows(io, col, after, sizes.size)
            if not chunk:
                break
            fresh = iter(comb_batch(len(chunk), col.layout))
            values = [col.value(key_of_time(row[n_keys] if col.stamp else None, col.layout, fresh)) for row in chunk]
            last = [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in chunk[-1][:n_keys]]
            update = _update(col, [row[:n_keys] for row in chunk], values)
        with io.transaction():
            for statement in hold:
                io.run(statement, {})
            changed = io.run(*update)
            io.run(
                f"UPDATE {name} SET last_key = :last, done = done + :n WHERE table_name = :t AND column_name = :c",
                {"last": _encode_key(last), "n": changed, "t": col.table, "c": col.column},
            )
        after = last
        progress.done += changed
        sizes.took(time.monotonic() - started)
        if time.monotonic() - progress.said_at >= every:
            say(progress.line(f"{col.table}.{col.column}"))
            progress.said_at = time.monotonic()
    say(progress.line(f"{col.table}.{col.column}") + " (done)")
    return progress


# --- which form runs ---------------------------------------------------------------------------------------


def choose_form(fetch: Fetch, vendor: str, table: str, *, committing: bool, what: str, fix: str) -> str:
    """``"online"`` or ``"offline"``: how an operation on ``table`` runs, the one decision of both ORMs'
    operations.  Online where the vendor changes tables online and the operation's batches may commit
    (``committing``: outside the migration's transaction); offline (the column added and filled in the
    migration's transaction) on the other vendors, and inside the migration's transaction for a table of
    at most :data:`IN_TRANSACTION_UP_TO_ROWS` rows, counted: right after a load or a restore the statistics
    say 0.  A bigger table there, or one this role cannot count, is refused before anything changes
    (:class:`~seqid_orm.errors.MigrationRefusedError`), naming ``fix``, the adapter's way out of its
    transaction."""
    if vendor not in ONLINE_VENDORS:
        return "offline"
    if committing:
        return "online"
    rows = rows_counted(fetch, vendor, table, IN_TRANSACTION_UP_TO_ROWS)
    if rows is None or rows > IN_TRANSACTION_UP_TO_ROWS:
        size = "rows this role cannot count" if rows is None else f"over {IN_TRANSACTION_UP_TO_ROWS:,} rows"
        raise MigrationRefusedError(
            f"{what} on {table} ({size}) fills it in batches that each commit, so the table stays usable, "
            f"and this migration runs in a transaction it cannot commit: {fix}"
        )
    return "offline"


# --- how big a table is -----------------------------------------------------------------------------------

Fetch = Callable[[str, dict[str, object]], list[tuple[Any, ...]]]


def estimate_rows(io: OnlineIO, col: OnlineColumn) -> int | None:
    """The planner's row count of ``col``'s table (see :func:`table_rows`)."""
    return table_rows(io.fetch, col.vendor, col.table)


def table_rows(fetch: Fetch, vendor: str, table: str) -> int | None:
    """The planner's row count of ``table`` (``None`` where it has none yet, or on a vendor seqid changes
    no table of): a bound, never a count that would scan the table."""
    rules = rules_for(vendor).ONLINE
    if rules is None:
        return None
    rows = fetch(*rules.estimate(table))
    value = rows[0][0] if rows else None
    return int(value) if value is not None and int(value) > 0 else None


def rows_counted(fetch: Fetch, vendor: str, table: str, limit: int) -> int | None:
    """``table``'s rows counted up to ``limit + 1`` (a read of that many index entries, blocking no writer:
    PostgreSQL's ACCESS SHARE, InnoDB's consistent read), whatever the statistics say (none yet after a
    load or a restore); ``None`` where this role cannot count them all (no SELECT, or row-level security
    hiding some), so a caller that must know refuses."""
    rules = rules_for(vendor).ONLINE
    if rules is None:
        return None
    ask = rules.reads_every_row(table)
    if ask is not None:
        [(readable,)] = fetch(*ask)
        if not readable:
            return None
    count = f"SELECT COUNT(*) FROM (SELECT 1 FROM {rules.quote(table)} LIMIT {int(limit) + 1}) AS seqid_rows"
    try:
        [(rows,)] = fetch(count, {})
    except Exception:  # MariaDB: no SELECT on it (PostgreSQL asked first: no statement fails there)
        return None
    return int(rows)


def rows_past(fetch: Fetch, vendor: str, table: str, limit: int) -> int | None:
    """``table``'s rows where a refusal turns on ``limit``: the planner's estimate (:func:`table_rows`), and where
    that says more than ``limit``, the rows themselves, counted up to ``limit + 1`` (more than ``limit``
    of them: the estimate again, for a message to say how many).

    An estimate is a sample: InnoDB's ``TABLE_ROWS`` put a table of exactly 100,000 rows at 100,001 (CI), and
    a refusal should be true of the table it names.  A role that may not read the table keeps the estimate;
    so does one from which row-level security hides rows (PostgreSQL), which would count fewer rows than
    the rewrite touches.
    """
    estimate = table_rows(fetch, vendor, table)
    if estimate is None or estimate <= limit:
        return estimate
    rows = rows_counted(fetch, vendor, table, limit)
    return rows if rows is not None and rows <= limit else estimate  # past the line: the estimate says how far
