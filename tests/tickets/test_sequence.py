"""TicketSequence in one process, on every real ticket server: segments, threads, forks, errors."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqid_orm.allocation.flight import Flight
from seqid_orm.allocation.stores import open_ticket_store
from seqid_orm.allocation.stores.sqlalchemy import SQLAlchemyTicketStore
from seqid_orm.allocation.tickets import TicketSequence
from seqid_orm.errors import (
    AllocationError,
    ArgumentTypeError,
    BackendMismatchError,
    BackendUnavailableError,
    CounterRegressedError,
    GeneratorExhaustedError,
    InvalidArgumentError,
    InvalidIDError,
    SeqIDError,
)
from seqid_orm.ids.validate import BIGINT_MAX
from tests.conftest import POSTGRES_URL
from tests.servers.private import free_port
from tests.tickets.conftest import forget

sa = pytest.importorskip("sqlalchemy")
redis = pytest.importorskip("redis")

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork() on Linux")


def set_next_value(url: str, name: str, value: int) -> None:
    """Move a stored counter directly, as an operator (or a test of the far end) would."""
    if url.startswith("redis"):
        client = redis.Redis.from_url(url.split("?")[0])
        client.hset(f"seqid:tickets:{name}", "next_value", value)
        client.close()
        return
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE seqid_tickets SET next_value = :v WHERE name = :n"), {"v": value, "n": name})
    engine.dispose()


class Spy:
    """Wraps a real store and records which thread made each reservation (not a database mock)."""

    def __init__(self, store):
        self.store = store
        self.label = store.label
        self.threads: list[str] = []

    def allocate(self, *args):
        self.threads.append(threading.current_thread().name)
        return self.store.allocate(*args)

    def rows(self):
        return self.store.rows()

    def read(self, name):
        return self.store.read(name)

    def create(self, row):
        self.store.create(row)

    def raise_to(self, row):
        return self.store.raise_to(row)

    def after_fork(self):
        self.store.after_fork()

    def close(self):
        self.store.close()


def test_ids_increase_and_segments_follow_each_other(server, seq_name):
    with TicketSequence(seq_name, server, block_size=7) as seq:
        singles = [seq.next_id() for _ in range(30)]
        batch = seq.next_ids(100)
        more = [seq.next_id() for _ in range(5)]
    values = singles + batch + more
    assert values == list(range(1, 136))  # one process alone: dense and increasing
    # the singles take 5 segments of 7 (a 6th may be prefetched), the batch what it still lacks in one
    # reservation, the last five one more (and a prefetch): at most 10, where a block at a time took 20
    assert 7 <= seq.fetches <= 10, seq.fetches


def test_background_prefetch_keeps_the_caller_off_the_server(server, seq_name):
    """Double buffering: after the first segment every reservation is made by the prefetch thread."""
    spy = Spy(open_ticket_store(server))
    with TicketSequence(seq_name, spy, block_size=50) as seq:
        for _ in range(500):
            seq.next_id()
    caller = threading.current_thread().name
    assert spy.threads[0] == caller  # nothing to prefetch from before the first id
    assert len(spy.threads) >= 10 and all(t == f"seqid-tickets-{seq_name}" for t in spy.threads[1:])


def test_a_prefetch_thread_the_machine_runs_late_is_followed_not_doubled(server, seq_name, monkeypatch):
    """On a busy machine the thread that prefetches may run after the caller has emptied its segment (CI's
    two cores did: the caller then reserved too).  The prefetch is claimed before its thread starts, so the
    caller waits for it, and no block is reserved twice: here every thread starts 0.2 s late."""
    late = TicketSequence._prefetch

    def _prefetch(self, *args):
        threading.Event().wait(0.2)  # the thread is scheduled late, after the caller drew its 5 last values
        return late(self, *args)

    monkeypatch.setattr(TicketSequence, "_prefetch", _prefetch)
    spy = Spy(open_ticket_store(server))
    with TicketSequence(seq_name, spy, block_size=50, prefetch_at=0.1) as seq:
        ids = [seq.next_id() for _ in range(200)]
    assert ids == list(range(ids[0], ids[0] + 200))  # in turn: no block skipped, none reserved beside another
    prefetcher = f"seqid-tickets-{seq_name}"
    assert spy.threads[0] == threading.current_thread().name and set(spy.threads[1:]) == {prefetcher}, spy.threads
    assert len(spy.threads) <= 5, spy.threads  # 4 segments of 50, and at most one more prefetched

    # the thread whose draw started the prefetch ends before it is done: the prefetch is still followed
    spy, second = Spy(open_ticket_store(server)), f"{seq_name}b"
    try:
        with TicketSequence(second, spy, block_size=50, prefetch_at=0.1) as seq:
            first = threading.Thread(target=lambda: [seq.next_id() for _ in range(46)], name="short-lived")
            first.start()
            first.join()  # it drew the trigger (the 46th value) and ended; the prefetch thread has not run yet
            ids = [seq.next_id() for _ in range(54)]
    finally:
        forget(second, [] if server.startswith("redis") else [server])  # seq_name's fixture forgets the first
    # the short-lived thread's first reservation, then only the prefetch thread's (the second segment's trigger
    # starts one more): never this thread's
    assert spy.threads[0] == "short-lived" and set(spy.threads[1:]) == {f"seqid-tickets-{second}"}, spy.threads
    assert ids == list(range(ids[0], ids[0] + 54))


def test_a_trigger_drawn_while_the_prefetch_ends_starts_the_next_one(server, seq_name, monkeypatch):
    """The prefetch puts its segment in the buffer, then ends its claim.  A caller that draws that segment
    down to its trigger in between finds the claim live and leaves the next reservation to it (CI's two
    cores did, once): the prefetch thread must then reserve the next one too, or the caller reserves it
    itself when the segment runs out.  Here the first prefetch's end waits until the caller has drawn the
    trigger of the segment it brought."""
    prefetcher = f"seqid-tickets-{seq_name}"
    in_gap, drawn = threading.Event(), threading.Event()
    finish = Flight.finish

    def _finish(self, *args, **kwargs):
        if threading.current_thread().name == prefetcher and not in_gap.is_set():
            in_gap.set()  # the segment is in the buffer (put there before the claim ends)
            assert drawn.wait(30), "the caller never drew the new segment's trigger"
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(Flight, "finish", _finish)
    spy = Spy(open_ticket_store(server))
    with TicketSequence(seq_name, spy, block_size=50, prefetch_at=0.1) as seq:
        ids = [seq.next_id() for _ in range(46)]  # the 46th value is the first segment's trigger
        assert in_gap.wait(30), "the prefetch never reserved"
        ids += [seq.next_id() for _ in range(50)]  # through the second segment's trigger (value 96)
        drawn.set()
        ids += [seq.next_id() for _ in range(104)]
    assert ids == list(range(ids[0], ids[0] + 200))
    # the caller reserved the first segment only: the prefetch thread brought every later one
    assert spy.threads[0] == threading.current_thread().name and set(spy.threads[1:]) == {prefetcher}, spy.threads
    assert len(spy.threads) >= 4, spy.threads


def test_without_double_buffering_the_caller_reserves(server, seq_name):
    """The caller reserves, and a batch's shortfall in one reservation: 500 ids are one round trip (a
    block is a range), the next batch asks for a block again."""
    spy = Spy(open_ticket_store(server))
    with TicketSequence(seq_name, spy, block_size=50, double_buffer=False) as seq:
        first = seq.next_ids(500)
        second = seq.next_ids(30)
    assert first == list(range(1, 501)) and second == list(range(501, 531))
    assert len(spy.threads) == 2 and set(spy.threads) == {threading.current_thread().name}
    assert seq.stats().ids_issued == 550  # the segments held 500 and a block of 50


def test_threads_share_one_sequence_without_duplicates(server, seq_name):
    seq = TicketSequence(seq_name, server, block_size=64)
    results: list[list[int]] = [[] for _ in range(8)]
    barrier = threading.Barrier(8)

    def draw(k: int) -> None:
        barrier.wait()
        for i in range(1500):
            results[k].extend(seq.next_ids(3) if i % 10 == 0 else [seq.next_id()])

    threads = [threading.Thread(target=draw, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seq.close()
    flat = [i for r in results for i in r]
    assert len(flat) == 8 * (1350 + 150 * 3) and len(set(flat)) == len(flat)
    for r in results:
        assert r == sorted(r)  # each thread sees increasing values


@needs_fork
def test_forked_children_never_hand_out_their_parents_values(server, seq_name):
    seq = TicketSequence(seq_name, server, block_size=100)
    parent_ids = [seq.next_id() for _ in range(20)]  # a warm segment (and a prefetched one)
    pipes, pids = [], []
    for _ in range(3):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.write(w, "\n".join(str(seq.next_id()) for _ in range(150)).encode())
            finally:
                os._exit(0)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    parent_ids += [seq.next_id() for _ in range(300)]
    children = []
    for r, pid in zip(pipes, pids, strict=True):
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        children.append([int(x) for x in data.decode().split()])
    seq.close()
    flat = parent_ids + [i for c in children for i in c]
    assert all(len(c) == 150 for c in children)
    assert len(set(flat)) == len(flat)


@needs_fork
def test_children_of_a_c_level_fork_never_hand_out_their_parents_values(sqlite_ticket_url):
    """libc's fork() with no Python at-fork hooks (uWSGI's prefork), of a parent holding a warm
    segment: each child notices it is a child before its first value and reserves its own.  In a
    fresh interpreter with no other Python thread, which such a fork needs (tests/core/raw_fork.py):
    inside an xdist worker another thread waiting for the GIL at the fork hangs the child."""
    from tests.core.test_hardening import _raw_fork_children

    made = _raw_fork_children("tickets", sqlite_ticket_url, children=3, per_child=150)
    children = [[int(x) for x in c] for c in made["children"]]
    flat = made["after"] + [i for c in children for i in c]
    assert all(len(c) == 150 for c in children) and len(made["after"]) == 301
    assert len(set(flat)) == len(flat)


def test_adaptive_block_size_follows_how_long_segments_last(sqlite_ticket_url, seq_name):
    now = [0.0]
    seq = TicketSequence(
        seq_name,
        sqlite_ticket_url,
        block_size=10,
        max_block_size=80,
        segment_seconds=60,
        double_buffer=False,
        clock=lambda: now[0],
    )
    sizes = []
    for _ in range(6):  # fast segments: the block doubles up to the bound
        seq.next_ids(seq.segment.count if seq.segment else 1)
        sizes.append(seq.stats().block_size)
        now[0] += 1
    assert sizes[-1] == 80 and sizes == sorted(sizes)
    for _ in range(4):  # slow segments (over twice segment_seconds): it halves down to block_size
        now[0] += 200
        seq.next_ids(seq.segment.count)
    assert seq.stats().block_size == 10
    seq.close()


def test_failover_to_the_next_server_and_a_typed_error_when_none_answers(server, seq_name, caplog):
    dead = f"postgresql+psycopg://postgres:secret@127.0.0.1:{free_port()}/none"
    # a new sequence is created on all of its servers at once: not while one of them is down
    with TicketSequence(seq_name, [dead, server], connect_timeout=2) as seq, pytest.raises(BackendUnavailableError):
        seq.next_id()
    with TicketSequence(seq_name, server) as live:
        assert [r for _, r in live.rows() if r.name == seq_name] == []  # nothing was created half-way
    with TicketSequence(seq_name, server, step=2, offsets=[2]) as seq:  # the live half of the set, made earlier
        seq.next_id()
    with TicketSequence(seq_name, [dead, server], block_size=5, start_server=0, connect_timeout=2) as seq:
        with caplog.at_level(logging.WARNING, logger="seqid_orm.tickets"):
            ids = [seq.next_id() for _ in range(12)]
        assert all(i % 2 == 0 for i in ids)  # all from the second server (offset 2 of step 2)
        assert "secret" not in caplog.text and "trying the next" in caplog.text
    dead2 = f"redis://:secret@127.0.0.1:{free_port()}/0"
    with (
        TicketSequence(seq_name, [dead, dead2], connect_timeout=1) as seq,
        pytest.raises(BackendUnavailableError) as info,
    ):
        seq.next_id()
    message = str(info.value)
    assert "secret" not in message and "127.0.0.1" in message and "redis://" in message
    assert isinstance(info.value, (AllocationError, RuntimeError, SeqIDError))


def test_a_server_stored_with_another_step_or_offset_is_refused(server, seq_name):
    with TicketSequence(seq_name, server) as seq:
        seq.next_id()
    with (
        TicketSequence(seq_name, server, step=2, offsets=[2]) as other,
        pytest.raises(BackendMismatchError, match="step=1 offset=1"),
    ):
        other.next_id()


def test_exhaustion_shrinks_the_last_segment_then_raises(server, seq_name):
    with TicketSequence(seq_name, server, block_size=10, double_buffer=False) as seq:
        assert seq.next_id() == 1
        # 5 values left: the last one handed out is BIGINT_MAX - 1, so next_value still fits a BIGINT
        set_next_value(server, seq_name, BIGINT_MAX - 5)
        rest = seq.next_ids(9)  # the current segment
        tail = [seq.next_id() for _ in range(5)]
        assert rest == list(range(2, 11)) and tail == list(range(BIGINT_MAX - 5, BIGINT_MAX))
        with pytest.raises(GeneratorExhaustedError, match=seq_name):
            seq.next_id()


@pytest.mark.parametrize("awaited", [False, True], ids=["next_id", "anext_id"])
def test_a_sequence_started_at_the_bigint_edge_ends_exhausted_on_every_store(server, seq_name, awaited):
    """The edge as a user meets it (start=2**63-1000, the default block and double buffering): every store
    ends with GeneratorExhaustedError (Redis's own overflow answer included), never as a server
    that did not answer."""
    drawn: list[int] = []

    async def draw_all(seq: TicketSequence) -> None:
        while True:
            drawn.append(await seq.anext_id())

    with (
        TicketSequence(seq_name, server, start=BIGINT_MAX - 1000) as seq,
        pytest.raises(GeneratorExhaustedError, match=seq_name),
    ):
        if awaited:
            asyncio.run(draw_all(seq))
        while True:
            drawn.append(seq.next_id())
    assert drawn == list(range(BIGINT_MAX - 1000, BIGINT_MAX))


def test_three_sequences_drawing_one_counter_to_the_bigint_edge_all_end_exhausted(server, seq_name):
    """Three objects (three processes' worth) draw one sequence past 2**63 at once, in blocks of 128: each ends
    in GeneratorExhaustedError, never as a server that did not answer (on Redis one of them read the overflow
    refusal of a block another had shrunk first as silence: BackendUnavailableError), and between them
    every value below the edge is handed out once."""
    import threading

    sequences = [TicketSequence(seq_name, server, start=BIGINT_MAX - 1000, block_size=128) for _ in range(3)]
    drawn: list[list[int]] = [[] for _ in sequences]
    ended: list[BaseException | None] = [None] * 3

    def draw(k: int) -> None:
        try:
            while True:
                drawn[k].append(sequences[k].next_id())
        except BaseException as exc:  # the test reads how each one ended
            ended[k] = exc

    threads = [threading.Thread(target=draw, args=(k,)) for k in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for seq in sequences:
            seq.close()
    assert [type(e).__name__ for e in ended] == ["GeneratorExhaustedError"] * 3, ended
    values = [v for d in drawn for v in d]
    assert sorted(values) == list(range(BIGINT_MAX - 1000, BIGINT_MAX))


def test_max_value_bounds_a_sequence(server, seq_name):
    with TicketSequence(seq_name, server, block_size=4, max_value=10) as seq:
        assert seq.next_ids(10) == list(range(1, 11))
        with pytest.raises(GeneratorExhaustedError):
            seq.next_id()


def test_start_adopts_a_table_whose_ids_already_reach_n(server, seq_name):
    with TicketSequence(seq_name, server, step=2, offsets=[2], start=1000) as seq:
        first = seq.next_id()
    assert first == 1000  # the first value >= 1000 with offset 2 of step 2


def test_values_above_2_53_are_exact(server, seq_name):
    """Redis hands Lua integers as doubles; seqid reads the counter back as text, exactly."""
    with TicketSequence(seq_name, server, block_size=3, double_buffer=False) as seq:
        seq.next_id()
        set_next_value(server, seq_name, 2**60 + 1)
        seq.next_ids(2)
        assert seq.next_ids(4) == [2**60 + 1, 2**60 + 2, 2**60 + 3, 2**60 + 4]


def test_a_counter_that_vanishes_is_not_started_over(server, seq_name):
    """A truncated table, a deleted row or a Redis restart: starting at 1 again would repeat ids."""
    with TicketSequence(seq_name, server, block_size=5, double_buffer=False) as seq:
        seq.next_ids(5)
        forget(seq_name, [server] if not server.startswith("redis") else [])
        with pytest.raises(AllocationError, match="vanished"):
            seq.next_id()
    with TicketSequence(seq_name, server, block_size=5) as fresh:  # a new process may create it
        assert fresh.next_id() == 1


def test_rows_show_every_sequence_with_its_step_and_offset(server, seq_name):
    with TicketSequence(seq_name, server, step=2, offsets=[1], block_size=3, double_buffer=False) as seq:
        seq.next_id()
        rows = [row for _, row in seq.rows() if row.name == seq_name]
    assert [(r.step, r.offset, r.next_value) for r in rows] == [(2, 1, 7)]


def test_a_server_listed_twice_is_refused_before_anything_is_created(server, seq_name):
    with pytest.raises(InvalidArgumentError, match="listed more than once"):
        TicketSequence(seq_name, [server, server])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"servers": "ftp://example.org/x"}, InvalidArgumentError, "unknown ticket server scheme 'ftp'"),
        ({"servers": "orders.db"}, InvalidArgumentError, "unknown ticket server scheme"),
        ({"servers": 42}, ArgumentTypeError, "must be a URL"),
        ({"servers": []}, InvalidArgumentError, "at least one server"),
        ({"name": "Orders"}, InvalidIDError, "lower case"),
        ({"name": ""}, InvalidIDError, "invalid sequence name"),
        ({"name": "a" * 65}, InvalidIDError, "invalid sequence name"),
        ({"name": "orders; drop table x"}, InvalidIDError, "invalid sequence name"),
        ({"name": 7}, ArgumentTypeError, "must be a str"),
        ({"block_size": 0}, InvalidArgumentError, "block_size must be between 1"),
        ({"block_size": -5}, InvalidArgumentError, "block_size"),
        ({"block_size": 2.5}, ArgumentTypeError, "block_size must be an int"),
        ({"block_size": True}, ArgumentTypeError, "block_size must be an int"),
        ({"block_size": 2**40}, InvalidArgumentError, "block_size"),
        ({"max_block_size": 5, "block_size": 10}, InvalidArgumentError, "max_block_size"),
        ({"step": 0}, InvalidArgumentError, "step"),
        ({"offsets": [0]}, InvalidArgumentError, "offset"),
        ({"offsets": [2]}, InvalidArgumentError, "offset must be between 1 and 1"),
        ({"prefetch_at": 0}, InvalidArgumentError, "prefetch_at"),
        ({"max_value": 0}, InvalidArgumentError, "max_value"),
        ({"max_value": 2**63}, InvalidArgumentError, "max_value"),
        ({"start": 0}, InvalidArgumentError, "start"),
        ({"start_server": 1}, InvalidArgumentError, "start_server"),
        ({"connect_timeout": float("inf")}, InvalidArgumentError, "connect_timeout"),
        ({"connect_timeout": float("nan")}, InvalidArgumentError, "connect_timeout"),
        ({"connect_timeout": None}, ArgumentTypeError, "connect_timeout"),
        ({"connect_timeout": "5"}, ArgumentTypeError, "connect_timeout"),
        ({"connect_timeout": -1}, InvalidArgumentError, "connect_timeout"),
        ({"offsets": 1}, ArgumentTypeError, "offsets must be a list"),
        ({"offsets": [1.0]}, ArgumentTypeError, "offset must be an int"),
        ({"segment_seconds": float("inf")}, InvalidArgumentError, "segment_seconds"),
        ({"segment_seconds": "900"}, ArgumentTypeError, "segment_seconds"),
        ({"prefetch_at": float("nan")}, InvalidArgumentError, "prefetch_at"),
        ({"accept_state_loss": "yes"}, ArgumentTypeError, "accept_state_loss"),
        ({"double_buffer": 1}, ArgumentTypeError, "double_buffer"),
        ({"floor": "orders.id"}, ArgumentTypeError, "floor must be a KeyFloor"),
        ({"servers": "redis://127.0.0.1:1/0?accept_state_loss=maybe"}, InvalidArgumentError, "true or false"),
        # checked where the sequence is made, though its store opens at the first id
        ({"servers": "redis://127.0.0.1:port/0"}, InvalidArgumentError, "cannot use 'redis://127.0.0.1:port/0'"),
        ({"servers": "postgresql://h:99999/db"}, InvalidArgumentError, "out of range"),
    ],
)
def test_bad_input_raises_a_typed_error_before_anything_is_sent(tmp_path, kwargs, error, match):
    database = tmp_path / "tickets.sqlite3"
    args = {"name": "orders", "servers": f"sqlite:///{database}", **kwargs}
    with pytest.raises(error, match=match):
        TicketSequence(args.pop("name"), args.pop("servers"), **args)
    assert not database.exists()  # nothing was connected to, so no file, table or row was made


def test_next_ids_refuses_bad_counts(sqlite_ticket_url, seq_name):
    with TicketSequence(seq_name, sqlite_ticket_url) as seq:
        assert seq.next_ids(0) == []
        with pytest.raises(InvalidArgumentError):
            seq.next_ids(-1)
        with pytest.raises(ArgumentTypeError):
            seq.next_ids(2.0)  # type: ignore[arg-type]


def test_a_missing_table_is_created_or_named(tmp_path, seq_name):
    url = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    with pytest.raises(InvalidArgumentError, match="create_ticket_table"):
        TicketSequence(seq_name, url, create_table=False).next_id()
    with TicketSequence(seq_name, url) as seq:
        assert seq.next_id() == 1


def test_an_engine_or_a_redis_client_is_used_without_taking_it_over(pg_engine, redis_url, seq_name):
    store = SQLAlchemyTicketStore(pg_engine)
    with TicketSequence(seq_name, store) as seq:
        assert seq.next_id() == 1
    with pg_engine.connect() as conn:  # the application's engine still works after close()
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    client = redis.Redis.from_url(redis_url)
    with TicketSequence(seq_name, client, accept_state_loss=True) as seq:
        assert seq.next_id() == 1
    assert client.ping()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    block=st.integers(1, 40),
    calls=st.lists(st.one_of(st.just(None), st.integers(0, 90)), min_size=1, max_size=40),
    double_buffer=st.booleans(),
)
def test_any_mix_of_calls_gives_one_dense_increasing_run(sqlite_ticket_url, block, calls, double_buffer):
    import secrets

    name = f"h-{secrets.token_hex(6)}"
    with TicketSequence(name, sqlite_ticket_url, block_size=block, double_buffer=double_buffer) as seq:
        out: list[int] = []
        for call in calls:
            out += [seq.next_id()] if call is None else seq.next_ids(call)
    assert out == list(range(1, len(out) + 1))


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("mssql", "SET next_value = next_value + :delta OUTPUT inserted.next_value WHERE"),
        ("oracle", "RETURNING next_value INTO :new_next"),
        ("postgresql", "RETURNING next_value"),
        ("sqlite", "RETURNING next_value"),
        ("mysql", "SET next_value = LAST_INSERT_ID(next_value + :delta) WHERE"),
        ("mariadb", "SET next_value = LAST_INSERT_ID(next_value + :delta) WHERE"),
    ],
)
def test_the_atomic_statement_of_each_vendor_compiles_with_its_dialect(dialect, expected):
    """Every vendor's reservation is one UPDATE (ticket_sql.py, the one home of the ticket SQL),
    bounded by the largest start allowed; SQLAlchemy's dialect compiles it with its parameters, the
    out bind of Oracle's RETURNING INTO included (no SQL Server or Oracle server here)."""
    from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite

    from seqid_orm.allocation.stores.ticket_sql import ticket_sql

    sql = ticket_sql(dialect, "seqid_tickets")
    assert sql.advance.startswith("UPDATE seqid_tickets SET next_value = ") and expected in sql.advance
    assert "next_value <= :highest_start" in sql.advance  # never past the largest value allowed
    d = {"mssql": mssql, "oracle": oracle, "postgresql": postgresql, "sqlite": sqlite, "mysql": mysql}
    stmt = sa.text(sql.advance)
    if dialect == "oracle":
        stmt = stmt.bindparams(sa.bindparam("new_next", isoutparam=True, type_=sa.BigInteger))
    compiled = stmt.compile(dialect=d.get(dialect, mysql).dialect())
    assert set(compiled.params) >= {"delta", "seq_name", "seq_step", "seq_offset", "lowest_start", "highest_start"}


def test_a_vendor_without_an_atomic_idiom_is_refused_by_name():
    from seqid_orm.allocation.stores.ticket_sql import ticket_sql

    with pytest.raises(InvalidArgumentError, match="not 'firebird'"):
        ticket_sql("firebird", "t")


def test_a_password_never_appears_in_a_label():
    store = open_ticket_store(POSTGRES_URL.replace("postgres@", "postgres:hunter2@"))
    assert "hunter2" not in store.label and "***" in store.label
    store.close()


def test_a_counter_that_went_back_is_refused_and_left_where_it_is(server, seq_name):
    """A counter restored below what this process saw it hand out (a backup, a failover to a replica
    that lagged) is refused by the store itself, unmoved: before, every refused reservation still
    advanced it, so a process that kept asking walked it up into blocks other processes still used
    (before: 50-100 repeats with workers alive after an asynchronous failover)."""
    with TicketSequence(seq_name, server, block_size=10) as seq:
        drawn = [seq.next_id() for _ in range(25)]
        set_next_value(server, seq_name, 11)  # put back below every block this process reserved
        store = open_ticket_store(server)
        try:
            for _ in range(3):  # a refused process asks again and again
                with pytest.raises(CounterRegressedError, match=r"would hand out 11 next.*left where it is"):
                    for _ in range(30):  # what it holds in memory first (up to two blocks), then refused
                        drawn.append(seq.next_id())
            row = store.read(seq_name)
        finally:
            store.close()
        assert row is not None and row.next_value == 11  # not one refused reservation moved it
        assert len(drawn) == len(set(drawn)) >= 25
