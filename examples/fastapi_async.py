"""An asynchronous FastAPI service with seqid keys, on SQLAlchemy's asyncio engine.

Run it (PostgreSQL here; any async SQLAlchemy URL: ``sqlite+aiosqlite:///shop.db`` for one worker)::

    pip install -e '.[sqlalchemy,postgres,pydantic]' fastapi uvicorn
    export SEQID_EXAMPLE_URL=postgresql+psycopg://app@db/shop
    python examples/fastapi_async.py          # creates the tables, as a migration would
    uvicorn examples.fastapi_async:app --workers 4

Three kinds of key, each made without blocking the event loop:

* ``Customer.id``: a time-ordered UUID (``seq_uuid_pk``), made in Python at the flush, in the order
  the connected database compares UUIDs: new rows land at the end of the index.
* ``Invoice.number``: a BIGINT from a ticket sequence, gap-free enough for people to read and shared
  by every worker: each process reserves blocks from the ``seqid_tickets`` table.  In async code it
  is drawn with ``await INVOICES.anext_id()`` before the row is added (a column default cannot be
  awaited: it would block the loop for a reservation when the block runs out).
* ``Event.id``: a Snowflake BIGINT whose worker id is leased, so every worker process has its own
  however many run.  The lifespan takes the worker id (``await EVENTS.aprefetch()``) before the
  process accepts requests; the first process of a new namespace waits one ttl plus the clock
  tolerance there (35 s with the defaults), later ones nothing.  JSON carries the id as a string
  (``SnowflakeID``): a JavaScript number would lose its last digits.

(No ``from __future__ import annotations``: FastAPI reads the route annotations.)
"""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import sqlalchemy as sa
from fastapi import Depends, FastAPI
from pydantic import BaseModel, ConfigDict
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from seqid_orm import Snowflake, TicketSequence, WorkerLease
from seqid_orm.pydantic import SnowflakeID
from seqid_orm.sqlalchemy import seq_uuid_pk, snowflake_pk, ticket_pk

URL = os.environ.get("SEQID_EXAMPLE_URL", "sqlite+aiosqlite:///shop.db")
# The sequence and the lease keep their tables in the same database, over a synchronous URL of it
# (they open it at their first call, in a worker thread when awaited, and await psycopg's own async
# connection where the driver has one).
STORE_URL = sa.make_url(URL).set(drivername=sa.make_url(URL).drivername.replace("+aiosqlite", ""))
STORE = STORE_URL.render_as_string(hide_password=False)
INVOICES = TicketSequence("example-invoices", STORE, block_size=100)
EVENTS = Snowflake(worker_id=WorkerLease(STORE, os.environ.get("SEQID_EXAMPLE_NAMESPACE", "example-events")))


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "example_async_customer"
    id: Mapped[uuid.UUID] = seq_uuid_pk()
    name: Mapped[str] = mapped_column(sa.String(100))


class Invoice(Base):
    __tablename__ = "example_async_invoice"
    number: Mapped[int] = ticket_pk(INVOICES)
    customer_id: Mapped[uuid.UUID] = mapped_column(sa.ForeignKey("example_async_customer.id"))
    total_cents: Mapped[int]


class Event(Base):
    __tablename__ = "example_async_event"
    id: Mapped[int] = snowflake_pk(EVENTS)
    kind: Mapped[str] = mapped_column(sa.String(50))


class CustomerIn(BaseModel):
    name: str


class CustomerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: uuid.UUID
    name: str


class InvoiceIn(BaseModel):
    customer_id: uuid.UUID
    total_cents: int


class InvoiceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    number: int
    customer_id: uuid.UUID
    total_cents: int


class EventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: SnowflakeID
    kind: str


engine = create_async_engine(URL)
sessions = async_sessionmaker(engine, expire_on_commit=False)


async def session() -> AsyncIterator[AsyncSession]:
    async with sessions() as s:
        yield s


Db = Annotated[AsyncSession, Depends(session)]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await INVOICES.aprefetch()  # the first blocks reserved before the first request
    await EVENTS.aprefetch()  # the worker id leased, its fence waited out here
    yield
    await asyncio.to_thread(INVOICES.close)
    await EVENTS.source.arelease()  # the worker id given back at once, not left to expire
    await engine.dispose()


app = FastAPI(title="seqid async example", lifespan=lifespan)


@app.post("/customers", response_model=CustomerOut, status_code=201)
async def add_customer(body: CustomerIn, db: Db) -> Customer:
    customer = Customer(name=body.name)
    db.add(customer)
    await db.commit()  # the key is made at the flush, in Python, in the database's order
    return customer


@app.post("/invoices", response_model=InvoiceOut, status_code=201)
async def add_invoice(body: InvoiceIn, db: Db) -> Invoice:
    invoice = Invoice(number=await INVOICES.anext_id(), **body.model_dump())
    db.add(invoice)
    await db.commit()
    return invoice


@app.post("/events/{kind}", response_model=EventOut, status_code=201)
async def add_event(kind: str, db: Db) -> Event:
    event = Event(id=await EVENTS.anext_id(), kind=kind)
    db.add(event)
    await db.commit()
    return event


async def create_tables() -> None:
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    await engine.dispose()


if __name__ == "__main__":
    asyncio.run(create_tables())
    INVOICES.close()
    print(f"tables made in {engine.url.render_as_string()}; now: uvicorn examples.fastapi_async:app --workers 4")
