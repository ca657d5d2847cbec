"""Ticket sequences on a replicated PostgreSQL that fails over: a private primary, a streaming
standby whose replication link runs through a proxy the test stalls, real worker processes, and
the standby promoted.  Every id every process printed is counted: a repeat is the one failure.

Asynchronous replication loses the last reservations the primary acknowledged; seqid must see
that the store's history changed (a new timeline) and refuse until `seqid ticket repair`.
Synchronous replication loses nothing: seqid must go on after the failover, and a stalled
standby (commits waiting for it) must give a typed error within the deadline, not a hang.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time

import pytest

from seqid_orm import TicketSequence
from seqid_orm.errors import BackendUnavailableError, StoreHistoryError, VolatileStoreError
from tests.conftest import POSTGRES_URL, volatile_ok
from tests.servers.stack_files import redis_args
from tests.tickets.procs import Worker, start_together

sa = pytest.importorskip("sqlalchemy")

pytestmark = [pytest.mark.slow, pytest.mark.system("postgresql-server")]

TIMEOUT = 2.0  # each reservation's deadline, seconds
# What a refusal may take past its deadline here: the grace of a reservation's report plus a loaded
# machine's scheduling (the suite runs in parallel workers); the hangs these tests catch last tens of seconds
SLACK = 2.0


def workers(url: str, name: str, n: int, **extra) -> list[Worker]:
    options = {"block_size": 50, "timeout": TIMEOUT, "accept_state_loss": True} | extra.pop("options", {})
    return [Worker(servers=url, name=name, count=100_000, pace=0.0005, options=options, **extra) for _ in range(n)]


def repeats(groups: list[list[Worker]]) -> int:
    ids = [i for group in groups for w in group for i in w.ids()]
    return len(ids) - len(set(ids))


def stop(group: list[Worker]) -> None:
    for w in group:
        w.stop()


def test_an_asynchronous_standby_is_refused_before_the_first_id(pair_factory):
    pair = pair_factory(synchronous=False)
    with (
        TicketSequence(f"f-{secrets.token_hex(4)}", pair.url, timeout=TIMEOUT) as seq,
        pytest.raises(VolatileStoreError, match="synchronous_standby_names"),
    ):
        seq.next_id()


def test_a_lagging_standby_promoted_repeats_no_id_and_refuses_until_repair(pair_factory):
    pair = pair_factory(synchronous=False)
    name = f"f-{secrets.token_hex(4)}"
    alive = workers(pair.url, name, 3, persist=30.0)
    later: list[Worker] = []
    try:
        start_together(alive)
        for w in alive:
            w.wait_for_ids(500)
        pair.link.stall()  # the standby stops hearing; the primary goes on acknowledging blocks
        time.sleep(2.0)
        pair.fail_over()
        before = {id(w): len(w.ids()) for w in alive}

        # the workers that lived through it: they finish their blocks, then every reservation is refused
        # (a worker may first be refused for a timeout while the old primary goes: wait for the history)
        def refused_for_history(w: Worker) -> bool:
            return any("StoreHistoryError" in e for e in w.values("error"))

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(refused_for_history(w) for w in alive):
            time.sleep(0.1)
        assert all(refused_for_history(w) for w in alive), [w.values("error")[:2] for w in alive]
        assert max((float(t) for w in alive for t in w.values("refused-after")), default=0) <= TIMEOUT + SLACK
        # workers started after the failover are refused too, before their first id
        later = workers(pair.url, name, 3)
        start_together(later)
        for w in later:
            w.finish_refused()
            assert w.ids() == [] and "StoreHistoryError" in w.values("error")[0]
        assert repeats([alive, later]) == 0
        # after the failover only what was in memory: the current and the prefetched block
        assert sum(len(w.ids()) - before[id(w)] for w in alive) <= 3 * 2 * 50

        # repair: every counter above every id handed out, the new history recorded; then progress
        highest = max(i for w in alive for i in w.ids())
        with TicketSequence(name, pair.url, timeout=TIMEOUT, accept_state_loss=True) as seq:
            seq.repair(above=highest)
        after = workers(pair.url, name, 3)
        start_together(after)
        for w in after:
            w.wait_for_ids(200)
        assert repeats([alive, later, after]) == 0
        assert min(i for w in after for i in w.ids()) > highest
    finally:
        stop(alive)
        stop(later)


def test_a_synchronous_standby_promoted_loses_nothing_and_work_goes_on(pair_factory):
    pair = pair_factory(synchronous=True)
    name = f"f-{secrets.token_hex(4)}"
    # no accept_state_loss: a synchronous standby covers every write
    alive = workers(pair.url, name, 3, persist=60.0, options={"accept_state_loss": False})
    try:
        start_together(alive)
        for w in alive:
            w.wait_for_ids(500)
        pair.link.stall()  # commits now wait for a standby that does not hear: typed errors, bounded

        # wait for the refusal itself: its "refused-after" line comes before its "error" line
        def timed_out(w: Worker) -> bool:
            return any("StoreTimeoutError" in e for e in w.values("error"))

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(timed_out(w) for w in alive):
            time.sleep(0.1)
        assert all(timed_out(w) for w in alive), [w.values("error")[:2] for w in alive]
        assert max((float(t) for w in alive for t in w.values("refused-after")), default=0) <= TIMEOUT + SLACK
        pair.fail_over()
        counts = {id(w): len(w.ids()) for w in alive}
        for w in alive:  # the same processes go on, on the promoted standby
            w.wait_for_ids(counts[id(w)] + 300, timeout=40)
        assert repeats([alive]) == 0
        assert not any("StoreHistoryError" in e for w in alive for e in w.values("error"))
    finally:
        stop(alive)


# --- Redis: a primary, a replica behind a link the test stalls, clients behind a virtual IP ------

# docs/stacks/redis.conf, what the production guide says to run; and a replica's first copy at once
REDIS_DURABLE = (*redis_args(), "--repl-diskless-sync-delay", "0")


def online_replicas(url: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return len(client.role()[2])
    finally:
        client.close()


def wait_online(url: str, n: int) -> None:
    deadline = time.monotonic() + 20
    while online_replicas(url) < n:
        assert time.monotonic() < deadline, f"{url} does not serve {n} replica(s)"
        time.sleep(0.05)


def wait_synced(url: str, n: int) -> None:
    """Until ``url`` serves ``n`` replicas that finished their first sync (``state=online``): only
    those confirm a WAIT."""
    import redis

    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    try:
        while (
            sum(
                1
                for k, v in client.info("replication").items()
                if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
            )
            < n
        ):
            assert time.monotonic() < deadline, f"{url} has not {n} replica(s) in sync"
            time.sleep(0.05)
    finally:
        client.close()


def _answered(call, within: float = 30.0):
    """``call()``, made again while a replica does not confirm in time (a loaded machine: a refusal
    is the right answer then, and the test is not about it); any other error is raised."""
    from seqid_orm.errors import StoreTimeoutError

    deadline = time.monotonic() + within
    while True:
        try:
            return call()
        except StoreTimeoutError:
            assert time.monotonic() < deadline, "the replica never confirmed a write"
            time.sleep(0.1)


def _persisting(draw, n: int, within: float = 30.0) -> list[int]:
    """``draw(n)`` as :func:`_answered` makes it."""
    return list(_answered(lambda: draw(n), within))


def redis_fail_over(primary, replica, vip) -> None:
    """The failover: the replica promoted, the old primary made its replica (once it has synced, every
    write can be confirmed again), the virtual IP moved to the promoted one."""
    import redis

    promoted = redis.Redis.from_url(replica.url)
    promoted.replicaof("NO", "ONE")
    promoted.close()
    demoted = redis.Redis.from_url(primary.url)
    demoted.replicaof("127.0.0.1", str(replica.port))
    demoted.close()
    vip.move_to(replica.port)
    wait_online(replica.url, 1)


@pytest.mark.system("redis-server")
def test_a_redis_replica_promoted_after_a_stalled_link_repeats_no_id():
    """Before: 0-150 repeats with the workers alive, 19,400-28,300 with them restarted;
    the replica had missed the blocks the primary acknowledged while the link stalled.  Now every
    write waits for the replica (WAIT in the same round trip): during the stall reservations are
    refused within the deadline, so the promoted replica holds every block anyone used."""

    from tests.servers.private import PrivateRedis
    from tests.servers.proxy import StallableProxy

    name = f"f-{secrets.token_hex(4)}"
    with PrivateRedis("redis-server", *REDIS_DURABLE) as primary:
        link = StallableProxy(primary.port)
        vip = StallableProxy(primary.port)  # what the clients know: moved to the promoted server
        url = f"redis://127.0.0.1:{vip.port}/0"
        alive: list[Worker] = []
        later: list[Worker] = []
        try:
            with PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(link.port)) as replica:
                wait_online(primary.url, 1)
                alive = workers(url, name, 3, persist=60.0, options={"accept_state_loss": False})
                start_together(alive)
                for w in alive:
                    w.wait_for_ids(500)
                link.stall()  # the replica stops hearing: every write is now refused, within its deadline

                # wait for the refusal itself: its "refused-after" line comes before its "error" line
                def unconfirmed(w: Worker) -> bool:
                    return any("replica(s) confirmed" in e for e in w.values("error"))

                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not all(unconfirmed(w) for w in alive):
                    time.sleep(0.1)
                assert all(unconfirmed(w) for w in alive), [w.values("error")[:2] for w in alive]
                assert max((float(t) for w in alive for t in w.values("refused-after")), default=0) <= TIMEOUT + SLACK
                redis_fail_over(primary, replica, vip)
                counts = {id(w): len(w.ids()) for w in alive}
                for w in alive:  # the same processes go on, on the promoted replica
                    w.wait_for_ids(counts[id(w)] + 300, timeout=40)
                later = workers(url, name, 3, options={"accept_state_loss": False})
                start_together(later)
                for w in later:
                    w.wait_for_ids(300)
                assert repeats([alive, later]) == 0
                assert min(i for w in later for i in w.ids()) > max(i for w in alive for i in w.ids()[: counts[id(w)]])
        finally:
            stop(alive)
            stop(later)
            link.close()
            vip.close()


# --- MariaDB: a primary whose replica reads its binary log ---------------------------------------


@pytest.mark.system("mariadb-server")
def test_a_mariadb_primary_with_an_asynchronous_replica_is_refused_until_semi_synchronous():
    """Before: accepted, and a failover to the replica could hand out the last blocks again (MariaDB
    tells no history to catch it after the fact).  Now refused before the first id, tickets and
    leases, naming the setting; lossless semi-synchronous replication is accepted."""
    from seqid_orm.allocation.leases import WorkerLease
    from tests.servers.private import PrivateMariaDB

    name = f"f-{secrets.token_hex(4)}"
    with (
        PrivateMariaDB(log_bin="mysql-bin", server_id="1", binlog_format="ROW") as primary,
        PrivateMariaDB(server_id="2") as replica,
    ):
        on_primary = sa.create_engine(primary.url)
        on_replica = sa.create_engine(replica.url)
        try:
            with on_replica.begin() as conn:
                conn.execute(
                    sa.text(
                        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
                        "MASTER_USER='root', MASTER_PASSWORD='', MASTER_CONNECT_RETRY=1"
                    )
                )
                conn.execute(sa.text("START SLAVE"))
            dumps = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%%'"
            wait_for(on_primary, dumps, "1")
            with TicketSequence(name, primary.url, timeout=TIMEOUT) as seq, pytest.raises(VolatileStoreError) as err:
                seq.next_id()
            assert "1 replica(s) read its binary log" in str(err.value)
            assert "rpl_semi_sync_master_wait_point = AFTER_SYNC" in str(err.value)
            lease = WorkerLease(primary.url, "mariadb-ns", ttl=1.0)
            try:
                with pytest.raises(VolatileStoreError, match="read its binary log"):
                    lease.acquire()
            finally:
                lease.release()
                lease.store.close()
            # lossless semi-synchronous replication: every commit is on the replica before it is acknowledged
            with on_primary.begin() as conn:
                conn.execute(sa.text("SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC"))
                conn.execute(sa.text("SET GLOBAL rpl_semi_sync_master_enabled = ON"))
            with on_replica.begin() as conn:
                conn.execute(sa.text("SET GLOBAL rpl_semi_sync_slave_enabled = ON"))
                conn.execute(sa.text("STOP SLAVE IO_THREAD"))
                conn.execute(sa.text("START SLAVE IO_THREAD"))
            wait_for(on_primary, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'", "ON", column=1)
            with TicketSequence(name, primary.url, timeout=TIMEOUT, block_size=10) as seq:
                drawn = [seq.next_id() for _ in range(25)]
            assert drawn == list(range(1, 26))
            wait_for(on_replica, f"SELECT next_value FROM seqid_tickets WHERE name = '{name}'", None)
        finally:
            on_primary.dispose()
            on_replica.dispose()


def wait_for(engine, sql: str, value: str | None, column: int = 0, timeout: float = 30.0) -> None:
    """Until ``sql``'s first row has ``value`` in ``column`` (any row at all when ``value`` is None)."""
    deadline = time.monotonic() + timeout
    while True:
        with engine.connect() as conn:
            row = conn.execute(sa.text(sql)).first()
        if row is not None and (value is None or str(row[column]) == value):
            return
        assert time.monotonic() < deadline, f"{sql!r} did not give {value!r}: {row}"
        time.sleep(0.1)


