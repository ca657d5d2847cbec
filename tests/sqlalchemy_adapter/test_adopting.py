"""Adopting seqid on a table that already holds uuid4 keys, as a SQLAlchemy user does it: the key's type and
default swapped, the migration Alembic's autogenerate writes (with seqid's writer) applied, then rows
through every path that makes keys (the ORM's unit of work, Core's executemany, bulk_insert, the
database's default).  On the real servers: every old row is found by its key, the new rows sort in
creation order (on PostgreSQL after every old one), and the primary key grows as a seqid-only one
does (PostgreSQL splits inner pages 50/50; InnoDB and SQLite fill them where inserts go).

A column that keeps another form than the type writes is refused before a row is written.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
alembic_command = pytest.importorskip("alembic.command")
from alembic.config import Config  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

from seqid_orm import describe  # noqa: E402
from seqid_orm.errors import StorageMismatchError  # noqa: E402
from seqid_orm.ids.adopted import ABOVE_BITS  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, bulk_insert, seq_uuid_pk  # noqa: E402
from seqid_orm.sqlalchemy.columns import forget_columns  # noqa: E402
from tests.sqlalchemy_adapter.test_alembic import SCRIPT_MAKO  # noqa: E402

N = 100_000  # rows before the swap, and rows after it
RATIO = 1.05  # the adopted index against its old part plus a fresh seqid index of the new rows

ENV_PY = """
import datetime
from alembic import context
import sqlalchemy as sa
from seqid_orm.sqlalchemy import DatabaseSeqUUID, SeqUUID
from seqid_orm.sqlalchemy.alembic import compare_server_default, render_item, writer

metadata = sa.MetaData()
sa.Table(
    "{table}",
    metadata,
    sa.Column("id", SeqUUID(), primary_key=True{server_default}),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("note", sa.String(20), nullable=False),
)

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    render_item=render_item,
    compare_server_default=compare_server_default,
    process_revision_directives=writer,
    include_name=lambda name, type_, parents: type_ != "table" or name == "{table}",
    version_table="{table}_version",
)
with context.begin_transaction():
    context.run_migrations()
"""


def _legacy(name: str) -> sa.Table:
    """The table as the user has it: sa.Uuid keys filled by uuid.uuid4."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Uuid, primary_key=True, default=uuid.uuid4),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("note", sa.String(20), nullable=False),
    )


def _fill_old(engine, table: sa.Table, count: int) -> list[uuid.UUID]:
    """``count`` uuid4 rows (server-side on PostgreSQL), with n from -count to -1; their keys."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(
                sa.text(f"INSERT INTO {table.name} SELECT gen_random_uuid(), -g, 'old' FROM generate_series(1, :n) g"),
                {"n": count},
            )
        else:
            for start in range(0, count, 10_000):
                rows = [{"n": -1 - i, "note": "old"} for i in range(start, min(start + 10_000, count))]
                conn.execute(sa.insert(table), rows)
        return list(conn.execute(sa.select(table.c.id)).scalars())


def _key_bytes(engine, name: str) -> int:
    """The primary key's size: PostgreSQL's index, InnoDB's clustered index, SQLite's index pages."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            return int(conn.execute(sa.text(f"SELECT pg_relation_size('{name}_pkey')")).scalar_one())
        if engine.dialect.name == "mysql":
            conn.execute(sa.text(f"ANALYZE TABLE {name}")).all()
            return int(
                conn.execute(
                    sa.text(
                        "SELECT data_length FROM information_schema.TABLES "
                        "WHERE table_schema = DATABASE() AND table_name = :t"
                    ),
                    {"t": name},
                ).scalar_one()
            )
        pages = conn.execute(
            sa.text("SELECT SUM(pgsize) FROM dbstat WHERE name = :i"), {"i": f"sqlite_autoindex_{name}_1"}
        )
        return int(pages.scalar_one())


class _Models:
    """The swapped model (seq_uuid_pk()) for one table, mapped anew per test."""

    def __init__(self, name: str, **key_options: object) -> None:
        class Base(DeclarativeBase):
            pass

        class Row(Base):
            __tablename__ = name
            id: Mapped[uuid.UUID] = seq_uuid_pk(**key_options)  # type: ignore[arg-type]
            n: Mapped[int] = mapped_column(sa.Integer)
            note: Mapped[str] = mapped_column(sa.String(20))

        self.Row, self.table = Row, Row.__table__


