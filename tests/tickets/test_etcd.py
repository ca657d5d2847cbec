"""Ticket sequences on a private 3-member etcd cluster (Debian's etcd-server 3.4): the store's
protocol, bad URLs, and worker processes drawing ids while the leader is killed or frozen past the
election timeout.  Every id every process printed is counted: a repeat is the one failure."""

from __future__ import annotations

import secrets
import time

import pytest

from seqid_orm import TicketSequence, WorkerLease
from seqid_orm.allocation.stores import open_ticket_store
from seqid_orm.allocation.stores.base import TicketRow
from seqid_orm.errors import (
    BackendMismatchError,
    BackendUnavailableError,
    CounterRegressedError,
    InvalidArgumentError,
)
from tests.servers.etcd import FAULTS, EtcdCluster, inflict
from tests.system import need
from tests.tickets.procs import Worker, start_together

pytestmark = [pytest.mark.etcd, pytest.mark.system("etcd")]

TIMEOUT = 2.0
# What a refusal may take past its deadline here: the grace of a reservation's report plus a loaded
# machine's scheduling (the suite runs in parallel workers); the hangs these tests catch last tens of seconds
SLACK = 2.0


@pytest.fixture
def name() -> str:
    return f"e-{secrets.token_hex(4)}"


def test_a_sequence_on_etcd_hands_out_each_value_once_in_order(etcd_cluster, name):
    with (
        TicketSequence(name, etcd_cluster.url, block_size=10) as a,
        TicketSequence(name, etcd_cluster.url, block_size=10) as b,
    ):
        drawn = [a.next_id() for _ in range(25)] + [b.next_id() for _ in range(25)]
    assert len(set(drawn)) == 50
    assert drawn[:25] == sorted(drawn[:25]) and drawn[25:] == sorted(drawn[25:])
    store = open_ticket_store(etcd_cluster.url)
    try:
        row = store.read(name)
        assert row is not None and row.next_value > max(drawn)
        assert name in {r.name for r in store.rows()}
        # repair moves the counter up, never down
        assert store.raise_to(TicketRow(name, row.next_value + 1000, 1, 1)).next_value == row.next_value + 1000
        assert store.raise_to(TicketRow(name, 5, 1, 1)).next_value == row.next_value + 1000
    finally:
        store.close()


def test_a_prefix_is_a_namespace_of_its_own(etcd_cluster, name):
    with TicketSequence(name, etcd_cluster.url + "/app-a") as a, TicketSequence(name, etcd_cluster.url + "/app-b") as b:
        assert (a.next_id(), b.next_id()) == (1, 1)


def test_a_counter_put_back_is_refused_and_left_where_it_is(etcd_cluster, name):
    with TicketSequence(name, etcd_cluster.url, block_size=10) as seq:
        drawn = [seq.next_id() for _ in range(25)]
        store = open_ticket_store(etcd_cluster.url)
        try:
            # an operator writes an older value over the counter (etcdctl put)
            from seqid_orm.allocation.stores.etcd import _b64

            store._cluster.call("/kv/put", {"key": _b64(f"seqid/tickets/{name}"), "value": _b64("11:1:1")})
            with pytest.raises(CounterRegressedError, match="left where it is"):
                for _ in range(30):
                    drawn.append(seq.next_id())
            row = store.read(name)
        finally:
            store.close()
    assert row is not None and row.next_value == 11
    assert len(drawn) == len(set(drawn))


def test_two_servers_offsets_and_a_contradicting_step_are_refused(etcd_cluster, name):
    with TicketSequence(name, [etcd_cluster.url + "/one", etcd_cluster.url + "/two"]) as pair:
        values = [pair.next_id() for _ in range(5)]
    assert len({v % 2 for v in values}) == 1 and len(set(values)) == 5  # one server's offset, step 2
    with TicketSequence(name, etcd_cluster.url + "/one") as alone, pytest.raises(BackendMismatchError):
        alone.next_id()


def test_the_ticket_commands_work_on_etcd(etcd_cluster, name, capsys):
    from seqid_orm.cli import main

    with TicketSequence(name, etcd_cluster.url + "/cli") as seq:
        seq.next_id()
    assert main(["ticket", "init", etcd_cluster.url + "/cli"]) == 0
    assert "etcd needs no table" in capsys.readouterr().out
    assert main(["ticket", "repair", name, etcd_cluster.url + "/cli", "--above", "5000"]) == 0
    assert f"sequence {name!r} next_value 5001" in capsys.readouterr().out
    assert main(["ticket", "status", etcd_cluster.url + "/cli"]) == 0
    status = capsys.readouterr().out
    assert name in status and "5001" in status
    with TicketSequence(name, etcd_cluster.url + "/cli") as seq:
        assert seq.next_id() == 5001


