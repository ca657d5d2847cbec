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


@pytest.mark.parametrize("generate", ["python", "database"])
def test_seq_uuid_field_is_the_one_line_way(engine, table_name, generate):
    from seqid_orm.sqlalchemy.sqlmodel import seq_uuid_field

    # SQLite before 3.41 has no unhex() to build a BLOB default (a typed refusal, tested elsewhere)
    storage = "text" if generate == "database" and engine.dialect.name == "sqlite" else None
    Hero = type(
        "Hero",
        (SQLModel,),
        {
            "__tablename__": table_name,
            "__annotations__": {"id": uuid.UUID | None, "name": str},
            "id": seq_uuid_field(storage, generate=generate),
            "name": Field(),
        },
        table=True,
    )
    Hero.__table__.create(engine)
    try:
        with Session(engine) as session:
            heroes = [Hero(name=f"h{i}") for i in range(20)]
            assert all(h.id is None for h in heroes)  # made at the flush, for this connection
            for hero in heroes:
                session.add(hero)
                session.flush()
            session.commit()
            made = [h.id for h in heroes]
            stored = session.exec(select(Hero.id).order_by(Hero.id)).all()
        assert all(isinstance(u, uuid.UUID) for u in made) and len(set(made)) == 20
        if generate == "python":
            assert list(stored) == made  # ORDER BY on the server is creation order
        else:  # a database's generator orders by its clock tick; ids of one tick may interleave (README)
            from seqid_orm import timestamp_of

            assert set(stored) == set(made)
            assert [timestamp_of(u) for u in stored] == sorted(timestamp_of(u) for u in made)
    finally:
        Hero.__table__.drop(engine)
        SQLModel.metadata.remove(Hero.__table__)


def test_seq_uuid_field_refuses_a_layout_for_database_made_ids():
    from seqid_orm.errors import InvalidArgumentError
    from seqid_orm.sqlalchemy.sqlmodel import seq_uuid_field

    with pytest.raises(InvalidArgumentError, match="layout="):
        seq_uuid_field(layout="time_first", generate="database")
    with pytest.raises(InvalidArgumentError, match="generate"):
        seq_uuid_field(generate="client")