def _fill_new(engine, models: _Models, count: int) -> None:
    """``count`` rows, n from 0 up, through the ORM's flush, Core's executemany and bulk_insert in turn."""
    third = count // 3
    with Session(engine) as session:
        for start in range(0, third, 1000):
            session.add_all(models.Row(n=i, note="new") for i in range(start, min(start + 1000, third)))
            session.commit()
    with engine.begin() as conn:
        for start in range(third, 2 * third, 5000):
            conn.execute(
                sa.insert(models.table), [{"n": i, "note": "new"} for i in range(start, min(start + 5000, 2 * third))]
            )
    with engine.begin() as conn:
        bulk_insert(conn, models.table, [{"n": i, "note": "new"} for i in range(2 * third, count)])


def _project(tmp_path: Path, name: str, server_default: str = "") -> Config:
    (tmp_path / "versions").mkdir(exist_ok=True)
    (tmp_path / "env.py").write_text(textwrap.dedent(ENV_PY.format(table=name, server_default=server_default)))
    (tmp_path / "script.py.mako").write_text(SCRIPT_MAKO)
    config = Config()
    config.set_main_option("script_location", str(tmp_path))
    return config


def _autogenerate_and_upgrade(engine, config: Config) -> str:
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        alembic_command.revision(config, message="adopt", autogenerate=True)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        alembic_command.upgrade(config, "head")
    [script] = (Path(config.get_main_option("script_location")) / "versions").glob("*.py")
    return script.read_text()


def _drop(engine, *names: str) -> None:
    with engine.begin() as conn:
        for name in names:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}_version"))


def _fresh_key_bytes(engine, name: str, count: int) -> int:
    """The primary key of a table keyed by seqid from the start, filled the same way."""
    fresh = _Models(name)
    fresh.table.metadata.create_all(engine)
    _fill_new(engine, fresh, count)
    return _key_bytes(engine, name)


