"""op.add_seqid_column: seqid adopted on a table that already has rows; old rows keep their time order."""

from __future__ import annotations

import datetime as dt
import secrets

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm import timestamp_of  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID  # noqa: E402
from tests.sqlalchemy_adapter.one_migration import migrate, write  # noqa: E402

MIGRATION = '''
"""adopt"""
revision = "0001"
down_revision = None
from alembic import op
import seqid_orm.sqlalchemy.alembic


def upgrade():
    op.add_seqid_column({table!r}, "seq_id", from_timestamp="created_at", server_default={server_default!r})


def downgrade():
    op.drop_seqid_column({table!r}, "seq_id")
'''


def test_a_table_with_rows_adopts_seqid_in_the_order_its_rows_were_made(engine, tmp_path):
    table_name = f"ad{secrets.token_hex(3)}"
    md = sa.MetaData()
    legacy = sa.Table(
        table_name,
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("created_at", sa.DateTime, nullable=True),
    )
    md.create_all(engine)
    base = dt.datetime(2024, 3, 1, 12, 0, 0)
    rows = [{"id": i, "created_at": base + dt.timedelta(seconds=(i * 7919) % 500)} for i in range(500)]
    rows[3]["created_at"] = None  # a row without a time: a new id, after all the others
    with engine.begin() as conn:
        conn.execute(sa.insert(legacy), rows)
    server_default = engine.dialect.name != "sqlite"  # (SQLite < 3.41 cannot make a BLOB default)
    write(tmp_path, MIGRATION.format(table=table_name, server_default=server_default))
    try:
        migrate(engine, tmp_path, "up")
        adopted = sa.Table(
            table_name,
            sa.MetaData(),
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("created_at", sa.DateTime),
            sa.Column("seq_id", SeqUUID()),
        )
        with engine.begin() as conn:
            found = conn.execute(sa.select(adopted).order_by(adopted.c.seq_id)).all()
            if server_default:  # new rows get a seqid key from the database itself
                conn.execute(sa.insert(adopted), {"id": 1000, "created_at": None})
                newest = conn.execute(sa.select(adopted.c.seq_id).where(adopted.c.id == 1000)).scalar_one()
        # ORDER BY the new key is the order the rows were made in; the row without a time comes last
        assert [r.created_at for r in found[:-1]] == sorted(r["created_at"] for r in rows if r["created_at"])
        assert found[-1].id == 3
        for r in found[:-1]:
            assert timestamp_of(r.seq_id) == r.created_at.replace(tzinfo=dt.timezone.utc)
        if server_default:
            assert newest > found[-1].seq_id or engine.dialect.name == "mysql"  # MariaDB's UUID() is v1
        uniques = sa.inspect(engine).get_unique_constraints(table_name)
        assert any(u["column_names"] == ["seq_id"] for u in uniques) or engine.dialect.name == "sqlite"
        migrate(engine, tmp_path, "down")
        assert "seq_id" not in {c["name"] for c in sa.inspect(engine).get_columns(table_name)}
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
        md.drop_all(engine)


def test_the_recorded_width_covers_the_old_keys_whatever_a_process_guessed_before_the_migration(pg_engine, table_name):
    """A process that ran the swapped model before the migration wrote keys of the width it guessed from the rows
    it could see (16).  Before, ``adopt_seqid_keys`` took the widest seqid key among the largest and recorded that,
    though the old keys needed more: an old key stayed above every new key, for good.  Now the old keys decide:
    a key of the recorded width made now sorts after every key of the column, by PostgreSQL's ORDER BY."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import seqid_orm.sqlalchemy.alembic  # noqa: F401 - registers op.adopt_seqid_keys
    from seqid_orm import comb_at
    from seqid_orm.ids.adopted import leading_ones, record_of
    from seqid_orm.ids.layout import Layout

    now = dt.datetime.now(dt.timezone.utc)
    tail = [  # old random keys of the far tail (version 4), 22 one bits first, as a big table's largest have
        ((((1 << 22) - 1) << 106) | (secrets.randbits(100) & ~(1 << 105)) & ~(0xF << 76) | (4 << 76)).to_bytes(
            16, "big"
        )
        for _ in range(3)
    ]
    guessed = [comb_at(now, Layout.TIME_FIRST, "next", above=16) for _ in range(200)]
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table_name} (id uuid PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {table_name} SELECT gen_random_uuid() FROM generate_series(1, 50000)")
        conn.execute(
            sa.text(f"INSERT INTO {table_name} (id) VALUES (CAST(:k AS uuid))"),
            [{"k": str(dt_uuid)} for dt_uuid in [*map(_uuid_of, tail), *guessed]],
        )
        conn.exec_driver_sql(f"ANALYZE {table_name}")
    try:
        with pg_engine.begin() as conn:
            Operations(MigrationContext.configure(conn)).adopt_seqid_keys(table_name, "id")
        with pg_engine.connect() as conn:
            comment = conn.exec_driver_sql(f"SELECT col_description('{table_name}'::regclass, 1)").scalar_one()
            width = record_of(comment)
            assert width is not None and width > 22 >= 16, comment
            fresh = comb_at(dt.datetime.now(dt.timezone.utc), Layout.TIME_FIRST, "min", above=width)
            after = conn.execute(
                sa.text(f"SELECT count(*) FROM {table_name} WHERE id >= CAST(:k AS uuid)"), {"k": str(fresh)}
            ).scalar_one()
            largest = conn.exec_driver_sql(f"SELECT id FROM {table_name} ORDER BY id DESC LIMIT 1").scalar_one()
        assert after == 0, (width, largest)  # no key, old or guessed, sorts after the new ones
        # the largest is an old key of the tail: 22 one bits first, or more where one of the 50,000 random keys
        # has more (about one run in a hundred: fffffe4d-... had 23 in CI), which the width covered too (above)
        assert leading_ones(largest.bytes) >= 22, (width, largest)
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table_name}")


def _uuid_of(raw: bytes):
    import uuid

    return uuid.UUID(bytes=raw)
