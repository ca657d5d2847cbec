"""Ticket sequences under real processes on real servers: races, kills, open transactions, failover.

Every worker is a separate Python process (``tests/tickets/worker.py``) with its own
``TicketSequence``; workers are started together (each waits for "go") so they really race.
"""

from __future__ import annotations

import secrets
import time

import pytest

from tests.conftest import MYSQL_URL, POSTGRES_URL, volatile_ok
from tests.servers.private import PrivatePostgres, PrivateRedis, pg_bindir
from tests.system import need
from tests.tickets.conftest import forget
from tests.tickets.procs import Worker, start_together

sa = pytest.importorskip("sqlalchemy")
redis = pytest.importorskip("redis")

pytestmark = pytest.mark.slow

#: The races below test uniqueness, not the machine's speed: each call may wait as long as the
#: machine needs.  SQLite's writers wait for the file's one write lock by polling, not in a queue,
#: so under sixteen racing processes one of them can wait while the others go on: with blocks of
#: 10 on two cores loaded six-fold a reservation waited 4.1 s, and under CI's load one was refused
#: at the default 5 s bound (``StoreTimeoutError``): a typed refusal, which docs/how-to/tickets.md
#: tells users of (larger blocks or a longer ``timeout``), not a repeat.
RACE = {"timeout": 60.0}


def stored_next_value(url: str, name: str) -> int:
    if url.startswith("redis"):
        client = redis.Redis.from_url(url.split("?")[0])
        try:
            return int(client.hget(f"seqid:tickets:{name}", "next_value"))
        finally:
            client.close()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT next_value FROM seqid_tickets WHERE name = :n"), {"n": name}).scalar()
    finally:
        engine.dispose()


def test_eight_processes_share_a_sequence_without_duplicates(server, seq_name):
    """8 processes x 2,000 ids with block_size=100: no duplicate, at most two blocks lost each."""
    workers = [Worker(servers=server, name=seq_name, count=2000, options={"block_size": 100, **RACE}) for _ in range(8)]
    try:
        start_together(workers)
        for w in workers:
            w.finish()
        per_process = [w.ids() for w in workers]
        flat = [i for ids in per_process for i in ids]
        assert len(flat) == 16_000 and len(set(flat)) == 16_000
        for ids in per_process:
            assert ids == sorted(ids) and len(set(ids)) == len(ids)  # increasing within a process
        for w in workers:
            # reserved - used <= the current and the prefetched block
            assert w.fetches() * 100 - 2000 <= 2 * 100
        # the server handed out exactly what the processes reserved: nothing else moved the counter
        assert stored_next_value(server, seq_name) - 1 == sum(w.fetches() for w in workers) * 100
    finally:
        for w in workers:
            w.stop()


def test_sixteen_processes_racing_on_a_new_name_get_no_duplicate(server, seq_name):
    workers = [Worker(servers=server, name=seq_name, count=300, options={"block_size": 10, **RACE}) for _ in range(16)]
    try:
        start_together(workers)
        for w in workers:
            w.finish()
        flat = [i for w in workers for i in w.ids()]
        assert len(flat) == 16 * 300 and len(set(flat)) == len(flat)
        assert min(flat) == 1  # the sequence started once, at its first value
    finally:
        for w in workers:
            w.stop()


@pytest.fixture
def fresh_sql_database(request):
    """A new, empty database on the server named by the parameter: its ticket table does not exist yet."""
    kind = request.param
    name = f"seqid_race_{secrets.token_hex(4)}"
    if kind == "sqlite":
        path = request.getfixturevalue("tmp_path") / "fresh.sqlite3"
        yield f"sqlite:///{path}"
        return
    admin_url = {"postgresql": POSTGRES_URL, "mysql": MYSQL_URL}[kind]
    request.getfixturevalue({"postgresql": "pg_engine", "mysql": "mysql_engine"}[kind])
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            if kind == "postgresql":
                conn.execute(sa.text(f"DROP DATABASE {name} WITH (FORCE)"))
            else:
                conn.execute(sa.text(f"DROP DATABASE {name}"))
        admin.dispose()


@pytest.mark.parametrize("fresh_sql_database", ["postgresql", "mysql", "sqlite"], indirect=True)
def test_sixteen_processes_racing_to_create_the_table(fresh_sql_database, seq_name):
    """The table does not exist yet: 16 processes create it (and the name) at once."""
    workers = [
        Worker(servers=fresh_sql_database, name=seq_name, count=100, options={"block_size": 10, **RACE})
        for _ in range(16)
    ]
    try:
        start_together(workers)
        for w in workers:
            w.finish()
        flat = [i for w in workers for i in w.ids()]
        assert len(flat) == 1600 and len(set(flat)) == 1600
    finally:
        for w in workers:
            w.stop()


