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
