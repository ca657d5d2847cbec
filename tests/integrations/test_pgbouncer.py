"""Ticket sequences and worker leases through PgBouncer (Debian's 1.18, its packaged settings: no
``ignore_startup_parameters``), in transaction and session pooling, synchronous and awaited (issue
45).  Before: seqid's time-outs went as libpq's ``options`` startup parameter, which PgBouncer
refuses (0 ids); in transaction pooling psycopg's automatic prepared statements met other clients'
server connections ("prepared statement _pg3_N does not exist / already exists")."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")

from seqid_orm import Snowflake, TicketSequence, WorkerLease  # noqa: E402
from seqid_orm.errors import InvalidArgumentError, StoreTimeoutError  # noqa: E402
from tests import system  # noqa: E402
from tests.conftest import POSTGRES_URL  # noqa: E402
from tests.leases.stores import age_namespace, forget_namespace  # noqa: E402
from tests.servers.pgbouncer import PrivatePgBouncer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(params=["transaction", "session"])
def bouncer(request, pg_engine):
    system.need("pgbouncer")
    # transaction pooling: two server connections for every client below, which take turns on them;
    # session pooling holds one for each client connection (up to two per store engine here)
    with PrivatePgBouncer(request.param, pool_size=2 if request.param == "transaction" else 40) as b:
        yield b


def _drop(name: str) -> None:
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name = :n"), {"n": name})
    engine.dispose()


def test_many_clients_draw_tickets_and_hold_leases_through_the_pooler(bouncer):
    """Six threads, each with a sequence and a leased Snowflake of its own (so six engines and six
    client connections over two server connections), drawing blocks of 10 and renewing every
    few seconds, for about 5 s: every id unique, no error of any kind.  The ttl is long against the
    run: on a loaded two-core machine a 1 s ttl and then a 3 s one were lost once each, the renewal
    thread starved of the CPU and the GIL by six drawing threads in the same process, not by the
    pooler; a 9 s ttl is renewed at least once (every 3 s) and lost only past a 6 s delay."""
    name = f"pgb-{secrets.token_hex(4)}"
    namespace = f"pgb-{secrets.token_hex(4)}"
    age_namespace(namespace, [POSTGRES_URL], [])
    tickets: list[int] = []
    stamped: list[int] = []
    errors: list[BaseException] = []

    def client() -> None:
        try:
            lease = WorkerLease(bouncer.url, namespace, ttl=9.0, clock_tolerance=0.1, max_workers=8)
            gen = Snowflake(worker_id=lease)
            with TicketSequence(name, bouncer.url, block_size=10) as seq, lease:
                until = time.monotonic() + 5
                while time.monotonic() < until:
                    tickets.extend(seq.next_ids(7))
                    stamped.append(gen.next_id())
                    time.sleep(0.005)
        except BaseException as exc:  # every error counts, whatever its type
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        _drop(name)
        forget_namespace(namespace, [POSTGRES_URL], [])
    assert errors == [], errors[:3]
    assert len(tickets) > 1000 and len(set(tickets)) == len(tickets)
    assert len(stamped) > 100 and len(set(stamped)) == len(stamped)
    assert "prepared statement" not in bouncer.log()


def test_awaited_calls_go_through_the_pooler(bouncer):
    """The awaited store (psycopg's async driver): 20 tasks, blocks of 5, no error, no repeat."""
    name = f"pgb-a-{secrets.token_hex(4)}"
    seq = TicketSequence(name, bouncer.url, block_size=5)

    async def draw() -> list[int]:
        async def one() -> list[int]:
            return [await seq.anext_id() for _ in range(40)]

        return [i for part in await asyncio.gather(*(one() for _ in range(20))) for i in part]

    try:
        ids = asyncio.run(draw())
    finally:
        seq.close()
        _drop(name)
    assert len(ids) == 800 and len(set(ids)) == 800


@pytest.fixture
def transaction_bouncer(pg_engine):
    system.need("pgbouncer")
    with PrivatePgBouncer("transaction", pool_size=2) as b:
        yield b


def test_a_reservation_on_a_locked_row_gives_up_on_the_server_too(transaction_bouncer):
    """Another session holds the ticket row's lock: the reservation fails at its deadline
    (StoreTimeoutError), and its UPDATE is no longer waiting on the server (the lock_timeout of its
    own statement ended it); before, it stayed there and burned a block when the lock went.  In
    transaction pooling, where a session setting would not hold."""
    name = f"pgb-l-{secrets.token_hex(4)}"
    seq = TicketSequence(name, transaction_bouncer.url, block_size=10, timeout=1.0, double_buffer=False)
    direct = sa.create_engine(POSTGRES_URL)
    try:
        assert seq.next_ids(10) == list(range(1, 11))  # the whole first block
        with direct.connect() as locker:
            locker.execute(sa.text("SELECT 1 FROM seqid_tickets WHERE name = :n FOR UPDATE"), {"n": name})
            began = time.monotonic()
            with pytest.raises(StoreTimeoutError):
                seq.next_id()
            refused = time.monotonic()
            assert refused - began < 1.0 + 1.5
            # the server's lock_timeout started a network hop after the client's deadline: it ends
            # within moments of the refusal, not when the lock goes
            with direct.connect() as watcher:
                while (waiting := _waiting_on_the_row(watcher)) and time.monotonic() < refused + 1.0:
                    time.sleep(0.02)
            assert waiting == 0
            locker.rollback()
        assert seq.next_id() == 11  # no block burned while the lock was held
        with direct.connect() as conn:
            stored = conn.execute(sa.text("SELECT next_value FROM seqid_tickets WHERE name = :n"), {"n": name})
            assert stored.scalar() == 21
    finally:
        seq.close()
        direct.dispose()
        _drop(name)


def _waiting_on_the_row(conn: sa.Connection) -> int:
    """The server sessions waiting for a lock in a statement on the ticket table (other than this one)."""
    return int(
        conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%seqid_tickets%' AND pid <> pg_backend_pid()"
            )
        ).scalar_one()
    )


def test_driver_options_in_the_url_reach_the_driver_typed():
    """``?prepare_threshold=None`` is psycopg's None, not the text "None" (which failed every
    statement with a TypeError); a value that is neither is refused by name."""
    name = f"pgb-u-{secrets.token_hex(4)}"
    with TicketSequence(name, POSTGRES_URL + "?prepare_threshold=None", block_size=5) as seq:
        assert seq.next_ids(7) == list(range(1, 8))
    _drop(name)
    with pytest.raises(InvalidArgumentError, match="prepare_threshold in the URL must be a whole number or None"):
        TicketSequence(name, POSTGRES_URL + "?prepare_threshold=soon")
