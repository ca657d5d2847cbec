"""op.convert_uuid_storage: a key moved from text or BINARY(16) to the native UUID type (and back),
with the foreign keys that reference it, every value and relationship kept."""

from __future__ import annotations

import secrets

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm import comb_batch  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID  # noqa: E402
from tests.sqlalchemy_adapter.one_migration import migrate, write  # noqa: E402

MIGRATION = '''
"""convert"""
revision = "0001"
down_revision = None
from alembic import op
import seqid_orm.sqlalchemy.alembic


def upgrade():
    op.convert_uuid_storage({table!r}, "id", from_storage={source!r}, to_storage={target!r})


def downgrade():
    op.convert_uuid_storage({table!r}, "id", from_storage={target!r}, to_storage={source!r})
'''

CASES = {  # engine fixture: [(source storage, target storage)]
    "pg_engine": [("text", "native"), ("hex", "native"), ("binary", "native")],
    "mysql_engine": [("text", "native"), ("hex", "native"), ("binary", "native")],
    "sqlite_engine": [("text", "binary"), ("hex", "binary")],
}


def schema(prefix: str, storage: str) -> tuple[sa.MetaData, sa.Table, sa.Table, sa.Table]:
    md = sa.MetaData()
    parent = sa.Table(f"{prefix}_author", md, sa.Column("id", SeqUUID(storage=storage), primary_key=True))
    book = sa.Table(
        f"{prefix}_book",
        md,
        sa.Column("n", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("author_id", SeqUUID(storage=storage), nullable=False),
        sa.ForeignKeyConstraint(["author_id"], [parent.c.id], name=f"{prefix}_fk_book", ondelete="CASCADE"),
    )
    note = sa.Table(
        f"{prefix}_note",
        md,
        sa.Column("n", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("author_id", SeqUUID(storage=storage), nullable=True),
        sa.ForeignKeyConstraint(["author_id"], [parent.c.id], name=f"{prefix}_fk_note"),
    )
    return md, parent, book, note


def contents(engine, storage, prefix):
    _, parent, book, note = schema(prefix, storage)
    with engine.connect() as conn:
        return (
            sorted(conn.execute(sa.select(parent.c.id)).scalars()),
            sorted(conn.execute(sa.select(book.c.n, book.c.author_id)).all()),
            sorted(conn.execute(sa.select(note.c.n, note.c.author_id)).all(), key=lambda r: r[0]),
        )


@pytest.mark.parametrize(
    ("engine_name", "source", "target"), [(e, s, t) for e, pairs in CASES.items() for s, t in pairs]
)
def test_a_key_and_its_foreign_keys_change_storage_and_back(request, tmp_path, engine_name, source, target):
    engine = request.getfixturevalue(engine_name)
    prefix = f"cv{secrets.token_hex(3)}"
    md, parent, book, note = schema(prefix, source)
    md.create_all(engine)
    ids = comb_batch(50)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys = ON")
        conn.execute(sa.insert(parent), [{"id": i} for i in ids])
        conn.execute(sa.insert(book), [{"n": n, "author_id": ids[n % 50]} for n in range(200)])
        conn.execute(sa.insert(note), [{"n": n, "author_id": ids[n] if n % 2 else None} for n in range(20)])
    before = contents(engine, source, prefix)
    write(tmp_path, MIGRATION.format(table=parent.name, source=source, target=target))
    try:
        migrate(engine, tmp_path, "up")
        assert contents(engine, target, prefix) == before  # every value and relationship kept
        inspector = sa.inspect(engine)
        kind = str(inspector.get_columns(parent.name)[0]["type"]).lower()
        assert ("uuid" in kind) if target == "native" else ("blob" in kind or "binary" in kind), kind
        fks = {fk["name"] for t in (book.name, note.name) for fk in inspector.get_foreign_keys(t)}
        if engine.dialect.name != "sqlite":  # SQLite reflects unnamed constraints after batch mode
            assert fks == {f"{prefix}_fk_book", f"{prefix}_fk_note"}
        _, parent2, book2, _ = schema(prefix, target)
        with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA foreign_keys = ON")
            conn.execute(sa.delete(parent2).where(parent2.c.id == ids[0]))  # ON DELETE CASCADE still there
            assert conn.execute(sa.select(sa.func.count()).select_from(book2)).scalar() == 196
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the key is still enforced
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA foreign_keys = ON")
            conn.execute(sa.insert(book2), {"n": 999, "author_id": comb_batch(1)[0]})
        migrate(engine, tmp_path, "down")
        parents, books, notes = before
        assert contents(engine, source, prefix) == (
            [i for i in parents if i != ids[0]],
            [b for b in books if b[1] != ids[0]],
            notes,  # no note referenced the deleted author
        )
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
        md.drop_all(engine)


def test_a_table_dropped_by_another_session_during_the_scan_is_skipped(pg_engine, tmp_path, monkeypatch):
    """The conversion reads every table's foreign keys to find those referring to the key; a table
    another session drops between the listing and its read (seen in CI, a parallel test's table) is
    skipped: it refers to nothing any more.  The listing is made to name such a table; the database
    answers for it as it would."""
    from sqlalchemy.engine.reflection import Inspector

    prefix = f"cv{secrets.token_hex(3)}"
    md, parent, book, note = schema(prefix, "text")
    md.create_all(pg_engine)
    listed = Inspector.get_table_names

    def with_a_dropped_table(self, *args, **kw):
        return [f"{prefix}_dropped_meanwhile", *listed(self, *args, **kw)]

    monkeypatch.setattr(Inspector, "get_table_names", with_a_dropped_table)
    write(tmp_path, MIGRATION.format(table=parent.name, source="text", target="native"))
    try:
        migrate(pg_engine, tmp_path, "up")
        fks = {fk["name"] for t in (book.name, note.name) for fk in sa.inspect(pg_engine).get_foreign_keys(t)}
        assert fks == {f"{prefix}_fk_book", f"{prefix}_fk_note"}  # the others were still found and converted
        kind = str(sa.inspect(pg_engine).get_columns(parent.name)[0]["type"]).lower()
        assert "uuid" in kind
    finally:
        with pg_engine.begin() as conn:
            for t in (note.name, book.name, parent.name, "alembic_version"):
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {t}"))
