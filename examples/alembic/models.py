"""The models examples/alembic/env.py migrates: a key made in Python and one made by the database."""

import uuid

from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from seqid_orm.sqlalchemy import seq_uuid_pk


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customer"
    id: Mapped[uuid.UUID] = seq_uuid_pk()
    name: Mapped[str] = mapped_column(String(100))


class Reading(Base):
    __tablename__ = "reading"
    id: Mapped[uuid.UUID] = seq_uuid_pk(generate="database")  # the server's SQL, chosen when migrating
