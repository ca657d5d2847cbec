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
    """The conversion read every table's foreign keys through the inspector to find those referring to the
    key, and a table another session dropped between the listing and its read (seen in CI, a parallel test's
    table) failed it.  It now reads them in one query of the catalog (PostgreSQL, MariaDB; the inspector's
    scan, which skips such a table, stays for SQLite): a listing made to name such a table changes nothing."""
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


def _column_type(conn, table: str, column: str) -> str:
    """PostgreSQL's type of ``column`` of ``table`` (its name as ``to_regclass`` reads one: with its schema)."""
    return conn.execute(
        sa.text(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass(:t) "
            "AND attname = :c"
        ),
        {"t": table, "c": column},
    ).scalar()


def test_a_tenant_schemas_foreign_key_is_converted_with_its_actions_and_deferral(pg_engine, tmp_path):
    """A foreign key from another schema (a tenant's), deferrable as Django makes them, with ON DELETE CASCADE:
    the inspector read the search path's schema only, so the key's ALTER met that key's text column and failed
    (DatatypeMismatch).  Read from the catalog, it is converted with the others, and comes back with its
    actions and its deferral, which the re-made keys used to lose."""
    prefix = f"cv{secrets.token_hex(3)}"
    tenant = f"{prefix}_tenant"
    md, parent, _book, _note = schema(prefix, "text")
    md.create_all(pg_engine)
    ids = comb_batch(20)
    with pg_engine.begin() as conn:
        conn.execute(sa.insert(parent), [{"id": i} for i in ids])
        conn.exec_driver_sql(f"CREATE SCHEMA {tenant}")
        conn.exec_driver_sql(
            f"CREATE TABLE {tenant}.{prefix}_book (n int PRIMARY KEY, author_id char(36) NOT NULL "
            f"CONSTRAINT {prefix}_fk_tenant REFERENCES {parent.name} (id) ON DELETE CASCADE "
            "DEFERRABLE INITIALLY DEFERRED)"
        )
        conn.execute(
            sa.text(f"INSERT INTO {tenant}.{prefix}_book VALUES (:n, :a)"),
            [{"n": n, "a": str(ids[n % 20])} for n in range(60)],
        )
    write(tmp_path, MIGRATION.format(table=parent.name, source="text", target="native"))
    try:
        migrate(pg_engine, tmp_path, "up")
        with pg_engine.begin() as conn:
            assert _column_type(conn, f"{tenant}.{prefix}_book", "author_id") == "uuid"
            assert conn.exec_driver_sql(
                f"SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = '{prefix}_fk_tenant'"
            ).scalar() == (
                f"FOREIGN KEY (author_id) REFERENCES {parent.name}(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED"
            )
            pairs = conn.exec_driver_sql(
                f"SELECT count(*) FROM {tenant}.{prefix}_book b JOIN {parent.name} p ON p.id = b.author_id"
            ).scalar()
            assert pairs == 60  # every book on its author
            conn.execute(sa.text(f"DELETE FROM {parent.name} WHERE id = :i"), {"i": ids[0]})
            assert conn.exec_driver_sql(f"SELECT count(*) FROM {tenant}.{prefix}_book").scalar() == 57
        migrate(pg_engine, tmp_path, "down")
        with pg_engine.connect() as conn:
            assert _column_type(conn, f"{tenant}.{prefix}_book", "author_id") == "character(36)"
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {tenant} CASCADE")
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
        md.drop_all(pg_engine)


def test_another_databases_foreign_key_is_converted_and_a_composite_one_refused_before_any_change(
    mysql_engine, tmp_path
):
    """MariaDB's DDL does not roll back: a foreign key the inspector did not see (another database's) made the
    key's MODIFY fail after the foreign keys it saw were dropped and their columns converted, and left so.  Read
    from the catalog, another database's is converted with the others, and made again naming the key's table
    with its database (MariaDB reads a bare name as the child's database's); and back.  A composite key (the key
    beside a tenant's column), which the inspector skipped, is refused before the first statement."""
    from seqid_orm.errors import MigrationRefusedError

    prefix = f"cv{secrets.token_hex(3)}"
    other = f"{prefix}_other"
    md, parent, _book, _note = schema(prefix, "text")
    md.create_all(mysql_engine)
    database = mysql_engine.url.database

    def state() -> list[tuple]:
        with mysql_engine.connect() as conn:
            return (
                conn.exec_driver_sql(
                    "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                    f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE '{prefix}%%' ORDER BY 1, 2"
                ).all()
                + conn.exec_driver_sql(
                    "SELECT TABLE_NAME, CONSTRAINT_NAME, '' FROM information_schema.REFERENTIAL_CONSTRAINTS "
                    f"WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME LIKE '{prefix}%%' ORDER BY 1, 2"
                ).all()
            )

    def elsewhere() -> list[tuple]:
        with mysql_engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT c.DATA_TYPE, k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME "
                "FROM information_schema.COLUMNS c JOIN information_schema.KEY_COLUMN_USAGE k "
                "ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = "
                f"c.TABLE_NAME AND k.COLUMN_NAME = c.COLUMN_NAME WHERE c.TABLE_SCHEMA = '{other}' "
                "AND k.REFERENCED_TABLE_NAME IS NOT NULL"
            ).all()

    write(tmp_path, MIGRATION.format(table=parent.name, source="text", target="native"))
    try:
        ids = [str(i) for i in comb_batch(5)]
        with mysql_engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {other}")
            conn.exec_driver_sql(
                f"CREATE TABLE {other}.book (n int PRIMARY KEY, author_id char(36) NOT NULL, "
                f"FOREIGN KEY (author_id) REFERENCES {database}.{parent.name} (id))"
            )
            conn.execute(sa.insert(parent), [{"id": i} for i in ids])
            conn.execute(
                sa.text(f"INSERT INTO {other}.book VALUES (:n, :a)"), [{"n": n, "a": a} for n, a in enumerate(ids)]
            )
        migrate(mysql_engine, tmp_path, "up")
        assert elsewhere() == [("uuid", database, parent.name)]
        with mysql_engine.begin() as conn:  # every book on its author, and the key holds
            assert (
                conn.exec_driver_sql(
                    f"SELECT count(*) FROM {other}.book b JOIN {parent.name} a ON a.id = b.author_id"
                ).scalar()
                == 5
            )
        with pytest.raises(sa.exc.IntegrityError), mysql_engine.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO {other}.book VALUES (99, UUID())")
        migrate(mysql_engine, tmp_path, "down")
        assert elsewhere() == [("char", database, parent.name)]
        with mysql_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {other}")
            conn.exec_driver_sql(f"ALTER TABLE {parent.name} ADD COLUMN tenant int NOT NULL DEFAULT 1")
            conn.exec_driver_sql(f"ALTER TABLE {parent.name} ADD UNIQUE KEY {prefix}_pair (tenant, id)")
            conn.exec_driver_sql(
                f"CREATE TABLE {prefix}_pair (n int PRIMARY KEY, tenant int NOT NULL, author_id char(36), "
                f"FOREIGN KEY (tenant, author_id) REFERENCES {parent.name} (tenant, id))"
            )
        before = state()
        with pytest.raises(MigrationRefusedError, match="a conversion in place changes keys of one column"):
            migrate(mysql_engine, tmp_path, "up")
        assert state() == before
    finally:
        with mysql_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {other}")
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {prefix}_pair")
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
        md.drop_all(mysql_engine)
