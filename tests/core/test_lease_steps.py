"""A held lease's renewal (seqid_orm.allocation.renewal) and the lease around it, with scripted store answers
and clocks: every renewal outcome, the rule each caller reads, and a release in each state.  No socket."""

from __future__ import annotations

import threading

import pytest

from seqid_orm import WorkerLease
from seqid_orm.allocation.lease_life import Event, Terms
from seqid_orm.allocation.renewal import decide, renew
from seqid_orm.allocation.stores.base import Grant
from seqid_orm.errors import BackendUnavailableError, LeaseLostError, StoreTimeoutError
from tests.core.test_allocation_steps import Scripted, run_script

TTL = 30.0


def _terms(clock=None) -> Terms:
    """A lease's terms: namespace "ns", ttl TTL, on ``clock``."""
    clock = clock or (lambda: 1000.0)
    return Terms("ns", 4, TTL, 5.0, 5.0, None, lambda: "memory", clock, lambda: 0, lambda: 0, lambda s: None)


def _renew(store, held_until: float, clock) -> object:
    """Worker id 3's renewal with token "tok" and mark 5,000 ms, valid until ``held_until``, as steps."""
    return renew(store, _terms(clock), 3, "tok", 5_000, held_until)


def _next_in(renewal, now: float) -> float:
    return _terms().next_renewal_in(renewal.outcome, renewal.valid_until, now)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_renewal_answered_yes_renews_from_when_it_was_sent():
    clock = Clock()
    store = Scripted("s", renew=lambda *args: (setattr(clock, "now", clock.now + 0.4), True)[1])
    renewal, _ = run_script(_renew(store, 1010.0, clock))
    assert renewal.outcome is Event.RENEWED and renewal.sent == 1000.0
    assert renewal.valid_until == _terms().valid_until(1000.0) == 1027.0  # counted from the send, less the margin
    assert _next_in(renewal, clock.now) == TTL / 3
    assert store.asked == [("renew", ("ns", 3, "tok", 30_000, 5_000))]


def test_renewal_refused_is_lost_at_once():
    renewal, _ = run_script(_renew(Scripted("s", renew=False), 1010.0, Clock()))
    assert renewal.outcome is Event.LOST and renewal.valid_until == float("-inf")
    assert _next_in(renewal, 1000.0) == TTL / 10  # the next step is leasing again


@pytest.mark.parametrize("error", [BackendUnavailableError("down"), StoreTimeoutError("stalled")])
def test_an_unanswered_renewal_is_tried_again_before_the_lease_runs_out(error):
    clock = Clock(1000.0)
    renewal, _ = run_script(_renew(Scripted("s", renew=error), 1004.0, clock))
    assert renewal.outcome is Event.RETRY and renewal.error is error
    assert renewal.valid_until == 1004.0  # as it was: nothing the store did not say
    assert _next_in(renewal, 1000.0) == 2.0  # half the time left (at most a tenth of the ttl)
    assert _next_in(renewal, 1003.99) == pytest.approx(0.01)  # never less than 10 ms


def test_an_unanswered_renewal_after_the_lease_ran_out_is_lost():
    clock = Clock(1000.0)

    def stalled(*args):
        clock.now = 1005.0  # the store took the rest of the lease's time, then failed
        raise StoreTimeoutError("stalled")

    renewal, _ = run_script(_renew(Scripted("s", renew=stalled), 1004.0, clock))
    assert renewal.outcome is Event.LOST


def test_a_bug_in_a_store_surfaces_as_itself():
    with pytest.raises(KeyError):
        run_script(_renew(Scripted("s", renew=KeyError("oops")), 1004.0, Clock()))


def test_the_decision_is_one_table():
    rows = [
        (True, 1001.0, "renewed"),
        (True, 2000.0, "renewed"),  # a yes is a yes: valid again from its send
        (False, 1001.0, "lost"),
        (None, 1001.0, "retry"),
        (None, 1004.0, "lost"),  # no answer, and the time is up
    ]
    assert [(r, now, decide(r, 1000.0, now, TTL, 1004.0).value) for r, now, _ in rows] == rows


# --- the lease around it: scripted store, scripted clocks, a release in each state -----------------


class MemoryStore:
    """A lease store in memory whose renewals answer what the test queued (True, False or an error)."""

    label = "memory"

    def __init__(self) -> None:
        self.renewals: list[object] = []
        self.asked: list[tuple[object, ...]] = []
        self.released: list[tuple[object, ...]] = []

    def acquire(self, namespace, token, max_workers, ttl_ms, quarantine_ms):
        self.asked.append(("acquire", namespace))
        return Grant(worker_id=7, mark_ms=1_000, wait_ms=0)

    def renew(self, namespace, worker_id, token, ttl_ms, mark_ms):
        self.asked.append(("renew", worker_id, mark_ms))
        answer = self.renewals.pop(0) if self.renewals else True
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def release(self, namespace, worker_id, token, mark_ms):
        self.released.append((worker_id, mark_ms))

    def leases(self, namespace):
        return []

    def namespaces(self):
        return []

    def after_fork(self):
        pass

    def close(self):
        pass