def test_a_driver_error_reads_as_the_servers_answer_and_a_bug_as_itself(pg_engine, redis_url):
    """The store contract (stores/base.TicketStore): each store turns its driver's errors into
    BackendUnavailableError, and the set fails over on typed errors alone. A connection the server
    ends is the next server's turn; an untyped exception (a bug) stops the reservation as itself,
    where it used to read as 'no ticket server answered' and send every call to the next server."""
    name = f"contract-{secrets.token_hex(4)}"
    servers = [POSTGRES_URL, volatile_ok(redis_url)]
    with TicketSequence(name, servers, block_size=5, start_server=0, double_buffer=False) as seq:
        seq.next_ids(5)
        pg_store = seq.servers.stores[0]
        real = pg_store.allocate

        def buggy(*args):
            raise TypeError("a bug in the store's code")

        pg_store.allocate = buggy
        try:
            with pytest.raises(TypeError, match="a bug in the store's code"):
                seq.next_id()
            assert seq.stats().server == pg_store.label  # not failed over to Redis
        finally:
            pg_store.allocate = real
        down = _unreachable_store_error()
        assert isinstance(down, BackendUnavailableError) and "OperationalError" in str(down)


def _unreachable_store_error() -> BaseException:
    """What a store's driver error becomes: the SQLAlchemy store on a port nobody listens on."""
    from seqid_orm.allocation.stores.sqlalchemy import SQLAlchemyTicketStore
    from tests.servers.private import free_port

    store = SQLAlchemyTicketStore(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test", timeout=2.0)
    try:
        store.read("anything")
    except BaseException as exc:  # the typed error, checked by the caller
        return exc
    finally:
        store.close()
    raise AssertionError("a store on a closed port answered")


@pytest.mark.system("redis-server")
def test_an_old_redis_primary_restarted_alone_is_refused_by_a_store_that_never_saw_its_replica():
    """Kill -9 of the primary, its replica promoted, then the old primary restarted from
    its AOF as a primary with no replica (the seconds before Sentinel demotes it).  A process
    started then on a plain URL naming it once repeated 12,850-16,100 ids in 3 of 3 runs: it had never
    seen a replica, so it did not WAIT, and the resync from the promoted replica dropped its blocks.
    The data set records the replicas its writes waited for, so such a store now refuses, and the
    work goes on on the promoted replica once the old primary serves it."""
    import redis

    from seqid_orm import TicketSequence
    from seqid_orm.errors import StoreTimeoutError
    from tests.servers.private import PrivateRedis

    name = f"restarted-{secrets.token_hex(4)}"
    with (
        PrivateRedis("redis-server", *REDIS_DURABLE) as old,
        PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(old.port)) as new,
    ):
        wait_synced(old.url, 1)
        first = TicketSequence(name, old.url, block_size=10, timeout=5.0, double_buffer=False)
        drawn = _persisting(first.next_ids, 25)  # three blocks, each confirmed by the replica (WAIT 1)
        first.close()
        old.stop()  # kill -9
        promoted = redis.Redis.from_url(new.url)
        promoted.replicaof("NO", "ONE")
        old.start()  # from its AOF: a primary again, with no replica
        late = TicketSequence(name, old.url, block_size=10, timeout=1.0, double_buffer=False)
        try:
            with pytest.raises(StoreTimeoutError, match=r"0 of 1 replica\(s\) confirmed"):
                late.next_id()
        finally:
            late.close()
        demoted = redis.Redis.from_url(old.url)  # what Sentinel does next
        demoted.replicaof("127.0.0.1", str(new.port))
        demoted.close()
        promoted.close()
        wait_synced(new.url, 1)  # the demoted one has loaded the promoted one's data
        after = TicketSequence(name, new.url, block_size=10, timeout=5.0, double_buffer=False)
        drawn += _persisting(after.next_ids, 25)
        after.close()
    assert len(drawn) == 50 and len(set(drawn)) == 50


