"""A store's history: what seqid records of the server it writes to, and what it decides when that changes.

A counter or a lease row is only as good as the server's memory of it.  A PostgreSQL standby
promoted while it lagged, or a cluster restored from a backup, answers with state *older* than
what processes were handed, and nothing in the rows says so.  PostgreSQL does say it elsewhere:
a promotion or a point-in-time recovery starts a new **timeline** (the first 8 hex digits of
``pg_walfile_name(pg_current_wal_lsn())``), and a new cluster has a new **system identifier**
(``pg_control_system()``; a physical standby shares its primary's).  seqid records both in the
store beside its state, with whether the writes it made then waited for a synchronous standby,
and compares at every reservation:

* same history: go on;
* a later timeline of the same system, every write recorded as synchronous: a promoted
  synchronous standby has every acknowledged write, so the new history is recorded and work goes
  on (how Patroni's ``synchronous_mode`` fails over);
* anything else (a later timeline after asynchronous writes, an earlier one, another system):
  the state may have gone back.  Ticket stores refuse (:class:`~seqid_orm.errors.StoreHistoryError`)
  until ``seqid ticket repair``; lease stores make every new holder wait out the longest mark a
  holder the store forgot may still use (one ttl plus the clock tolerance).

Before every reservation a store also refuses a server that can lose acknowledged writes by its
configuration, unless the caller accepts it (:class:`~seqid_orm.errors.VolatileStoreError`,
``accept_state_loss``): a PostgreSQL primary with asynchronous standbys and no synchronous one, a
MariaDB primary whose replicas read its binary log asynchronously (no lossless semi-synchronous
replication; a Galera node is synchronous).  MariaDB tells no history to compare, but it does
tell that.

The decisions (:func:`judge`, :func:`durability_problem`, :class:`HistoryGuard`) are pure and
shared by every SQL store (SQLAlchemy's and Django's); the statements are text, yielded as
:mod:`seqid_orm.calls.steps` for a synchronous or an asynchronous connection to run.  Only PostgreSQL tells its history;
MariaDB, MySQL and SQLite are not tracked (docs/how-to/production.md says what that leaves to the operator);
MariaDB's replication is judged.

The record lives in the store's own table, in a row no sequence or namespace can be named
(names start with a letter or digit), so no table changes shape:

* tickets: ``name = '~history'``, ``next_value`` = timeline, ``step`` = system identifier (as a
  signed 64-bit integer), ``value_offset`` = 1 when synchronous;
* leases: ``namespace = '~history'``, ``worker_id = 0``, ``expires_at`` = timeline,
  ``last_timestamp`` = system identifier, ``token`` = ``'1'`` when synchronous.

Redis tells less (:func:`lacks_write`, measured on Redis 7.0): every start, a ``kill -9`` or a clean
``SHUTDOWN`` alike, begins a new replication id at offset 0 with no link to the last one (and so does
a primary's first replica after that), so the id cannot tell a restart from an old primary restarted
beside its successor, or from a node restored from a backup.  And no record kept in the data set can
witness its own loss (a node that holds a record holds every write before it), so what a node lacks
is known only to the processes that saw those writes confirmed.  So each seqid write counts itself
in the data set under the replication id it was made in, and each Redis store remembers its last
confirmed write as that pair (:class:`ReplicationPoint`): a node whose data set counted less there
lacks the write, whatever id it serves now, and is refused; a restarted one counted as far.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's.
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...calls.retry import HISTORY_ROW, Again
from ...calls.steps import Steps, fetch, run
from ...errors import BackendUnavailableError, StoreHistoryError, VolatileStoreError

__all__ = [
    "HISTORY_NAME",
    "HistoryGuard",
    "HistoryRecords",
    "ReplicationPoint",
    "StoreHistory",
    "Verdict",
    "durability_problem",
    "judge",
    "lacks_write",
    "lease_records",
    "mariadb_durability_problem",
    "read_present",
    "ticket_records",
]


#: The name of the history row in the ticket and lease tables (no sequence or namespace can have it).
HISTORY_NAME = "~history"

# One round trip: the system identifier, the timeline (-1 on a standby, where pg_walfile_name
# fails), whether commits wait for a synchronous standby, and how many standbys stream from here.
# CAST(), not ::, which the Django store would read as a :name parameter.
_PRESENT_PG = (
    "SELECT (SELECT system_identifier FROM pg_control_system()), "
    "CASE WHEN pg_is_in_recovery() THEN -1 "
    "ELSE CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS bit(32)) AS integer) END, "
    "current_setting('synchronous_standby_names'), current_setting('synchronous_commit'), "
    "(SELECT count(*) FROM pg_stat_replication)"
)
# synchronous_commit levels at which a commit waits for the synchronous standbys (remote_write:
# in the standby's memory; on: flushed there; remote_apply: replayed there)
_WAITING_LEVELS = ("on", "remote_write", "remote_apply")


def _signed64(value: int) -> int:
    """An unsigned 64-bit identifier as the signed BIGINT a column holds."""
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class StoreHistory:
    """What a server says of its history now, or what a store recorded of it."""

    system: int
    """The cluster's system identifier (signed 64-bit): new for a new cluster, shared by its standbys."""
    timeline: int
    """The timeline the server writes on: one more after every promotion or point-in-time recovery."""
    synchronous: bool
    """Commits wait for a synchronous standby (recorded: every write seqid made since was synchronous)."""
    async_standbys: int = 0
    """Standbys streaming from this server while commits do not wait for any (present only)."""
    in_recovery: bool = False
    """The server is a standby (read-only) now."""

    def describe(self) -> str:
        mode = "synchronous" if self.synchronous else "asynchronous or unreplicated"
        return f"system {self.system & ((1 << 64) - 1)}, timeline {self.timeline}, {mode} commits"


