"""A call's deadline is made once and handed to every store call beneath it: a store behind a stalled
TCP proxy keeps the caller no longer than what is left of the caller's deadline (not a fresh store
timeout), and a caller whose deadline has passed is refused at once.  Real servers, real sockets."""

from __future__ import annotations

import asyncio
import time

import pytest

from seqid_orm import WorkerLease
from seqid_orm.calls.retry import Deadline
from seqid_orm.errors import StoreTimeoutError
from tests.conftest import MYSQL_URL, POSTGRES_URL, REDIS_URL
from tests.servers.proxy import StallableProxy

sa = pytest.importorskip("sqlalchemy")

TIMEOUT = 4.0  # the store's bound on one call: what a store call would get without the caller's deadline


def _through(url: str, port: int) -> str:
    parsed = sa.make_url(url) if "://" in url and not url.startswith("redis") else None
    if parsed is not None:
        return parsed.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    return f"redis://127.0.0.1:{port}/{url.rsplit('/', 1)[-1]}"


STORES = {
    "postgresql": (POSTGRES_URL, 5432),
    "mysql": (MYSQL_URL, 3306),
    "redis": (REDIS_URL, 6379),
}


@pytest.fixture(params=sorted(STORES))
def stalled_lease(request, namespace):
    """A lease held on a store reached through a proxy, which the test then stalls."""
    url, default_port = STORES[request.param]
    port = (sa.make_url(url).port if not url.startswith("redis") else None) or default_port
    with StallableProxy(port) as proxy:
        options = {"accept_state_loss": True} if request.param == "redis" else {}  # the shared Redis keeps nothing
        lease = WorkerLease(_through(url, proxy.port), namespace, ttl=30.0, timeout=TIMEOUT, **options)
        lease.acquire()
        try:
            yield request.param, lease, proxy
        finally:
            proxy.resume()
            lease.release()


def _renew(lease: WorkerLease) -> None:
    life = lease.life
    lease.store.renew(lease.namespace, life.worker_id, life.token, 30_000, life.mark_ms)


@pytest.mark.parametrize("stalled_lease", ["mysql", "postgresql"], indirect=True)
def test_a_store_call_gets_what_is_left_of_the_callers_deadline(stalled_lease):
    """On the SQL stores the passed-down deadline bounds the call under way (the watchdog shuts the socket
    at it).  Not on Redis's blocking client: redis-py has no per-command time-out, so a call under way
    keeps the store's own bound (a passed deadline still sends nothing, below); Redis's awaited path is
    bounded (the test after)."""
    kind, lease, proxy = stalled_lease
    _renew(lease)  # the connection is open and pooled before the stall
    proxy.stall()
    began = time.monotonic()
    with Deadline.after(0.6).passed_down(), pytest.raises(StoreTimeoutError):
        _renew(lease)
    took = time.monotonic() - began
    assert took < 0.6 + 1.0, (kind, took)  # 0.6 s left of the caller's, not the store's fresh 4 s


def test_a_caller_whose_deadline_has_passed_is_refused_at_once(stalled_lease):
    kind, lease, proxy = stalled_lease
    proxy.stall()
    began = time.monotonic()
    with Deadline.after(-0.1).passed_down(), pytest.raises(StoreTimeoutError):
        _renew(lease)
    assert time.monotonic() - began < 0.5, kind


def test_an_awaited_store_call_gets_what_is_left_of_the_tasks_deadline(stalled_lease):
    """aacquire's deadline is a context variable of its task: the store's awaited call (its native
    asynchronous driver) is cut off at what is left of it."""
    kind, lease, proxy = stalled_lease
    life = lease.life
    proxy.stall()

    async def main() -> float:
        began = time.monotonic()
        with Deadline.after(0.6).passed_down(), pytest.raises(StoreTimeoutError):
            await lease.store.arenew(lease.namespace, life.worker_id, life.token, 30_000, life.mark_ms)
        return time.monotonic() - began

    took = asyncio.run(asyncio.wait_for(main(), 3 * TIMEOUT))  # watched: a frozen loop fails, not hangs
    assert took < 0.6 + 1.5, (kind, took)


def test_release_on_a_stalled_store_ends_within_its_deadline(stalled_lease):
    kind, lease, proxy = stalled_lease
    proxy.stall()
    began = time.monotonic()
    lease.release()  # the store's release times out; the lease is idle; the renewal thread is joined
    took = time.monotonic() - began
    assert lease.stats().state == "idle"
    assert took < TIMEOUT + 1.5, (kind, took)


@pytest.mark.parametrize("stalled_lease", ["mysql", "postgresql"], indirect=True)
def test_a_renewal_waits_no_longer_than_the_lease_is_still_valid(stalled_lease):
    """The renewal thread made its store calls with no deadline of its own, so a renewal sent with a fraction
    of a second of validity left waited the store's whole time-out on a stalled store, though an answer
    after the lease's end keeps nothing.  Now its deadline is what is left of the lease's validity."""
    kind, lease, proxy = stalled_lease
    _renew(lease)  # the connection is open and pooled before the stall
    life = lease.life
    held = life.renewing()
    assert held is not None
    left = held[3] - time.monotonic()
    assert left > 10  # a 30 s lease just granted
    proxy.stall()
    with life.lock:
        life.valid_until = time.monotonic() + 0.6  # as a lease whose renewals failed for its last 26 s is
    began = time.monotonic()
    lease.renewer.renew(0)
    took = time.monotonic() - began
    assert took < 0.6 + 1.0, (kind, took)  # what was left of the lease, not the store's 4 s
