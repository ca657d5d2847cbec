"""Public (masked) ids with the SQLAlchemy ORM on each real database: found, never confused."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from seqid_orm import mask, uuid_sequence_nextval
from seqid_orm.sqlalchemy import seq_uuid_pk
from seqid_orm.sqlalchemy.public_ids import get_by_public_id, public_id_of

NEW, OLD = b"new-key-for-public-ids-000000000", b"old-key-for-public-ids-000000000"


@pytest.mark.parametrize("storage", [None, "binary", "text"])
def test_rows_are_found_by_public_id_under_rotating_keys(engine, table_name, storage):
    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = table_name
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage)
        name: Mapped[str] = mapped_column(sa.String(20))

    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            items = [Item(name=f"i{i}") for i in range(30)]
            session.add_all(items)
            session.commit()
            for item in items:
                assert public_id_of(item.id, [NEW, OLD]) == mask(item.id, NEW)
                assert get_by_public_id(session, Item, mask(item.id, NEW), [NEW, OLD]) is item
                assert get_by_public_id(session, Item, str(mask(item.id, OLD)), [NEW, OLD]) is item
                assert get_by_public_id(session, Item, mask(item.id, b"z" * 32), [NEW, OLD]) is None
                assert get_by_public_id(session, Item, item.id, [NEW, OLD]) is None  # the key itself is not public
            assert get_by_public_id(session, Item, "garbage", NEW) is None
    finally:
        Base.metadata.drop_all(engine)


def test_wrapping_prefix_keys_are_unmasked_as_prefixed(pg_engine, table_name):
    class Base(DeclarativeBase):
        pass

    class Thing(Base):
        __tablename__ = table_name
        id: Mapped[uuid.UUID] = mapped_column(sa.Uuid(), primary_key=True)

    Base.metadata.create_all(pg_engine)
    try:
        with Session(pg_engine) as session:
            things = [Thing(id=uuid_sequence_nextval(n)) for n in range(1, 20)]
            session.add_all(things)
            session.commit()
            for thing in things:
                assert get_by_public_id(session, Thing, mask(thing.id, NEW), NEW) is thing
    finally:
        Base.metadata.drop_all(pg_engine)