@pytest.fixture
def scripted():
    store, clock = MemoryStore(), Clock()
    wall = [2_000_000 * 1_000_000]  # Unix ns, past the previous holder's mark
    lease = WorkerLease(
        store, "scripted", ttl=TTL, monotonic=clock, wall_clock=lambda: wall[0], sleep=lambda s: None, timeout=5.0
    )
    yield lease, store, clock
    lease.release()


def _renew_once(lease: WorkerLease) -> float:
    return lease.renewer.once(threading.Event())


def test_each_renewal_outcome_as_the_lease_lives_it(scripted):
    lease, store, clock = scripted
    assert lease.acquire() == 7 and lease.held
    clock.now += 10
    store.renewals = [True]
    assert _renew_once(lease) == TTL / 3 and lease.valid_until == _terms().valid_until(clock.now)
    store.renewals = [BackendUnavailableError("down")]
    clock.now += 10
    left = lease.valid_until - clock.now
    assert _renew_once(lease) == pytest.approx(min(TTL / 10, left / 2))
    assert lease.held and lease.renewal_failures == 1  # still valid: tried again soon
    store.renewals = [False]
    assert _renew_once(lease) == TTL / 10
    assert not lease.held and lease.stats().state == "lost"
    with pytest.raises(LeaseLostError):
        lease.worker_id  # noqa: B018 - the property raises
    with pytest.raises(LeaseLostError):
        lease.hold()  # a generator's next id stops at once, not at the mark it was given


def test_extend_mark_reads_the_same_outcomes(scripted):
    lease, store, _clock = scripted
    lease.acquire()
    store.renewals = [True]
    assert lease.extend_mark(3_000_000_000_000) == 3_000_000_000_000  # the confirmed mark moved
    store.renewals = [StoreTimeoutError("stalled")]
    with pytest.raises(LeaseLostError, match="to move its clock mark failed") as raised:
        lease.extend_mark(3_000_000_000_001)
    assert isinstance(raised.value.__cause__, StoreTimeoutError) and lease.held  # the thread goes on trying
    store.renewals = [False]
    with pytest.raises(LeaseLostError):
        lease.extend_mark(3_000_000_000_002)
    assert not lease.held


def test_a_release_while_idle_asks_the_store_nothing(scripted):
    lease, store, _clock = scripted
    lease.release()
    assert store.asked == [] and store.released == []


def test_a_release_while_held_leaves_the_mark_it_used(scripted):
    lease, store, _clock = scripted
    lease.acquire()
    lease.release()
    [(worker_id, mark)] = store.released
    assert worker_id == 7 and mark >= 1_000  # never below the mark it inherited
    assert lease.stats().state == "idle"


def test_a_release_while_lost_gives_the_token_back_and_stops(scripted):
    lease, store, _clock = scripted
    lease.acquire()
    store.renewals = [False]
    _renew_once(lease)
    lease.release()
    assert [w for w, _ in store.released] == [7] and lease.stats().state == "idle"


def test_a_renewal_answered_after_a_release_is_not_applied(scripted):
    """No lock is held across the store's round trip: a release meanwhile wins, and the late answer of the
    renewal that was in flight changes nothing."""
    lease, store, _clock = scripted
    lease.acquire()

    def late(*args):
        lease.release()  # the release lands while the renewal is with the store
        return True

    store.renew = late  # type: ignore[method-assign]
    assert _renew_once(lease) == TTL / 3
    assert lease.stats().state == "idle" and not lease.held


# --- the lease's table (lease_life.py): every state and event, and a release in each state ----------


def _life(clock: Clock):
    from seqid_orm.allocation.lease_life import LeaseLife, Terms

    return LeaseLife(
        Terms("ns", 4, TTL, 5.0, 5.0, MemoryStore, lambda: "memory", clock, lambda: 0, lambda: 0, lambda s: None)
    )


