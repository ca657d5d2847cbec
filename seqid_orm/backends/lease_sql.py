"""The SQL of worker-id leases, per vendor: one place, used by the SQLAlchemy and Django stores.

Every statement reads the time from the database itself (``NOW_MS``): lease expiry must be
judged by a clock all nodes share, and a node whose clock is behind would otherwise take over a
lease that is still live.  Statements use ``:name`` parameters (SQLAlchemy ``text()``); the
Django store turns them into ``%(name)s``.

A worker id's row outlives its holders: on release ``expires_at`` drops to 0 and the token is
cleared, but ``last_timestamp`` (the high-water mark) stays for the next holder, who must not
make ids until its clock has passed it.
"""

from __future__ import annotations

import secrets
from typing import Any, Protocol

from ..errors import InvalidArgumentError
from .base import Grant, LeaseRow

__all__ = ["NOW_MS", "Executor", "LeaseSQL", "SQLLeaseStore", "acquire", "lease_sql", "leases", "release", "renew"]

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
        self.now = f"SELECT {now}"
        self.scan = f"SELECT worker_id, expires_at, {now} FROM {t} WHERE namespace = :ns"
        insert = (
            f"INSERT INTO {t} (namespace, worker_id, token, expires_at, last_timestamp) "
            f"VALUES (:ns, :wid, :token, {now} + :ttl, 0)"
        )
        # PostgreSQL and SQLite: no error (and no server log line) when another node won the race
        self.insert = insert + (" ON CONFLICT DO NOTHING" if vendor in ("postgresql", "sqlite") else "")
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
            "WHERE namespace = :ns ORDER BY worker_id"
        )


def lease_sql(vendor: str, table: str) -> LeaseSQL:
    """The lease statements for ``vendor`` (a SQLAlchemy dialect or Django vendor name) on ``table``."""
    return LeaseSQL({"microsoft": "mssql"}.get(vendor, vendor), table)


class Executor(Protocol):
    """How a store runs one statement on its own connection, in autocommit."""

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        """Rows of a ``SELECT``."""
        ...

    def run(self, sql: str, params: dict[str, object]) -> int:
        """Rows changed by ``INSERT``/``UPDATE``; 0 when an ``INSERT`` met an existing key."""
        ...


def acquire(ex: Executor, sql: LeaseSQL, namespace: str, token: str, max_workers: int, ttl_ms: int) -> Grant | None:
    """Take a worker id nobody holds: one never used first, then one whose lease expired.

    Candidates are tried in random order, so processes starting together rarely collide; each
    attempt is one conditional statement, so two of them can never both win the same id.
    """
    found = ex.fetch(sql.scan, {"ns": namespace})
    now = int(found[0][2]) if found else int(ex.fetch(sql.now, {})[0][0])
    known = {int(w): int(expires) for w, expires, _ in found}
    never_used = [w for w in range(max_workers) if w not in known]
    expired = [w for w, expires in known.items() if w < max_workers and expires < now]
    params = {"ns": namespace, "token": token, "ttl": ttl_ms}
    for wid in _shuffled(never_used):
        if ex.run(sql.insert, {**params, "wid": wid}) == 1:
            return Grant(wid, 0)
    for wid in _shuffled(expired):
        if ex.run(sql.take, {**params, "wid": wid}) == 1:
            rows = ex.fetch(sql.mark, {"ns": namespace, "wid": wid, "token": token})
            return Grant(wid, int(rows[0][0]) if rows else 0)
    return None


def renew(ex: Executor, sql: LeaseSQL, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
    params = {"ns": namespace, "wid": worker_id, "token": token, "ttl": ttl_ms, "mark": mark_ms}
    return ex.run(sql.renew, params) == 1


def release(ex: Executor, sql: LeaseSQL, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
    ex.run(sql.release, {"ns": namespace, "wid": worker_id, "token": token, "mark": mark_ms})


def leases(ex: Executor, sql: LeaseSQL, namespace: str) -> list[LeaseRow]:
    return [
        LeaseRow(namespace, int(w), bool(token) and int(left) > 0, max(0, int(left)), int(mark))
        for w, token, left, mark in ex.fetch(sql.rows, {"ns": namespace})
    ]


class SQLLeaseStore:
    """The :class:`~seqid_orm.backends.base.LeaseStore` methods of a SQL store, on the functions
    above: a subclass only says how one call reaches its own connection, by ``_run(fn, *args)``
    calling ``fn(executor, lease_sql, *args)`` there (retrying a dropped connection once)."""

    def _run(self, fn: Any, *args: Any) -> Any:
        raise NotImplementedError

    def acquire(self, namespace: str, token: str, max_workers: int, ttl_ms: int) -> Grant | None:
        found: Grant | None = self._run(acquire, namespace, token, max_workers, ttl_ms)
        return found

    def renew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        return bool(self._run(renew, namespace, worker_id, token, ttl_ms, mark_ms))

    def release(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        self._run(release, namespace, worker_id, token, mark_ms)

    def leases(self, namespace: str) -> list[LeaseRow]:
        found: list[LeaseRow] = self._run(leases, namespace)
        return found


def _shuffled(values: list[int]) -> list[int]:
    out = list(values)
    for i in range(len(out) - 1, 0, -1):  # Fisher-Yates with the OS CSPRNG
        j = secrets.randbelow(i + 1)
        out[i], out[j] = out[j], out[i]
    return out
