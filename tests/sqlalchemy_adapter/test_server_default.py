"""Ids made by the database: DatabaseSeqUUID / seq_uuid_pk(generate="database").

The generator table is checked offline; on the live servers the ids are made by PostgreSQL,
MariaDB and SQLite themselves, read back through the ORM (RETURNING) and Core, and the
database's own ORDER BY must give insertion order.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import uuid

import pytest

from seqid_orm import timestamp_of
from seqid_orm.errors import ServerDefaultUnavailableError
from seqid_orm.vendors import server_default

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402
from sqlalchemy.schema import CreateTable  # noqa: E402

from seqid_orm.sqlalchemy import DatabaseSeqUUID, SeqUUID, seq_uuid_pk  # noqa: E402
from seqid_orm.sqlalchemy.types import dialect_server_version, dialect_vendor  # noqa: E402
from tests.conftest import ASYNC_DRIVERS  # noqa: E402
from tests.ordering import check_time_ordered  # noqa: E402

# --- the generator table, offline --------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "version", "storage", "contains", "uuid_version"),
    [
        ("postgresql", (18, 0), "native", "uuidv7()", 7),
        ("postgresql", (18, 0), "binary", "uuid_send(uuidv7())", 7),
        ("postgresql", (15, 20), "native", "gen_random_uuid()", 7),
        ("postgresql", (13, 0), "hex", "clock_timestamp()", 7),
        ("mariadb", (11, 7, 2), "native", "uuid_v7()", 7),
        ("mariadb", (10, 11, 19), "native", "uuid()", 1),
        ("mariadb", (10, 7, 0), "native", "uuid()", 1),
        ("mariadb", (10, 11, 19), "binary", "random_bytes(7)", 7),
        ("mysql", (8, 0, 36), "text", "random_bytes(7)", 7),
        ("sqlite", (3, 45, 1), "binary", "unhex(", 7),
        ("sqlite", (3, 40, 1), "text", "randomblob", 7),
        ("mssql", (16, 0), "native", "newsequentialid()", 1),
    ],
)
def test_generator_follows_engine_version_and_storage(vendor, version, storage, contains, uuid_version):
    made = server_default(vendor, version, storage)
    assert contains in made.sql
    assert made.uuid_version == uuid_version


@pytest.mark.parametrize(
    ("vendor", "version", "storage", "reason"),
    [
        ("postgresql", (12, 9), "native", "gen_random_uuid"),
        ("mariadb", (10, 9, 8), "binary", "RANDOM_BYTES"),
        ("mysql", (8, 0, 12), "binary", "8.0.13"),
        ("mysql", (8, 0, 36), "native", "no UUID column type"),
        ("sqlite", (3, 40, 1), "binary", "unhex"),
        ("mssql", (16, 0), "text", "UNIQUEIDENTIFIER"),
        ("oracle", (23, 0), "binary", "Oracle"),
        ("cockroachdb", (24, 1), "native", "hot spot"),
    ],
)
def test_engines_that_cannot_are_refused_with_the_reason(vendor, version, storage, reason):
    with pytest.raises(ServerDefaultUnavailableError, match=reason):
        server_default(vendor, version, storage)


def test_bad_storage_is_a_typed_error():
    with pytest.raises(ValueError, match="storage"):
        server_default("postgresql", (15,), "bytes")


# --- DDL for the dialects without a server here -------------------------------------------


def _ddl(dialect, storage=None) -> str:
    table = sa.Table("t", sa.MetaData(), sa.Column("id", SeqUUID(storage), server_default=DatabaseSeqUUID(storage)))
    return str(CreateTable(table).compile(dialect=dialect))


def test_sql_server_gets_newsequentialid_on_uniqueidentifier():
    from sqlalchemy.dialects import mssql

    ddl = _ddl(mssql.dialect())
    assert "id UNIQUEIDENTIFIER NULL DEFAULT (newsequentialid())" in ddl


def test_oracle_refuses_at_create_table():
    from sqlalchemy.dialects import oracle

    with pytest.raises(ServerDefaultUnavailableError, match="Oracle"):
        _ddl(oracle.dialect())


@pytest.mark.cockroachdb
def test_cockroachdb_refuses_at_create_table():
    from sqlalchemy_cockroachdb.base import CockroachDBDialect

    with pytest.raises(ServerDefaultUnavailableError, match="hot spot"):
        _ddl(CockroachDBDialect())


def test_mysql_8_gets_the_expression_in_parentheses():
    from sqlalchemy.dialects import mysql

    dialect = mysql.dialect()
    dialect.server_version_info = (8, 0, 36)
    ddl = _ddl(dialect, "binary")
    assert "DEFAULT (unhex(concat(" in ddl and "random_bytes(7)" in ddl


def test_layout_and_generate_database_do_not_mix():
    with pytest.raises(ValueError, match="layout"):
        seq_uuid_pk(layout="time_last", generate="database")
    with pytest.raises(ValueError, match="generate"):
        seq_uuid_pk(generate="server")


# --- live: the database makes the ids ----------------------------------------------------


def _storages(engine) -> list[str | None]:
    if engine.dialect.name == "sqlite":
        return [None, "text", "hex"]
    return [None, "binary", "text", "hex"]


def _check_time_ordered(engine, rows: list[tuple[int, uuid.UUID]]) -> None:
    """``rows`` as ORDER BY id gave them: insertion order, up to the database's millisecond
    (:func:`tests.ordering.exact_order` says where)."""
    dialect = engine.dialect
    check_time_ordered(dialect.name, dialect.server_version_info or (), rows)


def _expected(engine, storage):
    conn_storage = SeqUUID(storage).storage_for(engine.dialect)
    return server_default(dialect_vendor(engine.dialect), dialect_server_version(engine.dialect), conn_storage)


def test_orm_and_core_inserts_get_database_made_time_ordered_ids(engine, table_name):
    with engine.connect():
        pass  # the dialect learns the server version
    for storage in _storages(engine):

        class Base(DeclarativeBase):
            pass

        class Item(Base):
            # one table per storage: psycopg prepares a statement run five times on a connection,
            # and the same INSERT text against a table re-created with another key type on
            # another connection would fail there ("cached plan must not change result type")
            __tablename__ = f"{table_name}_{storage or 'default'}"
            id: Mapped[uuid.UUID] = seq_uuid_pk(storage, generate="database")
            n: Mapped[int]

        try:
            expected = _expected(engine, storage)
        except ServerDefaultUnavailableError:
            # only SQLite's BLOB before 3.41 (no unhex()); the error must then come at CREATE TABLE
            assert engine.dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 41)
            with pytest.raises(ServerDefaultUnavailableError, match="unhex"):
                Base.metadata.create_all(engine)
            continue
        Base.metadata.create_all(engine)
        try:
            before = dt.datetime.now(dt.timezone.utc)
            with Session(engine, expire_on_commit=False) as session:
                made = []
                for i in range(30):  # ORM unit of work: the id comes back by RETURNING
                    item = Item(n=i)
                    session.add(item)
                    session.flush()
                    made.append(item)
                session.commit()
            assert all(isinstance(item.id, uuid.UUID) for item in made)
            assert len({item.id for item in made}) == 30
            with engine.begin() as conn:  # Core executemany: rows sent without a key
                conn.execute(sa.insert(Item.__table__), [{"n": i} for i in range(30, 530)])
            with engine.connect() as conn:
                rows = conn.execute(sa.select(Item.n, Item.id).order_by(Item.id)).all()
            assert len(rows) == 530 and len({r.id for r in rows}) == 530
            _check_time_ordered(engine, [tuple(r) for r in rows])
            for value in (made[0].id, rows[-1].id):
                assert value.version == expected.uuid_version and value.variant == uuid.RFC_4122
                assert abs(timestamp_of(value) - before) < dt.timedelta(minutes=1)
        finally:
            Base.metadata.drop_all(engine)


def test_orm_batches_database_made_ids_only_with_an_insert_sentinel(engine, table_name):
    """SQLAlchemy's unit of work must match each RETURNING row to its object.

    A key the database makes cannot tell it which row is whose, so SQLAlchemy falls back to one
    INSERT per object; ``orm_insert_sentinel()`` gives it a column that can. The README states
    both; this pins them, and checks that every object got the id of its own row.
    """
    from sqlalchemy.orm import orm_insert_sentinel

    storage = "text" if engine.dialect.name == "sqlite" else None  # SQLite < 3.41 has no BLOB default
    with engine.connect():
        pass

    class Base(DeclarativeBase):
        pass

    class Plain(Base):
        __tablename__ = f"{table_name}_plain"
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage, generate="database")
        n: Mapped[int]

    class Sentinel(Base):
        __tablename__ = f"{table_name}_sent"
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage, generate="database")
        n: Mapped[int]
        _sentinel: Mapped[int] = orm_insert_sentinel()

    Base.metadata.create_all(engine)
    inserts: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        statements = {}
        for model in (Plain, Sentinel):
            inserts.clear()
            with Session(engine, expire_on_commit=False) as session:
                objects = [model(n=i) for i in range(300)]
                session.add_all(objects)
                session.commit()
            statements[model] = len(inserts)
            with engine.connect() as conn:
                stored = dict(conn.execute(sa.select(model.id, model.n)).all())
            assert {obj.id: obj.n for obj in objects} == stored  # each object holds its own row's id
        assert statements[Plain] == 300  # one INSERT per object
        assert statements[Sentinel] <= 3  # batched INSERT ... RETURNING
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
        Base.metadata.drop_all(engine)


def test_async_engines_read_database_made_ids_back(engine, table_name):
    url = engine.url.set(drivername=ASYNC_DRIVERS[engine.dialect.name])
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = table_name
        id: Mapped[uuid.UUID] = seq_uuid_pk("text" if engine.dialect.name == "sqlite" else None, generate="database")
        n: Mapped[int] = mapped_column()

    async def scenario():
        aengine = create_async_engine(url)
        try:
            async with aengine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with AsyncSession(aengine, expire_on_commit=False) as session:
                items = [Item(n=i) for i in range(50)]
                session.add_all(items)
                await session.commit()  # one flush: insertmanyvalues with RETURNING
                ordered = (await session.execute(sa.select(Item.n, Item.id).order_by(Item.id))).all()
            return [i.id for i in items], [tuple(r) for r in ordered]
        finally:
            async with aengine.begin() as conn:
                await conn.run_sync(Base.metadata.drop_all)
            await aengine.dispose()

    made, ordered = asyncio.run(scenario())
    assert all(isinstance(m, uuid.UUID) for m in made) and len(set(made)) == 50
    assert {u for _, u in ordered} == set(made)
    assert [u for n, u in sorted(ordered)] == made  # each object got its own row's id
    _check_time_ordered(engine, ordered)


def test_mariadb_native_column_stores_uuid1_in_time_order(mysql_engine, table_name):
    """MariaDB's UUID() is version 1; its UUID type sorts those by time (node, clock seq, then time)."""
    table = sa.Table(
        table_name,
        sa.MetaData(),
        sa.Column("n", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("id", SeqUUID(), server_default=DatabaseSeqUUID(), unique=True),
    )
    table.create(mysql_engine)
    try:
        with mysql_engine.begin() as conn:
            for i in range(50):
                conn.execute(sa.insert(table), {"n": i})
            rows = conn.execute(sa.select(table.c.n, table.c.id).order_by(table.c.id)).all()
        assert [n for n, _ in rows] == list(range(50))
        assert {u.version for _, u in rows} == {1}
        assert [u.time for _, u in rows] == sorted(u.time for _, u in rows)
    finally:
        table.drop(mysql_engine)


def test_python_and_database_made_ids_interleave_by_time_on_postgresql(pg_engine, table_name):
    """Both are UUIDv7 there, so a table may mix them (bulk loads, backfills) and stay ordered.

    To the millisecond: inside one, Python's ids carry a counter and PostgreSQL's a sub-ms
    fraction, so the two sources interleave arbitrarily there; the rows here are 2 ms apart.
    """
    import time

    from seqid_orm import comb

    table = sa.Table(
        table_name,
        sa.MetaData(),
        sa.Column("id", SeqUUID(), primary_key=True, server_default=DatabaseSeqUUID()),
        sa.Column("n", sa.Integer),
    )
    table.create(pg_engine)
    try:
        with pg_engine.begin() as conn:
            for i in range(60):
                time.sleep(0.002)
                if i % 3 == 1:
                    conn.execute(sa.insert(table), {"id": comb(), "n": i})
                else:
                    conn.execute(sa.insert(table), {"n": i})
            ordered = conn.execute(sa.select(table.c.n).order_by(table.c.id)).scalars().all()
        assert ordered == list(range(60))
    finally:
        table.drop(pg_engine)
