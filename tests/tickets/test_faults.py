"""Ticket sequences under the faults a hostile operator (or an ordinary week) brings: a Redis that
restarts empty, a ticket row restored from an older backup or deleted and re-created, fail-over to a
server that lost its counter, servers listed in another order.  Real processes, real servers; every
id a worker prints was first inserted into a table bound to the sequence, and across all of them
no id may appear twice: each fault ends in 0 duplicates and, where seqid refuses, a typed error.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter

import pytest

from seqid_orm.allocation.stores.sqlalchemy import ColumnFloor
from seqid_orm.allocation.tickets import TicketSequence
from seqid_orm.errors import (
    AllocationError,
    BackendMismatchError,
    CounterBelowDataError,
    StoreTimeoutError,
    VolatileStoreError,
)
from tests.conftest import MYSQL_URL, POSTGRES_URL, volatile_ok
from tests.servers.private import PrivateRedis
from tests.tickets.conftest import forget
from tests.tickets.procs import Worker, start_together

sa = pytest.importorskip("sqlalchemy")
redis = pytest.importorskip("redis")

pytestmark = pytest.mark.slow


@pytest.fixture
def data_table(pg_engine):
    """A key table on the shared PostgreSQL that the workers fill (the sequence's floor)."""
    name = f"keys_{secrets.token_hex(4)}"
    table = sa.Table(name, sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True))
    table.create(pg_engine)
    yield name
    table.drop(pg_engine)


def keyed_worker(servers, name, table, **opts) -> Worker:
    return Worker(servers=servers, name=name, table=table, table_url=POSTGRES_URL, **opts)


def ended(worker: Worker, timeout: float = 120.0) -> str:
    """How a worker ended: ``done``, or its ``error ...`` line; a crash (a traceback, an insert that met
    a duplicate key) fails the test."""
    worker.expect("<eof>", timeout)
    worker.proc.wait(timeout)
    assert worker.proc.returncode == 0, worker.stderr()
    last = [line for line in worker.lines if line != "<eof>"][-1]
    assert last == "done" or last.startswith("error "), last
    return last


def assert_unique(*workers: Worker) -> list[int]:
    ids = [i for w in workers for i in w.ids()]
    repeated = [i for i, n in Counter(ids).items() if n > 1]
    assert repeated == [], f"{len(repeated)} ids handed out twice"
    return ids


def counter_row(url: str, name: str):
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            return conn.execute(sa.text("SELECT next_value FROM seqid_tickets WHERE name = :n"), {"n": name}).scalar()
    finally:
        engine.dispose()


