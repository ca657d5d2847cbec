"""Allocation an operator can see: stats(), log records with their fields as extra, OpenTelemetry
metrics (the SDK's in-memory reader, in a child process so the global MeterProvider is its own),
and seqid status on real stores."""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import time

import pytest

sa = pytest.importorskip("sqlalchemy")

from seqid_orm import Snowflake, TicketSequence, WorkerLease  # noqa: E402
from seqid_orm.errors import LeaseLostError, LeaseUnavailableError  # noqa: E402
from tests.conftest import POSTGRES_URL, volatile_ok  # noqa: E402
from tests.leases.stores import age_namespace, forget_namespace  # noqa: E402

SECRET_URL = POSTGRES_URL.replace("postgres@", "postgres:secret@")  # trust auth ignores the password


def test_a_ticket_sequences_stats_add_up_and_hide_the_password(pg_engine, caplog):
    name = f"obs-{secrets.token_hex(4)}"
    with (
        caplog.at_level(logging.DEBUG, logger="seqid_orm.tickets"),
        TicketSequence(name, SECRET_URL, block_size=10) as seq,
    ):
        assert seq.stats().ids_issued == 0 and seq.stats().segment is None
        drawn = [seq.next_id() for _ in range(25)]
        time.sleep(0.5)  # the prefetch thread's reservation lands
        stats = seq.stats()
    assert stats.ids_issued == 25 and stats.remaining == 5 and drawn[-1] == stats.segment.first + 4
    assert stats.reservations >= 3 and stats.prefetched in (0, 10)
    assert stats.ids_issued + stats.remaining + stats.prefetched == 10 * stats.reservations
    assert 0 < stats.last_reservation_seconds < 5
    assert all("secret" not in s for s in (*stats.servers, stats.server)) and "***" in stats.server
    reserved = [r for r in caplog.records if getattr(r, "seqid_sequence", None) == name and hasattr(r, "seqid_first")]
    assert len(reserved) == stats.reservations
    assert [r.seqid_first for r in reserved][:3] == [1, 11, 21] and all(r.seqid_count == 10 for r in reserved)
    assert all(r.levelno == logging.DEBUG and "secret" not in r.seqid_server for r in reserved)


def test_a_leases_stats_and_its_log_records_taken_renewed_lost_refused(pg_engine, caplog):
    namespace = f"obs-{secrets.token_hex(4)}"
    age_namespace(namespace, [POSTGRES_URL], [])
    lease = WorkerLease(POSTGRES_URL, namespace, ttl=0.9, clock_tolerance=0.2, max_workers=1)
    other = WorkerLease(POSTGRES_URL, namespace, ttl=0.9, clock_tolerance=0.2, max_workers=1)
    try:
        with caplog.at_level(logging.DEBUG, logger="seqid_orm.leases"):
            assert lease.stats().state == "idle" and lease.stats().worker_id is None
            lease.acquire()
            with pytest.raises(LeaseUnavailableError):
                other.acquire()  # the namespace's one worker id is held
            time.sleep(0.8)  # renewals every ttl/3
            stats = lease.stats()
            assert stats.state == "held" and stats.worker_id == 0 and stats.renewals >= 1
            assert 0 < stats.expires_in <= 0.9 and stats.last_renewal_seconds is not None
            with pg_engine.begin() as conn:  # another holder took it over behind our back
                conn.execute(
                    sa.text("UPDATE seqid_worker_leases SET token = 'stolen' WHERE namespace = :n AND worker_id = 0"),
                    {"n": namespace},
                )
            deadline = time.monotonic() + 5
            while lease.stats().state != "lost" and time.monotonic() < deadline:
                time.sleep(0.05)
            assert lease.stats().state == "lost" and lease.stats().expires_in is None
            with pytest.raises(LeaseLostError):
                lease.worker_id  # noqa: B018
    finally:
        lease.release()
        other.release()
        forget_namespace(namespace, [POSTGRES_URL], [])
    mine = [r for r in caplog.records if getattr(r, "seqid_namespace", None) == namespace]
    by_level = {level: [r for r in mine if r.levelno == level] for level in (10, 20, 30, 40)}
    taken = by_level[logging.INFO][0]
    assert (taken.seqid_worker_id, taken.seqid_store) == (0, POSTGRES_URL)
    assert any(r.getMessage().startswith("renewed worker id 0") for r in by_level[logging.DEBUG])
    assert any(r.seqid_error == "LeaseUnavailableError" for r in by_level[logging.WARNING])
    assert any(r.seqid_error == "LeaseLostError" for r in by_level[logging.ERROR])


