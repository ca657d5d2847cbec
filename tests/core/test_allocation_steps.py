"""The allocation core's decisions with scripted input and no socket (h11's way of testing): the
segment buffer (seqid_orm/allocation/segments.py) fed scripted segments and clock readings, and the
single flight (seqid_orm/allocation/flight.py) with scripted leaders and followers in threads and
event loops."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from seqid_orm.allocation.flight import Abandoned, Flight
from seqid_orm.allocation.segments import Segment, SegmentBuffer
from seqid_orm.errors import BackendUnavailableError, StoreTimeoutError


def buffer(block: int = 10, most: int = 10, prefetch_at: float = 0.1, clock=lambda: 0.0, **kw) -> SegmentBuffer:
    return SegmentBuffer(
        block_size=block, max_block_size=most, prefetch_at=prefetch_at, segment_seconds=60.0, clock=clock, **kw
    )


# --- the segment buffer ---------------------------------------------------------------------


def test_an_empty_buffer_asks_for_a_segment_and_hands_it_out_in_order():
    buf = buffer()
    assert buf.empty() and buf.take() is None and buf.wants_prefetch()
    buf.add(Segment(first=5, count=3, step=2, server=1))
    assert [buf.take(), buf.take(), buf.take(), buf.take()] == [5, 7, 9, None]
    assert buf.handed == 3 and buf.installs == 1 and buf.segment == Segment(5, 3, 2, 1)


def test_the_trigger_asks_for_the_next_segment_once_it_is_handed_out():
    buf = buffer(prefetch_at=0.3)
    buf.add(Segment(first=1, count=10, step=1, server=0))
    assert buf.trigger == 4
    seen = []
    for _ in range(4):
        seen.append((buf.take(), buf.wants_prefetch()))
    assert seen == [(1, False), (2, False), (3, False), (4, True)]
    buf.add(Segment(first=101, count=10, step=1, server=0))  # kept behind the current one
    assert not buf.wants_prefetch() and buf.prefetched() == 10 and buf.remaining() == 6
    assert buf.take_many(8) == [5, 6, 7, 8, 9, 10, 101, 102]
    assert buf.trigger == 104 and not buf.wants_prefetch()
    assert buf.take_many(2) == [103, 104] and buf.wants_prefetch()


def test_without_double_buffering_nothing_is_prefetched():
    buf = buffer(double_buffer=False)
    buf.add(Segment(first=1, count=3, step=1, server=0))
    assert buf.trigger is None
    assert [buf.take() for _ in range(3)] == [1, 2, 3] and not buf.wants_prefetch()


def test_take_many_stops_at_what_memory_holds():
    buf = buffer()
    buf.add(Segment(first=1, count=3, step=1, server=0))
    assert buf.take_many(5) == [1, 2, 3] and buf.empty()


def test_leafs_adaptive_block_doubles_when_fast_and_halves_when_slow():
    now = [0.0]
    buf = buffer(block=10, most=80, clock=lambda: now[0])
    sizes = []
    for i in range(6):  # each segment lasts 1 s, far below segment_seconds (60)
        buf.add(Segment(first=1 + 100 * i, count=buf.block, step=1, server=0))
        buf.take_many(buf.remaining())
        sizes.append(buf.block)
        now[0] += 1.0
    assert sizes == [10, 20, 40, 80, 80, 80]
    for i in range(4):  # each lasts 200 s, over twice segment_seconds
        now[0] += 200.0
        buf.add(Segment(first=10_000 + 100 * i, count=buf.block, step=1, server=0))
        buf.take_many(buf.remaining())
    assert buf.block == 10


def test_a_segment_arriving_below_the_one_in_use_is_refused_and_order_holds():
    """Two reservations side by side (a synchronous call on a loop's thread reserves beside the
    prefetch in flight) arrive in either order: values of one server still increase."""
    buf = buffer()
    buf.add(Segment(first=1, count=10, step=1, server=0))
    buf.take_many(10)
    assert buf.add(Segment(first=21, count=10, step=1, server=0))  # the caller's own, first
    assert not buf.add(Segment(first=11, count=10, step=1, server=0))  # the prefetch, late and lower
    assert buf.dropped == 10 and buf.take_many(3) == [21, 22, 23]
    # behind a segment kept ahead too; another server may be lower (a failover continues lower)
    assert buf.add(Segment(first=41, count=10, step=1, server=0))
    assert not buf.add(Segment(first=31, count=10, step=1, server=0))
    assert buf.add(Segment(first=5, count=10, step=1, server=1))


def test_clear_drops_every_value():
    buf = buffer()
    buf.add(Segment(first=1, count=5, step=1, server=0))
    buf.add(Segment(first=6, count=5, step=1, server=0))
    buf.clear()
    assert buf.empty() and buf.take() is None


# --- the single flight ----------------------------------------------------------------------


def _timed_out() -> StoreTimeoutError:
    return StoreTimeoutError("waited too long")


def test_the_first_caller_leads_and_the_others_follow_its_outcome():
    flight: Flight[int] = Flight()
    claim, leads = flight.join(5.0)
    assert leads and flight.busy() and flight.leads(claim)
    again, leads_again = flight.join(5.0)
    assert again is claim and not leads_again
    assert flight.lead(5.0) is None  # a prefetch finds the work in flight: nothing to do
    got: list[int] = []
    follower = threading.Thread(target=lambda: got.append(flight.follow(claim, time.monotonic() + 5, _timed_out)))
    follower.start()
    assert flight.finish(claim, 42)
    follower.join(5)
    assert got == [42] and not flight.busy()


def test_a_leaders_failure_reaches_each_follower_as_its_own_copy():
    flight: Flight[int] = Flight()
    claim, _ = flight.join(5.0)
    error = BackendUnavailableError("no ticket server answered")
    caught: list[BaseException] = []

    def follow() -> None:
        try:
            flight.follow(claim, time.monotonic() + 5, _timed_out)
        except BackendUnavailableError as exc:
            caught.append(exc)

    followers = [threading.Thread(target=follow) for _ in range(3)]
    for t in followers:
        t.start()
    flight.finish(claim, error=error)
    for t in followers:
        t.join(5)
    assert len(caught) == 3 and all(str(e) == str(error) for e in caught)
    assert len({id(e) for e in caught}) == 3 and error not in caught


def test_a_leaders_timeout_error_is_its_outcome_not_the_followers_wait():
    """From 3.11 ``concurrent.futures.TimeoutError`` is ``TimeoutError``: a leader failing with one
    (StoreTimeoutError is one) must not read as "keep waiting"."""
    flight: Flight[int] = Flight()
    claim, _ = flight.join(5.0)
    flight.finish(claim, error=StoreTimeoutError("the store did not answer"))
    started = time.monotonic()
    with pytest.raises(StoreTimeoutError, match="did not answer"):
        flight.follow(claim, time.monotonic() + 5, _timed_out)
    assert time.monotonic() - started < 1


def test_a_cancelled_leader_abandons_its_claim_and_a_follower_leads_next():
    flight: Flight[int] = Flight()
    claim, _ = flight.join(5.0)
    flight.finish(claim, error=asyncio.CancelledError())
    with pytest.raises(Abandoned):
        flight.follow(claim, time.monotonic() + 5, _timed_out)
    _, leads = flight.join(5.0)
    assert leads


def test_a_claim_whose_thread_died_is_taken_over():
    flight: Flight[int] = Flight()
    claims = []
    owner = threading.Thread(target=lambda: claims.append(flight.join(5.0)[0]))
    owner.start()
    owner.join()  # it led and ended without an outcome
    claim = claims[0]
    assert not claim.alive() and not flight.busy()
    with pytest.raises(Abandoned):
        flight.follow(claim, time.monotonic() + 5, _timed_out)
    successor, leads = flight.join(5.0)
    assert leads and successor is not claim
    assert not flight.finish(claim, 1)  # a late outcome of the dead claim is not the live one's


def test_a_claim_past_its_deadline_is_taken_over():
    flight: Flight[int] = Flight()
    claim, _ = flight.join(0.05)
    time.sleep(0.1)
    successor, leads = flight.join(5.0)
    assert leads and successor is not claim and not flight.leads(claim)
    with pytest.raises(Abandoned):
        claim.future.result(timeout=1)


def test_a_follower_gives_up_at_its_own_deadline():
    flight: Flight[int] = Flight()
    claim, _ = flight.join(60.0)
    started = time.monotonic()
    with pytest.raises(StoreTimeoutError):
        flight.follow(claim, time.monotonic() + 0.2, _timed_out)
    assert 0.2 <= time.monotonic() - started < 1
    assert flight.busy()  # the leader goes on


def test_followers_on_two_loops_each_get_the_outcome_on_their_own_loop():
    """A leader in a thread ends the claim; each loop's follower is woken through its own loop
    (debug mode raises on a loop touched from another thread)."""
    flight: Flight[int] = Flight()
    claim, _ = flight.join(5.0)
    results: dict[str, object] = {}

    def follow(name: str) -> None:
        async def main() -> int:
            return await flight.afollow(claim, time.monotonic() + 5, _timed_out)

        results[name] = asyncio.run(main(), debug=True)

    loops = [threading.Thread(target=follow, args=(f"loop-{i}",)) for i in range(2)]
    for t in loops:
        t.start()
    time.sleep(0.1)
    flight.finish(claim, 7)
    for t in loops:
        t.join(5)
    assert results == {"loop-0": 7, "loop-1": 7}


def test_a_cancelled_follower_cancels_its_own_wait_only():
    flight: Flight[int] = Flight()

    async def main() -> tuple[bool, int]:
        claim, _ = flight.join(5.0)
        first = asyncio.ensure_future(flight.afollow(claim, time.monotonic() + 5, _timed_out))
        second = asyncio.ensure_future(flight.afollow(claim, time.monotonic() + 5, _timed_out))
        await asyncio.sleep(0.02)
        first.cancel()
        await asyncio.sleep(0.02)
        flight.finish(claim, 3)
        return first.cancelled(), await second

    assert asyncio.run(main(), debug=True) == (True, 3)


def test_a_claim_led_by_a_closed_loop_is_taken_over():
    flight: Flight[int] = Flight()
    loop = asyncio.new_event_loop()

    async def lead() -> None:
        flight.join(60.0)
        await asyncio.Event().wait()  # suspended with its claim

    task = loop.create_task(lead())
    loop.run_until_complete(asyncio.sleep(0.01))
    claim = flight._claim
    assert claim is not None and claim.alive()
    loop.close()  # its task never resumes
    del task
    assert not claim.alive()
    _, leads = flight.join(5.0)
    assert leads


def test_the_buffers_docstring_example_runs():
    import doctest

    from seqid_orm.allocation import segments

    result = doctest.testmod(segments)
    assert result.attempted >= 7 and result.failed == 0


# --- the server set: which server next, what is refused ----------------------------------------


class Scripted:
    """A ticket server that answers what the test scripted, by method: a value, an exception to
    raise, or a callable of the arguments.  Only a label: nothing here opens a socket."""

    def __init__(self, label: str, **replies: object) -> None:
        self.label = label
        self.replies = replies
        self.asked: list[tuple[str, tuple[object, ...]]] = []

    def __getattr__(self, name: str):
        """The scripted method ``name`` (what a step names by reference: ``Call(store.allocate, ...)``)."""
        replies = self.__dict__.get("replies", {})
        if name not in replies:
            raise AttributeError(name)

        def method(*args: object) -> object:
            self.asked.append((name, args))
            answer = replies[name]
            if callable(answer) and not isinstance(answer, type):
                answer = answer(*args)
            if isinstance(answer, BaseException):
                raise answer
            return answer

        method.__name__ = name
        return method


def run_script(steps):
    """Carry out ``steps`` against :class:`Scripted` targets; the outcome and the sleeps asked."""
    from seqid_orm.calls.steps import Call, Sleep

    slept: list[float] = []
    reply: object = None
    error: BaseException | None = None
    while True:
        try:
            request = steps.throw(error) if error is not None else steps.send(reply)
        except StopIteration as stop:
            return stop.value, slept
        reply, error = None, None
        if isinstance(request, Sleep):
            slept.append(request.seconds)
            continue
        assert isinstance(request, Call) and callable(request.method)  # a store's method, by reference
        try:
            reply = request.method(*request.args)
        except BaseException as exc:  # the scripted refusal goes back into the steps
            error = exc


def counter(first: int, step: int):
    """A scripted ``allocate`` that hands out consecutive blocks from ``first``, as a server does."""
    nxt = [first]

    def allocate(name, count, step_, offset, most, above):
        begin = nxt[0]
        nxt[0] += count * step
        return begin, count

    return allocate


def servers(*stores: Scripted, checked: bool = True, start: int = 0):
    from seqid_orm.allocation.servers import ServerSet
    from seqid_orm.allocation.stores.base import Deferred

    k = len(stores)
    held = [Deferred(store.label, opened=store) for store in stores]  # opened already, as an object passed in is
    s = ServerSet("orders", held, step=k, offsets=range(1, k + 1), start=1, max_value=2**63 - 1, start_server=start)
    s.checked = checked
    return s


def test_a_server_that_does_not_answer_is_skipped_and_the_one_that_did_is_asked_first_next():
    down = Scripted("a", allocate=BackendUnavailableError("a: refused"))
    up = Scripted("b", allocate=counter(2002, 2))
    s = servers(down, up)
    segment, _ = run_script(s.reserve(10))
    assert (segment.first, segment.count, segment.step, segment.server) == (2002, 10, 2, 1)
    assert s.current == 1 and s.high == {1: segment.last}
    run_script(s.reserve(10))
    assert len(down.asked) == 1 and len(up.asked) == 2  # b first now; a not asked again
    assert up.asked[1][1][-1] == segment.last  # the next reservation tells b what it handed out


def test_a_block_at_or_below_what_the_server_handed_out_is_refused():
    from seqid_orm.errors import CounterRegressedError

    given = iter([(1, 10), (5, 10)])  # the second starts inside the first: a counter put back
    s = servers(Scripted("a", allocate=lambda *args: next(given)))
    run_script(s.reserve(10))
    with pytest.raises(CounterRegressedError, match="went back"):
        run_script(s.reserve(10))


def test_every_server_stalled_exhausted_or_a_mix_says_which():
    from seqid_orm.errors import GeneratorExhaustedError

    def stalled(label):
        return Scripted(label, allocate=StoreTimeoutError(f"{label}: no answer in 2 s"))

    def exhausted(label):
        return Scripted(label, allocate=GeneratorExhaustedError(f"{label}: no values left"))

    with pytest.raises(StoreTimeoutError, match="in time: a: no answer in 2 s; b: no answer"):
        run_script(servers(stalled("a"), stalled("b")).reserve(10))
    with pytest.raises(GeneratorExhaustedError, match="a: no values left; b: no values left"):
        run_script(servers(exhausted("a"), exhausted("b")).reserve(10))
    with pytest.raises(BackendUnavailableError) as mixed:
        run_script(servers(stalled("a"), Scripted("b", allocate=BackendUnavailableError("b: refused"))).reserve(10))
    assert type(mixed.value) is BackendUnavailableError and "b: refused" in str(mixed.value)


def test_a_typed_refusal_or_a_bug_stops_the_reservation_at_that_server():
    from seqid_orm.errors import StoreHistoryError

    for raised in (StoreHistoryError("a: a new timeline"), KeyError("a bug")):
        a = Scripted("a", allocate=raised)
        b = Scripted("b", allocate=(2, 10))
        with pytest.raises(type(raised)):
            run_script(servers(a, b).reserve(10))
        assert b.asked == []  # going on could repeat ids (or hide the bug)


def test_the_set_is_checked_once_a_new_sequence_is_created_on_every_server_and_a_partial_one_refused():
    from seqid_orm.allocation.stores import TicketRow
    from seqid_orm.errors import AllocationError, BackendMismatchError

    rows: dict[str, TicketRow] = {}

    def store(label):
        return Scripted(
            label,
            read=lambda name: rows.get(label),
            create=lambda row: rows.setdefault(label, row) and None,
            allocate=counter(1 if label == "a" else 2, 2),
        )

    a, b = store("a"), store("b")
    s = servers(a, b, checked=False)
    run_script(s.reserve(5))
    assert rows == {"a": TicketRow("orders", 1, 2, 1), "b": TicketRow("orders", 2, 2, 2)} and s.checked
    run_script(s.reserve(5))
    assert [m for m, _ in a.asked].count("read") == 2  # read, created, read back: once

    del rows["b"]  # b lost its state: present on a only, read again with a pause, then refused
    b.asked.clear()
    with pytest.raises(AllocationError, match="exists on a but not on b"):
        run_script(servers(a, b, checked=False).reserve(5))
    assert [m for m, _ in b.asked] == ["read"] * 9  # read again 8 times (another client may be creating it)
    rows["b"] = TicketRow("orders", 2, 3, 2)  # b created by a client that lists three servers
    with pytest.raises(BackendMismatchError, match="this client gives b step=2 offset=2"):
        run_script(servers(a, b, checked=False).reserve(5))


# --- a worker id's grant: when a leased id is safe to stamp with (grants.py) ---------------------


class Clocks(Scripted):
    """A scripted pair of clocks: monotonic seconds and wall milliseconds, moved only by the
    scripted sleeps (so a fence's length is exact); a grant's waits are its ``sleep`` calls."""

    def __init__(self, wall_ms: int = 1_000_000) -> None:
        super().__init__("clocks", sleep=lambda seconds, releases: self.sleep(seconds, releases))
        self.mono = 100.0
        self.wall = wall_ms
        self.slept: list[float] = []

    def sleep(self, seconds: float, releases: int) -> None:
        self.slept.append(seconds)
        self.mono += seconds
        self.wall += int(seconds * 1000)


def grant_run(store: Scripted, clocks: Clocks, releases=lambda: 0, ttl: float = 3.0, tolerance: float = 1.0):
    from seqid_orm.allocation.grants import GrantRun
    from seqid_orm.allocation.lease_life import Terms

    terms = Terms(
        namespace="api",
        max_workers=4,
        ttl=ttl,
        clock_tolerance=tolerance,
        timeout=1.0,
        store=lambda: store,  # type: ignore[arg-type,return-value]
        label=lambda: "store",
        monotonic=lambda: clocks.mono,
        wall_ns=lambda: clocks.wall * 1_000_000,
        high_water=lambda: 0,
        sleep=clocks.sleep,
    )
    return GrantRun(terms, clocks, releases)  # type: ignore[arg-type]


def drive_grant(run, clocks: Clocks):
    """Run a grant's steps: the store's calls go to its Scripted target, the sleeps to the clocks."""
    taken, _ = run_script(run.steps())
    return taken


def test_a_never_used_worker_id_is_safe_at_once_and_its_bound_is_left_before_the_first_id():
    from seqid_orm.allocation.stores.base import Grant

    clocks = Clocks()
    store = Scripted("store", acquire=Grant(worker_id=2, mark_ms=0), renew=True)
    run = grant_run(store, clocks)
    taken = drive_grant(run, clocks)
    assert taken.grant.worker_id == 2 and taken.bound == clocks.wall + 3000
    assert [m for m, _ in store.asked] == ["acquire", "renew"]  # the bound is in the store before any id
    assert run.fence_until is None and run.mark_wait == 0 and clocks.slept == []


def test_a_quarantined_id_waits_its_fence_renewing_and_says_when_it_ends_from_the_first_reply():
    from seqid_orm.allocation.stores.base import Grant

    clocks = Clocks()
    seen_fence: list[float | None] = []
    store = Scripted("store", acquire=Grant(worker_id=1, mark_ms=0, wait_ms=4000), renew=True)
    run = grant_run(store, clocks)
    store.replies["renew"] = lambda *a: seen_fence.append(run.fence_until) or True
    drive_grant(run, clocks)
    assert run.fence_until == pytest.approx(104.0)  # 100 s when asked + 4 s, known from the first sleep on
    assert seen_fence[0] is None and seen_fence[-1] == pytest.approx(104.0)
    assert sum(clocks.slept) == pytest.approx(4.0) and max(clocks.slept) <= 1.0  # ttl / 3 at most
    assert [m for m, _ in store.asked].count("renew") >= 4  # kept alive through the wait
    assert run.mark_wait == pytest.approx(4.0)


def test_a_clock_behind_the_previous_holders_mark_waits_for_it_or_gives_the_id_back():
    from seqid_orm.allocation.stores.base import Grant
    from seqid_orm.errors import ClockMovedBackwardsError

    clocks = Clocks(wall_ms=1_000_000)
    store = Scripted("store", acquire=Grant(worker_id=1, mark_ms=1_000_500), renew=True, release=None)
    run = grant_run(store, clocks, tolerance=1.0)
    drive_grant(run, clocks)
    assert clocks.wall > 1_000_500 and run.mark_wait == pytest.approx(0.5, abs=0.06)

    clocks = Clocks(wall_ms=1_000_000)  # 3 s behind the mark, 1 s of tolerance
    store = Scripted("store", acquire=Grant(worker_id=1, mark_ms=1_003_000), renew=True, release=None)
    run = grant_run(store, clocks, tolerance=1.0)
    with pytest.raises(ClockMovedBackwardsError, match="before the mark the previous holder"):
        drive_grant(run, clocks)
    assert store.asked[-1][0] == "release"  # given back, its mark as handed over
    assert run.fence_until == pytest.approx(101.0)  # the fence ended at the tolerance, with this refusal


def test_a_lease_released_during_its_grant_gives_the_id_back_at_the_next_step():
    from seqid_orm.allocation.grants import Released
    from seqid_orm.allocation.stores.base import Grant

    clocks = Clocks()
    count = [0]
    store = Scripted("store", acquire=Grant(worker_id=3, mark_ms=0, wait_ms=4000), renew=True, release=None)
    run = grant_run(store, clocks, releases=lambda: count[0])
    clocks_sleep = clocks.sleep

    def sleep_then_release(seconds, releases):
        clocks_sleep(seconds, releases)
        count[0] += 1  # release() was called meanwhile

    clocks.sleep = sleep_then_release  # type: ignore[method-assign]
    with pytest.raises(Released, match="released while its grant was under way"):
        drive_grant(run, clocks)
    assert store.asked[-1] == ("release", ("api", 3, store.asked[0][1][1], 0))


def test_a_full_namespace_is_refused_by_name():
    from seqid_orm.errors import LeaseUnavailableError

    clocks = Clocks()
    store = Scripted("store", acquire=None)
    with pytest.raises(LeaseUnavailableError, match="all 4 worker ids of namespace 'api'"):
        drive_grant(grant_run(store, clocks), clocks)


def test_the_lease_timing_docstring_examples_run():
    import doctest

    from seqid_orm.allocation import lease_life

    result = doctest.testmod(lease_life)
    assert result.attempted >= 3 and result.failed == 0


# --- key floors: what a block is checked against (floors.py) ------------------------------------


class Column:
    """A key column holding ``keys``, answering a floor's two questions as the SQL ones do."""

    def __init__(self, label: str, keys: list[int]) -> None:
        self.label, self.keys, self.reads = label, keys, 0

    def largest(self) -> int | None:
        return max(self.keys, default=None)

    def taken_in(self, first: int, last: int, step: int) -> int | None:
        self.reads += 1
        hits = [k for k in self.keys if first <= k <= last and (k - first) % step == 0]
        return max(hits, default=None)


def test_a_block_whose_own_values_are_keys_is_refused_and_keys_above_it_are_not():
    from seqid_orm.allocation.floors import Floors
    from seqid_orm.calls.steps import drive
    from seqid_orm.errors import CounterBelowDataError

    column = Column("orders.id", [3, 9, 5000])
    floors = Floors("orders", [column])
    drive(floors.check(Segment(first=2, count=4, step=2, server=0), "pg"), None)  # 2,4,6,8: passes
    assert column.reads == 1  # 5000 is another process's later block; 3 and 9 are another offset's
    with pytest.raises(CounterBelowDataError, match=r"orders.id already holds the key 9 .* repair"):
        drive(floors.check(Segment(first=1, count=5, step=2, server=0), "pg"), None)  # 1,3,5,7,9


def test_a_column_is_bound_once_and_a_repair_reads_the_largest_key_of_all():
    from seqid_orm.allocation.floors import Floors
    from seqid_orm.errors import ArgumentTypeError

    floors = Floors("orders")
    assert not floors and floors.largest() == 0
    first = Column("orders.id", [7])
    assert floors.add(first) is first and floors.add(Column("orders.id", [1])) is None
    floors.add(Column("lines.order_id", [42]))
    assert floors.largest() == 42
    with pytest.raises(ArgumentTypeError, match="floor must be a KeyFloor"):
        floors.add("orders.id")


# --- the runners: a call's deadline written at the call, and an exception reaching the step function ---------


def test_a_calls_deadline_is_what_the_store_call_beneath_it_gets_driven_or_awaited():
    """The deadline a step writes at its Call is the caller's deadline every store call beneath reads
    (Deadline.within), shorter than the store's own bound; a call without one gets the store's bound."""
    from seqid_orm.calls.steps import Call, Deadline, adrive, drive

    def store_bound() -> float:
        return Deadline.within(5.0).left()  # what a store call with a 5 s bound of its own would get

    async def astore_bound() -> float:
        return Deadline.within(5.0).left()

    def steps(method):
        bounded = yield Call(method, (), Deadline.after(0.3))
        own = yield Call(method, ())
        return bounded, own

    for bounded, own in (drive(steps(store_bound), None), asyncio.run(adrive(steps(astore_bound), None))):
        assert 0 < bounded <= 0.3 and 4.9 < own <= 5.0


def test_a_cancellation_reaches_the_step_function_at_its_yield_and_its_cleanup_runs_then():
    """A task cancelled while a step's call is awaited: the step function sees the cancellation at its yield
    (its except and finally run at once, before the task ends), as a thread's step sees an error; before,
    it was closed only when collected, so a grant cancelled on a loop ended its lease's grant late."""
    from seqid_orm.calls.steps import Call, adrive

    seen: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(10)

    def steps():
        try:
            yield Call(slow, ())
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("cleaned up")

    async def main() -> None:
        task = asyncio.ensure_future(adrive(steps(), None))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["cancelled", "cleaned up"]  # already, not at garbage collection

    asyncio.run(main())
