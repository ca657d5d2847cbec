"""The README's main job until the insert benchmark lands: ids through SQLAlchemy into SQLite.

It creates a table per storage option, inserts rows through the ORM, reads them back with
``ORDER BY id`` and shows that the database returns them in the order they were made,
with each id's decoded timestamp and the layout seqid chose for that column.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..ids.decode import timestamp_of


def run(url: str = "sqlite://", rows: int = 5) -> int:
    from sqlalchemy import String, create_engine, select
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    from ..sqlalchemy import layout_for, seq_uuid_pk

    class Base(DeclarativeBase):
        pass

    models: dict[str, Any] = {}
    for storage in ("binary", "text", "hex"):
        models[storage] = type(
            f"Note_{storage}",
            (Base,),
            {
                "__tablename__": f"note_{storage}",
                "id": seq_uuid_pk(storage=storage),
                "body": mapped_column(String(100)),
                "__annotations__": {"id": Mapped[uuid.UUID], "body": Mapped[str]},
            },
        )
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    failures = 0
    with Session(engine) as session:
        for storage, model in models.items():
            made = []
            for i in range(rows):
                note = model(body=f"note {i}")
                session.add(note)
                session.flush()  # one INSERT each: the ids are made one after the other
                made.append(note.id)
            session.commit()
            stored = session.scalars(select(model.id).order_by(model.id)).all()
            layout = layout_for(engine.dialect, model.__table__.c.id.type)
            impl = model.__table__.c.id.type.dialect_impl(engine.dialect).impl
            ok = stored == made
            failures += not ok
            print(
                f"\n{engine.dialect.name} storage={storage} column={impl.compile(engine.dialect)} layout={layout.value}"
            )
            for value in stored:
                print(f"  {value}  {timestamp_of(value).isoformat(timespec='milliseconds')}")
            print(f"  ORDER BY id returns the generation order: {'yes' if ok else 'NO'}")
    return 1 if failures else 0