@pytest.mark.parametrize(
    "url",
    ["etcd://", "etcd://127.0.0.1:notaport", "etcd://127.0.0.1:70000", "etcd://:2379"],
)
def test_a_bad_etcd_url_is_a_typed_error(url):
    with pytest.raises(InvalidArgumentError, match="host:port"):
        open_ticket_store(url)


def test_a_cluster_that_does_not_answer_is_a_typed_error_within_the_deadline(name):
    from tests.servers.private import free_port

    url = f"etcd://127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    started = time.monotonic()
    with (
        TicketSequence(name, url, timeout=TIMEOUT) as seq,
        pytest.raises(BackendUnavailableError, match=r"within 2\.0 s"),
    ):
        seq.next_id()
    assert time.monotonic() - started < TIMEOUT + SLACK


# --- the leader killed, the leader frozen: real processes drawing through elections ------------


def workers(url: str, name: str, n: int) -> list[Worker]:
    options = {"block_size": 20, "timeout": TIMEOUT}
    return [Worker(servers=url, name=name, count=100_000, pace=0.0005, options=options, persist=60.0) for _ in range(n)]


def drawn(group: list[Worker]) -> list[int]:
    return [i for w in group for i in w.ids()]


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_workers_draw_through_the_clusters_faults_and_repeat_no_id(fault, name):
    """Three processes draw blocks of 20 while the cluster goes through ``fault``: they go on while a
    majority answers (or refuse within their deadline and retry), go on after it heals, and no id
    repeats."""
    need("etcd")
    with EtcdCluster(3, partitionable=True) as private:
        group = workers(private.url, name, 3)
        try:
            start_together(group)
            for w in group:
                w.wait_for_ids(300)
            heal = inflict(private, fault)
            counts = {id(w): len(w.ids()) for w in group}
            if fault != "whole cluster restarted":
                for w in group:  # a majority is up: every worker goes on
                    w.wait_for_ids(counts[id(w)] + 500, timeout=40)
            else:
                time.sleep(2 * TIMEOUT)  # nothing answers: calls refuse within their deadline
            heal()
            private.wait_healthy()
            counts = {id(w): len(w.ids()) for w in group}
            for w in group:
                w.wait_for_ids(counts[id(w)] + 300, timeout=40)
            ids = drawn(group)
            assert len(ids) == len(set(ids))
            # a refusal, if any came during the fault, came within its deadline
            assert max((float(t) for w in group for t in w.values("refused-after")), default=0) <= TIMEOUT + SLACK
        finally:
            for w in group:
                w.stop()