def test_a_process_killed_mid_segment_leaves_no_value_to_reuse(server, seq_name):
    opts = {"servers": server, "name": seq_name, "options": {"block_size": 50}}
    workers = [Worker(**opts, count=1500, pace=0.001) for _ in range(4)]
    try:
        start_together(workers)
        for w in workers:
            w.wait_for_ids(120)
        victim = workers[0]
        victim.kill()  # SIGKILL: no cleanup, no at-exit hooks, its segments simply vanish
        killed_ids = victim.ids()
        assert 0 < len(killed_ids) < 1500
        newcomer = Worker(**opts, count=1000)
        start_together([newcomer])
        for w in [*workers[1:], newcomer]:
            w.finish()
        others = [i for w in [*workers[1:], newcomer] for i in w.ids()]
        assert len(others) == 3 * 1500 + 1000 and len(set(others)) == len(others)
        assert not set(killed_ids) & set(others)  # nothing the dead process handed out came back
    finally:
        for w in workers:
            w.stop()


@pytest.fixture
def app_table(request, tmp_path):
    """A business table on the app database of the parametrized server, and that database's URL.

    On PostgreSQL and MariaDB the app shares its database with the ticket table; SQLite allows one
    writer per file, so there the app has a file of its own, as a SQLite user must.
    """
    kind = request.param
    if kind == "sqlite":
        app_url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
        ticket_url = request.getfixturevalue("sqlite_ticket_url")
    else:
        request.getfixturevalue({"postgresql": "pg_engine", "mysql": "mysql_engine"}[kind])
        app_url = ticket_url = {"postgresql": POSTGRES_URL, "mysql": MYSQL_URL}[kind]
    table = f"orders_{secrets.token_hex(4)}"
    engine = sa.create_engine(app_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY)"))
    yield kind, app_url, ticket_url, table
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE {table}"))
    engine.dispose()


@pytest.mark.parametrize("app_table", ["postgresql", "mysql", "sqlite"], indirect=True)
def test_an_open_business_transaction_that_drew_ids_blocks_no_other_process(app_table, seq_name):
    _kind, app_url, ticket_url, table = app_table
    one_per_trip = {"block_size": 1, "double_buffer": False}  # every id is a round trip to the server
    holder = Worker(
        servers=ticket_url, name=seq_name, count=5, hold=True, hold_url=app_url, hold_table=table, options=one_per_trip
    )
    try:
        holder.expect("holding", 60)
        other = Worker(servers=ticket_url, name=seq_name, count=20, options=one_per_trip)
        start_together([other])
        other.finish(timeout=20)  # not blocked by the holder's open transaction
        assert not set(other.ids()) & set(range(1, 6))
    finally:
        holder.release()
        holder.stop()


@pytest.mark.parametrize("app_table", ["postgresql", "mysql"], indirect=True)
def test_the_control_allocation_inside_the_business_transaction_does_block(app_table, seq_name):
    """Shows the test above can fail: the articles' anti-pattern (the ticket row updated inside the
    business transaction) makes another process wait until the business transaction ends."""
    _kind, app_url, ticket_url, table = app_table
    one_per_trip = {"block_size": 1, "double_buffer": False}
    holder = Worker(
        servers=ticket_url,
        name=seq_name,
        count=5,
        hold=True,
        naive=True,
        hold_url=app_url,
        hold_table=table,
        options=one_per_trip,
    )
    try:
        holder.expect("holding", 60)
        other = Worker(servers=ticket_url, name=seq_name, count=20, options=one_per_trip)
        start_together([other])
        time.sleep(3)
        assert other.ids() == []  # waiting for the holder's row lock
        holder.release()
        holder.expect("released", 30)
        other.finish(timeout=30)
    finally:
        holder.stop()


@pytest.fixture(params=["postgresql", "redis"])
def second_server(request):
    """A private server of the parametrized kind beside the shared one: (shared url, private server)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_engine")
        need("postgresql-server")
        with PrivatePostgres(pg_bindir(_pg_major())) as private:
            yield POSTGRES_URL, private
    else:
        shared = volatile_ok(request.getfixturevalue("redis_url"))
        need("redis-server")
        with PrivateRedis() as private:
            yield shared, private


def _pg_major() -> int:
    from tests.servers.private import server_major

    return server_major(POSTGRES_URL)


def test_two_ticket_servers_never_overlap_and_fail_over_when_one_stops(second_server, seq_name):
    shared, private = second_server
    private_url = volatile_ok(private.url) if isinstance(private, PrivateRedis) else private.url
    servers = [shared, private_url]  # offsets 1 (odd values) and 2 (even values), step 2
    workers = [
        Worker(
            servers=servers,
            name=seq_name,
            count=2500,
            pace=0.0005,
            options={"block_size": 20, "start_server": i % 2, "connect_timeout": 2},
        )
        for i in range(4)
    ]
    try:
        start_together(workers)
        for w in workers:
            w.wait_for_ids(300)
        if isinstance(private, PrivatePostgres):
            private.stop("immediate")  # a crash: clients are cut off
        else:
            private.stop()
        for w in workers:
            w.finish(timeout=120)
        flat = [i for w in workers for i in w.ids()]
        assert len(flat) == 4 * 2500 and len(set(flat)) == len(flat)
        odd = [i for i in flat if i % 2]
        even = [i for i in flat if not i % 2]
        assert even, "the workers that started on the private server drew from it"
        # after the stop only the shared server (odd values) served: every worker's tail is odd
        for w in workers:
            assert all(i % 2 for i in w.ids()[-200:])
        assert max(odd) < stored_next_value(shared, seq_name)
    finally:
        for w in workers:
            w.stop()
        forget(seq_name, [], ())