def sql(url: str, statement: str, **params) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement), params)
    finally:
        engine.dispose()


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def sql_server(request):
    """Each SQL ticket server in turn (the ``server`` fixture without Redis)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_engine")
        return POSTGRES_URL
    if request.param == "mysql":
        request.getfixturevalue("mysql_engine")
        return MYSQL_URL
    return request.getfixturevalue("sqlite_ticket_url")


def test_a_redis_without_persistence_is_refused_and_leaves_no_key(redis_url, seq_name):
    client = redis.Redis.from_url(redis_url)
    try:
        with TicketSequence(seq_name, redis_url) as seq, pytest.raises(VolatileStoreError, match="appendonly=no"):
            seq.next_id()
        assert client.exists(f"seqid:tickets:{seq_name}") == 0
        with TicketSequence(seq_name, redis_url, accept_state_loss=True) as seq:  # said explicitly
            assert seq.next_id() == 1
    finally:
        client.close()


@pytest.mark.system("redis-server")
def test_a_redis_restarted_empty_repeats_no_id(data_table, seq_name):
    """Before: the running process was refused at first, but once a new process re-created the key
    both started over (3,000 + 2,000 ids repeated).  Now the new process is refused by the keys
    already in the table, the running one by its own high-water mark, and a repair lets them go on."""
    with PrivateRedis() as private:
        url = volatile_ok(private.url)
        a = keyed_worker(url, seq_name, data_table, count=3000, pace=0.001, options={"block_size": 100})
        b = None
        try:
            start_together([a])
            a.wait_for_ids(1000)
            private.stop()
            private.start()  # the same port, nothing kept
            b = keyed_worker(url, seq_name, data_table, count=2000, options={"block_size": 100})
            start_together([b])
            assert ended(b).startswith("error CounterBelowDataError")
            assert ended(a).startswith(("error CounterRegressedError", "error AllocationError"))
            drawn = assert_unique(a, b)
            # the operator's way back: counters above the largest key, then everyone goes on
            from seqid_orm.allocation.stores.sqlalchemy import ColumnFloor

            table = sa.Table(data_table, sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True))
            engine = sa.create_engine(POSTGRES_URL)
            with TicketSequence(seq_name, url, floor=ColumnFloor(engine, table.c.id)) as fixer:
                [(_, row)] = fixer.repair()
            engine.dispose()
            assert row.next_value == max(drawn) + 1
            c = keyed_worker(url, seq_name, data_table, count=1000, options={"block_size": 100})
            start_together([c])
            assert ended(c) == "done"
            assert_unique(a, b, c)
        finally:
            for w in (a, b):
                if w is not None:
                    w.stop()


def test_a_ticket_row_restored_from_an_older_backup_repeats_no_id(sql_server, data_table, seq_name):
    """Before: the running process accepted the lower range and repeated 1,900 of its own ids."""
    a = keyed_worker(sql_server, seq_name, data_table, count=4000, pace=0.0005, options={"block_size": 100})
    try:
        start_together([a])
        a.wait_for_ids(300)
        backup = counter_row(sql_server, seq_name)
        a.wait_for_ids(2000)
        sql(sql_server, "UPDATE seqid_tickets SET next_value = :v WHERE name = :n", v=backup, n=seq_name)
        assert ended(a).startswith("error CounterRegressedError")
        b = keyed_worker(sql_server, seq_name, data_table, count=500, options={"block_size": 100})
        start_together([b])
        assert ended(b).startswith("error CounterBelowDataError")  # a process started after the restore
        assert_unique(a, b)
    finally:
        a.stop()
        forget(seq_name, [sql_server])


def test_a_ticket_row_deleted_and_re_created_by_a_new_process_repeats_no_id(sql_server, data_table, seq_name):
    """Before: 1,000 ids repeated on each engine."""
    a = keyed_worker(sql_server, seq_name, data_table, count=4000, pace=0.0005, options={"block_size": 100})
    b = None
    try:
        start_together([a])
        a.wait_for_ids(1000)
        sql(sql_server, "DELETE FROM seqid_tickets WHERE name = :n", n=seq_name)
        b = keyed_worker(sql_server, seq_name, data_table, count=1000, options={"block_size": 100})
        start_together([b])
        assert ended(b).startswith("error CounterBelowDataError")  # it re-created the row at 1
        assert ended(a).startswith(("error CounterRegressedError", "error AllocationError"))
        assert_unique(a, b)
    finally:
        for w in (a, b):
            if w is not None:
                w.stop()
        forget(seq_name, [sql_server])


@pytest.mark.system("redis-server")
def test_fail_over_to_a_server_that_lost_its_counter_repeats_no_id(sqlite_ticket_url, data_table, seq_name):
    """Two servers; the second loses its counter while the first goes down.  Before: the process that
    failed over to it took the counter afresh and 5,900 ids repeated."""
    with PrivateRedis() as private:
        servers = [volatile_ok(private.url), sqlite_ticket_url]
        opts = {"block_size": 50, "connect_timeout": 1}
        on_second = keyed_worker(
            servers, seq_name, data_table, count=6000, pace=0.0005, options={**opts, "start_server": 1}
        )
        on_first = keyed_worker(
            servers, seq_name, data_table, count=6000, pace=0.0005, options={**opts, "start_server": 0}
        )
        late = None
        try:
            start_together([on_second, on_first])
            on_second.wait_for_ids(1500)
            on_first.wait_for_ids(500)
            sql(sqlite_ticket_url, "DELETE FROM seqid_tickets WHERE name = :n", n=seq_name)
            private.stop()
            assert ended(on_first).startswith("error ")  # failed over to the emptied server: refused
            assert ended(on_second).startswith("error ")
            late = keyed_worker(servers, seq_name, data_table, count=500, options=opts)
            start_together([late])
            assert ended(late).startswith("error BackendUnavailableError")  # not re-created half-way
            assert_unique(on_second, on_first, late)
        finally:
            for w in (on_second, on_first, late):
                if w is not None:
                    w.stop()
            forget(seq_name, [sqlite_ticket_url])


def test_a_client_listing_the_servers_in_another_order_is_the_one_refused(tmp_path, seq_name):
    """Before: accepted, and 30 of its 30 ids overlapped the correctly configured client's."""
    one, two = (f"sqlite:///{tmp_path / f'{n}.sqlite3'}" for n in ("one", "two"))
    with TicketSequence(seq_name, [one, two], start_server=0, block_size=10) as right:
        first = right.next_ids(30)
        with TicketSequence(seq_name, [two, one], start_server=0, block_size=10) as wrong:
            with pytest.raises(BackendMismatchError, match="same order"):
                wrong.next_id()
            assert wrong.fetches == 0  # refused before it handed out an id
        assert right.next_ids(30)[0] > first[-1]  # the right one goes on
    with TicketSequence(seq_name, [one], block_size=10) as short, pytest.raises(BackendMismatchError):
        short.next_id()  # a shorter list contradicts the recorded set too


