"""The same defaults through SQLAlchemy's asyncio engines: asyncpg, aiosqlite, aiomysql."""

from __future__ import annotations

import asyncio
import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("greenlet")
from sqlalchemy import String, insert, select  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column  # noqa: E402

from seqid_orm.sqlalchemy import seq_uuid_pk  # noqa: E402
from tests.conftest import ASYNC_DRIVERS  # noqa: E402


@pytest.mark.parametrize("storage", [None, "text"])
def test_async_orm_and_bulk_inserts_keep_order(engine, table_name, storage):
    url = engine.url.set(drivername=ASYNC_DRIVERS[engine.dialect.name])

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = table_name
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage=storage)
        n: Mapped[int]
        label: Mapped[str] = mapped_column(String(20))

    async def scenario() -> tuple[list[int], list[uuid.UUID], list[uuid.UUID]]:
        aengine = create_async_engine(url)
        try:
            async with aengine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with AsyncSession(aengine, expire_on_commit=False) as session:
                items = []
                for i in range(20):
                    item = Item(n=i, label="orm")
                    session.add(item)
                    await session.flush()
                    items.append(item)
                await session.execute(insert(Item), [{"n": i, "label": "bulk"} for i in range(20, 520)])
                await session.commit()
                ordered = (await session.scalars(select(Item.n).order_by(Item.id))).all()
                return (
                    ordered,
                    [i.id for i in items],
                    (await session.scalars(select(Item.id).limit(20).order_by(Item.id))).all(),
                )
        finally:
            async with aengine.begin() as conn:
                await conn.run_sync(Base.metadata.drop_all)
            await aengine.dispose()

    ordered, made, first_stored = asyncio.run(scenario())
    assert ordered == list(range(520))
    assert made == first_stored
