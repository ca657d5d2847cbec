"""examples/fastapi_app.py through FastAPI's TestClient, on each real database."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import secrets
import threading
import time
import uuid

import pytest
from fastapi.testclient import TestClient

import seqid_orm
import seqid_orm.errors
import seqid_orm.ids.text
import seqid_orm.ids.validate
from seqid_orm import mask
from tests.integrations.served import scratch_database, served
from tests.leases.stores import age_namespace, forget_namespace

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _example():
    spec = importlib.util.spec_from_file_location("seqid_fastapi_example", ROOT / "examples" / "fastapi_app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def shop(engine, monkeypatch):
    """The example on ``engine``'s database, its order ids leased there in a namespace of its own
    (aged: no cold start to wait out)."""
    url = engine.url.render_as_string(hide_password=False)
    namespace = f"example-{secrets.token_hex(4)}"
    age_namespace(namespace, [url], [])
    monkeypatch.setenv("SEQID_EXAMPLE_LEASE_URL", url)
    monkeypatch.setenv("SEQID_EXAMPLE_NAMESPACE", namespace)
    example = _example()
    app = example.create_app(url)
    try:
        with TestClient(app) as client:
            yield client
    finally:
        example.ORDER_IDS.close()
        example.Base.metadata.drop_all(app.state.engine)
        app.state.engine.dispose()
        forget_namespace(namespace, [url], [])


def test_customers_are_shown_masked_and_found_by_their_public_id(shop):
    client = shop
    made = [client.post("/customers", json={"name": f"c{i}"}) for i in range(12)]
    assert all(r.status_code == 201 for r in made)
    public = [uuid.UUID(r.json()["id"]) for r in made]
    assert all(p.version == 4 for p in public)
    for p in public:
        with pytest.raises(seqid_orm.errors.NoTimestampError):
            seqid_orm.timestamp_of(p)
    # the database orders the real keys by creation; the listing (ORDER BY id) shows that order,
    # masked, without revealing it
    listed = [uuid.UUID(c["id"]) for c in client.get("/customers").json()]
    assert listed == public
    assert sorted(public) != public  # the masks themselves are not in creation order (12! to 1)
    one = client.get(f"/customers/{public[3]}")
    assert one.status_code == 200 and one.json() == {"id": str(public[3]), "name": "c3"}
    # another key's masks are not our public ids: refused as such (422), or, for the one in about
    # 160 that unmask() cannot tell from ours (its time check passes), looked up and not found (404)
    other_key = b"another-key-0123456789abcdef"
    codes = [client.get(f"/customers/{mask(seqid_orm.uuid7(), other_key)}").status_code for _ in range(40)]
    assert set(codes) <= {422, 404}, codes
    assert codes.count(422) >= 35, codes
    assert client.get("/customers/not-a-uuid").status_code == 422


def test_orders_carry_snowflake_ids_as_strings_and_customers_by_public_id(shop):
    client = shop
    customer = client.post("/customers", json={"name": "buyer"}).json()["id"]
    order = client.post("/orders", json={"customer_id": customer, "total_cents": 1234})
    assert order.status_code == 201, order.text
    body = order.json()
    assert isinstance(body["id"], str) and int(body["id"]) > 2**53
    assert body["customer_id"] == customer
    assert client.get(f"/orders/{body['id']}").json() == body
    assert client.get("/orders/12.5").status_code == 422
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert schema["OrderOut"]["properties"]["id"]["type"] == "string"
    assert schema["CustomerOut"]["properties"]["id"]["format"] == "uuid"


@pytest.mark.slow
def test_the_example_under_several_worker_processes_repeats_no_order_id(pg_engine):
    """``uvicorn --workers 3`` on a database of its own, eight clients posting orders for eight
    seconds: every POST succeeds and every order id is unique (before, with a configured
    ``worker_id=1``, 235 of 4,707 POSTs failed on a duplicate key in 20 s)."""
    import httpx
    import sqlalchemy as sa

    from seqid_orm import Snowflake

    statuses: list[int] = []
    order_ids: list[int] = []
    with scratch_database("seqid_example") as url:
        namespace = f"example-{secrets.token_hex(4)}"
        age_namespace(namespace, [url], [])
        example = _example()
        setup = sa.create_engine(url)
        example.Base.metadata.create_all(setup)  # as a migration would, before the workers start
        setup.dispose()
        example.ORDER_IDS.close()
        env = {**os.environ, "SEQID_EXAMPLE_URL": url, "SEQID_EXAMPLE_NAMESPACE": namespace, "PYTHONPATH": str(ROOT)}
        with served("examples.fastapi_app:app", ROOT, env) as server:
            with httpx.Client(base_url=server.base, timeout=10) as client:
                customer = server.first(lambda: client.post("/customers", json={"name": "load"}), within=60)
                customer = customer.json()["id"]

            decode = Snowflake(worker_id=0).decode

            def worker_of(order_id: int) -> tuple[int, int]:
                part = decode(order_id)
                return part.datacenter_id, part.worker_id

            # Every request on a connection of its own, so that each lands on whichever worker accepts
            # it: with keep-alive, eight connections opened while only one worker had started stay on
            # that worker for the whole run (a CI run saw every order from one worker id). And the load
            # starts once a second worker has answered: on a busy machine the others start late.
            fresh = {"Connection": "close"}
            seen: set[tuple[int, int]] = set()
            warm_ids: list[int] = []
            with httpx.Client(base_url=server.base, timeout=10, headers=fresh) as client:
                deadline = time.monotonic() + 60
                while len(seen) < 2:
                    alive = server.process.poll() is None
                    assert alive and time.monotonic() < deadline, f"only worker ids {seen} answered"
                    reply = client.post("/orders", json={"customer_id": customer, "total_cents": 100})
                    if reply.status_code == 201:
                        warm_ids.append(int(reply.json()["id"]))
                        seen.add(worker_of(warm_ids[-1]))
                    else:
                        time.sleep(0.05)

            def post_orders(until: float) -> None:
                with httpx.Client(base_url=server.base, timeout=30, headers=fresh) as client:
                    while time.monotonic() < until:
                        reply = client.post("/orders", json={"customer_id": customer, "total_cents": 100})
                        statuses.append(reply.status_code)
                        if reply.status_code == 201:
                            order_ids.append(int(reply.json()["id"]))

            until = time.monotonic() + 8
            clients = [threading.Thread(target=post_orders, args=(until,)) for _ in range(8)]
            for t in clients:
                t.start()
            for t in clients:
                t.join(60)
        db = sa.create_engine(url)
        with db.connect() as conn:
            rows, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT id) FROM example_order")).one()
        db.dispose()
    failed = [s for s in statuses if s != 201]
    assert len(order_ids) > 200 and failed == [], f"{len(failed)} of {len(statuses)} POSTs failed: {failed[:5]}"
    every_id = warm_ids + order_ids
    assert len(set(every_id)) == len(every_id) and (rows, distinct) == (len(every_id), len(every_id))
    workers = set(map(worker_of, order_ids))
    assert len(workers) >= 2, f"the orders came from {len(workers)} worker id(s): one process served them all"