def test_clients_racing_on_a_new_sequence_with_opposite_orders_never_overlap(tmp_path):
    """Both start at once on fresh servers: at most one configuration wins every server."""
    for trial in range(4):
        name = f"race-{trial}-{secrets.token_hex(3)}"
        one, two = (f"sqlite:///{tmp_path / f'{n}.sqlite3'}" for n in ("one", "two"))
        workers = [
            Worker(servers=order, name=name, count=30, options={"block_size": 10, "start_server": 0})
            for order in ([one, two], [two, one])
        ]
        try:
            start_together(workers)
            endings = [ended(w) for w in workers]
            assert sum(e == "done" for e in endings) <= 1
            assert all(e == "done" or e.startswith("error BackendMismatchError") for e in endings)
            assert_unique(*workers)
        finally:
            for w in workers:
                w.stop()


def test_a_sequence_missing_on_one_server_is_not_started_over_there(tmp_path, seq_name):
    one, two = (f"sqlite:///{tmp_path / f'{n}.sqlite3'}" for n in ("one", "two"))
    with TicketSequence(seq_name, [one, two], start_server=0, block_size=10, double_buffer=False) as seq:
        seq.next_id()  # from the first server; the second has handed out nothing
    sql(two, "DELETE FROM seqid_tickets WHERE name = :n", n=seq_name)
    with TicketSequence(seq_name, [one, two]) as seq, pytest.raises(AllocationError, match="but not on"):
        seq.next_id()
    with TicketSequence(seq_name, [one, two]) as seq:
        rows = dict((label, row.next_value) for label, row in seq.repair(above=500))
        assert rows == {one: 501, two: 502}  # the first values above 500 with offsets 1 and 2 of step 2
        assert seq.next_id() > 500


def test_workers_bound_to_a_key_column_and_started_together_are_not_refused(data_table, seq_name):
    """No fault at all: three workers fill one key column. Before, the floor read every key above a
    block's first value, so a faster worker's later block made the slower ones refuse at start
    (2 of 3 refused with CounterBelowDataError); now only keys inside the block's own range count."""
    workers = [
        keyed_worker(POSTGRES_URL, seq_name, data_table, count=600, options={"block_size": 20}) for _ in range(3)
    ]
    try:
        start_together(workers)
        assert [ended(w) for w in workers] == ["done"] * 3
        ids = [i for w in workers for i in w.ids()]
        assert len(ids) == len(set(ids)) == 1800
    finally:
        for w in workers:
            w.stop()