def read_present(vendor: str) -> Steps[StoreHistory | None]:
    """What the server says of its history (``None`` where the vendor tells none)."""
    if vendor != "postgresql":
        return None
    system, timeline, names, level, standbys = (yield from fetch(_PRESENT_PG, {}))[0]
    synchronous = bool(str(names).strip()) and str(level) in _WAITING_LEVELS
    return StoreHistory(
        _signed64(int(system)),
        int(timeline),
        synchronous,
        0 if synchronous else int(standbys),
        int(timeline) < 0,
    )


# MariaDB: the replicas streaming the binary log from here (their dump threads: seen by a user with
# the PROCESS privilege, which an application user often lacks, and then none are seen), whether
# this is a Galera node, whether semi-synchronous replication is on *now* (it falls back to
# asynchronous after rpl_semi_sync_master_timeout) and its wait point (AFTER_SYNC: the replica has
# the transaction before any client sees it committed; AFTER_COMMIT acknowledges first).
# https://mariadb.com/kb/en/semisynchronous-replication/
_PRESENT_MARIADB = (
    "SELECT (SELECT COUNT(*) FROM information_schema.PROCESSLIST "
    "WHERE COMMAND IN ('Binlog Dump', 'Binlog Dump GTID')), "
    "(SELECT MAX(VARIABLE_VALUE) FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME = 'WSREP_ON'), "
    "(SELECT MAX(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS'), "
    "(SELECT MAX(VARIABLE_VALUE) FROM information_schema.GLOBAL_VARIABLES "
    "WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_WAIT_POINT')"
)
# MySQL 5.7+ moved these tables to performance_schema: the query above then fails with one of
# these errors, and the check is skipped (no MySQL server is tested here; docs/how-to/production.md says so)
_NOT_MARIADB = (1109, 1146, 3167)


def mariadb_durability_problem(replicas: int, galera: bool, semi_sync: bool, wait_point: str) -> str | None:
    """Why a MariaDB primary can lose writes it acknowledged (``None``: it cannot, as far as it says)."""
    if galera or replicas == 0 or (semi_sync and wait_point.upper() == "AFTER_SYNC"):
        return None
    how = (
        "semi-synchronous replication waits AFTER_COMMIT (a client may see a commit the replicas lack)"
        if semi_sync
        else "no replica confirms a commit (rpl_semi_sync_master_enabled is off, or semi-synchronous replication "
        "fell back to asynchronous after rpl_semi_sync_master_timeout)"
    )
    return (
        f"{replicas} replica(s) read its binary log and {how}: a failover to a replica that lagged loses the last "
        "reservations it acknowledged, and ids repeat. Enable semi-synchronous replication with "
        "rpl_semi_sync_master_wait_point = AFTER_SYNC on the primary and rpl_semi_sync_slave_enabled on the "
        "replicas (and a rpl_semi_sync_master_timeout longer than any failover), or use Galera"
    )