def test_probe_reports_the_clusters_members_leader_and_health(etcd_cluster, capsys):
    import json

    from seqid_orm.cli import main

    assert main(["probe", etcd_cluster.url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["healthy"] and len(status["members"]) == 3 and all(m["answered"] for m in status["members"])
    assert [m["name"] for m in status["members"] if m["leader"]] == [status["leader"]]
    assert status["version"].startswith("3.") and status["cluster_id"]
    assert main(["probe", etcd_cluster.url]) == 0
    human = capsys.readouterr().out
    assert "3 members" in human and "healthy" in human and human.count("follower") == 2


@pytest.mark.slow
def test_probe_names_a_member_that_does_not_answer(capsys):
    import json

    from seqid_orm.cli import main

    need("etcd")
    with EtcdCluster(3) as private:
        follower = next(i for i in range(3) if i != private.leader())
        private.kill(follower)
        assert main(["probe", private.url, "--json"]) == 0  # two of three answer: still a majority
        status = json.loads(capsys.readouterr().out)
        assert [m["answered"] for m in status["members"]].count(False) == 1 and status["healthy"]
        private.kill(next(i for i in range(3) if i != follower))
        assert main(["probe", private.url]) == 1  # one of three: no majority
        assert "NOT HEALTHY" in capsys.readouterr().out


@pytest.mark.system("openssl")
def test_tls_with_client_certificates_and_a_user_password(name):
    """The URL's options reach the client: HTTPS verified against the cluster's CA, a client
    certificate (--client-cert-auth), and a user that logs in; without them the cluster refuses."""
    need("etcd")
    need("openssl")
    with EtcdCluster(1, tls=True) as secure:
        secure.enable_auth("s3cret")
        host = secure.members[0].endpoint
        certs = secure.certs
        assert certs is not None
        query = f"ca={certs['ca']}&cert={certs['client.crt']}&key={certs['client.key']}"
        url = f"etcd://root:s3cret@{host}?{query}"
        with TicketSequence(name, url) as seq:
            assert [seq.next_id() for _ in range(3)] == [1, 2, 3]
        with WorkerLease(url, name, ttl=1.0, clock_tolerance=0.0) as lease:
            assert lease.worker_id == 0
        refusals = {
            "a wrong password": f"etcd://root:wrong@{host}?{query}",
            "no user": f"etcd://{host}?{query}",
            "no client certificate": f"etcd://root:s3cret@{host}?ca={certs['ca']}",
        }
        for why, bad in refusals.items():
            with pytest.raises(BackendUnavailableError) as info, TicketSequence(name, bad, timeout=1.0) as seq:
                seq.next_id()
            assert "s3cret" not in str(info.value) and "wrong" not in str(info.value), why  # no password shown


def test_etcd_url_options_are_checked(tmp_path):
    from seqid_orm.allocation.stores.etcd import etcd_options

    ca, cert, key = (tmp_path / n for n in ("ca.pem", "client.pem", "client-key.pem"))
    for f in (ca, cert, key):
        f.write_text("-")
    found = etcd_options(f"etcd://u:p%40ss@h1:1,h2:2/app?ca={ca}&cert={cert}&key={key}")
    assert found.members == (("h1", 1), ("h2", 2)) and found.prefix == "app"
    assert (found.tls, found.ca, found.user, found.password) == (True, str(ca), "u", "p@ss")
    with pytest.raises(InvalidArgumentError, match="unknown etcd URL option 'cacert'"):
        etcd_options("etcd://h:1?cacert=/c")
    with pytest.raises(InvalidArgumentError, match="needs both cert= and key="):
        etcd_options(f"etcd://h:1?cert={cert}")
    # before: tls=maybe was taken, and a missing file was requests' OSError at the first call
    with pytest.raises(InvalidArgumentError, match="tls in an etcd URL must be true or false, got 'maybe'"):
        etcd_options("etcd://h:1?tls=maybe")
    with pytest.raises(InvalidArgumentError, match=r"ca=/nonexistent/ca.pem in an etcd URL is not a file"):
        etcd_options("etcd://h:1?ca=/nonexistent/ca.pem")


@pytest.mark.slow
def test_a_snapshot_restored_under_live_processes_repeats_no_id(name, tmp_path, capsys):
    """A backup taken, more ids drawn, the backup restored into the cluster (etcd's disaster recovery:
    a new cluster id).  The live process, which saw a later revision, refuses; so does a process
    started after the restore, which has no revision of its own: the counter was written on the old
    cluster.  Both stay refused until `seqid ticket repair`, then go on above every id drawn; a lease
    namespace found on the new cluster waits out its cold start again."""
    from seqid_orm.cli import main
    from seqid_orm.errors import StoreHistoryError

    need("etcd")
    with EtcdCluster(3) as private:
        live = TicketSequence(name, private.url, block_size=10, timeout=TIMEOUT)
        drawn = [live.next_id() for _ in range(45)]
        with WorkerLease(private.url, name, ttl=1.0, clock_tolerance=0.5) as lease:
            assert lease.worker_id == 0  # the namespace exists before the backup
        private.snapshot(str(tmp_path / "backup.db"))
        drawn += [live.next_id() for _ in range(200)]  # past the backup's counter
        private.restore(str(tmp_path / "backup.db"))
        with pytest.raises(StoreHistoryError):
            for _ in range(20):
                drawn.append(live.next_id())  # what is left of its block, then the refusal
        with (
            TicketSequence(name, private.url, timeout=TIMEOUT) as fresh,
            pytest.raises(StoreHistoryError, match="cluster"),
        ):
            fresh.next_id()
        assert main(["ticket", "repair", name, private.url, "--above", str(max(drawn))]) == 0
        capsys.readouterr()
        with TicketSequence(name, private.url, timeout=TIMEOUT) as fresh:
            after = [fresh.next_id() for _ in range(10)]
        assert min(after) > max(drawn) and len(set(drawn)) == len(drawn)
        with WorkerLease(private.url, name, ttl=1.0, clock_tolerance=0.5) as again:
            assert again.mark_wait >= 1.4  # a new cluster id: the namespace's cold start, again
        live.close()
