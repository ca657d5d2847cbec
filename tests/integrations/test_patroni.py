"""Ticket sequences on a Patroni cluster (Debian's 3.0.2, two PostgreSQL members, a private
three-member etcd as its DCS), clients on a libpq multi-host URL, as production runs it without a
proxy.  Real worker processes draw ids through Patroni's own events; every id they
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
from tests.integrations.events import drawing, go_on_through
from tests.tickets.procs import Worker

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
        PatroniCluster(stallable=True) as cluster,  # docs/stacks/patroni.yml as it stands
        HAProxy([(m.pg_port, m.rest_port) for m in cluster.members]) as haproxy,
    ):
        options = {"block_size": 50, "timeout": TIMEOUT}  # no accept_state_loss: the sync standby covers it
        alive = drawing([cluster.url, cluster.url, haproxy.url()], name, options)
        try:
            events = [
                ("switchover", cluster.switchover),
                ("kill -9 of the postmaster", cluster.kill_postmaster),
                ("failover (kill -9 of the leader's Patroni and postmaster)", cluster.fail_over),
                ("failover with the replication link stalled", lambda: _stalled_failover(cluster, alive)),
            ]
            go_on_through(
                alive,
                events,
                lambda: cluster.wait_streaming(120),
                lambda: f"{cluster.cluster()}\n{cluster.logs()}\n{haproxy.log()}",
            )
        finally:
            for w in alive:
                w.stop()


def test_patroni_strict_synchronous_mode_has_callers_wait_instead_of_refusing_them():
    """``synchronous_mode_strict: true``: while no member can confirm a commit (the other one lost
    or re-joining) commits wait for one (``synchronous_standby_names = '*'``) instead of going on
    unconfirmed, so seqid never meets a primary whose standbys stream asynchronously: through a
    switchover and a failover the workers' reservations wait or give up at their deadline
    (``StoreTimeoutError``) and are never refused with ``VolatileStoreError`` (the window the
    non-strict mode has after each event); they go on by themselves, 0 repeats."""
    system.need("patroni")
    system.need("postgresql-server")
    system.need("etcd")
    from tests.servers.patroni import PatroniCluster

    name = f"patroni-{secrets.token_hex(4)}"
    with PatroniCluster(strict=True) as cluster:
        options = {"block_size": 50, "timeout": TIMEOUT}
        alive = drawing([cluster.url] * 3, name, options)
        try:
            events = [
                ("switchover", cluster.switchover),
                ("failover (kill -9 of the leader's Patroni and postmaster)", cluster.fail_over),
            ]
            go_on_through(alive, events, lambda: cluster.wait_streaming(120), cluster.logs)
            volatile = [w.refusals().get("VolatileStoreError", 0) for w in alive]
            assert volatile == [0, 0, 0], [w.refusals() for w in alive]
        finally:
            for w in alive:
                w.stop()


def _wait_refused(workers: list[Worker], cluster, what: str, timeout: float = 120.0) -> None:
    """Until every worker is refused for the new timeline (a hand-over's stall included: the
    synchronous test allows 120 s for one too)."""
    deadline = time.monotonic() + timeout
    while not all(w.refusals().get("StoreHistoryError") for w in workers):
        assert time.monotonic() < deadline, "\n".join(
            [
                f"not refused after the {what}:",
                *(f"worker {n}: {w.values('error')[-1:]}" for n, w in enumerate(workers)),
                str(cluster.cluster()),
                cluster.logs(),
            ]
        )
        time.sleep(0.1)


def _stalled_failover(cluster, workers: list[Worker] | None = None) -> None:
    """The replicas stop hearing from the leader while the workers go on committing there (in
    asynchronous mode acknowledged at once; in synchronous mode waiting for the standby until the
    reservation's deadline: with ``workers``, they must have been refused meanwhile), then the
    leader is lost and a replica that lacks those commits takes over."""
    refused = sum(len(w.values("error")) for w in workers or [])
    cluster.stall_replication()
    time.sleep(5)
    if workers:
        assert sum(len(w.values("error")) for w in workers) > refused, "no reservation waited on the stalled link"
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
            return drawing([cluster.url] * 3, name, options, first=200)

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