def read_mariadb_problem() -> Steps[str | None]:
    """:func:`mariadb_durability_problem` for the server (``None`` on MySQL, see above)."""
    try:
        replicas, wsrep, status, wait_point = (yield from fetch(_PRESENT_MARIADB, {}))[0]
    except Exception as exc:
        orig = getattr(exc, "orig", None) or exc.__cause__ or exc
        if getattr(orig, "args", (None,))[:1] and orig.args[0] in _NOT_MARIADB:
            return None
        raise
    return mariadb_durability_problem(
        int(replicas or 0), str(wsrep).upper() == "ON", str(status).upper() == "ON", str(wait_point or "")
    )


def durability_problem(present: StoreHistory) -> str | None:
    """Why this server can lose writes it acknowledged, by its configuration (``None``: it cannot)."""
    if present.async_standbys:
        return (
            f"{present.async_standbys} standby(s) stream from it asynchronously and no commit waits for one "
            "(synchronous_standby_names is empty, or synchronous_commit is off or local): a failover to a "
            "standby that lagged loses the last reservations it acknowledged, and ids repeat. Set "
            "synchronous_standby_names (Patroni: synchronous_mode: true) with synchronous_commit = on"
        )
    return None


def _recorded_form(history: StoreHistory) -> tuple[int, int, bool]:
    return history.system, history.timeline, history.synchronous


class Verdict(enum.Enum):
    """What :func:`judge` decides."""

    SAME = "same"
    RECORD = "record"  # nothing recorded yet: record the present
    ACCEPT = "accept"  # a promotion of a synchronous standby: record the present, go on
    ROLLED_BACK = "rolled-back"  # the state may be older than what processes were handed


def judge(recorded: StoreHistory | None, present: StoreHistory) -> Verdict:
    """The decision for a store that recorded ``recorded`` and says ``present`` now."""
    if recorded is None:
        return Verdict.RECORD
    if recorded.system != present.system or present.timeline < recorded.timeline:
        return Verdict.ROLLED_BACK
    if present.timeline == recorded.timeline:
        return Verdict.SAME
    return Verdict.ACCEPT if recorded.synchronous else Verdict.ROLLED_BACK


@dataclass(frozen=True)
class ReplicationPoint:
    """A seqid write a Redis primary's replicas confirmed, by the history it was made in and its rank
    there (what :data:`~.redis.REPLICATION_KEY` recorded with it)."""

    replid: str
    """The primary's replication id when the write was made (``master_replid``)."""
    writes: int
    """How many seqid writes the data set had recorded under ``replid``, this one included."""


