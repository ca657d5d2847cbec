"""The SQL of the migration lock, per vendor: one place, used by the SQLAlchemy and Django stores.

Several pods that deploy at once run the same migrations.  A lock that outlives the migration's
transactions and holds through a transaction pooler is a row with an owner and an expiry, renewed while
held (a lease), not a session lock (PostgreSQL's advisory locks and MariaDB's ``GET_LOCK`` belong to
a session, which PgBouncer in transaction pooling hands to other clients between transactions: a lock
taken there strands on a pooled server connection and every later pod waits behind it, as
authentik#23876 and IBM/mcp-context-forge#4051 found).  One row per lock name::

    seqid_migration_locks(name VARCHAR(64) PRIMARY KEY, holder VARCHAR(255), token VARCHAR(32),
                          acquired_at BIGINT, expires_at BIGINT)

Every statement reads the time from the database (:data:`~.lease_sql.NOW_MS`): expiry is judged by the
one clock every pod shares.  A dead holder's row expires and the next run takes it over; a live holder
renews it (:mod:`seqid_orm.allocation.migration_lock`).  The functions below are :mod:`seqid_orm.calls.steps`.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's ``base``,
``lease_sql`` and ``steps``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...calls.steps import Steps, fetch, run
from ...errors import InvalidArgumentError
from .lease_sql import NOW_MS

__all__ = ["LOCK_TABLE", "LockHolder", "LockSQL", "SQLLockStore", "lock_sql"]

#: The migration lock's table.
LOCK_TABLE = "seqid_migration_locks"
#: The longest holder description kept (host, process, what runs).
HOLDER_LENGTH = 255


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock, as its row says: what an error names."""

    holder: str
    held_for_ms: int
    """How long it has held it (the database's clock)."""
    expires_in_ms: int
    """When its lease ends unless it renews it (negative: expired, free to take)."""


class LockSQL:
    """The statements of one vendor on one table."""

    def __init__(self, vendor: str, table: str) -> None:
        now = NOW_MS.get(vendor)
        if now is None or vendor == "mssql":
            raise InvalidArgumentError(
                f"the migration lock is written for PostgreSQL, MariaDB/MySQL and SQLite, not {vendor!r}"
            )
        self.vendor = vendor
        # PostgreSQL and SQLite: no error (and no server log line) when another pod got there first;
        # MariaDB's duplicate key is read as 0 rows by the executors
        if_absent = " ON CONFLICT DO NOTHING" if vendor in ("postgresql", "sqlite") else ""
        self.create = (
            f"CREATE TABLE IF NOT EXISTS {table} (name VARCHAR(64) NOT NULL PRIMARY KEY, "
            f"holder VARCHAR({HOLDER_LENGTH}) NOT NULL, token VARCHAR(32) NOT NULL, "
            "acquired_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)"
        )
        self.insert = (
            f"INSERT INTO {table} (name, holder, token, acquired_at, expires_at) "
            f"VALUES (:name, :holder, :token, {now}, {now} + :ttl)" + if_absent
        )
        self.take = (
            f"UPDATE {table} SET holder = :holder, token = :token, acquired_at = {now}, expires_at = {now} + :ttl "
            f"WHERE name = :name AND expires_at < {now}"
        )
        # a holder whose row still carries its token renews, late or not: nobody took it in between
        self.renew = f"UPDATE {table} SET expires_at = {now} + :ttl WHERE name = :name AND token = :token"
        self.release = f"DELETE FROM {table} WHERE name = :name AND token = :token"
        self.holder = f"SELECT holder, {now} - acquired_at, expires_at - {now} FROM {table} WHERE name = :name"


def lock_sql(vendor: str, table: str) -> LockSQL:
    """The lock statements for ``vendor`` (a SQLAlchemy dialect or Django vendor name) on ``table``."""
    return LockSQL(vendor, table)


def take(sql: LockSQL, name: str, holder: str, token: str, ttl_ms: int) -> Steps[bool]:
    """Take the lock where nobody holds it: a new row, or a row whose lease expired (its holder died or
    froze past it).  One conditional statement each, so two pods never both win."""
    params = {"name": name, "holder": holder[:HOLDER_LENGTH], "token": token, "ttl": ttl_ms}
    if (yield from run(sql.insert, params)) == 1:
        return True
    return bool((yield from run(sql.take, params)) == 1)


def renew(sql: LockSQL, name: str, token: str, ttl_ms: int) -> Steps[bool]:
    return bool((yield from run(sql.renew, {"name": name, "token": token, "ttl": ttl_ms})) == 1)


def release(sql: LockSQL, name: str, token: str) -> Steps[None]:
    yield from run(sql.release, {"name": name, "token": token})


def holder(sql: LockSQL, name: str) -> Steps[LockHolder | None]:
    rows = yield from fetch(sql.holder, {"name": name})
    if not rows:
        return None
    who, held, left = rows[0]
    return LockHolder(str(who), int(held), int(left))


class SQLLockStore:
    """The lock store's methods on the steps above: a subclass only says how one call reaches its own
    connection (``_run(steps_of)``), as :class:`~.lease_sql.SQLLeaseStore`'s do."""

    label: str

    def _run(self, steps_of: Callable[[LockSQL], Steps[Any]]) -> Any:
        raise NotImplementedError

    def take(self, name: str, holder: str, token: str, ttl_ms: int) -> bool:
        return bool(self._run(lambda sql: take(sql, name, holder, token, ttl_ms)))

    def renew(self, name: str, token: str, ttl_ms: int) -> bool:
        return bool(self._run(lambda sql: renew(sql, name, token, ttl_ms)))

    def release(self, name: str, token: str) -> None:
        self._run(lambda sql: release(sql, name, token))

    def holder(self, name: str) -> LockHolder | None:
        found: LockHolder | None = self._run(lambda sql: holder(sql, name))
        return found
