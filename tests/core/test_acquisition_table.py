"""What a caller asking a lease for its worker id does (seqid_orm.allocation.acquiring.choose): one scripted
case per row of the module's table, and the drivers carrying some rows out on a scripted store.  No socket."""

from __future__ import annotations

import asyncio
import threading

import pytest

from seqid_orm import WorkerLease
from seqid_orm.allocation.acquiring import Act, Ask, Caller, choose
from seqid_orm.allocation.lease_life import State
from seqid_orm.errors import WorkerIdNotReadyError
from tests.core.test_lease_steps import Clock, MemoryStore

NOT_HELD = [State.IDLE, State.GRANTING, State.FENCED, State.LOST]

# (row, what the caller sees, what it does): the module docstring's table, top to bottom
ROWS = [
    ("held, with time left", [Ask(State.HELD, None, w, c) for w in (True, False) for c in Caller], Act.RETURN),
    ("expired", [Ask(State.EXPIRED, None, w, c) for w in (True, False) for c in Caller], Act.RENEW_LATE),
    ("not held, not joined", [Ask(s, None, w, Caller.THREAD) for s in NOT_HELD for w in (True, False)], Act.JOIN),
    ("leads, waits", [Ask(State.GRANTING, True, True, c) for c in Caller], Act.LEAD),
    ("leads, lazy", [Ask(s, True, False, c) for s in NOT_HELD for c in Caller], Act.LEAD_IN_THREAD),
    ("follows, waits, on a loop's thread", [Ask(State.GRANTING, False, True, Caller.LOOP_THREAD)], Act.GRANT_BESIDE),
    ("follows, waits", [Ask(State.FENCED, False, True, c) for c in (Caller.THREAD, Caller.TASK)], Act.WAIT),
    (
        "follows, lazy, led on this loop, from its thread",
        [Ask(State.GRANTING, False, False, Caller.LOOP_THREAD, leader_here=True, now=1.0, deadline=5.0)],
        Act.REFUSE_ON_LOOP,
    ),
    (
        "follows, lazy, deadline passed or before the fence",
        [
            Ask(State.GRANTING, False, False, Caller.THREAD, now=5.0, deadline=5.0),
            Ask(State.FENCED, False, False, Caller.TASK, fence=9.0, now=1.0, deadline=5.0),
            Ask(State.FENCED, False, False, Caller.LOOP_THREAD, fence=9.0, now=1.0, deadline=5.0),
        ],
        Act.REFUSE,
    ),
    (
        "follows, lazy, within the deadline",
        [
            Ask(State.GRANTING, False, False, Caller.THREAD, now=1.0, deadline=5.0),
            Ask(State.FENCED, False, False, Caller.TASK, fence=4.0, now=1.0, deadline=5.0),
            Ask(State.FENCED, False, False, Caller.LOOP_THREAD, fence=4.0, now=1.0, deadline=5.0),
        ],
        Act.FOLLOW,
    ),
]


@pytest.mark.parametrize(("row", "asks", "act"), ROWS, ids=[row for row, _, _ in ROWS])
def test_each_row_of_the_acquisition_table(row, asks, act):
    assert [choose(ask) for ask in asks] == [act] * len(asks)


def test_the_table_reaches_every_act():
    assert {act for _, _, act in ROWS} == set(Act)


def _lease(store: MemoryStore, clock: Clock, **kwargs: object) -> WorkerLease:
    return WorkerLease(store, "table", ttl=30.0, monotonic=clock, wall_clock=lambda: 2_000_000 * 10**6, **kwargs)


def test_return_and_renew_late_on_a_scripted_store():
    """RETURN asks the store nothing; RENEW_LATE renews once and returns the same worker id."""
    store, clock = MemoryStore(), Clock()
    lease = _lease(store, clock, sleep=lambda s: None)
    try:
        assert lease.acquire() == 7 and [a[0] for a in store.asked] == ["acquire", "renew"]
        assert lease.acquire() == 7 and len(store.asked) == 2  # RETURN
        clock.now += 30.0  # past its time before its first use: expired
        assert lease.stats().state == "expired"
        assert lease.acquire() == 7 and store.asked[-1][0] == "renew" and len(store.asked) == 3  # RENEW_LATE
        assert lease.stats().state == "held"
    finally:
        lease.release()


def test_refuse_on_loop_and_grant_beside_on_a_loops_own_thread():
    """A task of this loop leads a grant held at its store call; a synchronous lazy caller on the loop's
    thread is refused at once (REFUSE_ON_LOOP), a waiting one grants beside the flight (GRANT_BESIDE) and
    the grant that ends second gives its worker id back."""
    store, clock = MemoryStore(), Clock()
    entered, go = threading.Event(), threading.Event()
    original = store.acquire
    calls = []

    def acquire(*args):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            entered.set()
            go.wait(10)
        return original(*args)

    store.acquire = acquire  # type: ignore[method-assign]
    lease = _lease(store, clock, sleep=lambda s: None)

    async def main() -> None:
        leader = asyncio.ensure_future(lease.aacquire())
        while not entered.is_set():
            await asyncio.sleep(0.01)
        with pytest.raises(WorkerIdNotReadyError, match="task of this event loop"):
            lease.acquire(wait=False)
        go.set()  # the leader's store call (in a worker thread) goes on; this thread grants beside it
        assert lease.acquire() == 7
        assert await leader == 7

    try:
        watcher = threading.Timer(20, go.set)  # a frozen loop would otherwise hang the test
        watcher.start()
        asyncio.run(main())
        watcher.cancel()
        assert len(calls) == 2 and len(store.released) == 1  # the second grant to end went back
    finally:
        lease.release()


def test_every_act_has_one_effect_for_both_drivers():
    """ACTS is the acts' one table: every act of choose() has its effect there, and no driver carries an act
    out itself (the two drivers are one step function, driven blocking or awaited)."""
    import inspect

    from seqid_orm.allocation import acquiring
    from seqid_orm.allocation.acquiring import ACTS, Acquirer

    assert set(ACTS) == set(Act)
    source = inspect.getsource(acquiring)
    assert "if act is" not in source and "elif act" not in source
    for driver in (Acquirer.acquire, Acquirer.aacquire):
        assert "Act." not in inspect.getsource(driver)


def test_the_module_docstring_names_the_acts_in_the_tables_order():
    """The docstring's table is read by people, the code by Python: the acts its last column names, top to
    bottom, are the rows above (each checked against choose())."""
    import re

    from seqid_orm.allocation import acquiring

    table = acquiring.__doc__.split("==========================  =========")[2]
    named = [Act[name] for name in re.findall(r"\b([A-Z]{4,}(?:_[A-Z]+)*)\b", table)]
    assert named == [act for _, _, act in ROWS]