def lacks_write(known: ReplicationPoint | None, info: dict[str, Any], recorded: int | None) -> str | None:
    """Why the Redis primary that answered ``info`` (``INFO replication``) does not hold the write
    ``known``, which replicas confirmed; ``None`` when it holds it (or nothing was confirmed yet).

    ``recorded``: how many writes the primary's data set records under ``known.replid`` (``None``:
    none).  Each seqid write counts itself there, in the data set, with the replication id it was
    made under; a copy of the data set has the write exactly when its count there reached the
    write's.  The id alone cannot tell (measured on Redis 7.0, ``tests/tickets/test_failover.py``):
    a restart, after ``SHUTDOWN`` or ``kill -9`` alike, begins a new id at offset 0, and so does a
    primary's first replica after that; an AOF reload keeps it.  So a node that serves another id
    holds the write when its data set counted that far (a restart, a promoted replica that had it)
    and lacks it otherwise: an old primary still serving beside the one promoted in its place (its
    own replica or not), a node restored from a backup, a replica promoted before the write reached
    it (the message then says where it left, from ``master_replid2`` and ``second_repl_offset``).

    >>> known = ReplicationPoint("a" * 40, 7)
    >>> lacks_write(known, {"master_replid": "a" * 40}, None)
    >>> lacks_write(known, {"master_replid": "b" * 40}, 7)  # restarted, or promoted with it
    >>> lacks_write(known, {"master_replid": "b" * 40}, 6)[:50]
    'does not continue replication history aaaaaaaaaaaa'
    >>> lacks_write(known, {"master_replid": "b" * 40, "master_replid2": "a" * 40, "second_repl_offset": 501}, 6)[:60]
    'was promoted from a replica that left replication history aa'
    """
    if known is None or str(info.get("master_replid")) == known.replid:
        return None
    if recorded is not None and recorded >= known.writes:
        return None
    counted = f"its data set counts {recorded or 0} seqid write(s) there, and write {known.writes} was confirmed"
    if str(info.get("master_replid2")) == known.replid:
        left = int(info.get("second_repl_offset", -1)) - 1
        return (
            f"was promoted from a replica that left replication history {known.replid} at offset {left}, before a "
            f"write confirmed there ({counted})"
        )
    return (
        f"does not continue replication history {known.replid} ({counted}): an old primary serving beside the one "
        "promoted in its place, or a node restored from a backup"
    )


@dataclass(frozen=True)
class HistoryRecords:
    """The statements that read and write the history row of one table."""

    select: str
    insert: str
    update: str
    """Replaces the row; ``:old_*`` parameters make it conditional on what was read."""
    rebirth: str
    """For leases: every namespace counts as new from now (its holders wait the quarantine)."""
    unpack: Callable[[tuple[Any, ...]], StoreHistory]
    pack: Callable[[StoreHistory], dict[str, object]]


@functools.cache
def ticket_records(table: str) -> HistoryRecords:
    """The history row of a ticket table (``table`` quoted)."""
    where = f"name = '{HISTORY_NAME}'"
    return HistoryRecords(
        select=f"SELECT next_value, step, value_offset FROM {table} WHERE {where}",
        insert=(
            f"INSERT INTO {table} (name, next_value, step, value_offset) "
            f"VALUES ('{HISTORY_NAME}', :timeline, :system, :sync) ON CONFLICT DO NOTHING"
        ),
        update=(
            f"UPDATE {table} SET next_value = :timeline, step = :system, value_offset = :sync "
            f"WHERE {where} AND next_value = :old_timeline AND step = :old_system"
        ),
        rebirth="",
        unpack=lambda r: StoreHistory(int(r[1]), int(r[0]), bool(int(r[2]))),
        pack=lambda h: {"timeline": h.timeline, "system": h.system, "sync": int(h.synchronous)},
    )


@functools.cache
def lease_records(table: str, now_ms: str) -> HistoryRecords:
    """The history row of a lease table (``table`` quoted; ``now_ms`` the database's time in Unix ms)."""
    where = f"namespace = '{HISTORY_NAME}' AND worker_id = 0"
    return HistoryRecords(
        select=f"SELECT expires_at, last_timestamp, token FROM {table} WHERE {where}",
        insert=(
            f"INSERT INTO {table} (namespace, worker_id, token, expires_at, last_timestamp) "
            f"VALUES ('{HISTORY_NAME}', 0, :sync, :timeline, :system) ON CONFLICT DO NOTHING"
        ),
        update=(
            f"UPDATE {table} SET expires_at = :timeline, last_timestamp = :system, token = :sync "
            f"WHERE {where} AND expires_at = :old_timeline AND last_timestamp = :old_system"
        ),
        rebirth=f"UPDATE {table} SET expires_at = {now_ms} WHERE worker_id = -1",
        unpack=lambda r: StoreHistory(int(r[1]), int(r[0]), str(r[2]) == "1"),
        pack=lambda h: {"timeline": h.timeline, "system": h.system, "sync": "1" if h.synchronous else "0"},
    )