@pytest.mark.system("redis-server")
@pytest.mark.parametrize("awaited", [False, True], ids=["sync", "awaited"])
def test_a_replica_promoted_without_a_confirmed_write_is_refused_by_every_process_until_repair(awaited):
    """``WAIT`` counts replicas, not which ones.  Replica B detaches (an operator's
    ``REPLICAOF NO ONE``: its history forks there) and C attaches in its place, so the primary serves
    two again and writes go on, confirmed by A and C.  Then B is made the primary (the clients' address
    moved to it, the other replicas following it, as Sentinel does).  B lacks blocks handed out: its
    counter stands below them (asserted), so going on would repeat them.  The store that saw them
    confirmed refuses, from Redis's own record of where B left the old history, and marks the data
    set: a process started afterwards, which saw nothing, refuses too, and a lease namespace's next
    holder waits the quarantine.  After ``repair`` every id is new."""
    import asyncio

    import redis

    from seqid_orm.allocation.stores.redis import KEY_PREFIX, RedisLeaseStore
    from tests.servers.private import PrivateRedis
    from tests.servers.proxy import StallableProxy

    name = f"forked-{secrets.token_hex(4)}"
    namespace = f"ns-{secrets.token_hex(4)}"
    quarantine = 400  # ms: what a reborn namespace's next holder waits

    def follow(replica, primary) -> None:
        client = redis.Redis.from_url(replica.url)
        client.replicaof("127.0.0.1", str(primary.port))
        client.close()

    with (
        PrivateRedis("redis-server", *REDIS_DURABLE) as primary,
        PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(primary.port)) as a,
        PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(primary.port)) as b,
        StallableProxy(primary.port) as vip,
    ):
        url = f"redis://127.0.0.1:{vip.port}/0"
        wait_synced(primary.url, 2)
        seq = TicketSequence(name, url, block_size=10, timeout=5.0, double_buffer=False)
        leases = RedisLeaseStore(url)
        try:
            drawn = _persisting(seq.next_ids, 20)  # two blocks, each confirmed by A and B
            assert _answered(lambda: leases.acquire(namespace, "t1", 8, 5_000, quarantine)) is not None
            promoted = redis.Redis.from_url(b.url)
            promoted.replicaof("NO", "ONE")
            wait_synced(primary.url, 1)
            with PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(primary.port)) as c:
                wait_synced(primary.url, 2)
                drawn += _persisting(seq.next_ids, 20)  # confirmed by A and C: B forked before them
                time.sleep(quarantine / 1000)
                # the namespace is old: no wait
                assert _answered(lambda: leases.acquire(namespace, "t2", 8, 5_000, quarantine)).wait_ms == 0
                stored = int(promoted.hget(KEY_PREFIX + name, "next_value"))
                assert stored <= max(drawn), "B has every block: the test did not fork it before them"
                vip.move_to(b.port)
                follow(a, b)
                follow(c, b)
                wait_synced(b.url, 2)

                marks = f"seqid:lease-marks:{{{namespace}}}"
                born = int(promoted.hget(marks, "_born"))
                seconds, micros = promoted.time()
                found_at = seconds * 1000 + micros // 1000  # B's clock, before the store finds the loss
                with pytest.raises(StoreHistoryError, match=r"left replication history \w+ at offset \d+"):
                    if awaited:  # found, and the data set marked, on the loop's redis.asyncio client
                        _answered(lambda: asyncio.run(seq.anext_ids(20)))
                    else:
                        _answered(lambda: seq.next_ids(20))
                # what the store knew, the data set now says to every process
                assert promoted.hget(KEY_PREFIX + name, "lost") is not None
                late = TicketSequence(name, url, block_size=10, timeout=5.0, double_buffer=False)
                try:
                    with pytest.raises(StoreHistoryError, match="marked lost"):
                        _answered(late.next_id)
                    with pytest.raises(StoreHistoryError, match="marked lost"):
                        _answered(lambda: asyncio.run(late.anext_id()))
                    # the lease store saw its own grant confirmed after B forked: the promotion is
                    # reported already, so it goes on, and its next holder waits the quarantine
                    assert born < found_at <= int(promoted.hget(marks, "_born"))  # new from the finding on
                    grant = _answered(lambda: leases.acquire(namespace, "t3", 8, 5_000, 60_000))
                    assert grant is not None and grant.wait_ms > 0
                    _answered(lambda: late.repair(above=max(drawn)))
                    assert promoted.hget(KEY_PREFIX + name, "lost") is None
                    after = _persisting(late.next_ids, 20)
                finally:
                    late.close()
            promoted.close()
        finally:
            seq.close()
            leases.close()
    assert min(after) > max(drawn)
    assert len(set(drawn + after)) == len(drawn + after) == 60


