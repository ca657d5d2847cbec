"""Leased worker ids on a replicated PostgreSQL that fails over to a standby that lagged: the
lease records the promoted standby lacks (worker ids granted, marks moved on) belong to holders
that are still alive.  seqid sees the store's history change (a new timeline) and makes every new
holder wait one ttl plus the tolerance; the live holders' renewals fail or carry on, and no id is
stamped twice.  Real processes, private servers, one worker id for all (``max_workers=1``) so a
repeat shows.
"""

from __future__ import annotations

import time

import pytest

from tests.tickets.procs import Worker, start_together

pytestmark = [pytest.mark.slow, pytest.mark.system("postgresql-server")]

TTL = 1.0
TOLERANCE = 0.5


def holder(url: str, namespace: str, **opts) -> Worker:
    options = {"ttl": TTL, "tolerance": TOLERANCE, "max_workers": 2, "count": 1_000_000, "pace": 0.001}
    return Worker(module="tests.leases.worker", store=url, namespace=namespace, **{**options, **opts})


def test_a_lagging_lease_store_promoted_repeats_no_id(pair_factory):
    pair = pair_factory(synchronous=False)
    url = pair.url + "&accept_state_loss=true"
    namespace = "failover-ns"
    first = holder(url, namespace)
    later = []
    try:
        start_together([first])
        first.wait_for_ids(200, timeout=60)  # includes the new namespace's quarantine
        pair.link.stall()  # the standby stops hearing: the holder's renewals and the grant below are lost
        time.sleep(0.5)
        second = holder(url, namespace)  # worker id 1, granted on the primary only
        later.append(second)
        start_together([second])
        second.wait_for_ids(200, timeout=60)
        pair.fail_over()
        # newcomers on the promoted standby: worker id 1 looks never granted there
        newcomers = [holder(url, namespace, retry=True, count=300, pace=0) for _ in range(2)]
        later += newcomers
        start_together(newcomers)
        for w in newcomers:
            w.expect("done", 90)
        # the history changed: the first grant on the promoted standby waits the quarantine (a later
        # one, after it, only the takeover's ttl)
        assert max(float(w.value("mark_wait")) for w in newcomers) >= TTL + TOLERANCE - 0.05
        time.sleep(TTL * 2)
        ids = [i for w in [first, *later] for i in w.ids()]
        assert len(ids) == len(set(ids))
    finally:
        first.stop()
        for w in later:
            w.stop()


@pytest.mark.system("redis-server")
def test_a_redis_lease_store_whose_replica_is_promoted_repeats_no_id():
    """A Redis primary and a replica behind a link the test stalls; holders reach the primary through
    a virtual IP moved to the promoted replica.  Every grant and renewal waits for the replica, so
    during the stall the holder's renewals fail and it stops before its lease runs out; the promoted
    replica holds every mark the holder stamped under, and newcomers wait for them."""

    from tests.servers.private import PrivateRedis
    from tests.servers.proxy import StallableProxy
    from tests.tickets.test_failover import REDIS_DURABLE, redis_fail_over, wait_online

    namespace = "redis-failover-ns"
    with PrivateRedis("redis-server", *REDIS_DURABLE) as primary:
        link = StallableProxy(primary.port)
        vip = StallableProxy(primary.port)
        url = f"redis://127.0.0.1:{vip.port}/0"
        first = holder(url, namespace, max_workers=1)
        newcomers: list[Worker] = []
        try:
            with PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(link.port)) as replica:
                wait_online(primary.url, 1)
                start_together([first])
                first.wait_for_ids(200, timeout=60)  # includes the new namespace's quarantine
                link.stall()  # renewals are no longer confirmed: the holder stops within its ttl
                first.expect("<eof>", 30)
                assert any(line.startswith("error ") for line in first.lines), first.lines[-3:]
                redis_fail_over(primary, replica, vip)
                newcomers = [holder(url, namespace, max_workers=1, retry=True, count=300, pace=0) for _ in range(2)]
                for w in newcomers:  # one after the other: one worker id
                    start_together([w])
                    w.expect("done", 60)
                    w.stop()
                ids = [i for w in [first, *newcomers] for i in w.ids()]
                assert len(ids) == len(set(ids))
                assert all(w.ids() for w in newcomers)
        finally:
            first.stop()
            for w in newcomers:
                w.stop()
            link.close()
            vip.close()