def _record(records: HistoryRecords, recorded: StoreHistory | None, present: StoreHistory) -> Steps[bool]:
    """Make the history row say ``present`` where it said ``recorded`` (insert it where there was
    none); ``False`` when another process wrote it between the read and this write."""
    if recorded is None:
        return (yield from run(records.insert, records.pack(present))) == 1
    if _recorded_form(recorded) == _recorded_form(present):
        return True
    old = {"old_timeline": recorded.timeline, "old_system": recorded.system}
    return (yield from run(records.update, {**records.pack(present), **old})) == 1


class HistoryGuard:
    """One store's view of its history: checked before every reservation or grant.

    The present is read in one round trip (PostgreSQL only); the recorded row only when the
    present differs from what this process saw last.  ``what`` is ``"tickets"`` (a history that
    went back is refused) or ``"leases"`` (it starts a quarantine instead).
    """

    def __init__(self, label: str, what: str, accept_state_loss: bool) -> None:
        self.label = label
        self.what = what
        self.accept_state_loss = accept_state_loss
        self._seen: StoreHistory | None = None
        self._lock = threading.Lock()

    def check(self, vendor: str, records: HistoryRecords) -> Steps[Verdict]:
        """Judge the store's history now; raise where it must be refused."""
        present = yield from read_present(vendor)
        if present is None:
            if vendor in ("mysql", "mariadb") and not self.accept_state_loss:
                problem = yield from read_mariadb_problem()
                if problem is not None:
                    raise VolatileStoreError(f"{self.label}: {problem}; or pass accept_state_loss=True")
            return Verdict.SAME
        if present.in_recovery:
            raise BackendUnavailableError(
                f"{self.label} is a standby (in recovery, read-only): point the URL at the primary (libpq: "
                "several hosts and target_session_attrs=read-write)"
            )
        with self._lock:
            if present == self._seen:
                return Verdict.SAME
        if not self.accept_state_loss:
            problem = durability_problem(present)
            if problem is not None:
                raise VolatileStoreError(
                    f"{self.label}: {problem}; or pass accept_state_loss=True (?accept_state_loss=true) to accept "
                    "that risk (seqid still refuses a history it sees go back)"
                )
        verdict = yield from self._settle(present, records)
        with self._lock:
            self._seen = present
        return verdict

    def _settle(self, present: StoreHistory, records: HistoryRecords) -> Steps[Verdict]:
        def settle(left: float) -> Steps[Verdict]:  # another process may write the row between read and write
            rows = yield from fetch(records.select, {})
            recorded = records.unpack(rows[0]) if rows else None
            verdict = judge(recorded, present)
            if verdict is Verdict.ROLLED_BACK:
                if self.what == "tickets":
                    raise StoreHistoryError(self._refusal(recorded, present))
                yield from run(records.rebirth, {})  # every namespace is new again: grants wait the quarantine
            if not (yield from _record(records, recorded, present)):
                raise Again(BackendUnavailableError(f"{self.label}: its history row changed under every attempt"))
            return verdict

        return (yield from HISTORY_ROW.steps(settle))

    def adopt(self, vendor: str, records: HistoryRecords) -> Steps[None]:
        """Record the present history whatever was recorded (``seqid ticket repair``, after the
        counters were moved above every id in use)."""
        present = yield from read_present(vendor)
        if present is None or present.in_recovery:
            return
        rows = yield from fetch(records.select, {})
        yield from _record(records, records.unpack(rows[0]) if rows else None, present)
        with self._lock:
            self._seen = present

    def _refusal(self, recorded: StoreHistory | None, present: StoreHistory) -> str:
        assert recorded is not None
        if recorded.system != present.system:
            why = "it is another cluster (a new system identifier: a restore into a new cluster, or another server)"
        elif present.timeline < recorded.timeline:
            why = "it is on an earlier timeline than the one recorded (a restore from an older backup)"
        else:
            why = (
                "it started a new timeline (a standby promoted, or a point-in-time recovery) after writes that "
                "did not wait for a synchronous standby, so it may lack the last blocks it handed out"
            )
        return (
            f"{self.label} recorded {recorded.describe()} but says {present.describe()}: {why}. Handing out its "
            "counters could repeat ids, so ticket sequences refuse this store until `seqid ticket repair` moves "
            "every counter above the largest id in use and records the new history"
        )
