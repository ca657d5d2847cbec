"""Worker-id leases under real processes on real servers: a crowd at start-up, a SIGKILL, a lost store."""

from __future__ import annotations

import time

import pytest

from seqid_orm import Snowflake
from seqid_orm.allocation.stores import open_lease_store
from seqid_orm.errors import LeaseLostError
from tests.conftest import POSTGRES_URL, volatile_ok
from tests.leases.stores import age_namespace, leased
from tests.servers.private import PrivatePostgres, PrivateRedis, pg_bindir, server_major
from tests.system import need
from tests.tickets.procs import Worker, start_together

pytestmark = pytest.mark.slow

TWITTER = Snowflake(worker_id=0)  # decodes any id of the default profile


def lease_worker(**opts) -> Worker:
    return Worker(module="tests.leases.worker", **opts)


def test_sixteen_processes_starting_at_once_get_sixteen_ids_and_a_seventeenth_is_refused(server, namespace):
    # a ttl of 10 s: sixteen interpreters starting at once beside the rest of the suite once took longer
    # than a 2 s lease's validity between the grant and the first id (a refusal, LeaseLostError)
    crowd = [lease_worker(store=server, namespace=namespace, max_workers=16, hold=True, ttl=10.0) for _ in range(16)]
    try:
        start_together(crowd)
        for w in crowd:
            w.expect("done", 120)
        ids = sorted(int(w.value("worker")) for w in crowd)
        assert ids == list(range(16))
        late = lease_worker(store=server, namespace=namespace, max_workers=16, ttl=10.0)
        start_together([late])
        late.expect("<eof>", 60)
        error = late.value("error")
        assert error.startswith("LeaseUnavailableError") and namespace in error and "16" in error
    finally:
        for w in crowd:
            w.release()
            w.stop()


def test_a_killed_holders_id_goes_to_a_newcomer_only_after_its_ttl_and_after_its_mark(server, namespace):
    """SIGKILL: no release, no last mark.  The newcomer, whose clock runs 1.5 s behind, gets the only
    worker id once the lease expires on the store, then waits until its clock passes the mark the dead
    holder left at its last renewal, so its ids are later than every id the dead one made."""
    # ttl 3 s and relet: on a loaded two-core machine one MySQL renewal took longer than a 2 s lease,
    # and the holder, which stopped at its first lost lease, never drew its 300 ids
    ttl = 3.0
    holder = lease_worker(
        store=server, namespace=namespace, max_workers=1, ttl=ttl, relet=True, count=100_000, pace=0.002
    )
    newcomer = None
    try:
        start_together([holder])
        holder.wait_for_ids(300)  # has renewed at least once (every ttl / 3)
        [row] = open_lease_store(server).leases(namespace)
        expires_at = time.monotonic() + row.expires_in_ms / 1000  # by the store's clock
        holder.kill()
        dead_ids = holder.ids()
        newcomer = lease_worker(
            store=server, namespace=namespace, max_workers=1, ttl=ttl, retry=True, count=50, clock_offset_ms=1500
        )
        start_together([newcomer])
        newcomer.expect("done", 60)
        assert float(newcomer.value("granted_at")) >= expires_at - 0.05  # not before it ran out on the store
        assert float(newcomer.value("mark_wait")) > 1.0  # its clock, 1.5 s behind, had to pass the mark
        assert newcomer.value("worker") == "0"
        new_ids = newcomer.ids()
        assert not set(new_ids) & set(dead_ids)
        last_dead = max(TWITTER.decode(i).timestamp for i in dead_ids)
        first_new = min(TWITTER.decode(i).timestamp for i in new_ids)
        assert first_new > last_dead  # same worker id, later milliseconds: no id can repeat
    finally:
        holder.stop()
        if newcomer is not None:
            newcomer.stop()


@pytest.fixture(params=["postgresql", "redis"])
def private_store(request):
    """A lease store of its own that the test can stop."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_engine")
        need("postgresql-server")
        with PrivatePostgres(pg_bindir(server_major(POSTGRES_URL))) as server:
            yield server
    else:
        request.getfixturevalue("redis_url")
        need("redis-server")
        with PrivateRedis() as server:
            yield server


def test_a_holder_whose_store_goes_away_stops_before_its_lease_expires_and_resumes(private_store, namespace):
    ttl = 2.0
    if isinstance(private_store, PrivatePostgres):
        url = private_store.url
        age_namespace(namespace, [url], [])
    else:
        url = volatile_ok(private_store.url)
        age_namespace(namespace, [], [url])
    gen = leased(url, namespace, ttl=ttl, max_workers=4)
    made = [gen.next_id()]
    time.sleep(ttl / 2)  # a renewal or two
    made.append(gen.next_id())
    if isinstance(private_store, PrivatePostgres):
        private_store.stop("immediate")
    else:
        private_store.stop()
    stopped_at = time.monotonic()
    # the lease was last extended at most ttl / 3 before the stop; from then it lives ttl on the store
    deadline_on_store = stopped_at + ttl
    lost_at = None
    while time.monotonic() < stopped_at + 2 * ttl:
        try:
            made.append(gen.next_id())
        except LeaseLostError:
            lost_at = time.monotonic()
            break
        time.sleep(0.005)
    assert lost_at is not None, "the generator went on although its lease could not be renewed"
    assert lost_at < deadline_on_store  # stopped before anyone else could have taken the id
    private_store.start()  # the store comes back (empty, for the private Redis)
    resumed = None
    give_up = time.monotonic() + 10 * ttl
    while resumed is None and time.monotonic() < give_up:
        try:
            resumed = gen.next_id()
        except LeaseLostError:
            time.sleep(0.05)
    assert resumed is not None and resumed not in made
    assert TWITTER.decode(resumed).timestamp > TWITTER.decode(made[-1]).timestamp
    gen.close()
