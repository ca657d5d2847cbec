"""An application process for the adoption tests: a SQLAlchemy engine on a swapped key, driven line by line.

    python -m tests.sqlalchemy_adapter.adopting_worker URL TABLE

Each line of standard input is one request; each answer is one JSON line on standard output:

* ``path SCHEMA``: ``SET search_path TO SCHEMA`` on the session's connection (kept for the next requests);
* ``tenant NAME``: ``SET seqid.tenant = NAME`` (the row-level security policy of the tests reads it);
* ``insert N FIRST [local-path SCHEMA]``: N rows with ``n`` from FIRST through the ORM's unit of work, in one
  transaction (with ``local-path``, its ``search_path`` set by ``SET LOCAL`` inside it); answers the widths
  of the keys made (``0``: plain UUIDv7);
* ``raw N FIRST``: the same through Core's executemany, the keys read back by ``RETURNING``;
* ``blind N FIRST``: Core's executemany with nothing read back (what a role without SELECT can do);
* ``quit``.

A process of its own, so each test sees what a separate application process decides, with its own
engine, pool and caches.
"""

from __future__ import annotations

import json
import sys
import uuid

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from seqid_orm import describe
from seqid_orm.sqlalchemy import seq_uuid_pk


def main() -> None:
    url, table = sys.argv[1], sys.argv[2]

    class Base(DeclarativeBase):
        pass

    Row = type(
        "Row",
        (Base,),
        {
            "__tablename__": table,
            "__annotations__": {"id": Mapped[uuid.UUID], "n": Mapped[int], "note": Mapped[str]},
            "id": seq_uuid_pk(),
            "n": mapped_column(sa.Integer),
            "note": mapped_column(sa.String(20)),
        },
    )
    engine = sa.create_engine(url, pool_size=1, max_overflow=0)
    settings: list[str] = []  # session-level SETs, replayed on the one pooled connection each request
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "path":
            settings.append(f"SET search_path TO {words[1]}")
        elif words[0] == "tenant":
            settings.append(f"SET seqid.tenant = '{words[1]}'")
        if words[0] in ("path", "tenant"):
            with engine.connect() as conn:
                conn.exec_driver_sql(settings[-1])
                conn.commit()
            print(json.dumps({"ok": True}), flush=True)
            continue
        count, first = int(words[1]), int(words[2])
        made: list[uuid.UUID] = []
        try:
            if words[0] == "insert":
                with Session(engine, expire_on_commit=False) as session:  # no read back: a role may lack SELECT
                    if len(words) > 4 and words[3] == "local-path":
                        session.execute(sa.text(f"SET LOCAL search_path TO {words[4]}"))
                    rows = [Row(n=first + i, note="new") for i in range(count)]
                    session.add_all(rows)
                    session.commit()
                    made = [row.id for row in rows]
            elif words[0] == "blind":
                with engine.begin() as conn:
                    conn.execute(sa.insert(Row.__table__), [{"n": first + i, "note": "new"} for i in range(count)])
                print(json.dumps({"ok": True}), flush=True)
                continue
            else:
                with engine.begin() as conn:
                    result = conn.execute(
                        sa.insert(Row.__table__).returning(Row.__table__.c.id),
                        [{"n": first + i, "note": "new"} for i in range(count)],
                    )
                    made = list(result.scalars())
        except Exception as exc:  # the test reads the refusal's type and message
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)[:500]}), flush=True)
            continue
        widths = sorted({describe(u).parts.get("above", 0) for u in made})
        print(json.dumps({"widths": widths, "ids": [str(u) for u in made]}), flush=True)


if __name__ == "__main__":
    main()
