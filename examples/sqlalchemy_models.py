"""The declarative models a user writes with seqid_orm, run against any database URL.

    python examples/sqlalchemy_models.py                      # SQLite in memory
    python examples/sqlalchemy_models.py postgresql+psycopg://postgres@127.0.0.1/test

Every model gets its id from the connection it is inserted over: UUIDv7 on PostgreSQL and
SQLite, time-at-end on SQL Server, whatever MariaDB's UUID type orders by on MariaDB.
"""

from __future__ import annotations

import sys
import uuid

from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from seqid_orm import Snowflake, timestamp_of
from seqid_orm.sqlalchemy import SeqUUID, layout_for, seq_uuid_fk, seq_uuid_pk, snowflake_pk, sortable_text_pk

events = Snowflake(worker_id=1)  # give every process its own worker id


class Base(DeclarativeBase):
    # every Mapped[uuid.UUID] (foreign keys included) gets the same storage as the keys
    type_annotation_map = {uuid.UUID: SeqUUID()}


class Author(Base):
    __tablename__ = "example_author"
    __table_args__ = {"sqlite_with_rowid": False}  # SQLite: rows in the key's own B-tree; ignored elsewhere
    id: Mapped[uuid.UUID] = seq_uuid_pk()
    name: Mapped[str] = mapped_column(String(100))
    books: Mapped[list[Book]] = relationship(back_populates="author", cascade="all, delete-orphan")


class Book(Base):
    __tablename__ = "example_book"
    __table_args__ = {"sqlite_with_rowid": False}
    id: Mapped[uuid.UUID] = seq_uuid_pk()
    author_id: Mapped[uuid.UUID] = seq_uuid_fk("example_author.id")
    title: Mapped[str] = mapped_column(String(200))
    author: Mapped[Author] = relationship(back_populates="books")


class AuditEvent(Base):
    __tablename__ = "example_audit_event"
    id: Mapped[int] = snowflake_pk(events)
    what: Mapped[str] = mapped_column(String(100))


class ShareLink(Base):
    __tablename__ = "example_share_link"
    code: Mapped[str] = sortable_text_pk("bsv")  # binary collation declared for you
    book_id: Mapped[uuid.UUID] = seq_uuid_fk("example_book.id")


def main(url: str = "sqlite://") -> None:
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            author = Author(name="Ursula", books=[Book(title="The Dispossessed"), Book(title="Lathe of Heaven")])
            session.add(author)
            session.add(AuditEvent(what="author created"))
            session.flush()  # ids exist from here on
            session.add(ShareLink(book_id=author.books[0].id))
            session.commit()
            layout = layout_for(engine.dialect, Author.__table__.c.id.type)
            print(f"{engine.dialect.name}: layout {layout.value}")
            for book in session.scalars(select(Book).order_by(Book.id)):
                print(f"  book {book.id} made {timestamp_of(book.id):%H:%M:%S.%f} by {book.author.name}")
            for event in session.scalars(select(AuditEvent)):
                print(f"  event {event.id} {events.decode(event.id)}")
            for link in session.scalars(select(ShareLink)):
                print(f"  share link {link.code}")
    finally:
        Base.metadata.drop_all(engine)


if __name__ == "__main__":
    main(*sys.argv[1:2])
