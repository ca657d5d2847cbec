"""WorkerLease and leased Snowflakes in one process, on every real store, with injected clocks."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

from seqid_orm import Snowflake
from seqid_orm.allocation.leases import WorkerLease
from seqid_orm.allocation.stores import open_lease_store
from seqid_orm.errors import (
    ArgumentTypeError,
    ClockMovedBackwardsError,
    InvalidArgumentError,
    InvalidIDError,
    LeaseLostError,
    LeaseUnavailableError,
)
from tests.conftest import volatile_ok
from tests.leases.stores import insert_rows, keyed_model, leased

sa = pytest.importorskip("sqlalchemy")


needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork() on Linux")


class FakeTime:
    """A wall clock and a monotonic clock that only move when slept on (or pushed)."""

    def __init__(self, wall_ms: int) -> None:
        self.wall_ns = wall_ms * 1_000_000
        self.mono = 1000.0
        self.slept = 0.0

    def wall(self) -> int:
        return self.wall_ns

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.wall_ns += int(seconds * 1e9)
        self.mono += seconds


def test_two_leases_never_share_a_worker_id_and_release_frees_it(server, namespace):
    with WorkerLease(server, namespace, max_workers=2, ttl=30) as a, WorkerLease(server, namespace, max_workers=2) as b:
        assert {a.worker_id, b.worker_id} == {0, 1}
        with pytest.raises(LeaseUnavailableError, match=rf"all 2 worker ids of namespace '{namespace}'"):
            WorkerLease(server, namespace, max_workers=2).acquire()
        taken = a.worker_id
    with pytest.raises(LeaseLostError, match="no worker id is leased"):
        _ = a.worker_id
    with WorkerLease(server, namespace, max_workers=2, ttl=0.5) as c:  # both released: either id, after a ttl
        assert c.worker_id in (0, 1)
    assert taken in (0, 1)


def test_a_lease_is_renewed_beyond_its_ttl(server, namespace):
    # a ttl of 1.5 s: renewals every 0.5 s with 0.85 s to spare, as the suite runs in parallel workers
    # (with 0.6 s, a renewal delayed 0.35 s on a loaded machine lost the lease)
    with WorkerLease(server, namespace, max_workers=4, ttl=1.5) as lease:
        first = lease.worker_id
        time.sleep(3.75)  # two and a half ttls: only renewals keep it
        assert lease.held and lease.worker_id == first
        row = next(r for r in open_lease_store(server).leases(namespace) if r.worker_id == first)
        assert row.held and 0 < row.expires_in_ms <= 1500


def test_the_high_water_mark_makes_a_new_holder_with_a_slow_clock_wait(server, namespace):
    """Injected clocks: B's clock is 500 ms behind A's.  A releases worker id 0 after its last id;
    B gets the same id and makes none until its own clock has passed A's last millisecond: one ttl
    (0.2 s, the fence of every takeover) and then the rest of the way to the mark."""
    a_time = FakeTime(1_800_000_000_000)
    a = leased(
        server, namespace, max_workers=1, ttl=60, clock=a_time.wall, sleep=a_time.sleep, monotonic=a_time.monotonic
    )
    a_ids = [a.next_id() for _ in range(5)]
    a_time.advance(0.25)
    a_ids.append(a.next_id())
    a_worker = a.source.worker_id
    a.close()  # the mark: A's last millisecond
    b_time = FakeTime(1_800_000_000_000 - 500 + 250)
    b = leased(
        server, namespace, max_workers=1, ttl=0.2, clock=b_time.wall, sleep=b_time.sleep, monotonic=b_time.monotonic
    )
    b_id = b.next_id()
    assert b.source.worker_id == a_worker == 0
    assert 0.45 <= b_time.slept <= 0.6  # it waited for its clock to pass A's mark
    assert b.decode(b_id).timestamp > max(a.decode(i).timestamp for i in a_ids)
    b.close()


def test_a_clock_too_far_behind_gives_the_id_back_with_a_typed_error(server, namespace):
    a_time = FakeTime(1_800_000_000_000)
    a = leased(server, namespace, max_workers=1, ttl=60, clock=a_time.wall, monotonic=a_time.monotonic)
    a.next_id()
    a.close()
    late = FakeTime(1_800_000_000_000 - 10_000)
    b = leased(
        server,
        namespace,
        max_workers=1,
        ttl=0.2,
        clock_tolerance=1.0,
        clock=late.wall,
        sleep=late.sleep,
        monotonic=late.monotonic,
    )
    with pytest.raises(ClockMovedBackwardsError, match="clock_tolerance"):
        b.next_id()
    assert 1.1 <= late.slept <= 1.3  # the takeover's fence (one ttl), then the tolerance
    c = leased(
        server, namespace, max_workers=1, ttl=0.2, clock=a_time.wall, sleep=a_time.sleep, monotonic=a_time.monotonic
    )
    a_time.advance(1)
    c.next_id()  # B gave worker id 0 back: someone with a good clock can take it
    c.close()


def test_a_lease_taken_from_under_its_holder_stops_the_generator_at_once(server, namespace):
    """A renewal that finds another token (an operator cleared the row, say) stops ids at once."""
    gen = leased(server, namespace, max_workers=1, ttl=0.9)
    gen.next_id()
    store = open_lease_store(server)
    thief = WorkerLease(server, namespace, max_workers=1, ttl=0.9)  # a takeover: it waits one ttl first
    # the holder's renewal thread waits meanwhile (else, on a loaded machine, it found its row gone and
    # leased the free worker id again before the thief asked)
    with gen.source.life.lock:
        store.release(namespace, 0, gen.source.life.token, 0)  # the holder's token no longer holds it
        thief.acquire()
    # its own lease ends within one ttl (0.9 s) of the theft; the rest is slack for a loaded machine
    # (the suite runs in parallel)
    deadline = time.monotonic() + 5
    with pytest.raises(LeaseLostError):
        while time.monotonic() < deadline:
            gen.next_id()
            time.sleep(0.01)
    thief.release()
    gen.close()


def test_worker_ids_fill_the_worker_and_datacenter_fields(redis_url, namespace):
    gens = [leased(volatile_ok(redis_url), namespace, max_workers=40, ttl=30) for _ in range(40)]
    try:
        made = [g.next_id() for g in gens]
        pairs = {(g.datacenter_id, g.worker_id) for g in gens}
        assert len(pairs) == 40 and {g.source.worker_id for g in gens} == set(range(40))
        for g, i in zip(gens, made, strict=True):
            parts = g.decode(i)
            assert (parts.datacenter_id, parts.worker_id) == (g.datacenter_id, g.worker_id)
            assert parts.datacenter_id * 32 + parts.worker_id == g.source.worker_id
    finally:
        for g in gens:
            g.close()


def test_threads_of_one_process_share_its_lease(server, namespace):
    gen = leased(server, namespace, ttl=30)
    out: list[list[int]] = [[] for _ in range(6)]

    def draw(k: int) -> None:
        out[k] = [gen.next_id() for _ in range(2000)]

    threads = [threading.Thread(target=draw, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [i for ids in out for i in ids]
    assert len(set(flat)) == len(flat) and gen.source.acquisitions == 1
    gen.close()


@needs_fork
def test_a_forked_child_leases_its_own_worker_id(server, namespace):
    gen = leased(server, namespace, max_workers=8, ttl=30)
    parent_ids = [gen.next_id() for _ in range(10)]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            ids = [gen.next_id() for _ in range(200)]
            os.write(w, f"{gen.source.worker_id} {' '.join(map(str, ids))}".encode())
            gen.close()
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    child_worker, *child_ids = data.decode().split()
    parent_ids += [gen.next_id() for _ in range(200)]
    assert int(child_worker) != gen.source.worker_id and gen.source.held
    assert not set(parent_ids) & {int(i) for i in child_ids}
    gen.close()


def test_snowflake_pk_with_a_leased_generator_through_the_orm(engine, table_name, namespace, sqlite_ticket_url):
    store = sqlite_ticket_url if engine.dialect.name == "sqlite" else engine.url.render_as_string(hide_password=False)
    gen = leased(store, namespace, ttl=30)
    event = keyed_model(table_name, gen)
    event.metadata.create_all(engine)
    try:
        insert_rows(engine, event, range(500))
        with engine.connect() as conn:
            rows = conn.execute(sa.select(event.n).order_by(event.id)).scalars().all()
        assert rows == list(range(500))  # one generator: key order is creation order
    finally:
        event.metadata.drop_all(engine)
        gen.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"namespace": "Orders"}, InvalidIDError, "lease namespace"),
        ({"max_workers": 0}, InvalidArgumentError, "max_workers"),
        ({"max_workers": 1.5}, ArgumentTypeError, "max_workers"),
        ({"ttl": 0.01}, InvalidArgumentError, "ttl"),
        ({"ttl": -1}, InvalidArgumentError, "ttl"),
        ({"clock_tolerance": float("nan")}, InvalidArgumentError, "clock_tolerance"),
        ({"store": "ftp://x/y"}, InvalidArgumentError, "unknown lease store scheme 'ftp'"),
        ({"store": 3}, ArgumentTypeError, "lease store"),
    ],
)
def test_bad_lease_arguments_raise_typed_errors(kwargs, error, match):
    args = {"store": "sqlite://", "namespace": "orders", **kwargs}
    with pytest.raises(error, match=match):
        WorkerLease(args.pop("store"), args.pop("namespace"), **args)


def test_max_workers_cannot_exceed_what_the_bits_hold():
    with pytest.raises(InvalidArgumentError, match="1024 ids"):
        leased("sqlite://", "orders", max_workers=2048)
    gen = leased("sqlite://", "orders")
    assert isinstance(gen.source, WorkerLease) and gen.source.max_workers == 1024
    assert Snowflake.sonyflake(0).worker_bits == 16


def test_seqid_lease_status_lists_holders_and_marks(server, namespace, capsys):
    from seqid_orm.cli import main

    with WorkerLease(server, namespace, max_workers=3, ttl=30) as lease:
        assert main(["lease", "status", server, "--namespace", namespace, "--json"]) == 0
        [row] = json.loads(capsys.readouterr().out)
        assert row["worker_id"] == lease.worker_id and row["held"] and 0 < row["expires_in_ms"] <= 30_000
    assert main(["lease", "status", server, "--namespace", namespace]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["worker_id", "held", "expires_in_ms", "mark"]
    assert text.splitlines()[1].split()[:2] == [str(lease.life.worker_id), "no"]


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "mysql+pymysql", "redis"])
def test_a_lease_store_that_cannot_be_reached_is_a_typed_error_naming_it(scheme):
    from seqid_orm.errors import BackendUnavailableError
    from tests.servers.private import free_port

    url = f"{scheme}://user:secret@127.0.0.1:{free_port()}/0"
    lease = WorkerLease(url, "orders", connect_timeout=1, accept_state_loss=True)
    with pytest.raises(BackendUnavailableError, match="lease store") as info:
        lease.acquire()
    assert "secret" not in str(info.value) and "127.0.0.1" in str(info.value)


def test_a_grant_slower_than_its_ttl_is_renewed_not_refused(server, namespace):
    """On a loaded machine the grant's reply can come after its ttl (seen under two CPU hogs with a
    0.2 s ttl): acquire() renews it before returning where the store still gives it to this holder
    (a SQL row keeps its token), or grants again where it does not (Redis expired the key), instead
    of raising LeaseLostError for a lease it has never used."""
    lease = WorkerLease(server, namespace, max_workers=2, ttl=0.5, clock_tolerance=0.0)
    store = lease.store
    renew = store.renew
    renewals: list[float] = []

    def slow_first_renewal(*args):
        renewed = renew(*args)
        renewals.append(time.monotonic())
        if len(renewals) == 1:
            time.sleep(0.7)  # the grant's own renewal answers after the lease's ttl
        return renewed

    store.renew = slow_first_renewal
    try:
        worker = lease.acquire()
        assert worker in (0, 1) and lease.held and len(renewals) >= 2  # renewed (or granted) again
        assert [r.worker_id for r in store.leases(namespace) if r.held] == [worker]
    finally:
        lease.release()
