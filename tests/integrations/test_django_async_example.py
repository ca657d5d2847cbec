"""The example Django project's async view (examples/django_project/library/views.py) served as its
docstring says, as subprocesses: ``manage.py migrate``, then ``uvicorn demo_site.asgi:application
--workers 3`` with the worker ids leased from the database; nothing of the project is changed but
the database and the lease namespace, from the environment.  Every key the three processes make
is unique, and the database's ``ORDER BY`` puts authors made one after another in that order."""

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
PROJECT = ROOT / "examples" / "django_project"


def test_the_async_view_under_several_workers_makes_every_key_once_and_in_order():
    pytest.importorskip("django")
    import httpx
    import sqlalchemy as sa

    from seqid_orm import Snowflake

    namespace = f"django-example-{secrets.token_hex(4)}"
    fresh = {"Connection": "close"}  # each request to whichever worker accepts it
    replies: list[tuple[int, dict]] = []
    authors_in_order: list[str] = []
    with scratch_database("seqid_django_async") as url:
        at = sa.make_url(url)
        env = {
            **os.environ,
            "SEQID_EXAMPLE_DB": "postgres",
            "SEQID_EXAMPLE_DB_NAME": at.database or "",
            "SEQID_EXAMPLE_DB_HOST": at.host or "",
            "SEQID_EXAMPLE_DB_PORT": str(at.port or 5432),
            "SEQID_EXAMPLE_DB_USER": at.username or "",
            "SEQID_EXAMPLE_DB_PASSWORD": at.password or "",
            "SEQID_LEASE_NAMESPACE": namespace,
            "PYTHONPATH": str(ROOT),
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)
        migrated = subprocess.run(
            [sys.executable, "manage.py", "migrate"], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300
        )
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        age_namespace(namespace, [url], [])  # its cold start over, as at a second deploy (a new one waits 35 s)
        with served("demo_site.asgi:application", PROJECT, env) as server:
            with httpx.Client(base_url=server.base, timeout=30, headers=fresh) as client:
                first = server.first(lambda: client.post("/lend/", data={"author": "first", "title": "t"}))
                assert first.status_code == 201, first.text[:2000]
                authors_in_order.append(first.json()["author"])
                for n in range(20):  # one after another, 2 ms apart at least: their keys' order
                    time.sleep(0.002)
                    reply = client.post("/lend/", data={"author": f"a{n}", "title": "t"})
                    assert reply.status_code == 201, reply.text[:2000]
                    authors_in_order.append(reply.json()["author"])

            def load(until: float) -> None:
                with httpx.Client(base_url=server.base, timeout=30, headers=fresh) as client:
                    while time.monotonic() < until:
                        reply = client.post("/lend/", data={"title": "load"})
                        replies.append((reply.status_code, reply.json() if reply.status_code == 201 else {}))

            until = time.monotonic() + 6
            clients = [threading.Thread(target=load, args=(until,)) for _ in range(6)]
            for t in clients:
                t.start()
            for t in clients:
                t.join(60)
        failed = [status for status, _ in replies if status != 201]
        assert replies and not failed, (failed[:3], server.stderr[-2000:])
        db = sa.create_engine(url)
        try:
            with db.connect() as conn:
                ordered = [str(k) for (k,) in conn.execute(sa.text("SELECT id FROM library_author ORDER BY id"))]
                counts = conn.execute(sa.text("SELECT count(*), count(DISTINCT id) FROM library_loan")).one()
        finally:
            db.dispose()
    loans = [int(body["loan"]) for _, body in replies]
    workers = {(p.datacenter_id, p.worker_id) for p in map(Snowflake(worker_id=0).decode, loans)}
    print(f"{len(loans)} loans from worker ids {sorted(workers)}")
    assert ordered[: len(authors_in_order)] == authors_in_order  # made first, one after another: first in order
    assert len(set(loans)) == len(loans) and counts == (len(loans) + 21, len(loans) + 21)
