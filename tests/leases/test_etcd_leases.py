"""Worker-id leases on a private 3-member etcd cluster (Debian's etcd-server 3.4): the store's
protocol, a leased Snowflake filling a PostgreSQL key through the ORM, and real lease-holding
processes while the leader is killed or frozen and while a holder is frozen past its ttl.  Every id
every process printed is counted: a repeat is the one failure."""

from __future__ import annotations

import secrets
import signal
import time

import pytest

from seqid_orm import Snowflake, WorkerLease
from seqid_orm.errors import LeaseLostError, LeaseUnavailableError
from tests.leases.stores import insert_rows, keyed_model
from tests.servers.etcd import FAULTS, EtcdCluster, inflict
from tests.system import need
from tests.tickets.procs import Worker, start_together

sa = pytest.importorskip("sqlalchemy")

pytestmark = [pytest.mark.etcd, pytest.mark.system("etcd")]

TWITTER = Snowflake(worker_id=0)  # decodes any id of the default profile


@pytest.fixture
def namespace() -> str:
    return f"ns-{secrets.token_hex(4)}"


def test_worker_ids_on_etcd_are_granted_once_and_taken_over_after_one_ttl(etcd_cluster, namespace):
    options = {"max_workers": 2, "ttl": 1.0, "clock_tolerance": 0.0, "timeout": 2.0}
    a, b = WorkerLease(etcd_cluster.url, namespace, **options), WorkerLease(etcd_cluster.url, namespace, **options)
    started = time.monotonic()
    a.acquire()
    assert a.mark_wait >= 0.9  # a new namespace: its first holders wait one ttl + tolerance (etcd's clock)
    b.acquire()
    assert {a.worker_id, b.worker_id} == {0, 1}
    with pytest.raises(LeaseUnavailableError, match=rf"all 2 worker ids of namespace '{namespace}'"):
        WorkerLease(etcd_cluster.url, namespace, **options).acquire()
    rows = a.store.leases(namespace)
    assert [(r.worker_id, r.held) for r in rows] == [(0, True), (1, True)]
    assert all(0 < r.expires_in_ms <= 2000 and r.mark_ms > 0 for r in rows)
    taken = a.worker_id
    a.release()
    c = WorkerLease(etcd_cluster.url, namespace, **options)
    c.acquire()  # the released worker id, after one ttl (its record may be a restored copy)
    assert c.worker_id == taken and c.mark_wait >= 0.9
    assert time.monotonic() - started < 15
    b.release()
    c.release()
    assert not any(r.held for r in a.store.leases(namespace))


def test_a_lease_renewed_past_etcds_expiry_is_lost(etcd_cluster, namespace):
    """The holder's view never outlives the store's: a renewal after the etcd lease ended fails."""
    lease = WorkerLease(etcd_cluster.url, namespace, max_workers=1, ttl=1.0, clock_tolerance=0.0)
    lease.acquire()
    token, worker = lease.life.token, lease.worker_id
    lease.renewer.stop.set()  # no more renewals from its thread
    time.sleep(3.5)  # past etcd's lease (whole seconds, at least 2)
    assert lease.store.renew(namespace, worker, token, 1000, 0) is False
    with pytest.raises(LeaseLostError):
        lease.extend_mark(0)
    lease.release()


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
def test_a_snowflake_leased_from_etcd_fills_a_key_through_the_orm(etcd_cluster, namespace, engine, table_name):
    gen = Snowflake(worker_id=WorkerLease(etcd_cluster.url, namespace, ttl=1.0, clock_tolerance=0.0))
    event = keyed_model(table_name, gen)
    event.metadata.create_all(engine)
    try:
        insert_rows(engine, event, range(300))
        with engine.connect() as conn:
            assert conn.execute(sa.select(event.n).order_by(event.id)).scalars().all() == list(range(300))
    finally:
        event.metadata.drop_all(engine)
        gen.close()


# --- real processes holding leases through the cluster's faults --------------------------------


def holder(store: str, namespace: str, **opts) -> Worker:
    options = {"ttl": 3.0, "tolerance": 0.5, "max_workers": 3, "count": 1_000_000, "pace": 0.001}
    return Worker(module="tests.leases.worker", store=store, namespace=namespace, **{**options, **opts})


def repeats(group: list[Worker]) -> int:
    ids = [i for w in group for i in w.ids()]
    return len(ids) - len(set(ids))


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_holders_on_etcd_repeat_no_id_through_the_clusters_faults(fault, namespace):
    """Three processes hold the three worker ids of a namespace and stamp ids while the cluster goes
    through ``fault``; a holder whose renewals fail past its lease stops (LeaseLostError) and leases
    again once the cluster answers.  They go on after it heals, and no id repeats."""
    need("etcd")
    with EtcdCluster(3, partitionable=True) as private:
        # relet: a holder whose lease lapsed in the outage (whether it does depends on how long the
        # restart takes against the ttl) asks again, as an application would, instead of exiting
        group = [holder(private.url, namespace, relet=True) for _ in range(3)]
        try:
            start_together(group)
            for w in group:
                w.wait_for_ids(300, timeout=40)
            assert sorted(int(w.value("worker")) for w in group) == [0, 1, 2]
            heal = inflict(private, fault)
            counts = {id(w): len(w.ids()) for w in group}
            if fault != "whole cluster restarted":
                for w in group:  # a majority answers: renewals go on within the ttl
                    w.wait_for_ids(counts[id(w)] + 500, timeout=40)
            else:
                time.sleep(2.0)
            heal()
            private.wait_healthy()
            counts = {id(w): len(w.ids()) for w in group}
            for w in group:
                # a holder whose lease lapsed in the outage waits for its old etcd lease to end (etcd
                # extends leases over a restart) and then one ttl more before it stamps again
                w.wait_for_ids(counts[id(w)] + 300, timeout=120)
            assert repeats(group) == 0
        finally:
            for w in group:
                w.stop()


@pytest.mark.slow
def test_a_holder_frozen_past_its_ttl_on_etcd_stamps_nothing_its_successor_stamps(etcd_cluster, namespace):
    """SIGSTOP for longer than etcd's lease while a newcomer waits for the only worker id, then SIGCONT:
    the resumed holder's clock is past its confirmed mark, its keep-alive finds the etcd lease gone,
    and it stops (LeaseLostError) without stamping a millisecond the newcomer stamps."""
    old = holder(etcd_cluster.url, namespace, ttl=1.0, max_workers=1)
    new = None
    try:
        start_together([old])
        old.wait_for_ids(200, timeout=40)
        old.proc.send_signal(signal.SIGSTOP)
        new = holder(etcd_cluster.url, namespace, ttl=1.0, max_workers=1, retry=True, count=300, pace=0)
        start_together([new])
        new.expect("done", 60)
        old.proc.send_signal(signal.SIGCONT)
        old.expect("<eof>", 30)
        assert any(line.startswith("error LeaseLostError") for line in old.lines), old.lines[-3:]
        assert set(old.ids()) & set(new.ids()) == set()
    finally:
        old.proc.send_signal(signal.SIGCONT)
        old.stop()
        if new is not None:
            new.stop()
