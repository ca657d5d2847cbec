"""The awaitable API never stalls an event loop: a ticker task that sleeps 10 ms records its longest
gap while ticket blocks are reserved on PostgreSQL and Redis, a new namespace's leased Snowflake waits
out its cold start, and AsyncSession loads draw ticket keys; every id is unique."""

from __future__ import annotations

import asyncio
import collections
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("greenlet")
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped  # noqa: E402

from seqid_orm import Snowflake, TicketSequence, WorkerLease  # noqa: E402
from seqid_orm.errors import CounterBelowDataError  # noqa: E402
from seqid_orm.sqlalchemy import abulk_insert, ticket_pk  # noqa: E402
from tests.conftest import ASYNC_DRIVERS, POSTGRES_URL, volatile_ok  # noqa: E402
from tests.leases.stores import forget_namespace  # noqa: E402
from tests.methods import replace_method  # noqa: E402
from tests.servers.proxy import StallableProxy  # noqa: E402

# The longest a 10 ms ticker may wait. The issue asks 100 ms, which a quiet machine meets (the note
# gives the gaps measured); CI runs these beside three other test processes on two cores, whose
# preemption alone stalled a loop doing only CPU work for up to 285 ms, and 324 ms with two CPU
# hogs beside the suite (.ci/under-load). The stores here answer after a second or more (a proxy
# that holds every chunk 300 ms, a 1.5 s cold start), so a loop waiting on one still shows; and each
# test also checks that no store call ran on the loop's thread at all (StoreCalls).
MAX_GAP = 0.6