@pytest.mark.big
def test_an_adopted_table_finds_its_old_rows_orders_its_new_ones_and_grows_as_a_new_one(engine, tmp_path, table_name):
    forget_columns(engine.dialect)
    legacy = _legacy(table_name)
    legacy.metadata.create_all(engine)
    try:
        old_keys = _fill_old(engine, legacy, N)
        script = _autogenerate_and_upgrade(engine, _project(tmp_path, table_name))
        if not engine.dialect.supports_native_uuid:  # sa.Uuid's CHAR(32) becomes what SeqUUID() writes, values kept
            to = "binary" if engine.dialect.name == "sqlite" else "native"  # MariaDB with SQLAlchemy 2.0
            assert f"op.convert_uuid_storage('{table_name}', 'id', from_storage='hex', to_storage='{to}')" in script
        else:  # the same column: the database's UUID type
            assert "op.alter_column" not in script and "convert_uuid_storage" not in script, script
        old_bytes = _key_bytes(engine, table_name)
        models = _Models(table_name)
        _fill_new(engine, models, N)
        adopted_bytes = _key_bytes(engine, table_name)
        with engine.connect() as conn:
            found = sum(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(models.table)
                    .where(models.table.c.id.in_(old_keys[i : i + 5000]))
                ).scalar_one()
                for i in range(0, N, 5000)
            )
            by_key = conn.execute(sa.select(models.table.c.n).order_by(models.table.c.id)).scalars().all()
            newest = conn.execute(sa.select(models.table.c.id).where(models.table.c.n == N - 1)).scalar_one()
        with Session(engine) as session:
            assert all(session.get(models.Row, key).note == "old" for key in old_keys[:: N // 200])
    finally:
        _drop(engine, table_name)
    assert found == N  # every old row, by its key
    assert [n for n in by_key if n >= 0] == list(range(N))  # the new rows in creation order, by key
    fresh_name = f"{table_name}_fresh"
    try:
        fresh_bytes = _fresh_key_bytes(engine, fresh_name, N)
    finally:
        _drop(engine, fresh_name)
    ratio = adopted_bytes / (old_bytes + fresh_bytes)
    assert ratio <= RATIO, (engine.dialect.name, old_bytes, fresh_bytes, adopted_bytes, ratio)
    adopted = engine.dialect.name == "postgresql"
    assert describe(newest).kind == ("adopted" if adopted else "uuid7")
    if adopted:  # PostgreSQL: after every old one, where its B-tree fills pages as at its right edge
        assert by_key[N:] == list(range(N))


@pytest.mark.parametrize("days", [0, -30])
def test_database_made_keys_on_an_adopted_postgresql_column_sort_after_the_old_ones(
    pg_engine, tmp_path, table_name, days
):
    """seq_uuid_pk(generate="database"): autogenerate writes op.set_seqid_default, which reads the column
    when it runs and sets the default of keys that sort after its old ones; with a shift, keys of the
    shifted time, still after the old ones."""
    forget_columns(pg_engine.dialect)
    legacy = _legacy(table_name)
    legacy.metadata.create_all(pg_engine)
    count = N // 5
    try:
        old_keys = set(_fill_old(pg_engine, legacy, count))
        shift = f"shift=datetime.timedelta(days={days})" if days else ""
        script = _autogenerate_and_upgrade(
            pg_engine, _project(tmp_path, table_name, f", server_default=DatabaseSeqUUID({shift})")
        )
        assert f"op.set_seqid_default('{table_name}', 'id'{', ' + shift if shift else ''})" in script
        assert ("import datetime" in script) == bool(days)
        plain = sa.Table(table_name, sa.MetaData(), sa.Column("n", sa.Integer), sa.Column("note", sa.String(20)))
        with pg_engine.begin() as conn:
            for start in range(0, count, 5000):
                conn.execute(sa.insert(plain), [{"n": i, "note": "new"} for i in range(start, start + 5000)])
            rows = conn.execute(sa.text(f"SELECT id, n FROM {table_name} ORDER BY id")).all()
    finally:
        _drop(pg_engine, table_name)
    assert {r.id for r in rows[:count]} == old_keys
    assert sorted(r.n for r in rows[count:]) == list(range(count))
    assert {describe(r.id).kind for r in rows[count:]} == {"adopted"}
    made = describe(rows[-1].id).timestamp
    assert abs(made - (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days))) < dt.timedelta(minutes=5)
    # one statement's rows in its order, give or take the two clock readings of a row's default
    # (the same as PostgreSQL 13-17's database-made UUIDv7, vendors/postgresql.py)
    inversions = sum(1 for a, b in zip(rows[count:], rows[count + 1 :], strict=False) if a.n > b.n)
    assert inversions <= count // 100


def test_a_sqlite_column_of_hex_text_refuses_seq_uuid_keys_of_bytes_before_writing_a_row(sqlite_engine, table_name):
    """sa.Uuid keeps 32 hex characters on SQLite, SeqUUID() 16 bytes: swapped without its migration, a look-up
    of an old key is refused (it would have found nothing), the first insert and a bulk load are refused; not a
    row of the second form is written."""
    forget_columns(sqlite_engine.dialect)
    legacy = _legacy(table_name)
    legacy.metadata.create_all(sqlite_engine)
    try:
        old_keys = _fill_old(sqlite_engine, legacy, 200)
        models = _Models(table_name)
        with Session(sqlite_engine) as session, pytest.raises(StorageMismatchError, match="holds hex"):
            session.get(models.Row, old_keys[0])  # a look-up is refused too: it would have found nothing
        forget_columns(sqlite_engine.dialect)
        with Session(sqlite_engine) as session:
            session.add(models.Row(n=1, note="new"))
            with pytest.raises(sa.exc.StatementError) as raised:
                session.commit()
        assert isinstance(raised.value.orig, StorageMismatchError)
        assert 'seq_uuid_pk(storage="hex")' in str(raised.value.orig)
        assert f'op.convert_uuid_storage("{table_name}", "id", from_storage="hex")' in str(raised.value.orig)
        with sqlite_engine.begin() as conn, pytest.raises(StorageMismatchError):
            bulk_insert(conn, models.table, [{"n": 2, "note": "new"}])
        with sqlite_engine.connect() as conn:
            kinds = conn.execute(sa.text(f"SELECT typeof(id), count(*) FROM {table_name} GROUP BY 1")).all()
        assert kinds == [("text", 200)]
        hexed = _Models(table_name, storage="hex")  # the first fix the message names
        with Session(sqlite_engine) as session:
            session.add(hexed.Row(n=3, note="new"))
            session.commit()
            assert all(session.get(hexed.Row, key) is not None for key in old_keys)
    finally:
        _drop(sqlite_engine, table_name)


def test_a_mariadb_char32_column_refuses_seq_uuid_keys_of_its_uuid_type(mysql_engine, table_name):
    """The CHAR(32) column of sa.Uuid under SQLAlchemy 2.0 (or of Django 4.2's UUIDField) where SeqUUID()
    writes MariaDB's UUID type: refused before the insert, naming the column and both fixes."""
    forget_columns(mysql_engine.dialect)
    with mysql_engine.begin() as conn:
        conn.execute(
            sa.text(f"CREATE TABLE {table_name} (id CHAR(32) PRIMARY KEY, n INT NOT NULL, note VARCHAR(20) NOT NULL)")
        )
        conn.execute(sa.text(f"INSERT INTO {table_name} VALUES (:id, -1, 'old')"), {"id": uuid.uuid4().hex})
    try:
        models = _Models(table_name)
        with mysql_engine.begin() as conn, pytest.raises(sa.exc.StatementError) as raised:
            conn.execute(sa.insert(models.table), [{"n": 1, "note": "new"}])
        assert isinstance(raised.value.orig, StorageMismatchError)
        assert f"{table_name}.id (declared char(32)) holds hex" in str(raised.value.orig)
        with mysql_engine.connect() as conn:
            assert conn.execute(sa.text(f"SELECT count(*) FROM {table_name}")).scalar_one() == 1
    finally:
        _drop(mysql_engine, table_name)


WORKER = """
import sys, uuid
import sqlalchemy as sa
from seqid_orm import describe
from seqid_orm.sqlalchemy import SeqUUID, seq_uuid_default
engine = sa.create_engine(sys.argv[1])
table = sa.Table(sys.argv[2], sa.MetaData(), sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default),
                 sa.Column("n", sa.Integer), sa.Column("note", sa.String(20)))
base = int(sys.argv[3])
for start in range(0, 3000, 300):
    with engine.begin() as conn:
        conn.execute(sa.insert(table), [{"n": base + start + i, "note": "new"} for i in range(300)])
with engine.connect() as conn:
    mine = conn.execute(sa.select(table.c.id).where(table.c.n >= base, table.c.n < base + 3000)).scalars().all()
print(sorted({describe(u).parts.get("above", 0) for u in mine}))
"""


def test_processes_that_adopt_a_postgresql_column_at_once_agree_on_its_keys_and_never_repeat_one(pg_engine, table_name):
    """Three processes start on a column of random keys at the same time: each reads it, all choose the
    same width (a deterministic function of the same largest key), and 9,000 rows go in with no
    duplicate key; the new keys all sort after the old ones."""
    legacy = _legacy(table_name)
    legacy.metadata.create_all(pg_engine)
    try:
        _fill_old(pg_engine, legacy, 20_000)
        url = pg_engine.url.render_as_string(hide_password=False)
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, url, table_name, str(k * 10_000)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for k in range(3)
        ]
        outputs = [w.communicate(timeout=120) for w in workers]
        assert [w.returncode for w in workers] == [0, 0, 0], outputs
        widths = {out for out, _err in outputs}
        with pg_engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT note FROM {table_name} ORDER BY id")).scalars().all()
    finally:
        _drop(pg_engine, table_name)
    # one width for all three (which one depends on how many one bits the largest random key has)
    assert len(widths) == 1 and widths.pop().strip() in {f"[{bits}]" for bits in ABOVE_BITS}, outputs
    assert rows[:20_000] == ["old"] * 20_000 and rows[20_000:] == ["new"] * 9000


