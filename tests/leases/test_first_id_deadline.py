"""A leased generator's first id keeps its call's deadline (before: "a fence wait longer than the
deadline raises a typed error saying when the id will be safe, unless the caller opted into
waiting").  A new namespace's first holder must wait ``ttl + clock_tolerance`` before stamping; a
lazy first id (``next_id``, ``anext_id``) does not wait that out past the lease's ``timeout``: it
raises :class:`WorkerIdNotReadyError` with ``safe_in``, the grant goes on in the background, and
once the fence has passed the next call stamps at once.  ``acquire()``, ``aprefetch()`` and
``first_id_waits=True`` wait.  On every real store, with real time (a fence of a few seconds).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from seqid_orm import Snowflake, WorkerLease
from seqid_orm.errors import LeaseLostError, WorkerIdNotReadyError
from tests.async_ids.watch import WatchedLoop

# slow: each test waits out a real 5 s fence on each store (make test runs them once, in parallel;
# the nox sessions and the PostgreSQL 18 step, which run their tests one by one, leave them out)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TTL, TOLERANCE, TIMEOUT = 3.0, 2.0, 1.0  # a fence of 5 s against a deadline of 1 s (a ttl a busy machine renews)


def _lease(server: str, namespace: str, **kw: object) -> WorkerLease:
    return WorkerLease(server, namespace, ttl=TTL, clock_tolerance=TOLERANCE, timeout=TIMEOUT, max_workers=8, **kw)


def _holders(lease: WorkerLease) -> list[int]:
    """The worker ids of the lease's namespace held now, as its store shows them."""
    return [row.worker_id for row in lease.store.leases(lease.namespace) if row.held and row.worker_id >= 0]


def once_granted(call, within: float = 3.0):
    """``call()`` once the grant has finished its last steps after the fence (a renewal and the
    previous holder's mark: round trips that a busy machine can delay past a 1 s deadline)."""
    end = time.monotonic() + within
    while True:
        try:
            return call()
        except WorkerIdNotReadyError as exc:
            assert exc.safe_in is None and time.monotonic() < end, exc  # the fence is over: only its steps left
            time.sleep(0.1)


def test_a_lazy_first_id_refuses_within_its_deadline_and_stamps_once_the_fence_has_passed(server, new_namespace):
    lease = _lease(server, new_namespace)
    gen = Snowflake(worker_id=lease)
    try:
        began = time.monotonic()
        with pytest.raises(WorkerIdNotReadyError, match=r"safe to use in \d+\.\d s") as refused:
            gen.next_id()
        took = time.monotonic() - began
        assert isinstance(refused.value, LeaseLostError)  # what code written for lost leases catches
        assert took < TIMEOUT + 0.5, took  # refused by its deadline, not after the 4 s fence
        safe_in = refused.value.safe_in
        assert safe_in is not None and TTL + TOLERANCE - took - 0.5 <= safe_in <= TTL + TOLERANCE, safe_in
        # the grant goes on: one worker id taken and renewed, whatever the number of calls meanwhile
        again = 0
        while time.monotonic() < began + (TTL + TOLERANCE) - 1.0:
            with pytest.raises(WorkerIdNotReadyError):
                gen.next_id()
            again += 1
            time.sleep(0.1)
        assert again >= 10 and len(_holders(lease)) == 1
        time.sleep(max(0.0, began + safe_in + took + 0.3 - time.monotonic()))
        first = once_granted(gen.next_id)  # the fence has passed: held (its grant's last steps done)
        assert gen.next_id() > first and lease.acquisitions == 1 and lease.stats().mark_wait >= TTL
    finally:
        lease.release()


def test_awaited_first_ids_of_many_tasks_refuse_together_and_share_one_grant(server, new_namespace):
    lease = _lease(server, new_namespace)
    gen = Snowflake(worker_id=lease)

    async def main() -> list[object]:
        async def one() -> object:
            try:
                return await gen.anext_id()
            except WorkerIdNotReadyError as exc:
                return exc

        return await asyncio.gather(*(one() for _ in range(8)))

    try:
        began = time.monotonic()
        outcomes = WatchedLoop(main).start().join(30)  # a frozen loop fails here, not the run
        returned = time.monotonic()
        assert returned - began < TIMEOUT + 1.0
        assert all(isinstance(o, WorkerIdNotReadyError) for o in outcomes), outcomes
        assert len(_holders(lease)) == 1  # one grant for the eight tasks
        # The fence runs from the grant's write, not from the test's first call: on a loaded machine the
        # loop reached it 1.4 s late and a wait reckoned from `began` ended 1.1 s inside the fence (a
        # newcomer's repeat run). Wait as the refusals say, or a whole fence from their return where
        # none had heard from the grant yet (it began before they returned).
        named = [o.safe_in for o in outcomes if isinstance(o, WorkerIdNotReadyError) and o.safe_in is not None]
        assert all(0 < safe_in <= TTL + TOLERANCE for safe_in in named), named
        time.sleep(max(0.0, returned + max(named, default=TTL + TOLERANCE) + 0.3 - time.monotonic()))

        async def eight() -> list[int]:
            return list(await asyncio.gather(*(gen.anext_id() for _ in range(8))))

        ids = once_granted(lambda: WatchedLoop(eight).start().join(30))
        assert len(set(ids)) == 8 and lease.acquisitions == 1
    finally:
        lease.release()


