"""``seqid demo`` (and ``make demo``): what seqid does, in plain words, on SQLite in about a second.

1. The layout comes from the live connection: the demo asks SQLite which way it compares the column,
   says what seqid chose and why, and what the same model would get on the other databases.
2. The order it buys: rows inserted through the ORM come back from ``ORDER BY id`` in the order they
   were made, each id carrying its time, where random UUIDv4 keys come back shuffled.
3. Where to go next: ``seqid bench`` for the insert-speed table, ``seqid probe URL`` for your server.
"""

from __future__ import annotations

import uuid

from ..ids.decode import timestamp_of
from ..vendors import Target, target

#: The same model elsewhere: (what the reader knows it as, vendor, version, storage).
_ELSEWHERE = (
    ("PostgreSQL 15, uuid", "postgresql", (15, 4), None),
    ("MariaDB 10.11.5+, UUID", "mariadb", (10, 11, 19), None),
    ("MariaDB 10.11.0-10.11.4, UUID", "mariadb", (10, 11, 4), None),
    ("MySQL 8, BINARY(16)", "mysql", (8, 0, 36), None),
    ("SQL Server, uniqueidentifier", "mssql", (16, 0), None),
    ("CockroachDB, uuid", "cockroachdb", (24, 1), None),
)

_WHY = {
    "time_first": "it compares the 16 bytes first to last, so the time goes first (RFC 9562 UUIDv7)",
    "time_last": "it compares the last six bytes first, so the time goes there",
    "time_first_le": "it compares the bytes as .NET writes them, so the time goes first in that order",
    "sharded": "it spreads a table over ranges by key: 4 shard bits first, then the time (no hot range)",
}


def _column(where: Target) -> str:
    return {"native": "a UUID column", "binary": "a 16-byte column", "text": "a CHAR(36) column"}.get(
        where.storage.value, "a CHAR(32) column"
    )


def run(url: str = "sqlite://", rows: int = 5) -> int:
    """Print the three parts; 1 if ``ORDER BY id`` did not return the generation order."""
    from sqlalchemy import String, create_engine, select
    from sqlalchemy.orm import DeclarativeBase, Session, mapped_column

    from ..sqlalchemy import SeqUUID, seq_uuid_pk

    class Base(DeclarativeBase):
        pass

    class Note(Base):
        __tablename__ = "note"
        id = seq_uuid_pk()
        body = mapped_column(String(100))

    class RandomNote(Base):
        __tablename__ = "random_note"
        id = seq_uuid_pk(default=uuid.uuid4)
        body = mapped_column(String(100))

    engine = create_engine(url)
    Base.metadata.create_all(engine)
    where = SeqUUID().target(engine.dialect)  # what seq_uuid_pk()'s column decided on this connection
    version = ".".join(map(str, where.server_version or ()))
    print("seqid demo: a time-ordered primary key whose layout is chosen from the live connection\n")
    print(f"1. The layout, read from this connection: {engine.dialect.name} {version}, {_column(where)}.")
    print(f"   seqid chose {where.layout.value}: {_WHY[where.layout.value]}.")
    print("   The same model, on the databases it meets elsewhere:")
    for label, vendor, server, storage in _ELSEWHERE:
        other = target(vendor, server, storage)
        print(f"     {label:32} {other.layout.value}")
    failures = 0
    with Session(engine) as session:
        made, shuffled = [], []
        for i in range(rows):
            note, random_note = Note(body=f"note {i}"), RandomNote(body=f"note {i}")
            session.add_all([note, random_note])
            session.flush()  # one INSERT each: the ids are made one after the other
            made.append(note.id)
            shuffled.append(random_note.id)
        session.commit()
        stored = session.scalars(select(Note.id).order_by(Note.id)).all()
        stored_random = session.scalars(select(RandomNote.id).order_by(RandomNote.id)).all()
    ok = stored == made
    failures += not ok
    print(f"\n2. The order it buys: {rows} rows inserted one by one, read back with ORDER BY id:")
    for value in stored:
        when = timestamp_of(value).isoformat(timespec="milliseconds")
        print(f"     {value}  made {made.index(value) + 1}{_ordinal(made.index(value) + 1)}, at {when}")
    print(f"   The database's order is the order they were made: {'yes' if ok else 'NO'}.")
    ranks = ", ".join(str(shuffled.index(value) + 1) for value in stored_random)
    print(f"   The same rows keyed by random UUIDv4 come back in the order made {ranks}: new rows land")
    print("   anywhere in the index, the page splits and cache misses the articles measured.")
    print("\n3. Next: `seqid bench` times BIGINT, UUIDv4 and seqid keys on SQLite (about 40 s; --url for")
    print("   your database), `seqid probe URL` measures how your server orders UUIDs, and the README's")
    print("   quick start shows the model lines for SQLAlchemy and Django.")
    engine.dispose()
    return 1 if failures else 0


def _ordinal(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
