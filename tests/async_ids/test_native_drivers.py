"""Where a store's driver has an asynchronous twin (psycopg's async connection, aiomysql,
redis.asyncio), awaitable reservations run the same steps as the synchronous ones, awaited on the event loop: the
synchronous methods are never called, the loop never waits on the network, and a store that stops
answering is a typed refusal within the deadline."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("greenlet")

from seqid_orm import TicketSequence, WorkerLease  # noqa: E402
from seqid_orm.allocation.stores.sqlalchemy import SQLAlchemyLeaseStore  # noqa: E402
from seqid_orm.errors import BackendUnavailableError  # noqa: E402
from tests.async_ids.test_event_loop import MAX_GAP, StoreCalls, longest_gap  # noqa: E402
from tests.conftest import MYSQL_URL, POSTGRES_URL, volatile_ok  # noqa: E402
from tests.leases.stores import forget_namespace  # noqa: E402
from tests.methods import replace_method  # noqa: E402
from tests.servers.proxy import StallableProxy  # noqa: E402


@pytest.fixture(params=["postgresql", "mysql", "redis"])
def server(request):
    """Each store whose driver has an asynchronous twin, as a URL (SQLite's awaited calls run its
    blocking driver in a worker thread: test_sqlite_is_awaited_in_a_worker_thread)."""
    return request.getfixturevalue(f"_{request.param}_store")


@pytest.fixture
def _postgresql_store(pg_engine):
    return POSTGRES_URL


@pytest.fixture
def _mysql_store(mysql_engine):
    return MYSQL_URL


@pytest.fixture
def _redis_store(redis_url):
    return volatile_ok(redis_url)


def test_sqlite_is_awaited_in_a_worker_thread(sqlite_ticket_url):
    """Not through aiosqlite, whose execute and fetch are awaited apart: a loop closed between them
    left SQLite's file write-locked (test_sharing.py closes loops mid-reservation)."""
    seq = TicketSequence(f"native-{secrets.token_hex(4)}", sqlite_ticket_url, block_size=5)
    assert not seq.servers.stores[0].native_async
    calls = StoreCalls(seq.servers.stores, ("_with_rows",))  # every statement of the store runs through it

    async def draw() -> list[int]:
        return [await seq.anext_id() for _ in range(12)]

    try:
        ids = asyncio.run(draw())
    finally:
        seq.close()
    assert ids == list(range(1, 13))
    assert calls.by_name["_with_rows"] >= 3 and calls.none_on_the_loop()  # each in a worker thread


def lease_store(url: str) -> Any:
    if url.startswith("redis"):
        from seqid_orm.allocation.stores.redis import RedisLeaseStore

        return RedisLeaseStore(url)
    return SQLAlchemyLeaseStore(url)


class Refused:
    """Replaces a store's synchronous methods by ones that record the call and raise: a test then
    shows that none of them was needed."""

    def __init__(self, store: object, methods: tuple[str, ...]) -> None:
        self.called: list[str] = []
        for name in methods:
            replace_method(store, name, self._refusing(name))

    def _refusing(self, name: str) -> Any:
        def refused(*args: object, **kwargs: object) -> None:
            self.called.append(name)
            raise AssertionError(f"the synchronous {name}() was called")

        return refused


def test_tasks_draw_tickets_through_the_async_driver_only(server):
    """Blocks of 50, 20 tasks drawing 30 ids each, double buffered: every reservation (the check of
    the new sequence, the refills, the prefetches) is awaited on the loop, none made synchronously."""
    seq = TicketSequence(f"native-{secrets.token_hex(4)}", server, block_size=50)
    store = seq.servers.stores[0]
    assert store.native_async
    refused = Refused(store, ("allocate", "read", "create"))

    async def draw() -> list[int]:
        async def one_task() -> list[int]:
            out = []
            for _ in range(30):
                out.append(await seq.anext_id())
                await asyncio.sleep(0)  # let the prefetch task run between draws
            return out

        batches = await asyncio.gather(*(one_task() for _ in range(20)))
        return [i for batch in batches for i in batch]

    try:
        ids = asyncio.run(draw())
    finally:
        seq.close()
    assert refused.called == []
    assert seq.fetches >= 12  # 600 ids in blocks of 50
    assert sorted(ids) == list(range(1, 601))  # one process, one server: the blocks follow each other