def test_every_block_is_checked_against_the_keys_not_only_the_first(data_table, seq_name, pg_engine):
    """A counter put back *under a running process*, to a value above what that process drew but below
    another's keys: its next block passes its own high-water mark, and only a floor check of every
    block (not only the first from each server) refuses it before a duplicate-key insert."""
    table = sa.Table(data_table, sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True))
    floor_engine = sa.create_engine(POSTGRES_URL)
    options = {"block_size": 10, "double_buffer": False}
    seq = TicketSequence(seq_name, POSTGRES_URL, floor=ColumnFloor(floor_engine, table.c.id), **options)
    other = TicketSequence(seq_name, POSTGRES_URL, **options)
    try:
        ours = [seq.next_id() for _ in range(10)]  # 1..10: the first block, checked
        theirs = [other.next_id() for _ in range(30)]  # 11..40: another process, keys inserted
        with pg_engine.begin() as conn:
            conn.execute(table.insert(), [{"id": i} for i in ours + theirs])
            # the counter is put back to 11 (a row restored from a copy taken seconds earlier)
            conn.execute(sa.text("UPDATE seqid_tickets SET next_value = 11 WHERE name = :n"), {"n": seq_name})
        with pytest.raises(CounterBelowDataError, match="already holds the key 20"):
            seq.next_id()  # the block 11..20 is above our own 10, but its keys are taken
    finally:
        seq.close()
        other.close()
        floor_engine.dispose()


DURABLE = ("--appendonly", "yes", "--appendfsync", "always")


@pytest.mark.system("redis-server")
def test_a_redis_that_may_evict_every_key_is_refused_naming_the_policy(seq_name):
    """Before: allkeys-lru accepted, and 250 of 500 ids repeated once the counter was evicted."""
    with (
        PrivateRedis("redis-server", *DURABLE, "--maxmemory-policy", "allkeys-lru") as private,
        TicketSequence(seq_name, private.url) as seq,
        pytest.raises(VolatileStoreError, match="maxmemory-policy allkeys-lru"),
    ):
        seq.next_id()
    # volatile-* evicts keys with a TTL only: counters have none
    with (
        PrivateRedis("redis-server", *DURABLE, "--maxmemory-policy", "volatile-lru") as private,
        TicketSequence(seq_name, private.url) as seq,
    ):
        assert seq.next_id() == 1


@pytest.mark.system("redis-server")
def test_a_redis_primary_waits_for_its_replica_and_a_replica_is_refused(seq_name):
    """Before: a primary with replicas was accepted and wrote without waiting (ids repeated after a
    failover).  Now each write waits for every replica; one that attaches later (or has not finished
    its first sync) is waited for from the write that sees it on."""
    with (
        PrivateRedis("redis-server", *DURABLE, "--repl-diskless-sync-delay", "0") as primary,
        TicketSequence(seq_name, primary.url, block_size=10) as seq,
    ):
        assert seq.next_id() == 1  # no replica yet: nothing to wait for
        with PrivateRedis("redis-server", *DURABLE, "--replicaof", "127.0.0.1", str(primary.port)) as replica:
            client = redis.Redis.from_url(primary.url)
            try:
                deadline = time.monotonic() + 20
                while not client.role()[2]:
                    assert time.monotonic() < deadline, "the replica did not come online"
                    time.sleep(0.05)
            finally:
                client.close()
            drawn = [seq.next_id() for _ in range(40)]  # blocks reserved with the replica confirming
            assert drawn == sorted(set(drawn))
            follower = redis.Redis.from_url(replica.url)
            try:  # what the replica holds covers every id handed out
                stored = int(follower.hget(f"seqid:tickets:{seq_name}", "next_value"))
            finally:
                follower.close()
            assert stored > max(drawn)
            with (
                TicketSequence(seq_name, replica.url) as on_replica,
                pytest.raises(VolatileStoreError, match="is a replica"),
            ):
                on_replica.next_id()
        # the replica is gone: writes are refused (typed, within the deadline), not made unconfirmed
        with pytest.raises(StoreTimeoutError, match="0 of 1 replica"):
            for _ in range(40):
                seq.next_id()