def test_a_snowflake_counts_its_ids():
    gen = Snowflake(worker_id=9, datacenter_id=1)
    ids = [gen.next_id() for _ in range(5000)]
    stats = gen.stats()
    assert stats.ids_issued == 5000 and stats.worker_id == (1 << 5) | 9 and not stats.leased
    assert stats.last_ms >= gen.decode(ids[-1]).timestamp.timestamp() * 1000


OTEL_CHILD = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    from seqid_orm import Snowflake, TicketSequence, WorkerLease
    from seqid_orm.errors import LeaseUnavailableError

    pg, redis_url, name, namespace = sys.argv[1:5]
    seq = TicketSequence(name, pg, block_size=100)
    ids = [seq.next_id() for _ in range(250)]
    twin = TicketSequence(name, pg, block_size=100)  # a second object of the same sequence and store
    ids += [twin.next_id() for _ in range(30)]
    elsewhere = TicketSequence(name, redis_url, block_size=100)  # the same name on another store
    ids += [elsewhere.next_id() for _ in range(10)]
    lease = WorkerLease(redis_url, namespace, ttl=5, clock_tolerance=0.2, max_workers=1)
    lease.acquire()
    try:
        WorkerLease(redis_url, namespace, ttl=5, clock_tolerance=0.2, max_workers=1).acquire()
    except LeaseUnavailableError:
        pass
    gen = Snowflake(worker_id=4)
    [gen.next_id() for _ in range(1234)]
    import time; time.sleep(0.5)
    stats, twins = seq.stats(), twin.stats()
    out = {"stats": {"reservations": stats.reservations + twins.reservations,
                     "remaining": stats.remaining + stats.prefetched + twins.remaining + twins.prefetched}}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = [
                    {"attributes": dict(p.attributes), "value": getattr(p, "value", None),
                     "count": getattr(p, "count", None)}
                    for p in m.data.data_points
                ]
    lease.release()
    for each in (seq, twin, elsewhere):
        each.close()
    print(json.dumps(out))
    """
)


def test_opentelemetry_instruments_report_what_was_drawn(pg_engine, redis_url):
    pytest.importorskip("opentelemetry.sdk")
    name, namespace = f"otel-{secrets.token_hex(4)}", f"otel-{secrets.token_hex(4)}"
    age_namespace(namespace, [], [redis_url])
    try:
        done = subprocess.run(
            [sys.executable, "-c", OTEL_CHILD, POSTGRES_URL, volatile_ok(redis_url), name, namespace],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        forget_namespace(namespace, [], [redis_url])
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)

    def point(metric: str, on: str | None = None, **attributes: object) -> dict[str, object]:
        wanted = {f"seqid.{k}" if k != "error_type" else "error.type": v for k, v in attributes.items()}
        found = [
            p
            for p in got.get(metric, [])
            if wanted.items() <= p["attributes"].items() and (on is None or on in p["attributes"]["seqid.store"])
        ]
        assert len(found) == 1, (metric, attributes, got.get(metric))
        return found[0]

    # two objects of one sequence on one store are one series, their counts added (before: the
    # last observed one's); the same name on another store is a series of its own
    assert point("seqid.ids.issued", "postgresql", sequence=name)["value"] == 250 + 30
    assert point("seqid.ids.issued", "redis", sequence=name)["value"] == 10
    assert point("seqid.ids.issued", worker_id=4)["value"] == 1234
    assert point("seqid.reservation.duration", sequence=name)["count"] >= got["stats"]["reservations"]
    assert point("seqid.block.remaining", "postgresql", sequence=name)["value"] == got["stats"]["remaining"]
    assert point("seqid.leases.held", namespace=namespace)["value"] == 1
    assert 0 < point("seqid.lease.time_left", namespace=namespace, worker_id=0)["value"] <= 5
    assert point("seqid.refusals", namespace=namespace, error_type="LeaseUnavailableError")["value"] == 1


@pytest.fixture(params=["pg_engine", "redis_url"])
def lease_store(request) -> tuple[str, str]:
    """(URL the status reads, URL the holder uses)."""
    request.getfixturevalue(request.param)
    if request.param == "pg_engine":
        return POSTGRES_URL, POSTGRES_URL
    url = request.getfixturevalue("redis_url")
    return url, volatile_ok(url)


def test_seqid_status_lists_counters_namespaces_and_holders(lease_store):
    read_url, hold_url = lease_store
    namespace, name = f"status-{secrets.token_hex(4)}", f"status-{secrets.token_hex(4)}"
    age_namespace(namespace, *(([read_url], []) if read_url == POSTGRES_URL else ([], [read_url])))
    with TicketSequence(name, hold_url, block_size=50) as seq:
        seq.next_id()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from seqid_orm import WorkerLease\n"
            f"lease = WorkerLease({hold_url!r}, {namespace!r}, ttl=3, clock_tolerance=0.2); lease.acquire()\n"
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        done = subprocess.run(
            [sys.executable, "-m", "seqid_orm", "status", hold_url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        assert {"name": name, "next_value": 51, "step": 1, "offset": 1} in status["sequences"]
        rows = status["namespaces"][namespace]
        assert [(r["worker_id"], r["held"]) for r in rows] == [(0, True)]
        host = "".join(ch for ch in socket.gethostname() if ch.isalnum() or ch in ".-")
        assert rows[0]["holder"] == f"{holder.pid}@{host}"[:16] and 0 < rows[0]["expires_in_s"] <= 3
        text = subprocess.run(
            [sys.executable, "-m", "seqid_orm", "status", hold_url, namespace],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert f"worker id     0  {holder.pid}@" in text.stdout and name in text.stdout
    finally:
        holder.kill()
        holder.wait()
        forget_namespace(namespace, *(([read_url], []) if read_url == POSTGRES_URL else ([], [read_url])))
    assert os.getpid() != holder.pid


def test_an_opentelemetry_namespace_without_the_api_leaves_allocation_working(tmp_path):
    """Before: with only another part of the ``opentelemetry`` namespace installed (an exporter's
    ``opentelemetry-proto``) and no ``opentelemetry-api``, ``TicketSequence(...)`` raised
    ImportError.  A fresh interpreter that cannot import ``opentelemetry.metrics``."""
    (tmp_path / "opentelemetry" / "proto").mkdir(parents=True)
    (tmp_path / "opentelemetry" / "proto" / "__init__.py").write_text("")
    script = textwrap.dedent(
        f"""
        import importlib.abc, sys
        class NoApi(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry.metrics" or name.startswith("opentelemetry.metrics."):
                    raise ModuleNotFoundError(f"No module named {{name!r}}")
        sys.meta_path.insert(0, NoApi())
        sys.path.insert(0, {str(tmp_path)!r})
        import opentelemetry.proto  # the namespace is there
        from seqid_orm import TicketSequence
        from seqid_orm.allocation import telemetry
        with TicketSequence("otel-less", "sqlite:///{tmp_path / "t.sqlite3"}", block_size=5) as seq:
            print(seq.next_ids(7), telemetry.enabled())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[1,", "2,", "3,", "4,", "5,", "6,", "7]", "False"]