class StoreCalls:
    """Counts the calls to the given methods of real store objects (they go through unchanged), and
    those made on a thread whose event loop is running: there must be none of those.  Where a store
    has an awaitable twin (``aallocate``: an asynchronous driver), its calls are counted as ``awaited``."""

    def __init__(self, stores: Iterable[object], methods: Iterable[str]) -> None:
        self.calls = self.on_loop = self.awaited = 0
        self.by_name: collections.Counter[str] = collections.Counter()
        for store in stores:
            for name in methods:
                self._record(store, name)
                if getattr(store, "native_async", False):
                    self._record_awaited(store, "a" + name)

    def _record_awaited(self, store: object, name: str) -> None:
        method = getattr(store, name)

        async def recorded(*args: Any, **kwargs: Any) -> Any:
            self.awaited += 1
            self.by_name[name] += 1
            return await method(*args, **kwargs)

        replace_method(store, name, recorded)

    def _record(self, store: object, name: str) -> None:
        method = getattr(store, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.by_name[name] += 1
            if asyncio._get_running_loop() is not None:  # on a loop's thread, while it runs
                self.on_loop += 1
            return method(*args, **kwargs)

        replace_method(store, name, recorded)

    def none_on_the_loop(self) -> bool:
        return self.calls + self.awaited > 0 and self.on_loop == 0


TICKET_CALLS = ("allocate", "read", "create")
LEASE_CALLS = ("acquire", "renew", "release")


def _runqueue_wait() -> float:
    """Seconds this thread has waited for a CPU so far (the second field of Linux's schedstat);
    0 where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


async def longest_gap(work: Callable[[], Awaitable[object]]) -> tuple[float, object]:
    """Run ``work`` beside a task that sleeps 10 ms at a time; its longest wake-up gap, and the result.

    A gap counts what held the loop (a blocking call, work on it, a thread holding the GIL), not the
    time its thread waited for a CPU: on a busy machine (CI's two cores with a dozen processes
    runnable) the kernel alone kept the loop's thread off the CPU for 625 and 722 ms while nothing
    blocked it, so each gap is less the run-queue wait the kernel counted for the thread meanwhile."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last, waited = loop.time(), _runqueue_wait()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now, wait = loop.time(), _runqueue_wait()
            gaps.append(now - last - (wait - waited))
            last, waited = now, wait

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    try:
        result = await work()
    finally:
        done.set()
        await tick
    return max(gaps), result


def forget(namespace: str, url: str) -> None:
    if url == POSTGRES_URL:
        forget_namespace(namespace, [url], [])
    else:
        forget_namespace(namespace, [], [url.partition("?")[0]])


@pytest.fixture(params=["pg_engine", "redis_url"])
def store_url(request) -> str:
    """A ticket or lease store: the shared PostgreSQL, or the shared Redis (no persistence, accepted)."""
    request.getfixturevalue(request.param)
    return POSTGRES_URL if request.param == "pg_engine" else volatile_ok(request.getfixturevalue("redis_url"))


@pytest.fixture(params=["pg_engine", "redis_url"])
def slow_store_url(request) -> Iterator[str]:
    """The shared PostgreSQL or Redis behind a proxy that holds every chunk 300 ms (a store across a
    slow network): a reservation takes about a second, which a loop blocked by it would show."""
    request.getfixturevalue(request.param)
    # the servers the suite is pointed at (make test-pg18 points it at PostgreSQL 18 on another port)
    url = sa.engine.make_url(POSTGRES_URL if request.param == "pg_engine" else request.getfixturevalue("redis_url"))
    with StallableProxy(url.port or (5432 if request.param == "pg_engine" else 6379), delay=0.3) as proxy:
        slow = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        yield slow if request.param == "pg_engine" else volatile_ok(slow)


def test_ticket_blocks_reserved_by_many_tasks_never_stall_the_loop(slow_store_url):
    """Blocks of 200 from a slow store, 50 tasks drawing 40 ids each: every reservation off the loop."""
    seq = TicketSequence(f"async-{secrets.token_hex(4)}", slow_store_url, block_size=200, timeout=20)
    calls = StoreCalls(seq.servers.stores, TICKET_CALLS)

    async def draw() -> list[int]:
        async def one_task() -> list[int]:
            return [await seq.anext_id() for _ in range(40)]

        batches = await asyncio.gather(*(one_task() for _ in range(50)))
        return [i for batch in batches for i in batch] + await seq.anext_ids(250)

    try:
        started = time.monotonic()
        gap, ids = asyncio.run(longest_gap(draw))
        took = time.monotonic() - started
    finally:
        seq.close()
    assert len(ids) == len(set(ids)) == 2250
    assert seq.fetches >= 11 and took >= 2  # the slow reservations really happened during the run
    assert calls.none_on_the_loop()
    # psycopg and redis-py have asynchronous drivers: the loop's reservations awaited them
    assert calls.awaited > 0
    assert gap <= MAX_GAP, f"the loop stalled {gap * 1000:.0f} ms"


@pytest.mark.parametrize("start", ["lazy", "aprefetch"])
def test_a_new_namespaces_cold_start_is_awaited_not_blocked(store_url, start):
    """A leased Snowflake's first id in a new namespace waits ttl + clock tolerance (1.7 s here,
    inside the lease's 5 s timeout).  Taken at start-up (``aprefetch``), the grant is awaited on the
    loop through the store's asynchronous driver; taken lazily by the first ``anext_id``, it runs in
    a thread of its own that outlives the loop (a short ``asyncio.run`` would cancel a task's), and
    the task awaits it.  Either way nothing blocks the loop."""
    namespace = f"async-{secrets.token_hex(4)}"
    lease = WorkerLease(store_url, namespace, ttl=1.5, clock_tolerance=0.2)
    gen = Snowflake(worker_id=lease)
    calls = StoreCalls([lease.store], LEASE_CALLS)

    async def first_ids() -> tuple[float, list[int]]:
        started = time.monotonic()
        if start == "aprefetch":
            await gen.aprefetch()
        first = await gen.anext_id()
        waited = time.monotonic() - started
        return waited, [first] + [await gen.anext_id() for _ in range(2_000)]

    try:
        gap, (waited, ids) = asyncio.run(longest_gap(first_ids))
    finally:
        gen.close()
        forget(namespace, store_url)
    assert waited >= 1.6, f"the cold start did not happen ({waited:.2f} s)"
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert calls.none_on_the_loop()
    # the grant and the renewals of its cold start were awaited through the store's async driver
    if start == "aprefetch":
        assert calls.by_name["aacquire"] == 1 and calls.by_name["acquire"] == 0 and calls.by_name["arenew"] >= 2
    else:
        assert calls.by_name["acquire"] == 1 and calls.by_name["aacquire"] == 0 and calls.by_name["renew"] >= 2
    assert gap <= MAX_GAP, f"the loop stalled {gap * 1000:.0f} ms"


def test_a_configured_snowflake_awaits_the_next_millisecond():
    """A profile of 16 ids a millisecond (4 sequence bits): 2,000 ids wait for the next millisecond
    over a hundred times, each wait an asyncio.sleep, never the generator's own (blocking) sleep,
    which the same draw through next_id calls (the control)."""
    blocking: list[float] = []

    def sleep(seconds: float) -> None:
        blocking.append(seconds)
        time.sleep(seconds)

    gen = Snowflake(worker_id=5, sequence_bits=4, sleep=sleep)

    async def draw() -> list[int]:
        return [await gen.anext_id() for _ in range(2_000)]

    gap, ids = asyncio.run(longest_gap(draw))
    assert len(set(ids)) == 2_000 and ids == sorted(ids)
    assert blocking == [] and gap <= MAX_GAP
    control = [gen.next_id() for _ in range(2_000)]
    assert len(blocking) >= 100 and len(set(control)) == 2_000


def test_async_with_a_lease(store_url):
    namespace = f"async-{secrets.token_hex(4)}"

    async def hold() -> tuple[int, bool]:
        async with WorkerLease(store_url, namespace, ttl=1.5, clock_tolerance=0.2) as lease:
            return lease.worker_id, lease.held

    try:
        gap, (worker_id, held) = asyncio.run(longest_gap(hold))
    finally:
        forget(namespace, store_url)
    assert held and 0 <= worker_id < 1024
    assert gap <= MAX_GAP


def ticket_keyed(seq: TicketSequence) -> tuple[type[DeclarativeBase], type[Any]]:
    """A declarative base and one model keyed by ``seq`` (``ticket_pk``), in a table of its own."""

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = f"async_rows_{secrets.token_hex(3)}"
        id: Mapped[int] = ticket_pk(seq)
        n: Mapped[int]

    return Base, Row


def test_abulk_insert_through_an_async_session_reserves_ticket_keys_off_the_loop(pg_engine):
    """A ticket-keyed table (ticket_pk binds its floor on the async engine): AsyncSession flushes and
    abulk_insert loads draw keys; the floor's reads from worker threads go to the engine's loop."""
    seq = TicketSequence(f"async-{secrets.token_hex(4)}", POSTGRES_URL, block_size=50)
    calls = StoreCalls(seq.servers.stores, TICKET_CALLS)
    Base, Order = ticket_keyed(seq)
    url = pg_engine.url.set(drivername=ASYNC_DRIVERS["postgresql"])

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            await seq.aprefetch()  # what the README says to do: the flush below then draws from memory
            async with AsyncSession(engine) as session:
                session.add(Order(n=-1))  # the first flush binds the floor (in SQLAlchemy's greenlet)
                await session.commit()
                loaded = []
                for start in range(0, 1000, 100):
                    loaded += await abulk_insert(session, Order, [{"n": i} for i in range(start, start + 100)])
                await session.commit()
                drawn = [await seq.anext_id() for _ in range(120)]  # crosses segments: floors read from threads
                stored = (await session.scalars(sa.select(Order.id).order_by(Order.id))).all()
            return list(loaded), drawn, list(stored)
        finally:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.drop_all)
            await engine.dispose()

    try:
        _gap, (loaded, drawn, stored) = asyncio.run(longest_gap(scenario))
    finally:
        seq.close()
    assert len(stored) == 1001 and set(loaded) <= set(stored)
    assert not set(drawn) & set(stored) and len(set(drawn)) == 120
    # The store here is the local one (milliseconds), so a gap would not tell a blocked loop from a busy
    # one (this loop runs asyncpg and the ORM itself: 257 ms under CI's load); the count does.
    assert calls.none_on_the_loop()