def test_start_up_calls_and_first_id_waits_wait_out_the_fence(server, new_namespace):
    waits = _lease(server, new_namespace, first_id_waits=True)
    try:
        began = time.monotonic()
        Snowflake(worker_id=waits).next_id()  # opted in: waits the 5 s fence
        assert time.monotonic() - began >= TTL + TOLERANCE - 0.1
    finally:
        waits.release()
    # later holders of the namespace wait nothing (a released id's mark is in the past)
    lease = _lease(server, new_namespace)
    gen = Snowflake(worker_id=lease)
    try:
        WatchedLoop(gen.aprefetch).start().join(30)  # a start-up call: waits whatever the fence
        assert lease.held
        gen.next_id()
    finally:
        lease.release()


def test_acquire_at_start_up_waits_the_cold_start(server, new_namespace):
    lease = _lease(server, new_namespace)
    try:
        began = time.monotonic()
        assert lease.acquire() in range(8)
        assert time.monotonic() - began >= TTL + TOLERANCE - 0.1
    finally:
        lease.release()


def test_short_asyncio_runs_during_a_cold_start_share_one_grant_that_outlives_them(server, new_namespace):
    """Each ``asyncio.run(gen.anext_id())`` ends before the fence does (a CLI, a job, a sync view):
    the grant is led by a thread, not a task those loops would cancel, so it completes once and
    later runs stamp; a grant cancelled by every run would start again in each and never end."""
    lease = _lease(server, new_namespace)
    gen = Snowflake(worker_id=lease)
    refused = 0
    ids: list[int] = []
    try:
        began = time.monotonic()
        while len(ids) < 5:
            assert time.monotonic() - began < 3 * (TTL + TOLERANCE), (refused, ids)
            try:
                ids.append(asyncio.run(gen.anext_id()))
            except WorkerIdNotReadyError:
                refused += 1
            time.sleep(0.2)
        assert refused >= 2 and ids == sorted(set(ids))
        assert lease.acquisitions == 1 and len(_holders(lease)) == 1
    finally:
        lease.release()


def test_a_lease_released_during_its_cold_start_gives_its_worker_id_back(server, new_namespace):
    """release() (a Snowflake closed, a test's teardown) while a lazy first id's grant waits out its
    fence: the grant ends then, not at the fence, and gives its worker id back; nothing adopts and
    renews it afterwards (before, the grant went on and held the worker id with no one to release it)."""
    lease = _lease(server, new_namespace)
    gen = Snowflake(worker_id=lease)
    with pytest.raises(WorkerIdNotReadyError) as refused:
        gen.next_id()
    assert refused.value.safe_in is not None and len(_holders(lease)) == 1  # taken, fenced
    began = time.monotonic()
    lease.release()
    assert time.monotonic() - began < TTL + TOLERANCE - 1.0  # it ended the grant's wait, not the fence
    grants = [t for t in threading.enumerate() if t.name == f"seqid-lease-grant-{new_namespace}"]
    assert grants == [] and _holders(lease) == [] and lease.stats().state == "idle"
    time.sleep(TTL + TOLERANCE)  # past the fence the grant would have ended at
    assert _holders(lease) == [] and not lease.held


def test_an_awaited_grant_released_from_another_thread_ends_with_a_typed_error(server, new_namespace):
    """aacquire() leading a cold start on a loop, release() from a thread: the awaited grant ends at
    its next step with LeaseLostError, its worker id given back; the loop was never blocked."""
    lease = _lease(server, new_namespace)

    async def main() -> None:
        task = asyncio.create_task(lease.aacquire())
        while not await asyncio.to_thread(_holders, lease):  # taken, waiting out the fence
            await asyncio.sleep(0.05)
        await asyncio.to_thread(lease.release)
        with pytest.raises(LeaseLostError, match="released while its grant was under way"):
            await asyncio.wait_for(task, TTL)

    WatchedLoop(main).start().join(60)  # a frozen loop fails here, not the run
    assert _holders(lease) == [] and not lease.held
