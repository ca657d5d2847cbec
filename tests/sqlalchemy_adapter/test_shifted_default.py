"""Database-made keys for a shifted time: ``DatabaseSeqUUID(shift=timedelta(...))`` on each real
database and storage, as a column default and as a value in one INSERT; the keys carry the shifted
time, stay in insertion order under ORDER BY and sort below (or above) keys made now; the defaults
that cannot shift are refused by type; Alembic writes the shift and notices it added or removed."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from seqid_orm import comb, timestamp_of
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, ServerDefaultUnavailableError
from seqid_orm.vendors import Storage, target

sa = pytest.importorskip("sqlalchemy")
from seqid_orm.sqlalchemy import DatabaseSeqUUID, SeqUUID  # noqa: E402
from seqid_orm.sqlalchemy.alembic import compare_server_default, render_item  # noqa: E402
from tests.ordering import check_time_ordered  # noqa: E402

MONTH_AGO = dt.timedelta(days=-30)


def _storages(engine) -> list[str | None]:
    # SQLite's BLOB default needs unhex() (3.41; Debian 12 has 3.40): its text forms everywhere
    return ["text", "hex"] if engine.dialect.name == "sqlite" else [None, "binary", "text", "hex"]


def _storage(engine) -> str | None:
    return _storages(engine)[0]


def _near(value: uuid.UUID, when: dt.datetime) -> bool:
    return abs(timestamp_of(value) - when) < dt.timedelta(minutes=1)


@pytest.mark.parametrize("shift", [MONTH_AGO, dt.timedelta(hours=5, microseconds=7)])
def test_a_shifted_default_makes_keys_of_the_shifted_time_in_insertion_order(engine, metadata, table_name, shift):
    with engine.connect():
        pass  # the dialect learns the server version
    tables = [
        sa.Table(
            f"{table_name}_{storage or 'default'}",
            metadata,
            sa.Column("id", SeqUUID(storage), primary_key=True, server_default=DatabaseSeqUUID(storage, shift=shift)),
            sa.Column("n", sa.Integer, nullable=False),
        )
        for storage in _storages(engine)
    ]
    metadata.create_all(engine)
    for table in tables:
        now = dt.datetime.now(dt.timezone.utc)
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"n": n} for n in range(300)])
            rows = conn.execute(sa.select(table.c.n, table.c.id).order_by(table.c.id)).all()
        assert len({r.id for r in rows}) == 300
        check_time_ordered(engine.dialect.name, engine.dialect.server_version_info or (), [tuple(r) for r in rows])
        assert all(_near(r.id, now + shift) for r in (rows[0], rows[-1])), (table.name, rows[0].id)
        # against a key made now, in the database's own order: below it for a shift back, above for one ahead
        fresh = comb(table.c.id.type.target(engine.dialect).layout)
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"id": fresh, "n": -1}])
            order = conn.execute(sa.select(table.c.n).order_by(table.c.id)).scalars().all()
        assert order.index(-1) == (300 if shift < dt.timedelta(0) else 0)


def test_as_a_value_each_insert_gets_the_shift_it_names(engine, metadata, table_name):
    """The element in an INSERT's values: two statements with other shifts, one after the other on one
    connection, each get their own (the statement cache tells them apart)."""
    with engine.connect():
        pass
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(_storage(engine)), primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
    )
    metadata.create_all(engine)
    now = dt.datetime.now(dt.timezone.utc)
    with engine.begin() as conn:
        for n, days in enumerate((-30, -60, -30, 0)):
            shift = dt.timedelta(days=days) if days else None
            conn.execute(table.insert().values(id=DatabaseSeqUUID(_storage(engine), shift=shift), n=n))
        made = dict(conn.execute(sa.select(table.c.n, table.c.id)).all())
        in_order = conn.execute(sa.select(table.c.n).order_by(table.c.id)).scalars().all()
    for n, days in enumerate((-30, -60, -30, 0)):
        assert _near(made[n], now + dt.timedelta(days=days)), (n, timestamp_of(made[n]))
    # 60 days back first, now last; the two 30 days back may share a millisecond (SQLite's default counts
    # no fraction of one), so either order of them is time order
    assert in_order[0] == 1 and in_order[3] == 3 and sorted(in_order[1:3]) == [0, 2]


@pytest.mark.parametrize(
    ("engine_name", "version", "storage", "shows"),
    [
        ("postgresql", (18, 0), Storage.NATIVE, "uuidv7(interval '-2592000000000 microseconds')"),
        ("postgresql", (15, 20), Storage.BINARY, "(clock_timestamp() + interval '-2592000000000 microseconds')"),
        ("mariadb", (10, 11, 19), Storage.NATIVE, "floor((-2592000.000000 + unix_timestamp(sysdate(6)))"),
        ("mariadb", (11, 7, 2), Storage.NATIVE, "floor((-2592000.000000 + unix_timestamp(sysdate(6)))"),
        ("mysql", (8, 0, 36), Storage.BINARY, "floor((-2592000.000000 + unix_timestamp(sysdate(6)))"),
        ("sqlite", (3, 45, 1), Storage.TEXT, "julianday('now', '-2592000.000000 seconds')"),
    ],
)
def test_each_engine_moves_the_clock_its_default_reads(engine_name, version, storage, shows):
    made = target(engine_name, version, storage).shifted_default(MONTH_AGO)
    assert shows in made.sql and made.uuid_version == 7
    where = target(engine_name, version, storage)
    assert where.shifted_default(None) == where.server_default


@pytest.mark.parametrize(("engine_name", "version"), [("sqlite", (3, 45, 1)), ("mariadb", (10, 11, 19))])
def test_a_fraction_of_a_second_back_is_exact(engine_name, version):
    made = target(engine_name, version, Storage.HEX).shifted_default(dt.timedelta(microseconds=-1))
    assert "-0.000001 " in made.sql  # not -1 + 0.999999, nor a float's digits


@pytest.mark.parametrize(
    ("engine_name", "version", "storage", "reason"),
    [
        ("mssql", (16, 0), Storage.NATIVE, "NEWSEQUENTIALID"),
        ("mariadb", (10, 11, 4), Storage.NATIVE, "UUID()"),  # its uuid type scatters a UUIDv7 before 10.11.5
        ("oracle", (23, 0), Storage.BINARY, "Oracle"),
    ],
)
def test_a_default_that_cannot_shift_is_refused(engine_name, version, storage, reason):
    with pytest.raises(ServerDefaultUnavailableError, match=reason):
        target(engine_name, version, storage).shifted_default(MONTH_AGO)


def test_a_shift_that_is_no_timedelta_or_leaves_the_range_is_refused():
    where = target("postgresql", (15, 20), Storage.NATIVE)
    with pytest.raises(ArgumentTypeError, match="timedelta"):
        where.shifted_default(-30)
    with pytest.raises(ArgumentTypeError, match="timedelta"):
        DatabaseSeqUUID(shift=30)
    with pytest.raises(InvalidArgumentError, match="range"):
        where.shifted_default(dt.timedelta(days=-365 * 60))  # before 1970
    with pytest.raises(InvalidArgumentError, match="datetime"):
        where.shifted_default(dt.timedelta(days=999_999_999))


def test_sql_server_refuses_a_shifted_default_at_create_table():
    from sqlalchemy.dialects import mssql
    from sqlalchemy.schema import CreateTable

    default = DatabaseSeqUUID(shift=MONTH_AGO)
    table = sa.Table("t", sa.MetaData(), sa.Column("id", SeqUUID(), primary_key=True, server_default=default))
    dialect = mssql.dialect()
    dialect.server_version_info = (16, 0)
    with pytest.raises(ServerDefaultUnavailableError, match="NEWSEQUENTIALID"):
        str(CreateTable(table).compile(dialect=dialect))


def test_alembic_writes_the_shift_and_sees_it_added_or_removed(engine, metadata, table_name):
    from alembic.autogenerate import compare_metadata, produce_migrations, render_python_code
    from alembic.autogenerate.api import AutogenContext
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import seqid_orm

    storage = _storage(engine)

    def model(shift):
        meta = sa.MetaData()
        default = DatabaseSeqUUID(storage, shift=shift)
        sa.Table(table_name, meta, sa.Column("id", SeqUUID(storage), primary_key=True, server_default=default))
        return meta

    only_this = {"include_name": lambda name, type_, parent: type_ != "table" or name == table_name}
    opts = {"render_item": render_item, "compare_server_default": compare_server_default, **only_this}
    with engine.begin() as conn:
        context = MigrationContext.configure(conn, opts=opts)
        code = render_python_code(produce_migrations(context, model(MONTH_AGO)).upgrade_ops, render_item=render_item)
        assert "shift=datetime.timedelta(days=-30))" in code, code
        with_imports = AutogenContext(context)
        render_item("server_default", model(MONTH_AGO).tables[table_name].c.id.server_default, with_imports)
        assert "import datetime" in with_imports.imports  # the migration file can name the timedelta
        body = "\n".join(line[4:] for line in code.splitlines()[1:])
        exec(body, {"op": Operations(context), "sa": sa, "seqid_orm": seqid_orm, "datetime": dt})
    metadata.reflect(engine, only=[table_name])  # dropped after the test
    with engine.begin() as conn:
        context = MigrationContext.configure(conn, opts=opts)
        assert compare_metadata(context, model(MONTH_AGO)) == []  # as written: nothing to do
        changed = compare_metadata(context, model(None))  # the shift removed from the model
        assert [d[0][0] for d in changed] == ["modify_default"], changed
