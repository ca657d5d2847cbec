"""The SQL of ticket sequences, per vendor: one place, used by the SQLAlchemy and Django stores
(as :mod:`.lease_sql` is for leases).

One reservation is one conditional ``UPDATE`` that adds ``count * step`` to the row's
``next_value`` and returns the new value, in the idiom each vendor has for "return what this
``UPDATE`` wrote" (an atomic read-modify-write, never a ``SELECT`` then an ``UPDATE``):

* PostgreSQL, SQLite 3.35+, CockroachDB: ``UPDATE ... RETURNING next_value``;
* MariaDB/MySQL (no ``UPDATE ... RETURNING``): ``SET next_value = LAST_INSERT_ID(next_value + n)``,
  the value coming back in the statement's own OK packet (the driver's ``lastrowid``), on this
  connection only — MySQL's documented way to emulate a sequence;
* SQL Server: ``UPDATE ... OUTPUT inserted.next_value``;
* Oracle: ``RETURNING next_value INTO :new_next``, an out bind (compiled, no server here).

The ``WHERE`` clause matches the sequence only with this client's step and offset and a
``next_value`` inside the range the caller allows, so a row that went back or was re-created
with other settings matches nothing, and :func:`allocate_rows` reads it to say why.
Statements use ``:name`` parameters, run by an :class:`~.steps.Executor` (the Django store turns
them into ``%s``); the functions below are :mod:`seqid_orm.calls.steps`.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, :mod:`seqid_orm.ids` and
this package's ``base``, ``history``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from ...calls.retry import CHANGED_ROW, Again
from ...calls.steps import Call, Steps, fetch, run
from ...errors import AllocationError, InvalidArgumentError
from ...ids.validate import BIGINT_MAX
from .base import TicketRow, grantable, last_value_limit, vanished
from .history import HISTORY_NAME, HistoryGuard, ticket_records

__all__ = [
    "SQLTicketStore",
    "TicketSQL",
    "advance",
    "allocate_rows",
    "create",
    "raise_next",
    "raise_rows",
    "read",
    "rows",
    "ticket_sql",
]

_T = TypeVar("_T")

#: How each vendor returns the value its ``UPDATE`` wrote.
IDIOMS = {
    "postgresql": "returning",
    "cockroachdb": "returning",
    "sqlite": "returning",
    "mysql": "last_insert_id",
    "mariadb": "last_insert_id",
    "mssql": "output",
    "oracle": "returning_into",
}

_MATCH = (
    "name = :seq_name AND step = :seq_step AND value_offset = :seq_offset "
    "AND next_value >= :lowest_start AND next_value <= :highest_start"
)
_COLUMNS = "name, next_value, step, value_offset"


class TicketSQL:
    """The statements of one vendor on one (quoted) table."""

    def __init__(self, vendor: str, table: str) -> None:
        idiom = IDIOMS.get(vendor)
        if idiom is None:
            raise InvalidArgumentError(
                f"ticket sequences support PostgreSQL, MariaDB/MySQL, SQLite, SQL Server and Oracle, not {vendor!r}"
            )
        t = table
        self.vendor = vendor
        self.table = table
        self.idiom = idiom
        added = "next_value + :delta"
        self.advance = {
            "returning": f"UPDATE {t} SET next_value = {added} WHERE {_MATCH} RETURNING next_value",
            "last_insert_id": f"UPDATE {t} SET next_value = LAST_INSERT_ID({added}) WHERE {_MATCH}",
            "output": f"UPDATE {t} SET next_value = {added} OUTPUT inserted.next_value WHERE {_MATCH}",
            "returning_into": f"UPDATE {t} SET next_value = {added} WHERE {_MATCH} RETURNING next_value INTO :new_next",
        }[idiom]
        self.read = f"SELECT {_COLUMNS} FROM {t} WHERE name = :name"
        insert = f"INSERT INTO {t} ({_COLUMNS}) VALUES (:name, :next_value, :step, :value_offset)"
        # no error (and no server log line) when another client created it first; elsewhere a plain
        # INSERT, whose duplicate-key error the executor reads as "already there" (run() gives 0)
        self.create = {
            "postgresql": insert + " ON CONFLICT (name) DO NOTHING",
            "cockroachdb": insert + " ON CONFLICT (name) DO NOTHING",
            "sqlite": insert + " ON CONFLICT (name) DO NOTHING",
            "mysql": insert + " ON DUPLICATE KEY UPDATE name = name",
            "mariadb": insert + " ON DUPLICATE KEY UPDATE name = name",
        }.get(vendor, insert)
        self.raise_next = (
            f"UPDATE {t} SET next_value = :next_value "
            "WHERE name = :name AND step = :step AND value_offset = :value_offset AND next_value < :next_value"
        )
        self.rows = f"SELECT {_COLUMNS} FROM {t} WHERE name <> :history ORDER BY name"


def ticket_sql(vendor: str, table: str) -> TicketSQL:
    """The ticket statements for ``vendor`` (a SQLAlchemy dialect or Django vendor name) on ``table``."""
    return TicketSQL({"microsoft": "mssql"}.get(vendor, vendor), table)


def advance(
    sql: TicketSQL, name: str, delta: int, step: int, offset: int, lowest_start: int, highest_start: int
) -> Steps[int | None]:
    """Add ``delta`` to the counter of ``name`` where it has this ``step`` and ``offset`` and lies in
    ``lowest_start..highest_start``: the new ``next_value``, or ``None`` where no row matched."""
    params: dict[str, object] = {
        "seq_name": name,
        "delta": delta,
        "seq_step": step,
        "seq_offset": offset,
        "lowest_start": lowest_start,
        "highest_start": highest_start,
    }
    if sql.idiom == "last_insert_id":
        changed, value = yield Call("run_last_id", (sql.advance, params))
        return int(value) if changed else None
    if sql.idiom == "returning_into":
        found = yield Call("run_returning_into", (sql.advance, params, "new_next"))
        return None if found is None else int(found)
    rows = yield from fetch(sql.advance, params)
    return int(rows[0][0]) if rows else None


def read(sql: TicketSQL, name: str) -> Steps[TicketRow | None]:
    """The row of ``name``, if any."""
    rows = yield from fetch(sql.read, {"name": name})
    return TicketRow(*rows[0]) if rows else None


def _row_params(row: TicketRow) -> dict[str, object]:
    return {"name": row.name, "next_value": row.next_value, "step": row.step, "value_offset": row.offset}


def create(sql: TicketSQL, row: TicketRow) -> Steps[None]:
    """Insert ``row`` unless a row of that name exists (never an error on a race)."""
    yield from run(sql.create, _row_params(row))


def raise_next(sql: TicketSQL, row: TicketRow) -> Steps[None]:
    """Move the counter of ``row.name`` up to ``row.next_value`` (never down), where it has this step and offset."""
    yield from run(sql.raise_next, _row_params(row))


def rows(sql: TicketSQL) -> Steps[list[TicketRow]]:
    """Every sequence in the table (the store's history record left out)."""
    found = yield from fetch(sql.rows, {"history": HISTORY_NAME})
    return [TicketRow(*r) for r in found]


def allocate_rows(
    sql: TicketSQL,
    label: str,
    name: str,
    count: int,
    step: int,
    offset: int,
    max_value: int,
    above: int | None = None,
) -> Steps[tuple[int, int]]:
    """:meth:`~.base.TicketStore.allocate` for a SQL store: ``(first value, count granted)``.

    The fast path is one ``UPDATE`` (one round trip).  Only when it matches no row does this
    read the row to tell a new name (create it, then retry) from a counter that went back below
    ``above`` (refuse, the counter unmoved) from a contradicting step/offset (refuse) from too few
    values left (shrink the reservation, or refuse when none is left).  A missing row is refused,
    never created: a counter started over would repeat every id it handed out.
    """
    limit = last_value_limit(max_value, step)
    lowest_start = -BIGINT_MAX - 1 if above is None else above + 1
    wanted = count

    def reserve(left: float) -> Steps[tuple[int, int]]:  # shrink, ask again: someone keeps changing the row
        nonlocal wanted
        highest_start = limit - (wanted - 1) * step  # the last value reserved must be <= limit
        new_next = yield from advance(sql, name, wanted * step, step, offset, lowest_start, highest_start)
        if new_next is not None:
            return new_next - wanted * step, wanted
        row = yield from read(sql, name)
        if row is None:
            raise vanished(name, label)
        wanted = grantable(row, label, wanted, step, offset, limit, above)
        raise Again(AllocationError(f"sequence {name!r} on {label} changed under every attempt to reserve values"))

    return (yield from CHANGED_ROW.steps(reserve))


def raise_rows(sql: TicketSQL, row: TicketRow) -> Steps[TicketRow]:
    """:meth:`~.base.TicketStore.raise_to` for a SQL store."""
    yield from create(sql, row)
    yield from raise_next(sql, row)
    stored = yield from read(sql, row.name)
    if stored is None:  # deleted again between the statements
        raise AllocationError(f"sequence {row.name!r} vanished while it was being repaired")
    return stored


class SQLTicketStore:
    """The :class:`~.base.TicketStore` methods of a SQL store, on the steps above: a subclass only
    says how one call reaches its own connection, by ``_with_rows(steps_of)`` driving
    ``steps_of(sql)`` on an :class:`~.steps.Executor` of that connection, its vendor's
    :class:`TicketSQL` given (retrying a dropped connection); an asynchronous twin
    (``_awith_rows``, where the store has an async driver) drives the same steps on an event loop.

    Every reservation first checks the store's history (:mod:`.history`): a server that can lose
    acknowledged writes is refused unless ``accept_state_loss``, one whose history went back is
    refused until :meth:`raise_to` (``seqid ticket repair``) records the new one.
    """

    label: str
    accept_state_loss: bool = False
    _guard: HistoryGuard | None = None

    def _with_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        raise NotImplementedError

    async def _awith_rows(self, steps_of: Callable[[TicketSQL], Steps[_T]]) -> _T:
        """:meth:`_with_rows` for an event loop: in a worker thread, unless the store has an async driver."""
        return await asyncio.to_thread(self._with_rows, steps_of)

    def _history(self) -> HistoryGuard:
        if self._guard is None:
            self._guard = HistoryGuard(self.label, "tickets", self.accept_state_loss)
        return self._guard

    def _allocate_steps(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None
    ) -> Callable[[TicketSQL], Steps[tuple[int, int]]]:
        def steps(sql: TicketSQL) -> Steps[tuple[int, int]]:
            yield from self._history().check(sql.vendor, ticket_records(sql.table))
            return (yield from allocate_rows(sql, self.label, name, count, step, offset, max_value, above))

        return steps

    def _raise_steps(self, row: TicketRow) -> Callable[[TicketSQL], Steps[TicketRow]]:
        def steps(sql: TicketSQL) -> Steps[TicketRow]:
            stored = yield from raise_rows(sql, row)
            # the counter is above every id in use now: the present history is the one to keep
            yield from self._history().adopt(sql.vendor, ticket_records(sql.table))
            return stored

        return steps

    def allocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        return self._with_rows(self._allocate_steps(name, count, step, offset, max_value, above))

    def read(self, name: str) -> TicketRow | None:
        return self._with_rows(lambda sql: read(sql, name))

    def create(self, row: TicketRow) -> None:
        self._with_rows(lambda sql: create(sql, row))

    def raise_to(self, row: TicketRow) -> TicketRow:
        return self._with_rows(self._raise_steps(row))

    # awaitable twins: the same steps, on the loop where the store has an asynchronous driver

    async def aallocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        return await self._awith_rows(self._allocate_steps(name, count, step, offset, max_value, above))

    async def aread(self, name: str) -> TicketRow | None:
        return await self._awith_rows(lambda sql: read(sql, name))

    async def acreate(self, row: TicketRow) -> None:
        await self._awith_rows(lambda sql: create(sql, row))
