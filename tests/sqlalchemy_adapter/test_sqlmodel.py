"""The SQLModel recipe of the README, through SQLModel's own session on each real database."""

from __future__ import annotations

import uuid

import pytest

sqlmodel = pytest.importorskip("sqlmodel")
from sqlmodel import Field, Session, SQLModel, select  # noqa: E402

from seqid_orm.sqlalchemy import SeqUUID, layout_for, seq_uuid_default  # noqa: E402


def test_the_readme_recipe_keeps_the_connection_aware_layout(engine, table_name):
    # SQLModel's `sa_type=SeqUUID()` alone gives no default (NOT NULL fails): the default goes in
    # sa_column_kwargs, as the README shows.
    Hero = type(
        "Hero",
        (SQLModel,),
        {
            "__tablename__": table_name,
            "__annotations__": {"id": uuid.UUID | None, "name": str},
            "id": Field(
                default=None, sa_type=SeqUUID(), primary_key=True, sa_column_kwargs={"default": seq_uuid_default}
            ),
            "name": Field(),
        },
        table=True,
    )
    Hero.__table__.create(engine)
    try:
        with Session(engine) as session:
            heroes = [Hero(name=f"h{i}") for i in range(30)]
            for hero in heroes:  # one flush each: the ids are made one after the other
                session.add(hero)
                session.flush()
            session.commit()
            made = [h.id for h in heroes]
            stored = session.exec(select(Hero.id).order_by(Hero.id)).all()
        assert all(isinstance(u, uuid.UUID) for u in made) and len(set(made)) == 30
        assert list(stored) == made  # the database's ORDER BY is creation order
        layout = layout_for(engine.dialect, Hero.__table__.c.id.type)
        assert made == sorted(made, key=layout.sort_key)
    finally:
        Hero.__table__.drop(engine)
        SQLModel.metadata.remove(Hero.__table__)