def test_a_process_whose_own_reservations_survived_an_asynchronous_failover_must_still_refuse(pair_factory):
    """Why seqid refuses every process after a lossy promotion, not only those whose own writes were
    lost (go on when every write *seqid saw* acknowledged lies before the fork).

    Two sequences (two processes' worth: each its own store and connection) share one counter.  A's
    block commits and reaches the standby; B's commits after the link stalls, acknowledged by the
    primary alone.  The standby is promoted.  Measured here: the new timeline forks after A's commit
    and before B's, so A, judging by its own commits, would find nothing lost, and the promoted
    counter hands out B's block again.  A rule per process would repeat B's ids, so A refuses too."""
    from sqlalchemy import text

    pair = pair_factory(synchronous=False)
    name = f"f-{secrets.token_hex(4)}"
    primary = sa.create_engine(pair.primary.url)

    def lsn() -> int:
        with primary.connect() as conn:
            return conn.execute(text("SELECT pg_current_wal_lsn() - '0/0'")).scalar_one()

    options = {"block_size": 100, "double_buffer": False, "timeout": TIMEOUT, "accept_state_loss": True}
    a = TicketSequence(name, pair.url, **options)
    b = TicketSequence(name, pair.url, **options)
    try:
        first_a = a.next_id()
        a_commit = lsn()
        standby = sa.create_engine(pair.standby.url)
        deadline = time.monotonic() + 20
        with standby.connect() as conn:  # A's block is on the standby before the link stalls
            while conn.execute(text("SELECT pg_last_wal_replay_lsn() - '0/0'")).scalar_one() < a_commit:
                assert time.monotonic() < deadline, "the standby did not replay A's reservation"
                time.sleep(0.05)
        standby.dispose()
        pair.link.stall()
        first_b = b.next_id()  # acknowledged by the primary alone
        b_commit = lsn()
        assert first_b == first_a + 100  # B's block follows A's on the one counter
        primary.dispose()
        pair.fail_over()

        promoted = sa.create_engine(pair.standby.url)
        with promoted.connect() as conn:
            newest = conn.execute(text("SELECT max(f) FROM pg_ls_dir('pg_wal') AS f WHERE f LIKE '%.history'"))
            history = conn.execute(text("SELECT pg_read_file(:f)"), {"f": f"pg_wal/{newest.scalar_one()}"})
            fork_text = history.scalar_one().split()[1]  # "1  0/3000148  no recovery target specified"
            fork = conn.execute(text("SELECT CAST(:l AS pg_lsn) - '0/0'"), {"l": fork_text}).scalar_one()
            next_value = conn.execute(
                text("SELECT next_value FROM seqid_tickets WHERE name = :n"), {"n": name}
            ).scalar_one()
        promoted.dispose()
        print(f"A committed at LSN {a_commit}, the fork at {fork}, B at {b_commit}", end="; ")
        print(f"B's block from {first_b}, the promoted counter at {next_value}")
        # the measurement: A's commit before the fork, B's after it, and B's values handed out again
        assert a_commit <= fork < b_commit, (a_commit, fork, b_commit)
        assert next_value <= first_b, "the promoted counter kept B's block: nothing would repeat"
        a.next_ids(99)  # A's block, from memory
        with pytest.raises(StoreHistoryError, match="timeline"):
            a.next_id()  # so A, whose own writes all survived, is refused too
    finally:
        a.close()
        b.close()


