"""A process that inserts rows keyed by a *configured* Snowflake (worker id 1), from a start time it is
given, and prints what became of each insert: ``ok``, or ``duplicate`` and the IntegrityError's notes.
tests/sqlalchemy_adapter/test_shared_worker_id.py runs two at once.  Their clocks are injected and
read the same millisecond (the start time), as two processes drawing at once do: the two make the same
ids, whatever the machine's speed, so the test does not wait for a collision by chance."""

import logging
import sys
import time

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from seqid_orm import Snowflake
from seqid_orm.sqlalchemy import snowflake_pk

url, table, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")


class Base(DeclarativeBase):
    pass


class Row(Base):
    __tablename__ = table
    id: Mapped[int] = snowflake_pk(Snowflake(worker_id=1, clock=lambda: int(start * 1e9)))
    note: Mapped[str] = mapped_column(sa.String(20), unique=True)


engine = sa.create_engine(url)
while time.time() < start:
    time.sleep(0.001)
made = 0
with Session(engine) as session:
    while made < 200:
        session.add(Row(note=f"{sys.argv[4]}-{made}"))
        made += 1
        try:
            session.commit()
            print("ok", flush=True)
        except sa.exc.IntegrityError as exc:
            session.rollback()
            print("duplicate", " | ".join(getattr(exc, "__notes__", [])), flush=True)
            break
engine.dispose()
