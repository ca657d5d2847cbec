"""examples/fastapi_async.py run as its docstring says, as subprocesses: ``python
examples/fastapi_async.py`` makes the tables, then ``uvicorn examples.fastapi_async:app --workers 3``
serves it, on a PostgreSQL database of its own; nothing of the file is changed but the URL (and the
lease namespace) from the environment.  Every key made by the three processes is unique, and the
database's ``ORDER BY`` puts customers made one after another in the order they were made."""

from __future__ import annotations

import os
import pathlib
import secrets
import subprocess
import sys
import threading
import time

import pytest

from tests.integrations.served import scratch_database, served
from tests.leases.stores import age_namespace

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_async_example_under_several_workers_makes_every_key_once_and_in_order():
    import httpx
    import sqlalchemy as sa

    from seqid_orm import Snowflake

    namespace = f"example-{secrets.token_hex(4)}"
    fresh = {"Connection": "close"}  # each request to whichever worker accepts it
    replies: list[tuple[str, int, dict]] = []
    with scratch_database("seqid_async") as url:
        # a namespace whose cold start is over, as at a second deploy (a new one waits 35 s at start-up)
        age_namespace(namespace, [url], [])
        env = {**os.environ, "SEQID_EXAMPLE_URL": url, "SEQID_EXAMPLE_NAMESPACE": namespace, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "examples/fastapi_async.py"]
        made = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        assert "tables made" in made.stdout
        with served("examples.fastapi_async:app", ROOT, env) as server:
            with httpx.Client(base_url=server.base, timeout=30, headers=fresh) as client:
                first = server.first(lambda: client.post("/customers", json={"name": "first"}))
                assert first.status_code == 201, first.text
                made_in_order = [first.json()["id"]]
                for n in range(30):  # one after another, each 2 ms apart at least: their keys' order
                    time.sleep(0.002)
                    reply = client.post("/customers", json={"name": f"c{n}"})
                    assert reply.status_code == 201, reply.text
                    made_in_order.append(reply.json()["id"])
            requests = (("/invoices", {"customer_id": made_in_order[0], "total_cents": 100}), ("/events/x", None))

            def load(until: float) -> None:
                with httpx.Client(base_url=server.base, timeout=30, headers=fresh) as client:
                    while time.monotonic() < until:
                        for path, body in requests:
                            reply = client.post(path, json=body)
                            replies.append((path, reply.status_code, reply.json()))

            until = time.monotonic() + 6
            clients = [threading.Thread(target=load, args=(until,)) for _ in range(8)]
            for t in clients:
                t.start()
            for t in clients:
                t.join(60)
        failed = [r for r in replies if r[1] != 201]
        assert replies and not failed, (failed[:3], server.stderr[-2000:])
        db = sa.create_engine(url)
        try:
            with db.connect() as conn:
                keys = conn.execute(sa.text("SELECT id FROM example_async_customer ORDER BY id"))
                ordered = [str(k) for (k,) in keys]
                stored = {
                    table: conn.execute(sa.text(f"SELECT count(*), count(DISTINCT {key}) FROM {table}")).one()
                    for table, key in (("example_async_invoice", "number"), ("example_async_event", "id"))
                }
                held = conn.execute(
                    sa.text("SELECT count(*) FROM seqid_worker_leases WHERE namespace = :n AND token <> ''"),
                    {"n": namespace},
                ).scalar_one()
        finally:
            db.dispose()
    invoices = [r[2]["number"] for r in replies if r[0] == "/invoices"]
    events = [int(r[2]["id"]) for r in replies if r[0] == "/events/x"]
    assert all(isinstance(r[2]["id"], str) for r in replies if r[0] == "/events/x")  # a string in JSON
    workers = {(p.datacenter_id, p.worker_id) for p in map(Snowflake(worker_id=0).decode, events)}
    print(f"{len(invoices)} invoices, {len(events)} events from worker ids {sorted(workers)}")
    assert ordered == made_in_order  # the database's ORDER BY is the order they were made in
    assert len(set(invoices)) == len(invoices) and len(set(events)) == len(events)
    assert stored["example_async_invoice"] == (len(invoices), len(invoices))
    assert stored["example_async_event"] == (len(events), len(events))
    assert held == 0  # each worker gave its worker id back at shutdown