def test_a_lease_store_grants_renews_and_releases_through_the_async_driver(server):
    """The lease steps (history check, grant, renewal, release) awaited: the same outcomes as the
    synchronous store's, which is never called."""
    store = lease_store(server)
    assert store.native_async
    refused = Refused(store, ("acquire", "renew", "release"))
    namespace = f"native-{secrets.token_hex(4)}"
    token_a, token_b = secrets.token_hex(16), secrets.token_hex(16)

    async def work() -> tuple[Any, ...]:
        first = await store.aacquire(namespace, token_a, 2, 60_000, 65_000)
        second = await store.aacquire(namespace, token_b, 2, 60_000, 65_000)
        none_left = await store.aacquire(namespace, secrets.token_hex(16), 2, 60_000, 65_000)
        renewed = await store.arenew(namespace, first.worker_id, token_a, 60_000, 123)
        stolen = await store.arenew(namespace, first.worker_id, token_b, 60_000, 456)
        await store.arelease(namespace, first.worker_id, token_a, 789)
        return first, second, none_left, renewed, stolen

    try:
        first, second, none_left, renewed, stolen = asyncio.run(work())
        rows = {row.worker_id: row for row in store.leases(namespace)}  # read synchronously, as seqid status does
    finally:
        store.close()
    assert refused.called == []
    assert {first.worker_id, second.worker_id} == {0, 1} and none_left is None
    assert renewed is True and stolen is False
    assert not rows[first.worker_id].held and rows[first.worker_id].mark_ms == 789
    assert rows[second.worker_id].held


@pytest.mark.parametrize("where", ["pg_engine", "redis_url"])
def test_a_stalled_server_is_refused_within_the_deadline_without_blocking_the_loop(where, request):
    """PostgreSQL or Redis behind a proxy that stops forwarding (its sockets open): the awaited
    reservation gives up within the store's timeout with a typed refusal (StoreTimeoutError for a
    statement cut off, BackendUnavailableError for a connection that could not be opened in time, as
    the synchronous path says), and the loop ticks on."""
    request.getfixturevalue(where)
    url = sa.engine.make_url(POSTGRES_URL if where == "pg_engine" else request.getfixturevalue("redis_url"))
    name = f"native-stall-{secrets.token_hex(4)}"
    with StallableProxy(url.port or (5432 if where == "pg_engine" else 6379)) as proxy:
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        if where == "redis_url":
            proxied = volatile_ok(proxied)
        seq = TicketSequence(name, proxied, block_size=10, timeout=2)
        try:

            async def stalled() -> float:
                assert await seq.anext_id() >= 1  # the sequence is checked and a block reserved
                for _ in range(9):
                    await seq.anext_id()
                proxy.stall()
                began = time.monotonic()
                with pytest.raises(BackendUnavailableError):
                    while True:
                        await seq.anext_id()
                return time.monotonic() - began

            gap, waited = asyncio.run(longest_gap(stalled))
        finally:
            proxy.resume()
            seq.close()
    assert 1.5 <= waited <= 6, waited  # the store's 2 s deadline, not a hang
    assert gap <= MAX_GAP, f"the loop stalled {gap * 1000:.0f} ms"


def test_an_awaited_lease_and_a_threads_lease_at_once_leave_one_worker_id_held(pg_engine):
    """A thread calls acquire() while a task awaits aacquire() on the same lease, both in a new
    namespace's cold start: whichever finishes second finds the lease held; an awaited grant that
    lost is given back, so the store shows one worker id held, the one the lease reports."""
    namespace = f"native-race-{secrets.token_hex(4)}"
    lease = WorkerLease(POSTGRES_URL, namespace, ttl=1.5, clock_tolerance=0.2)

    async def both() -> tuple[int, int]:
        thread = asyncio.ensure_future(asyncio.to_thread(lease.acquire))
        awaited = await lease.aacquire()
        return awaited, await thread

    try:
        awaited, threaded = asyncio.run(both())
        held = [row for row in lease.store.leases(namespace) if row.held]
        assert awaited == threaded == lease.worker_id
        assert [row.worker_id for row in held] == [lease.worker_id]
    finally:
        lease.release()
        forget_namespace(namespace, [POSTGRES_URL], [])
