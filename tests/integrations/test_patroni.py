"""Ticket sequences on a Patroni cluster (Debian's 3.0.2, two PostgreSQL members, a private
three-member etcd as its DCS), clients on a libpq multi-host URL, as production runs it without a
proxy (issue 45).  Real worker processes draw ids through Patroni's own events; every id they
print is counted, and a repeat is the one failure.

In ``synchronous_mode`` every commit waits for the synchronous standby, so a hand-over or a
restart loses no acknowledged write: the workers must go on by themselves, without a
``StoreHistoryError`` and without ``seqid ticket repair``.
"""

from __future__ import annotations

import secrets
import time

import pytest

from tests import system
from tests.tickets.procs import Worker, start_together

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

TIMEOUT = 2.0  # each reservation's deadline, seconds


def test_patroni_synchronous_mode_loses_nothing_through_its_events_behind_a_url_or_haproxy():
    """Two workers on the libpq multi-host URL, one through HAProxy (Patroni's documented set-up,
    tests/servers/haproxy.py), through a switchover, a kill -9 of the postmaster, a failover, and
    a failover while the replication link is stalled: the leader's commits wait for the
    synchronous standby, the workers' reservations give up at their deadline (the blocks committed
    on the leader alone are never handed out), and the standby that takes over lacks only those.
    The same processes go on after each, with no ``StoreHistoryError``; 0 repeats."""
    system.need("patroni")
    system.need("postgresql-server")
    system.need("etcd")
    system.need("haproxy")
    from tests.servers.haproxy import HAProxy
    from tests.servers.patroni import PatroniCluster

    name = f"patroni-{secrets.token_hex(4)}"
    with (
        PatroniCluster(synchronous=True, stallable=True) as cluster,
        HAProxy([(m.pg_port, m.rest_port) for m in cluster.members]) as haproxy,
    ):
        options = {"block_size": 50, "timeout": TIMEOUT}  # no accept_state_loss: the sync standby covers it
        alive = [
            Worker(servers=url, name=name, count=10**7, pace=0.001, persist=600.0, options=options)
            for url in (cluster.url, cluster.url, haproxy.url())
        ]
        try:
            start_together(alive)
            for w in alive:
                w.wait_for_ids(300)
            events = [
                ("switchover", cluster.switchover),
                ("kill -9 of the postmaster", cluster.kill_postmaster),
                ("failover (kill -9 of the leader's Patroni and postmaster)", cluster.fail_over),
                ("failover with the replication link stalled", lambda: _stalled_failover(cluster)),
            ]
            for what, act in events:
                refused = sum(len(w.values("error")) for w in alive)
                act()
                if "stalled" in what:  # the commits waited for the standby: the workers were refused meanwhile
                    assert sum(len(w.values("error")) for w in alive) > refused
                counts = {id(w): len(w.ids()) for w in alive}
                for w in alive:  # the same processes go on, on whichever member leads now
                    try:
                        w.wait_for_ids(counts[id(w)] + 300, timeout=120)
                    except AssertionError as exc:
                        raise AssertionError(
                            f"after the {what}: {exc}\n{cluster.cluster()}\n{cluster.logs()}\n{haproxy.log()}"
                        ) from None
                cluster.wait_streaming(120)  # the other member is back (and synchronous) before the next event
                ids = [i for w in alive for i in w.ids()]
                assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} repeats after the {what}"
                print(f"after the {what}: {len(ids)} ids, refusals so far {[w.refusals() for w in alive]}")
            errors = [e for w in alive for e in w.values("error")]
            assert not [e for e in errors if "StoreHistoryError" in e], errors[:3]
        finally:
            for w in alive:
                w.stop()


def _refusals(w: Worker) -> int:
    return sum("StoreHistoryError" in e for e in w.values("error"))


def _wait_refused(workers: list[Worker], cluster, what: str, timeout: float = 120.0) -> None:
    """Until every worker is refused for the new timeline (a hand-over's stall included: the
    synchronous test allows 120 s for one too)."""
    deadline = time.monotonic() + timeout
    while not all(_refusals(w) for w in workers):
        assert time.monotonic() < deadline, "\n".join(
            [
                f"not refused after the {what}:",
                *(f"worker {n}: {w.values('error')[-1:]}" for n, w in enumerate(workers)),
                str(cluster.cluster()),
                cluster.logs(),
            ]
        )
        time.sleep(0.1)


def _stalled_failover(cluster) -> None:
    """The replicas stop hearing from the leader while the workers go on committing there (in
    asynchronous mode acknowledged at once; in synchronous mode waiting for the standby until the
    reservation's deadline), then the leader is lost and a replica that lacks those commits takes over."""
    cluster.stall_replication()
    time.sleep(5)
    cluster.fail_over()
    cluster.resume_replication()


def test_patroni_asynchronous_mode_refuses_after_each_event_until_repaired_and_repeats_nothing():
    """Patroni's default, asynchronous replication: a hand-over may lose acknowledged reservations,
    and from PostgreSQL alone no process can tell that none of *anyone's* was lost
    (tests/tickets/test_failover.py measures why), so after every event that starts a new timeline
    (a clean switchover, a kill -9 of the postmaster that Patroni restarts and promotes again, a
    failover to a replica that lacks acknowledged commits) every worker refuses with
    ``StoreHistoryError``, and new ones go on after ``seqid ticket repair``.  In the last event the
    promoted counter really stands below ids that were handed out: the refusal is what keeps them
    from repeating.  Every id counted: 0 repeats."""
    system.need("patroni")
    system.need("postgresql-server")
    system.need("etcd")
    from seqid_orm import TicketSequence
    from tests.servers.patroni import PatroniCluster

    name = f"patroni-{secrets.token_hex(4)}"
    with PatroniCluster(synchronous=False, stallable=True) as cluster:
        options = {"block_size": 50, "timeout": TIMEOUT, "accept_state_loss": True}

        def workers() -> list[Worker]:
            started = [
                Worker(servers=cluster.url, name=name, count=10**7, pace=0.001, persist=600.0, options=options)
                for _ in range(3)
            ]
            start_together(started)
            for w in started:
                w.wait_for_ids(200)
            return started

        every: list[Worker] = []
        try:
            alive = workers()
            every += alive
            # (the event, whether it loses acknowledged reservations)
            events = [
                ("switchover", cluster.switchover, False),
                ("kill -9 of the postmaster", cluster.kill_postmaster, False),
                ("failover with the replication link stalled", lambda: _stalled_failover(cluster), True),
            ]
            for what, act, loses in events:
                act()
                _wait_refused(alive, cluster, what)
                for w in alive:
                    w.stop()
                ids = [i for w in every for i in w.ids()]
                assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} repeats after the {what}"
                with TicketSequence(name, cluster.url, timeout=TIMEOUT, accept_state_loss=True) as seq:
                    if loses:  # acknowledged reservations are gone with the old leader
                        ((_, row),) = seq.rows()
                        assert row.next_value <= max(ids), (row, max(ids))
                    seq.repair(above=max(ids))  # what `seqid ticket repair NAME URL --above N` runs
                cluster.wait_streaming(120)
                alive = workers()
                every += alive
                later = [i for w in alive for i in w.ids()]
                assert min(later) > max(ids)
            ids = [i for w in every for i in w.ids()]
            assert len(ids) == len(set(ids))
        finally:
            for w in every:
                w.stop()
