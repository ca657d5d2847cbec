"""A FastAPI service on SQLAlchemy with seqid keys: ordered in the database, opaque outside.

Run: ``pip install 'seqid-orm[sqlalchemy,postgres,pydantic]' fastapi uvicorn`` then
``SEQID_EXAMPLE_URL=postgresql+psycopg://app@db/shop uvicorn examples.fastapi_app:app --workers 4``
(any SQLAlchemy URL; ``sqlite:///shop.db`` for one worker on a laptop).

* ``Customer.id`` is a time-ordered UUID (``seq_uuid_pk``): new rows land at the end of the
  index.  The API never shows it: clients see ``public_id`` masks, which reveal no creation time
  (``seqid_orm.mask``), and the routes turn them back into keys.
* ``Order.id`` is a Snowflake BIGINT; JSON carries it as a string (``SnowflakeID``), because a
  JavaScript number would lose its last digits.  Its worker id is **leased** from the database
  (``WorkerLease``), so every worker process of the server has its own, however many run: a
  configured ``Snowflake(worker_id=1)`` in four workers makes four generators stamp the same ids,
  and about one insert in twenty fails on a duplicate key.  Each process takes its worker id at
  start-up (the lifespan below), before it accepts requests: the first process of a new namespace
  waits one ttl plus the clock tolerance there (35 s with the defaults), the time a holder the
  store may have forgotten needs to stop; later processes wait nothing.  A request never waits on
  the lease: while none is held (the store unreachable past the lease's ttl) it gets a 503.

(No ``from __future__ import annotations`` here: FastAPI reads the route annotations, some of
which are types made inside ``create_app``.)
"""

import math
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated

import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from seqid_orm import Snowflake, WorkerLease
from seqid_orm.errors import LeaseLostError
from seqid_orm.pydantic import SnowflakeID, public_id
from seqid_orm.sqlalchemy import layout_for, seq_uuid_fk, seq_uuid_pk, snowflake_pk

# In production the key comes from a secret store; the previous key stays while links made with
# it are still around (public_id() masks with the first and accepts all).
MASK_KEYS = [os.environ.get("SEQID_EXAMPLE_MASK_KEY", "example-key-change-me-0123456789").encode()]
# One worker id per process, leased from the lease table in the app's own database (or another
# store: a Redis URL); a process takes it at start-up and gives it back at exit.
LEASE_URL = os.environ.get("SEQID_EXAMPLE_LEASE_URL") or os.environ.get("SEQID_EXAMPLE_URL", "sqlite:///shop.db")
LEASE_NAMESPACE = os.environ.get("SEQID_EXAMPLE_NAMESPACE", "example-shop-orders")
ORDER_LEASE = WorkerLease(LEASE_URL, LEASE_NAMESPACE)
ORDER_IDS = Snowflake(worker_id=ORDER_LEASE)


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "example_customer"
    id: Mapped[uuid.UUID] = seq_uuid_pk()
    name: Mapped[str] = mapped_column(sa.String(100))


class Order(Base):
    __tablename__ = "example_order"
    id: Mapped[int] = snowflake_pk(ORDER_IDS)
    customer_id: Mapped[uuid.UUID] = seq_uuid_fk("example_customer.id")
    total_cents: Mapped[int]


def create_app(url: str) -> FastAPI:
    engine = sa.create_engine(url)
    Base.metadata.create_all(engine)
    with engine.connect():  # the first connection tells seqid the server and so the layout
        pass
    customer_layout = layout_for(engine.dialect, Customer.__table__.c.id.type)
    PublicId = public_id(MASK_KEYS, customer_layout)  # the layout unmask expects

    class CustomerIn(BaseModel):
        name: str

    class CustomerOut(BaseModel):
        model_config = ConfigDict(from_attributes=True)
        id: PublicId  # the real key in Python, its mask in JSON
        name: str

    class OrderIn(BaseModel):
        customer_id: PublicId  # the client names the customer by its public id
        total_cents: int

    class OrderOut(BaseModel):
        model_config = ConfigDict(from_attributes=True)
        id: SnowflakeID
        customer_id: PublicId
        total_cents: int

    def session() -> Iterator[Session]:
        with Session(engine) as s:
            yield s

    Db = Annotated[Session, Depends(session)]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await ORDER_IDS.aprefetch()  # the worker id, its fence waited out here rather than in a request
        yield

    app = FastAPI(title="seqid example shop", lifespan=lifespan)
    app.state.engine = engine

    @app.exception_handler(LeaseLostError)
    def no_worker_id(request: Request, exc: LeaseLostError) -> JSONResponse:
        # no lease held now (the renewal thread is leasing again); WorkerIdNotReadyError says when
        retry = getattr(exc, "safe_in", None) or ORDER_LEASE.ttl / 3
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": str(math.ceil(retry))})

    @app.post("/customers", response_model=CustomerOut, status_code=201)
    def add_customer(body: CustomerIn, db: Db) -> Customer:
        customer = Customer(name=body.name)
        db.add(customer)
        db.commit()
        return customer

    @app.get("/customers", response_model=list[CustomerOut])
    def list_customers(db: Db) -> list[Customer]:
        return list(db.scalars(sa.select(Customer).order_by(Customer.id)))

    @app.get("/customers/{customer_id}", response_model=CustomerOut)
    def get_customer(customer_id: PublicId, db: Db) -> Customer:  # unmasked by the type
        customer = db.get(Customer, customer_id)
        if customer is None:
            raise HTTPException(404, "no such customer")
        return customer

    @app.post("/orders", response_model=OrderOut, status_code=201)
    def add_order(body: OrderIn, db: Db) -> Order:
        if db.get(Customer, body.customer_id) is None:
            raise HTTPException(422, "no such customer")
        order = Order(customer_id=body.customer_id, total_cents=body.total_cents)
        db.add(order)
        db.commit()
        return order

    @app.get("/orders/{order_id}", response_model=OrderOut)
    def get_order(order_id: SnowflakeID, db: Db) -> Order:
        order = db.get(Order, order_id)
        if order is None:
            raise HTTPException(404, "no such order")
        return order

    return app


if os.environ.get("SEQID_EXAMPLE_URL"):
    app = create_app(os.environ["SEQID_EXAMPLE_URL"])
