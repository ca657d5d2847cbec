"""The README's "Migrating from sa.Uuid": keep the column sa.Uuid made, change the key's type and default,
and Alembic sees no column to change; on PostgreSQL, which splits inner pages half, it writes the
adoption (op.adopt_seqid_keys), which decides once how new keys sort after every old one and records it.
Old rows are found by their ids, new rows get time-ordered ones (adopted keys on PostgreSQL)."""

from __future__ import annotations

import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")
from alembic.autogenerate import compare_metadata  # noqa: E402
from alembic.migration import MigrationContext  # noqa: E402
from alembic.operations import Operations  # noqa: E402

import seqid_orm.sqlalchemy.alembic  # noqa: E402, F401 - as env.py imports it: its autogenerate comparator
from seqid_orm import describe  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, seq_uuid_default  # noqa: E402


def sa_uuid_storage(dialect) -> str:
    """The README's rule: 'native' where sa.Uuid made the database's UUID type, else 'hex' (its CHAR(32))."""
    return "native" if dialect.supports_native_uuid else "hex"


def test_swapping_sa_uuid_for_seq_uuid_changes_no_column_and_records_the_adoption_on_postgresql(engine, table_name):
    before = sa.MetaData()
    old = sa.Table(
        table_name, before, sa.Column("id", sa.Uuid, primary_key=True, default=uuid.uuid4), sa.Column("n", sa.Integer)
    )
    before.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(old), [{"n": i} for i in range(5)])
            kept = dict(conn.execute(sa.select(old.c.id, old.c.n)).all())
        after = sa.MetaData()
        new = sa.Table(
            table_name,
            after,
            sa.Column(
                "id", SeqUUID(storage=sa_uuid_storage(engine.dialect)), primary_key=True, default=seq_uuid_default
            ),
            sa.Column("n", sa.Integer),
        )
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "include_name": lambda name, kind, _: kind != "table" or name == table_name,
                },
            )
            adopted = engine.dialect.name == "postgresql"
            # the column is the one sa.Uuid made; where keys must sort after the old ones, the adoption
            adoption = [("adopt_seqid_keys", None, table_name, "id")]
            assert compare_metadata(context, after) == (adoption if adopted else [])
        with engine.begin() as conn:
            op = Operations(MigrationContext.configure(conn))
            op.adopt_seqid_keys(table_name, "id", sa_uuid_storage(engine.dialect))
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"include_name": lambda name, kind, _: kind != "table" or name == table_name}
            )
            assert compare_metadata(context, after) == []  # recorded: nothing left to write
        with engine.begin() as conn:
            for key, n in kept.items():  # the rows written by sa.Uuid, found by their ids
                assert conn.execute(sa.select(new.c.n).where(new.c.id == key)).scalar_one() == n
            conn.execute(sa.insert(new), [{"n": 100 + i} for i in range(5)])
            fresh = conn.execute(sa.select(new.c.id).where(new.c.n >= 100).order_by(new.c.id)).scalars().all()
        assert [describe(u).kind for u in fresh] == ["adopted" if adopted else "uuid7"] * 5
        with engine.connect() as conn:
            ordered = conn.execute(sa.select(new.c.n).order_by(new.c.id)).scalars().all()
        # ORDER BY id, asked of the database, is creation order for the new rows, after every old one on PostgreSQL
        assert [n for n in ordered if n >= 100] == list(range(100, 105))
        if adopted:
            assert ordered[-5:] == list(range(100, 105))
    finally:
        before.drop_all(engine)
