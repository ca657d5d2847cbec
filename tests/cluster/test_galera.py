"""seqid on a real multi-master cluster: a 3-node MariaDB Galera cluster (``make test-galera``).

3 nodes x 4 processes, each writing ``SEQID_GALERA_ROWS`` rows (1,000; 5,000 for the figures in
docs/benchmarks.md) through its own node, into one table per kind of key: seqid's SeqUUID, leased
Snowflake ids (the lease table lives in the cluster), ticket sequences with one offset per node, and
the cluster's own AUTO_INCREMENT (``wsrep_auto_increment_control``).  Afterwards every node must hold
every row of every table, no row lost, and no certification conflict may have been caused by a key.
With ``SEQID_GALERA_COMPARE=1`` the same load on the single shared server gives the ratio (a
measurement, not a check: CI leaves it out).  The figures are written to ``bench-out/galera.json``.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from tests.cluster.schema import KINDS, table
from tests.conftest import MYSQL_URL, REQUIRE_DBS
from tests.leases.stores import age_namespace
from tests.servers import galera
from tests.system import need
from tests.tickets.procs import Worker, start_together

sa = pytest.importorskip("sqlalchemy")

pytestmark = [pytest.mark.galera, pytest.mark.slow]

PROCESSES_PER_NODE = 4
ROWS = int(os.environ.get("SEQID_GALERA_ROWS", "1000"))
COMPARE = os.environ.get("SEQID_GALERA_COMPARE") == "1"
BATCH = 500
CONFLICT_COUNTERS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")


@pytest.fixture(scope="module")
def nodes():
    need("galera")
    urls = galera.urls()
    engines = [sa.create_engine(u, connect_args={"connect_timeout": 3}) for u in urls]
    try:
        for engine in engines:
            with engine.connect() as conn:
                size = conn.execute(sa.text("SHOW STATUS LIKE 'wsrep_cluster_size'")).one()[1]
                assert size == "3", f"the cluster has {size} nodes"
    except Exception as exc:
        message = f"no 3-node Galera cluster at {urls}: run `make galera-up` ({exc})"
        if REQUIRE_DBS:
            pytest.fail(message)
        pytest.skip(message)
    yield urls, engines
    for engine in engines:
        engine.dispose()


def conflicts(engines) -> dict[str, int]:
    out = {}
    for i, engine in enumerate(engines, 1):
        with engine.connect() as conn:
            for name in CONFLICT_COUNTERS:  # a server without Galera has no such counter: 0
                row = conn.execute(sa.text(f"SHOW GLOBAL STATUS LIKE '{name}'")).first()
                out[f"node{i}.{name}"] = int(row[1]) if row else 0
    return out


def run_phase(kind: str, urls: list[str], prefix: str, per_url: int, namespace: str, sequence: str) -> list[Worker]:
    workers = []
    for node, url in enumerate(urls, 1):
        for p in range(per_url):
            workers.append(
                Worker(
                    module="tests.cluster.worker",
                    url=url,
                    node=node,
                    kind=kind,
                    prefix=prefix,
                    rows=ROWS,
                    batch=BATCH,
                    tag=f"n{node}p{p}",
                    namespace=namespace,
                    sequence=f"{sequence}-n{node}",
                )
            )
    return workers


def measure(kind, urls, engines, prefix, per_url, namespace, sequence) -> dict:
    workers = run_phase(kind, urls, prefix, per_url, namespace, sequence)
    try:
        for w in workers:
            w.expect("ready", 120)  # leases taken, first segments reserved
        before = conflicts(engines)
        start_together(workers, timeout=120)
        for w in workers:
            w.finish(timeout=600)
        after = conflicts(engines)
    finally:
        for w in workers:
            w.stop()
    per_node = {}
    for node in range(1, len(urls) + 1):
        mine = workers[(node - 1) * per_url : node * per_url]  # run_phase starts them node by node
        seconds = max(float(w.value("seconds")) for w in mine)
        per_node[f"node{node}"] = round(per_url * ROWS / seconds)
    return {
        "rows_per_s_per_node": per_node,
        "rows_per_s": round(len(workers) * ROWS / max(float(w.value("seconds")) for w in workers)),
        "retries": sum(int(w.value("retries")) for w in workers),
        "conflicts": sum(after[k] - before[k] for k in before),
    }


def test_twelve_writers_on_three_nodes_lose_nothing_and_cause_no_conflict(nodes):
    urls, engines = nodes
    prefix = f"g{secrets.token_hex(3)}"
    namespace = f"galera-{secrets.token_hex(3)}"
    sequence = f"galera-{secrets.token_hex(3)}"
    md = sa.MetaData()
    tables = {kind: table(kind, md, prefix) for kind in KINDS}
    md.create_all(engines[0])
    from seqid_orm.allocation.stores.sqlalchemy import SQLAlchemyLeaseStore, SQLAlchemyTicketStore

    for store in (SQLAlchemyTicketStore(urls[0]), SQLAlchemyLeaseStore(urls[0])):  # DDL once, not from 12 writers
        with store.engine.connect() as conn:
            store.prepare(conn)
        store.close()
    # a namespace the stores know already: its first holders need not wait out a forgotten one
    # (tests/leases/test_lease_faults.py tests that wait)
    age_namespace(namespace, [urls[0], *([MYSQL_URL] if COMPARE else [])], [])
    report: dict = {"cluster": {}, "single_server": {}}
    try:
        for kind in KINDS:
            report["cluster"][kind] = measure(kind, urls, engines, prefix, PROCESSES_PER_NODE, namespace, sequence)
        rows = 3 * PROCESSES_PER_NODE * ROWS
        expected_tags = {f"n{n}p{p}-{i}" for n in (1, 2, 3) for p in range(PROCESSES_PER_NODE) for i in range(ROWS)}
        for i, engine in enumerate(engines, 1):
            with engine.connect() as conn:
                conn.execute(sa.text("SET SESSION wsrep_sync_wait = 1"))  # read what the cluster committed
                for kind, t in tables.items():
                    total, keys, tags = conn.execute(
                        sa.select(sa.func.count(), sa.func.count(t.c.id.distinct()), sa.func.count(t.c.tag.distinct()))
                    ).one()
                    assert (total, keys, tags) == (rows,) * 3, f"node{i} {kind}"
                    if i == 1:
                        assert set(conn.execute(sa.select(t.c.tag)).scalars()) == expected_tags, kind
        for kind in ("uuid", "snowflake", "ticket"):
            assert report["cluster"][kind]["conflicts"] == 0, (kind, report)
            assert report["cluster"][kind]["retries"] == 0, (kind, report)
    finally:
        md.drop_all(engines[0])
    if COMPARE:
        report["single_server"] = compare_with_one_server(prefix, namespace, sequence, report["cluster"])
    out = Path(os.environ.get("SEQID_GALERA_REPORT", "bench-out/galera.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))


def compare_with_one_server(prefix: str, namespace: str, sequence: str, cluster: dict) -> dict:
    """The same 12 writers against the one shared server, and the cluster's rate beside it."""
    found: dict = {}
    single = sa.create_engine(MYSQL_URL)
    single_md = sa.MetaData()
    single_tables = {kind: table(kind, single_md, prefix) for kind in KINDS}
    single_md.create_all(single)
    try:
        for kind in KINDS:  # the same 12 writers against the one shared server
            found[kind] = measure(kind, [MYSQL_URL], [single], prefix, 3 * PROCESSES_PER_NODE, namespace, sequence)
            found[kind]["cluster_vs_single"] = round(cluster[kind]["rows_per_s"] / found[kind]["rows_per_s"], 3)
        with single.connect() as conn:
            for kind, t in single_tables.items():
                keys = conn.execute(sa.select(sa.func.count(t.c.id.distinct()))).scalar()
                assert keys == 3 * PROCESSES_PER_NODE * ROWS, kind
    finally:
        single_md.drop_all(single)
        with single.begin() as conn:
            conn.execute(sa.text("DELETE FROM seqid_worker_leases WHERE namespace = :n"), {"n": namespace})
            conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name LIKE :n"), {"n": f"{sequence}-%"})
        single.dispose()
    return found