def test_abulk_insert_as_the_first_insert_binds_the_floor_from_its_worker_thread(pg_engine):
    """No flush came first: the floor is made in abulk_insert's worker thread, and reads through the loop."""
    seq = TicketSequence(f"async-{secrets.token_hex(4)}", POSTGRES_URL, block_size=30)
    Base, Row = ticket_keyed(seq)
    url = pg_engine.url.set(drivername=ASYNC_DRIVERS["postgresql"])

    async def scenario() -> tuple[list[int], list[int]]:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with engine.begin() as conn:
                loaded = list(await abulk_insert(conn, Row, [{"n": i} for i in range(100)]))
            async with engine.connect() as conn:
                stored = list((await conn.execute(sa.select(Row.id).order_by(Row.id))).scalars())
            return loaded, stored
        finally:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.drop_all)
            await engine.dispose()

    try:
        loaded, stored = asyncio.run(scenario())
    finally:
        seq.close()
    assert sorted(loaded) == stored and len(set(stored)) == 100


def test_a_counter_behind_the_async_tables_keys_is_refused_from_the_worker_thread(pg_engine):
    """The floor check still holds when the block is reserved by anext_id in a worker thread."""
    name = f"async-{secrets.token_hex(4)}"
    seq = TicketSequence(name, POSTGRES_URL, block_size=10, double_buffer=False)
    Base, Item = ticket_keyed(seq)
    url = pg_engine.url.set(drivername=ASYNC_DRIVERS["postgresql"])

    async def scenario() -> None:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
                await conn.execute(sa.insert(Item), [{"id": 10_000 + n, "n": n} for n in range(5)])
            async with AsyncSession(engine) as session:
                session.add(Item(n=-1))  # binds the floor; the counter starts at 1, below the rows' 10,000
                await session.commit()
            async with engine.begin() as conn:  # the counter put back right below the keys
                await conn.execute(sa.text("UPDATE seqid_tickets SET next_value = 9995 WHERE name = :n"), {"n": name})
            for _ in range(20):
                await seq.anext_id()
        finally:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.drop_all)
            await engine.dispose()

    try:
        with pytest.raises(CounterBelowDataError):
            asyncio.run(scenario())
    finally:
        seq.close()