def test_a_role_that_may_not_read_the_column_inserts_with_plain_keys_and_its_transaction_goes_on(pg_engine, table_name):
    """A role granted INSERT alone cannot read the keys: seqid does not try (a refused SELECT would abort the
    insert's transaction on PostgreSQL), and makes plain keys there."""
    role = f"seqid_writer_{table_name[2:]}"
    legacy = _legacy(table_name)
    legacy.metadata.create_all(pg_engine)
    with pg_engine.begin() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(sa.text(f"GRANT INSERT ON {table_name} TO {role}"))
        conn.execute(sa.text(f"GRANT USAGE ON SCHEMA public TO {role}"))
    writer = sa.create_engine(pg_engine.url.set(username=role), poolclass=sa.NullPool)
    try:
        _fill_old(pg_engine, legacy, 1000)
        models = _Models(table_name)
        with writer.begin() as conn:
            conn.execute(sa.insert(models.table), [{"n": i, "note": "new"} for i in range(10)])
            conn.execute(sa.insert(models.table), [{"n": 10, "note": "new"}])  # the transaction is alive
        with pg_engine.connect() as conn:
            made = conn.execute(sa.select(models.table.c.id).where(models.table.c.n >= 0)).scalars().all()
        assert len(made) == 11 and {describe(u).kind for u in made} == {"uuid7"}
    finally:
        writer.dispose()
        _drop(pg_engine, table_name)
        with pg_engine.begin() as conn:
            conn.execute(sa.text(f"REVOKE ALL ON SCHEMA public FROM {role}"))
            conn.execute(sa.text(f"DROP ROLE {role}"))