def test_the_lease_moves_only_as_its_table_says():
    """Every state with every event: a pair the table lists moves the lease there; a pair the table ignores
    on purpose changes nothing (a grant ending while a lease is held is given back; a renewal answered once
    the lease is released or lost is not applied); any other raises, as h11 raises for an event its state
    does not expect: a bug is never dropped."""
    from seqid_orm.allocation.lease_life import IGNORED, TRANSITIONS, Event, State, UnknownMove

    assert {state for state, _ in TRANSITIONS} == set(State)  # every state is the table's
    assert not set(TRANSITIONS) & set(IGNORED)
    for state in State:
        for event in Event:
            life = _life(Clock(1.0))  # before valid_until: the clock makes no move of its own here
            life.state, life.valid_until = state, 5.0
            if (state, event) not in TRANSITIONS and (state, event) not in IGNORED:
                with pytest.raises(UnknownMove, match=event.value):
                    life.move(event)
                assert life.state is state and life.valid_until == 5.0
                continue
            moved = life.move(event)
            assert (moved is not None) == ((state, event) in TRANSITIONS)
            assert life.state is TRANSITIONS.get((state, event), state)
            kept = life.state in (State.HELD, State.EXPIRED) or not moved
            assert (life.valid_until == 5.0) == kept, (state, event)
    # what neither lists: "expired" in any state but held, an event only the clock sends, and only to held
    unknown = {(s, e) for s in State for e in Event} - set(TRANSITIONS) - set(IGNORED)
    assert unknown == {(s, Event.EXPIRED) for s in State if s is not State.HELD}
    assert (State.HELD, Event.GRANTED) not in TRANSITIONS  # a second grant is given back, never adopted
    assert all((state, Event.RELEASED) in TRANSITIONS for state in State)  # a release ends every state
    assert TRANSITIONS[State.EXPIRED, Event.RETRY] is State.LOST  # no answer, and no time left


def test_a_lease_held_past_its_time_is_expired_when_read_and_renewed_late():
    """ "Held but past its time" is a state of the table, moved there by the reader that sees the clock
    pass (not a sentinel); a renewal the store confirms takes it back to held, one it cannot answer to lost."""
    from seqid_orm.allocation.lease_life import Event, Renewal, State

    clock = Clock(100.0)
    life = _life(clock)
    life.state, life.valid_until, life.worker_id, life.acquisitions = State.HELD, 101.0, 7, 1
    assert life.seen() == (State.HELD, 7)
    clock.now = 101.0
    assert life.seen() == (State.EXPIRED, None) and life.state is State.EXPIRED
    with pytest.raises(LeaseLostError):
        life.holding()
    assert life.apply(Renewal(Event.RENEWED, 101.0, 5, 128.0), 1) and life.seen() == (State.HELD, 7)
    clock.now = 200.0
    assert life.now() is State.EXPIRED
    assert life.apply(Renewal(Event.RETRY, 200.0, 5, 128.0), 1) and life.state is State.LOST


def _quarantined(store: MemoryStore, wait_ms: int) -> MemoryStore:
    """``store`` granting worker id 7 with a quarantine of ``wait_ms`` (a new namespace, a takeover)."""
    store.acquire = lambda *args: (store.asked.append(("acquire", args[0])), Grant(7, 1_000, wait_ms))[1]  # type: ignore[method-assign]
    return store


def test_a_grant_is_reported_granting_then_fenced_then_held():
    store, clock = _quarantined(MemoryStore(), 2_000), Clock()
    seen: list[str] = []
    lease = WorkerLease(
        store, "ns", ttl=TTL, monotonic=clock, wall_clock=lambda: 2 * 10**15, timeout=5.0, sleep=lambda s: sleep(s)
    )
    original = store.acquire

    def acquire(*args):
        seen.append(lease.stats().state)  # the store is asked: a grant under way, its fence not yet known
        return original(*args)

    def sleep(seconds: float) -> None:
        seen.append(lease.stats().state)  # waiting out the quarantine: its end is known
        clock.now += seconds

    store.acquire = acquire  # type: ignore[method-assign]
    try:
        assert lease.stats().state == "idle"
        assert lease.acquire() == 7
        assert seen[0] == "granting" and set(seen[1:]) == {"fenced"} and len(seen) > 1
        assert lease.stats().state == "held"
    finally:
        lease.release()
    assert lease.stats().state == "idle"


@pytest.mark.parametrize("when", ["granting", "fenced"])
def test_a_release_while_granting_or_fenced_gives_the_worker_id_back(when):
    """A release from another thread while the grant asks the store, or waits out its fence: the grant
    gives worker id 7 back at its next step, the caller gets ``Released`` (a LeaseLostError), and
    nothing is held or renewed."""
    from seqid_orm.allocation.grants import Released

    store, clock = _quarantined(MemoryStore(), 2_000), Clock()
    lease = WorkerLease(
        store, "ns", ttl=TTL, monotonic=clock, wall_clock=lambda: 2 * 10**15, timeout=5.0, sleep=lambda s: sleep(s)
    )
    original = store.acquire

    def release_in_another_thread() -> None:
        thread = threading.Thread(target=lease.release)
        thread.start()
        thread.join()

    def acquire(*args):
        if when == "granting":
            release_in_another_thread()
        return original(*args)

    def sleep(seconds: float) -> None:
        if when == "fenced" and lease.stats().state == "fenced":
            release_in_another_thread()
        clock.now += seconds

    store.acquire = acquire  # type: ignore[method-assign]
    with pytest.raises(Released):
        lease.acquire()
    assert [w for w, _ in store.released] == [7]  # given back, by the grant
    assert lease.stats().state == "idle" and not lease.held and lease.renewer.thread is None


