"""The SQL of worker-id leases, per vendor: one place, used by the SQLAlchemy and Django stores.

Every statement reads the time from the database itself (``NOW_MS``): lease expiry must be
judged by a clock all nodes share, and a node whose clock is behind would otherwise take over a
lease that is still live.  Statements use ``:name`` parameters (SQLAlchemy ``text()``); the
Django store turns them into ``%s``.  The functions below are :mod:`seqid_orm.calls.steps`: they yield the
statements, and a synchronous or an asynchronous connection runs them.

A worker id's row outlives its holders: on release ``expires_at`` drops to 0 and the token is
cleared, but ``last_timestamp`` (the high-water mark) stays for the next holder, who must not
make ids until its clock has passed it.

Each namespace also has one row of its own, ``worker_id = -1``: ``expires_at`` holds when the
store first saw the namespace (``born``, by the database's clock) and ``last_timestamp`` the
highest worker id granted since.  It tells a worker id that was never used from one whose row
was deleted, and a namespace that is new from one the store forgot (see
:meth:`~seqid_orm.allocation.stores.base.LeaseStore.acquire`).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's ``base``,
``history`` and ``steps``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

from ...calls.steps import Steps, fetch, run
from ...errors import InvalidArgumentError
from .base import Grant, LeaseRow, holder_of
from .history import HISTORY_NAME, HistoryGuard, lease_records

__all__ = ["NOW_MS", "LeaseSQL", "SQLLeaseStore", "acquire", "lease_sql", "leases", "release", "renew"]

#: The database's current time in Unix milliseconds.
NOW_MS = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    "mysql": "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)",
    "mariadb": "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)",
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    "mssql": "DATEDIFF_BIG(millisecond, '19700101', SYSUTCDATETIME())",
}

_RAISE_MARK = "CASE WHEN last_timestamp < :mark THEN :mark ELSE last_timestamp END"


class LeaseSQL:
    """The statements of one vendor on one table."""

    def __init__(self, vendor: str, table: str) -> None:
        now = NOW_MS.get(vendor)
        if now is None:
            raise InvalidArgumentError(
                f"worker-id leases support PostgreSQL, MariaDB/MySQL, SQLite and SQL Server, not {vendor!r}"
            )
        t = table
        self.vendor = vendor
        self.history = lease_records(t, now)
        self.now = f"SELECT {now}"
        self.scan = f"SELECT worker_id, expires_at, last_timestamp, {now} FROM {t} WHERE namespace = :ns"
        # PostgreSQL and SQLite: no error (and no server log line) when another node won the race
        if_absent = " ON CONFLICT DO NOTHING" if vendor in ("postgresql", "sqlite") else ""
        self.insert = (
            f"INSERT INTO {t} (namespace, worker_id, token, expires_at, last_timestamp) "
            f"VALUES (:ns, :wid, :token, {now} + :ttl, 0)" + if_absent
        )
        self.insert_namespace = (
            f"INSERT INTO {t} (namespace, worker_id, token, expires_at, last_timestamp) "
            f"VALUES (:ns, -1, '', {now}, -1)" + if_absent
        )
        self.raise_highest = (
            f"UPDATE {t} SET last_timestamp = :wid WHERE namespace = :ns AND worker_id = -1 AND last_timestamp < :wid"
        )
        self.take = (
            f"UPDATE {t} SET token = :token, expires_at = {now} + :ttl "
            f"WHERE namespace = :ns AND worker_id = :wid AND expires_at < {now}"
        )
        self.mark = f"SELECT last_timestamp FROM {t} WHERE namespace = :ns AND worker_id = :wid AND token = :token"
        self.renew = (
            f"UPDATE {t} SET expires_at = {now} + :ttl, last_timestamp = {_RAISE_MARK} "
            "WHERE namespace = :ns AND worker_id = :wid AND token = :token"
        )
        # on release the holder states exactly what it used (its renewal bounds were upper limits)
        self.release = (
            f"UPDATE {t} SET expires_at = 0, token = '', last_timestamp = :mark "
            "WHERE namespace = :ns AND worker_id = :wid AND token = :token"
        )
        self.rows = (
            f"SELECT worker_id, token, expires_at - {now}, last_timestamp FROM {t} "
            "WHERE namespace = :ns AND worker_id >= 0 ORDER BY worker_id"
        )
        self.namespaces = (
            f"SELECT DISTINCT namespace FROM {t} WHERE worker_id >= 0 AND namespace <> :hist ORDER BY namespace"
        )


def lease_sql(vendor: str, table: str) -> LeaseSQL:
    """The lease statements for ``vendor`` (a SQLAlchemy dialect or Django vendor name) on ``table``."""
    return LeaseSQL({"microsoft": "mssql"}.get(vendor, vendor), table)


def acquire(
    sql: LeaseSQL, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int
) -> Steps[Grant | None]:
    """Take a worker id nobody holds: the lowest never used, then one whose lease expired, then one
    whose row was lost.  Only the first is free of waiting: the new holder of an expired or
    released worker id waits one ttl (its record may be a restored copy older than what a live
    holder confirmed), of a lost one the whole quarantine.

    Each attempt is one conditional statement, so two processes can never both win the same id;
    the namespace's highest granted id is raised *before* a never-used id is inserted, so a
    crash between the two can only make an id look lost (a wait), never new.
    """
    found = yield from fetch(sql.scan, {"ns": namespace})
    if not any(int(r[0]) == -1 for r in found):
        yield from run(sql.insert_namespace, {"ns": namespace})
        found = yield from fetch(sql.scan, {"ns": namespace})
    now = int(found[0][3])
    born, highest = next((int(e), int(m)) for w, e, m, _ in found if int(w) == -1)
    fresh = max(0, born + quarantine_ms - now)
    known = {int(w): int(expires) for w, expires, _, _ in found if int(w) >= 0}
    unknown = [w for w in range(max_workers) if w not in known]
    params = {"ns": namespace, "token": token, "ttl": ttl_ms}
    for wid in (w for w in unknown if w > highest):
        yield from run(sql.raise_highest, {"ns": namespace, "wid": wid})
        if (yield from run(sql.insert, {**params, "wid": wid})) == 1:
            return Grant(wid, 0, fresh)
    for wid in _shuffled([w for w, expires in known.items() if w < max_workers and expires < now]):
        if (yield from run(sql.take, {**params, "wid": wid})) == 1:
            rows = yield from fetch(sql.mark, {"ns": namespace, "wid": wid, "token": token})
            # a takeover is fenced: its record may have been rolled back under a live holder, who
            # stamps at most one ttl past its last renewal, whatever mark the record shows now
            return Grant(wid, int(rows[0][0]) if rows else 0, max(fresh, ttl_ms))
    for wid in (w for w in unknown if w <= highest):  # its row was deleted: its holder may live on
        if (yield from run(sql.insert, {**params, "wid": wid})) == 1:
            return Grant(wid, 0, quarantine_ms)
    return None


def renew(sql: LeaseSQL, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> Steps[bool]:
    params = {"ns": namespace, "wid": worker_id, "token": token, "ttl": ttl_ms, "mark": mark_ms}
    return (yield from run(sql.renew, params)) == 1


def release(sql: LeaseSQL, namespace: str, worker_id: int, token: str, mark_ms: int) -> Steps[None]:
    yield from run(sql.release, {"ns": namespace, "wid": worker_id, "token": token, "mark": mark_ms})


def leases(sql: LeaseSQL, namespace: str) -> Steps[list[LeaseRow]]:
    rows = []
    for w, token, left, mark in (yield from fetch(sql.rows, {"ns": namespace})):
        held = bool(token) and int(left) > 0
        rows.append(LeaseRow(namespace, int(w), held, max(0, int(left)), int(mark), holder_of(token) if held else ""))
    return rows


def namespaces(sql: LeaseSQL) -> Steps[list[str]]:
    return [str(ns) for (ns,) in (yield from fetch(sql.namespaces, {"hist": HISTORY_NAME}))]


class SQLLeaseStore:
    """The :class:`~seqid_orm.allocation.stores.base.LeaseStore` methods of a SQL store, on the steps
    above: a subclass only says how one call reaches its own connection, by ``_run(steps_of)``
    driving ``steps_of(lease_sql)`` there (retrying a dropped connection once); an asynchronous
    twin (``_arun``, where the store has an async driver) drives the same steps on an event loop.

    Every grant first checks the store's history (:mod:`.history`): a server that can lose
    acknowledged writes is refused unless ``accept_state_loss``; one whose history went back
    makes every namespace new again, so each new holder waits out what a holder the store forgot
    may still stamp.
    """

    label: str
    accept_state_loss: bool = False
    _guard: HistoryGuard | None = None

    def _run(self, steps_of: Callable[[LeaseSQL], Steps[Any]]) -> Any:
        raise NotImplementedError

    async def _arun(self, steps_of: Callable[[LeaseSQL], Steps[Any]]) -> Any:
        """:meth:`_run` for an event loop: in a worker thread, unless the store has an async driver."""
        return await asyncio.to_thread(self._run, steps_of)

    def _acquire_steps(
        self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int
    ) -> Callable[[LeaseSQL], Steps[Grant | None]]:
        def steps(sql: LeaseSQL) -> Steps[Grant | None]:
            if self._guard is None:
                self._guard = HistoryGuard(self.label, "leases", self.accept_state_loss)
            yield from self._guard.check(sql.vendor, sql.history)
            return (yield from acquire(sql, namespace, token, max_workers, ttl_ms, quarantine_ms))

        return steps

    def acquire(self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int) -> Grant | None:
        found: Grant | None = self._run(self._acquire_steps(namespace, token, max_workers, ttl_ms, quarantine_ms))
        return found

    def renew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        return bool(self._run(lambda sql: renew(sql, namespace, worker_id, token, ttl_ms, mark_ms)))

    def release(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        self._run(lambda sql: release(sql, namespace, worker_id, token, mark_ms))

    async def aacquire(
        self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int
    ) -> Grant | None:
        found: Grant | None = await self._arun(
            self._acquire_steps(namespace, token, max_workers, ttl_ms, quarantine_ms)
        )
        return found

    async def arenew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        return bool(await self._arun(lambda sql: renew(sql, namespace, worker_id, token, ttl_ms, mark_ms)))

    async def arelease(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        await self._arun(lambda sql: release(sql, namespace, worker_id, token, mark_ms))

    def leases(self, namespace: str) -> list[LeaseRow]:
        found: list[LeaseRow] = self._run(lambda sql: leases(sql, namespace))
        return found

    def namespaces(self) -> list[str]:
        found: list[str] = self._run(namespaces)
        return found


def _shuffled(values: list[int]) -> list[int]:
    out = list(values)
    for i in range(len(out) - 1, 0, -1):  # Fisher-Yates with the OS CSPRNG
        j = secrets.randbelow(i + 1)
        out[i], out[j] = out[j], out[i]
    return out