# --- Redis: which node continues the history a store saw its last write confirmed in --------------


def _replication(url: str) -> tuple[str, int]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        info = client.info("replication")
        return str(info["master_replid"]), int(info["master_repl_offset"])
    finally:
        client.close()


@pytest.mark.system("redis-server")
def test_what_redis_keeps_of_its_replication_id():
    """The measurement seqid's Redis history rests on (Redis 7.0 here): an AOF reload keeps the
    replication id and offset, but a restart, after a clean ``SHUTDOWN`` or a ``kill -9`` alike,
    begins a new id at offset 0 with the data kept, and so does the primary's first replica after it.
    So an id cannot tell a restart from another node: the data set counts seqid's writes per id.

    Each step is read with nothing else able to move it: the replica is stopped before the primary
    restarts and started again only after the restarted primary's id is read. (With the replica left
    running, it reconnects on its own timing, once a second, and its attach could come before the
    read: the test failed so once on a loaded machine, reading the second new id as the first.)"""
    import redis

    from tests.servers.private import PrivateRedis

    debug = ("--enable-debug-command", "yes")
    with (
        PrivateRedis("redis-server", *REDIS_DURABLE, *debug) as primary,
        PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(primary.port)) as replica,
    ):
        client = redis.Redis.from_url(primary.url)
        wait_synced(primary.url, 1)
        for _ in range(50):
            client.incr("k")
        replid, offset = _replication(primary.url)
        assert offset > 0
        client.execute_command("DEBUG", "LOADAOF")
        assert _replication(primary.url) == (replid, offset)  # an AOF reload: the same history
        for how in ("shutdown", "kill -9"):
            replica.stop()  # no replica can attach until the restarted primary's own id is read
            if how == "shutdown":
                with contextlib.suppress(redis.ConnectionError):
                    client.shutdown()
                primary.process.wait(10)
            else:
                primary.stop()
            primary.start()
            client = redis.Redis.from_url(primary.url)
            restarted = _replication(primary.url)
            assert online_replicas(primary.url) == 0, how
            assert restarted[0] != replid and restarted[1] == 0, how
            assert client.get("k") == b"50", how  # the data set is kept
            replica.start()
            wait_synced(primary.url, 1)  # its replica comes back: a new id once more
            assert _replication(primary.url)[0] not in (replid, restarted[0]), how
            replid = _replication(primary.url)[0]
        client.close()