@pytest.mark.parametrize("storage", ["binary", "text", "hex"])
def test_every_storage_of_a_key_adopts_as_the_database_compares_it(engine, table_name, storage):
    """BINARY(16)/bytea/BLOB, CHAR(36) and CHAR(32): old keys found, new ones in creation order (after the old
    ones on PostgreSQL, whose "C"-less default collation still compares lower-case hex as the bytes), and
    the key within the ratio of a fresh one."""
    count = 20_000
    forget_columns(engine.dialect)
    legacy = sa.Table(
        table_name,
        sa.MetaData(),
        sa.Column("id", SeqUUID(storage=storage), primary_key=True, default=uuid.uuid4),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("note", sa.String(20), nullable=False),
    )
    legacy.metadata.create_all(engine)
    fresh_name = f"{table_name}_fresh"
    try:
        with engine.begin() as conn:
            for start in range(0, count, 10_000):
                conn.execute(sa.insert(legacy), [{"n": -1 - i, "note": "old"} for i in range(start, start + 10_000)])
            old_keys = conn.execute(sa.select(legacy.c.id)).scalars().all()
        old_bytes = _key_bytes(engine, table_name) if engine.dialect.name != "sqlite" else 0
        models = _Models(table_name, storage=storage)
        _fill_new(engine, models, count)
        adopted_bytes = _key_bytes(engine, table_name) if engine.dialect.name != "sqlite" else 0
        with engine.connect() as conn:
            found = conn.execute(
                sa.select(sa.func.count()).select_from(models.table).where(models.table.c.id.in_(old_keys[:5000]))
            ).scalar_one()
            by_key = conn.execute(sa.select(models.table.c.n).order_by(models.table.c.id)).scalars().all()
            newest = conn.execute(sa.select(models.table.c.id).where(models.table.c.n == count - 1)).scalar_one()
        if engine.dialect.name != "sqlite":
            fresh = _Models(fresh_name, storage=storage)
            fresh.table.metadata.create_all(engine)
            _fill_new(engine, fresh, count)
            ratio = adopted_bytes / (old_bytes + _key_bytes(engine, fresh_name))
            assert ratio <= RATIO, (engine.dialect.name, storage, ratio)
    finally:
        _drop(engine, table_name, fresh_name)
    assert found == 5000
    assert [n for n in by_key if n >= 0] == list(range(count))
    adopted = engine.dialect.name == "postgresql"
    assert describe(newest).kind == ("adopted" if adopted else "uuid7")
    if adopted:
        assert by_key[count:] == list(range(count))
