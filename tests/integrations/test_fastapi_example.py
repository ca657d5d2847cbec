"""examples/fastapi_app.py through FastAPI's TestClient, on each real database."""

from __future__ import annotations

import importlib.util
import pathlib
import uuid

import pytest
from fastapi.testclient import TestClient

import seqid_orm
import seqid_orm.errors
import seqid_orm.ids.text
import seqid_orm.ids.validate
from seqid_orm import mask

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _example():
    spec = importlib.util.spec_from_file_location("seqid_fastapi_example", ROOT / "examples" / "fastapi_app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def shop(engine):
    example = _example()
    app = example.create_app(engine.url.render_as_string(hide_password=False))
    try:
        with TestClient(app) as client:
            yield client
    finally:
        example.Base.metadata.drop_all(app.state.engine)
        app.state.engine.dispose()


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
    other_key = mask(seqid_orm.uuid7(), b"another-key-0123456789abcdef")
    assert client.get(f"/customers/{other_key}").status_code == 422  # not one of our public ids
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