@pytest.mark.system("redis-server")
def test_a_restarted_redis_primary_goes_on_and_one_restored_from_a_backup_is_refused():
    """A restart (``kill -9``, from the AOF) keeps every write, under a new replication id: work goes
    on.  The same node restored from a copy of its data directory taken earlier, its replica resynced
    from it, lacks the blocks drawn since: the store that saw them confirmed refuses and marks the
    data set, so a process started afterwards, which saw nothing, refuses too, until ``repair``.
    Before, the store refused for its own counter alone (``CounterRegressedError``: the replica count
    was met), and the process started afterwards handed out the lost blocks again."""
    import redis

    from seqid_orm.allocation.stores.redis import KEY_PREFIX
    from tests.servers.private import PrivateRedis

    name = f"restored-{secrets.token_hex(4)}"
    options = {"block_size": 10, "timeout": 5.0, "double_buffer": False}
    with (
        PrivateRedis("redis-server", *REDIS_DURABLE) as primary,
        PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(primary.port)),
    ):
        wait_synced(primary.url, 1)
        seq = TicketSequence(name, primary.url, **options)
        try:
            drawn = _persisting(seq.next_ids, 20)
            backup = os.path.join(primary.tmp, "backup")
            shutil.copytree(os.path.join(primary.tmp, "appendonlydir"), backup)  # fsynced at every write
            drawn += _persisting(seq.next_ids, 20)
            primary.stop()  # kill -9, and back from its AOF: a new replication id, the same data
            primary.start()
            wait_synced(primary.url, 1)
            drawn += _persisting(seq.next_ids, 20)  # not refused
            primary.stop()  # restored from the backup, and its replica resynced from it
            shutil.rmtree(os.path.join(primary.tmp, "appendonlydir"))
            shutil.copytree(backup, os.path.join(primary.tmp, "appendonlydir"))
            primary.start()
            wait_synced(primary.url, 1)
            client = redis.Redis.from_url(primary.url)
            assert int(client.hget(KEY_PREFIX + name, "next_value")) <= max(drawn)  # it went back
            with pytest.raises(StoreHistoryError, match=r"does not continue replication history \w+"):
                _answered(lambda: seq.next_ids(20))
            late = TicketSequence(name, primary.url, **options)
            try:
                with pytest.raises(StoreHistoryError, match="marked lost"):
                    _answered(late.next_id)
                _answered(lambda: late.repair(above=max(drawn)))
                after = _persisting(late.next_ids, 20)
            finally:
                late.close()
            client.close()
        finally:
            seq.close()
    assert min(after) > max(drawn)
    assert len(set(drawn + after)) == len(drawn + after) == 80