def test_a_release_during_a_later_grant_gives_back_only_that_grants_worker_id():
    """A lease held, released, then granted again and released while that grant waits out its fence: the
    second release sends the store nothing of the first lease (its worker id went back already, its token
    is spent); the grant under way gives its own worker id back, once."""
    from seqid_orm.allocation.grants import Released

    store, clock = MemoryStore(), Clock()
    lease = WorkerLease(
        store, "ns", ttl=TTL, monotonic=clock, wall_clock=lambda: 2 * 10**15, timeout=5.0, sleep=lambda s: sleep(s)
    )

    def sleep(seconds: float) -> None:
        if lease.stats().state == "fenced":
            thread = threading.Thread(target=lease.release)
            thread.start()
            thread.join()
        clock.now += seconds

    assert lease.acquire() == 7
    lease.release()
    assert len(store.released) == 1
    _quarantined(store, 2_000)
    with pytest.raises(Released):
        lease.acquire()
    assert len(store.released) == 2  # the first release, then the second grant's give-back: no third
    assert lease.stats().state == "idle" and lease.renewer.thread is None


def _docstring_transitions() -> dict[tuple[object, object], object]:
    """The module docstring's table of lease_life, read as a person reads it: a row's states (``a/b``, a first
    column ending in ``/`` goes on on the next line, ``(any)`` every state), its event(s) and where they lead."""
    from seqid_orm.allocation import lease_life
    from seqid_orm.allocation.lease_life import Event, State

    text = lease_life.__doc__.split("state              event     next      sent by\n")[1].split("\n\n")[0]
    lines, rows = text.splitlines(), []
    while lines:
        line = lines.pop(0)
        if len(line) - len(line.lstrip()) > 20:  # the "sent by" column goes on
            continue
        while line.split()[0].endswith("/"):  # the states go on on the next line
            line = line.rstrip() + lines.pop(0).strip()
        rows.append(line.split())
    found: dict[tuple[object, object], object] = {}
    for words in rows:
        states = list(State) if words[0] == "(any)" else [State(name) for name in words[0].split("/")]
        if words[1].endswith(","):  # "begin, fence, failed: lost (...)"
            events, rest = [], words[1:]
            while not rest[0].endswith(":"):
                events.append(rest.pop(0).rstrip(","))
            events.append(rest.pop(0).rstrip(":"))
            after = State(rest[0])
        else:
            events, after = [words[1]], State(words[2])
        for state in states:
            for event in events:
                found[(state, Event(event))] = after
    return found


def test_the_module_docstring_table_is_the_transitions():
    from seqid_orm.allocation.lease_life import TRANSITIONS

    assert _docstring_transitions() == TRANSITIONS


def test_a_moves_report_is_the_reports_row_after_the_lock_is_let_go(caplog):
    """The log lines observe the table: a grant adopted says INFO once, and the line is written with the
    lease's lock free (a log handler that waits never holds a reader of the lease)."""
    import logging

    from seqid_orm.allocation.lease_life import REPORTS, Event, State

    store, clock = MemoryStore(), Clock()
    lease = WorkerLease(store, "reports", ttl=TTL, monotonic=clock, wall_clock=lambda: 2 * 10**15, sleep=lambda s: None)
    held_while_logging: list[bool] = []

    class Probe(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got = lease.life.lock.acquire(blocking=False)  # an RLock: free, or held by another thread
            if got:
                lease.life.lock.release()
            held_while_logging.append(not got or lease.life.lock._is_owned())  # type: ignore[attr-defined]

    probe = Probe(level=logging.DEBUG)
    logger = logging.getLogger("seqid_orm.leases")
    logger.addHandler(probe)
    try:
        with caplog.at_level(logging.DEBUG, logger="seqid_orm.leases"):
            lease.acquire()
    finally:
        logger.removeHandler(probe)
        lease.release()
    level, message, _ = REPORTS[(Event.GRANTED, State.HELD)]
    granted = [r for r in caplog.records if r.msg == message]
    assert len(granted) == 1 and granted[0].levelno == level == logging.INFO
    assert granted[0].getMessage() == "leased worker id 7 in 'reports' on memory"
    assert held_while_logging and not any(held_while_logging)
