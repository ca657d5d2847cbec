"""A column resolved once per connection and kept (schema.live.Kept): a single-row flush costs a look-up, not a
resolution, and what is kept never outlives what it was resolved under (the schema a ``schema_translate_map``
names, DDL through the engine).
"""

from __future__ import annotations

import cProfile
import pstats
import secrets
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy.orm import DeclarativeBase, Session  # noqa: E402

import seqid_orm  # noqa: E402
from seqid_orm.errors import StorageMismatchError  # noqa: E402
from seqid_orm.sqlalchemy import seq_uuid_pk  # noqa: E402

ADAPTER = str(Path(seqid_orm.__file__).parent / "sqlalchemy")


def test_a_single_row_flush_costs_four_adapter_calls_per_row(tmp_path):
    """The issue's measure: 15.7 seqid calls per flushed row, 14 of them resolving the live column again.  Kept,
    the adapter's share is its default, the look-up, the bind and the statement listener; the rest is the
    generator's (one call, two more when the millisecond turns)."""

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = "kept_rows"
        id = seq_uuid_pk()
        payload = sa.Column(sa.String(10))

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'kept.sqlite3'}")
    Base.metadata.create_all(engine)
    rows = 300
    try:
        with Session(engine) as session:
            session.add(Row(payload="first"))
            session.flush()
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(rows):
                session.add(Row(payload="x"))
                session.flush()
            profile.disable()
            session.commit()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        calls = {(name, line): n for (path, line, name), (_, n, *_rest) in stats.items() if path.startswith(ADAPTER)}
        # a few calls once (the first flush of the profiled block resolves its statement), four per row
        assert sum(calls.values()) < 4.1 * rows, sorted(calls.items(), key=lambda kv: -kv[1])
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(DISTINCT id) FROM kept_rows")).scalar() == rows + 1
    finally:
        engine.dispose()


def test_one_column_under_two_schema_translations_is_judged_in_each_schema(pg_engine):
    """One ``Column``, one pooled connection, two tenants' schemas through ``schema_translate_map``: the tenant
    whose column keeps hex text is refused as its own column demands, though the other tenant's native column
    was resolved and kept on this connection a statement before (kept for the ``Column`` alone, the second
    tenant's insert would go out as a ``uuid`` into ``char(32)``)."""
    tag = secrets.token_hex(3)
    good, odd = f"kept_uuid_{tag}", f"kept_text_{tag}"

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = "rows"
        id = seq_uuid_pk()

    with pg_engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {good}"))
        conn.execute(sa.text(f"CREATE SCHEMA {odd}"))
        conn.execute(sa.text(f"CREATE TABLE {good}.rows (id uuid PRIMARY KEY)"))
        conn.execute(sa.text(f"CREATE TABLE {odd}.rows (id char(32) PRIMARY KEY)"))
        conn.execute(sa.text(f"INSERT INTO {odd}.rows VALUES (replace(gen_random_uuid()::text, '-', ''))"))
    try:
        with pg_engine.connect() as conn:
            for _ in range(3):
                conn.execution_options(schema_translate_map={None: good})  # in place (SQLAlchemy 2)
                conn.execute(Row.__table__.insert())
                conn.execute(Row.__table__.insert())  # kept: one look-up
                conn.execution_options(schema_translate_map={None: odd})
                with pytest.raises(sa.exc.StatementError) as refused:
                    conn.execute(Row.__table__.insert())
                assert isinstance(refused.value.orig, StorageMismatchError), refused.value
                assert f"{odd}.rows.id" in str(refused.value.orig)
                conn.rollback()
            conn.execution_options(schema_translate_map={None: good})
            conn.execute(Row.__table__.insert())
            conn.commit()
        with pg_engine.connect() as conn:
            assert conn.execute(sa.text(f"SELECT count(*) FROM {good}.rows")).scalar() == 1  # the rest rolled back
            assert conn.execute(sa.text(f"SELECT count(*) FROM {odd}.rows")).scalar() == 1
    finally:
        with pg_engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {good} CASCADE"))
            conn.execute(sa.text(f"DROP SCHEMA {odd} CASCADE"))


def test_a_table_created_again_with_another_storage_is_judged_again(pg_engine):
    """DDL through the engine ends what every connection kept: the column re-created as text holding hex (a
    new table: another oid) is refused at the next insert, on the same connection that kept the first."""
    name = f"kept_again_{secrets.token_hex(3)}"

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = name
        id = seq_uuid_pk()

    try:
        with pg_engine.connect() as conn:
            Base.metadata.create_all(conn)
            conn.execute(Row.__table__.insert())
            conn.execute(Row.__table__.insert())
            Row.__table__.drop(conn)
            sa.Table(name, sa.MetaData(), sa.Column("id", sa.CHAR(32), primary_key=True)).create(conn)
            conn.execute(sa.text(f"INSERT INTO {name} VALUES (replace(gen_random_uuid()::text, '-', ''))"))
            with pytest.raises(sa.exc.StatementError) as refused:
                conn.execute(Row.__table__.insert())
            assert isinstance(refused.value.orig, StorageMismatchError), refused.value
            conn.rollback()
    finally:
        with pg_engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