@pytest.mark.system("redis-server")
def test_an_old_redis_primary_with_a_replica_of_its_own_is_refused_by_a_store_that_saw_its_successor():
    """Sentinel promotes replica B and gives it a new replica; the old primary A, cut off but still a
    primary, gains a fresh replica of its own before it is demoted, and a client's address leads
    back to it.  A serves as many replicas as the store waits for, so ``WAIT`` confirms, and its
    counter stands below the blocks drawn on B: going on repeats them.  The store that saw B's
    writes confirmed refuses, since A's data set never counted a write in B's history, and marks A's
    data set, so a process started there afterwards refuses too.  Before, the store refused for its
    own counter alone (``CounterRegressedError``), and the later process handed out B's blocks again."""
    import redis

    from seqid_orm.allocation.stores.redis import KEY_PREFIX
    from tests.servers.private import PrivateRedis
    from tests.servers.proxy import StallableProxy

    name = f"old-{secrets.token_hex(4)}"
    durable = (*REDIS_DURABLE,)
    with (
        PrivateRedis("redis-server", *durable) as a,
        PrivateRedis("redis-server", *durable, "--replicaof", "127.0.0.1", str(a.port)) as b,
        StallableProxy(a.port) as vip,
    ):
        url = f"redis://127.0.0.1:{vip.port}/0"
        wait_synced(a.url, 1)
        seq = TicketSequence(name, url, block_size=10, timeout=5.0, double_buffer=False)
        try:
            drawn = _persisting(seq.next_ids, 20)  # on A, confirmed by B
            promoted = redis.Redis.from_url(b.url)
            promoted.replicaof("NO", "ONE")
            promoted.close()
            with (
                PrivateRedis("redis-server", *durable, "--replicaof", "127.0.0.1", str(b.port)),
                PrivateRedis("redis-server", *durable, "--replicaof", "127.0.0.1", str(a.port)),
            ):
                vip.move_to(b.port)
                wait_synced(b.url, 1)
                drawn += _persisting(seq.next_ids, 20)  # on B, confirmed by its new replica
                wait_synced(a.url, 1)  # A's own new replica
                vip.move_to(a.port)
                old = redis.Redis.from_url(a.url)
                assert int(old.hget(KEY_PREFIX + name, "next_value")) <= max(drawn)  # A lacks B's blocks
                old.close()
                with pytest.raises(StoreHistoryError, match=r"does not continue replication history \w+"):
                    _answered(lambda: seq.next_ids(20))
                with (
                    TicketSequence(name, url, block_size=10, timeout=5.0) as late,
                    pytest.raises(StoreHistoryError, match="marked lost"),
                ):
                    _answered(late.next_id)
        finally:
            seq.close()
    assert len(set(drawn)) == len(drawn) == 40
