"""Ticket sequences through SQLAlchemy: ``ticket_pk``, wrapping-prefix keys counted by tickets, Alembic."""

from __future__ import annotations

import asyncio
import secrets
import textwrap
import time

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")
from alembic import command as alembic_command  # noqa: E402
from alembic.config import Config  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

from seqid_orm import uuid_sequence_nextval  # noqa: E402
from seqid_orm.allocation.stores.sqlalchemy import SQLAlchemyTicketStore  # noqa: E402
from seqid_orm.allocation.tickets import TicketSequence  # noqa: E402
from seqid_orm.errors import ArgumentTypeError, InvalidIDError  # noqa: E402
from seqid_orm.ids.prefixed import prefix_of  # noqa: E402
from seqid_orm.sqlalchemy import TicketID, prefixed_uuid_pk, ticket_pk  # noqa: E402
from seqid_orm.sqlalchemy.types import SeqUUID, dialect_server_version, dialect_vendor  # noqa: E402
from seqid_orm.vendors import choose_prefix_layout  # noqa: E402
from tests.conftest import ASYNC_DRIVERS  # noqa: E402
from tests.sqlalchemy_adapter.test_alembic import SCRIPT_MAKO, autogenerate  # noqa: E402


@pytest.fixture
def sequence(engine):
    """A ticket sequence on the test's own database (the ticket table beside the app's tables)."""
    name = f"t-{secrets.token_hex(6)}"
    seq = TicketSequence(name, engine.url.render_as_string(hide_password=False), block_size=50)
    yield seq
    seq.close()
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name = :n"), {"n": name})


def make_model(table_name: str, sequence):
    class Base(DeclarativeBase):
        pass

    class Order(Base):
        __tablename__ = table_name
        id: Mapped[int] = ticket_pk(sequence)
        note: Mapped[str] = mapped_column(sa.String(20))

    return Base, Order


def test_ticket_pk_binds_its_sequence_to_the_column_and_refuses_keys_already_there(engine, sequence, table_name):
    """A counter behind the table (restored, re-created, or a table adopted without start=) is refused at
    the first insert over the engine instead of handing out keys the table holds (a block holding one is
    refused; keys beyond it are not its business); repair() moves it on."""
    from seqid_orm.errors import CounterBelowDataError

    Base, Order = make_model(table_name, sequence)
    Base.metadata.create_all(engine)
    table = Order.__table__
    try:
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"id": 3 + i, "note": "old"} for i in range(3)])
        # the first block, 1..50, holds the keys 3..5
        with Session(engine) as session, pytest.raises(sa.exc.StatementError, match="the key 5 ") as info:
            session.add(Order(note="new"))
            session.flush()
        assert isinstance(info.value.orig, CounterBelowDataError)  # SQLAlchemy wraps a default's error
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 3  # no partial row
        sequence.repair()
        with Session(engine) as session:
            session.add_all([Order(note="new") for _ in range(5)])
            session.commit()
            # the refused block stays spent: repair never lowers a counter
            assert sorted(session.scalars(sa.select(Order.id))) == [3, 4, 5, 51, 52, 53, 54, 55]
    finally:
        Base.metadata.drop_all(engine)


def test_ticket_pk_through_the_orm_unit_of_work(engine, sequence, table_name):
    Base, Order = make_model(table_name, sequence)
    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            orders = [Order(note=f"n{i}") for i in range(300)]
            session.add_all(orders)
            session.flush()
            made = [o.id for o in orders]
            session.commit()
        with engine.connect() as conn:
            in_db = conn.execute(sa.select(Order.__table__.c.id).order_by(Order.__table__.c.id)).scalars().all()
        assert made == in_db  # one process: insertion order is key order, as with an identity column
        assert made == list(range(made[0], made[0] + 300))
    finally:
        Base.metadata.drop_all(engine)


def test_ticket_pk_through_core_executemany(engine, sequence, table_name):
    Base, Order = make_model(table_name, sequence)
    Base.metadata.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(Order.__table__), [{"note": str(i)} for i in range(1000)])
            rows = conn.execute(sa.select(Order.__table__).order_by(Order.__table__.c.id)).all()
        assert [r.note for r in rows] == [str(i) for i in range(1000)]
        assert len({r.id for r in rows}) == 1000
    finally:
        Base.metadata.drop_all(engine)


def test_bulk_insert_takes_a_loads_tickets_at_once_and_still_binds_the_floor(engine, sequence, table_name):
    """bulk_insert asks the sequence for a load's ids in one call (blocks handed over as ranges): the
    keys run on as one process's identity column would, and a counter behind the table is refused
    before any row of the load is written, as the per-row default refuses it."""
    from seqid_orm.errors import CounterBelowDataError
    from seqid_orm.sqlalchemy import bulk_insert

    Base, Order = make_model(table_name, sequence)
    Base.metadata.create_all(engine)
    table = Order.__table__
    try:
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"id": 7, "note": "old"}])
        with engine.begin() as conn, pytest.raises(CounterBelowDataError, match="the key 7 "):
            bulk_insert(conn, table, [{"note": "new"} for _ in range(120)])
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 1  # no row of the load
        sequence.repair()
        with engine.begin() as conn:
            keys = bulk_insert(conn, table, [{"note": str(i)} for i in range(1_234)])
        with engine.connect() as conn:
            rows = conn.execute(sa.select(table.c.id, table.c.note).order_by(table.c.id)).all()
        assert keys == list(range(keys[0], keys[0] + 1_234)) and keys[0] > 7  # 25 blocks of 50, in order
        assert [r.note for r in rows[1:]] == [str(i) for i in range(1_234)] and [r.id for r in rows[1:]] == keys
    finally:
        Base.metadata.drop_all(engine)


def test_ticket_pk_with_an_async_session(pg_engine, table_name):
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    name = f"t-{secrets.token_hex(6)}"
    seq = TicketSequence(name, pg_engine.url.render_as_string(hide_password=False), block_size=20)
    Base, Order = make_model(table_name, seq)
    Base.metadata.create_all(pg_engine)
    url = pg_engine.url.set(drivername=ASYNC_DRIVERS["postgresql"])

    async def run() -> list[int]:
        engine = create_async_engine(url)
        async with AsyncSession(engine) as session:
            session.add_all([Order(note=str(i)) for i in range(100)])
            await session.commit()
            rows = (await session.execute(sa.select(Order.id, Order.note).order_by(Order.id))).all()
        await engine.dispose()
        return [(r.id, r.note) for r in rows]

    try:
        rows = asyncio.run(run())
        # one process, one server: keys increase in insertion order. Not dense: the flush draws on
        # the loop's thread, which never waits for the prefetch thread (whose floor reads need that
        # loop): it may reserve beside it, and a prefetched block that arrives lower is dropped.
        assert [note for _, note in rows] == [str(i) for i in range(100)]
        assert len({i for i, _ in rows}) == 100 and rows[0][0] == 1
    finally:
        seq.close()
        Base.metadata.drop_all(pg_engine)
        with pg_engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name = :n"), {"n": name})


@pytest.mark.parametrize("value", [1.5, True, -1, 2**63, "12a"])
def test_ticket_id_refuses_what_is_not_a_bigint_key(engine, table_name, value):
    table = sa.Table(table_name, sa.MetaData(), sa.Column("id", TicketID(), primary_key=True))
    table.create(engine)
    try:
        with pytest.raises(sa.exc.StatementError) as info, engine.begin() as conn:
            conn.execute(sa.insert(table), {"id": value})
        assert isinstance(info.value.orig, (ArgumentTypeError, InvalidIDError))
    finally:
        table.drop(engine)


def test_ticket_id_is_the_rowid_on_sqlite():
    from sqlalchemy.dialects import sqlite

    table = sa.Table("t", sa.MetaData(), sa.Column("id", TicketID(), primary_key=True))
    assert "id INTEGER NOT NULL" in str(sa.schema.CreateTable(table).compile(dialect=sqlite.dialect()))


def test_wrapping_prefix_keys_counted_by_a_ticket_sequence_land_in_prefix_order(engine, sequence, table_name):
    """uuid_sequence_nextval with a shared ticket counter instead of a database sequence; the
    database's ORDER BY groups the keys by prefix, in counter order (no wrap within 1,000 values)."""

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = table_name
        id: Mapped[object] = prefixed_uuid_pk(sequence, block_size=10, block_count=256)
        n: Mapped[int] = mapped_column()

    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            session.add_all([Item(n=i) for i in range(1000)])
            session.commit()
        with engine.connect() as conn:
            ids = conn.execute(sa.select(Item.__table__.c.id).order_by(Item.__table__.c.id)).scalars().all()
        dialect = engine.dialect
        layout = choose_prefix_layout(
            dialect_vendor(dialect), dialect_server_version(dialect), SeqUUID().storage_for(dialect)
        )
        prefixes = [prefix_of(i, 256, layout) for i in ids]
        # the counter handed out 1..1000 (a fresh sequence): the keys sort as their prefixes do
        expected = sorted(prefix_of(uuid_sequence_nextval(v, 10, 256, layout), 256, layout) for v in range(1, 1001))
        assert prefixes == expected and len(set(prefixes)) > 90
    finally:
        Base.metadata.drop_all(engine)


ENV_PY = """
from alembic import context
import sqlalchemy as sa
from seqid_orm.sqlalchemy import lease_table, ticket_table
from seqid_orm.sqlalchemy.alembic import include_object, render_item, writer

metadata = sa.MetaData()
if {in_metadata!r}:
    {kind}_table(metadata, {table!r})


def include_name(name, type_, parent_names):
    return type_ != "table" or name == {table!r}  # the test database is shared


connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_item=render_item,
    process_revision_directives=writer,
    include_name=include_name,
    include_object=include_object,
)
with context.begin_transaction():
    context.run_migrations()
"""


def alembic_config(tmp_path, table: str, in_metadata: bool, kind: str = "ticket") -> Config:
    (tmp_path / "versions").mkdir(exist_ok=True)
    (tmp_path / "env.py").write_text(textwrap.dedent(ENV_PY.format(table=table, in_metadata=in_metadata, kind=kind)))
    (tmp_path / "script.py.mako").write_text(SCRIPT_MAKO)
    config = Config()
    config.set_main_option("script_location", str(tmp_path))
    return config


def run(engine, config, fn, *args):
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        fn(config, *args)


def _use_tickets(url: str, table: str) -> None:
    store = SQLAlchemyTicketStore(url, table_name=table, create_table=False)
    with TicketSequence("orders", store, block_size=5) as seq:
        assert seq.next_ids(7) == list(range(1, 8))


def _use_leases(url: str, table: str) -> None:
    from seqid_orm.allocation.leases import WorkerLease
    from seqid_orm.allocation.stores.sqlalchemy import SQLAlchemyLeaseStore

    # a new table: its first holder waits out one ttl plus the tolerance (a forgotten holder), kept short
    # here; a ttl of one second leaves a loaded machine time to renew (0.2 s expired between the grant and
    # its first read under two CPU hogs, a right refusal but not what this test is about)
    store = SQLAlchemyLeaseStore(url, table_name=table, create_table=False)
    started = time.monotonic()
    with WorkerLease(store, "orders", max_workers=4, ttl=1.0, clock_tolerance=0.25) as lease:
        # the wait is counted from the grant's reply (mark_wait), which a loaded machine delays; the
        # wall time from before the call must cover the whole 1.25 s
        assert lease.worker_id in range(4)
        assert time.monotonic() - started >= 1.25 - 0.05 and lease.mark_wait > 0.5


@pytest.mark.parametrize(("kind", "use"), [("ticket", _use_tickets), ("lease", _use_leases)])
def test_alembic_autogenerate_writes_the_table_operation_and_then_nothing(engine, tmp_path, kind, use):
    table = f"{kind}s_{secrets.token_hex(4)}"
    config = alembic_config(tmp_path, table, in_metadata=True, kind=kind)
    try:
        script = autogenerate(engine, config, f"{kind}s")
        assert f"op.create_{kind}_table(table_name={table!r})" in script
        assert f"op.drop_{kind}_table(table_name={table!r})" in script
        assert "import seqid_orm.sqlalchemy.alembic" in script and "op.create_table" not in script
        run(engine, config, alembic_command.upgrade, "head")
        use(engine.url.render_as_string(hide_password=False), table)  # the migrated table works
        second = autogenerate(engine, config, "again")
        assert "op.create" not in second and "op.drop" not in second and "op.alter" not in second
        run(engine, config, alembic_command.downgrade, "base")
        assert not sa.inspect(engine).has_table(table)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))


def test_a_hand_written_ticket_operation_is_not_undone_by_autogenerate(engine, tmp_path):
    """Without the table in the metadata, include_object keeps autogenerate from dropping it."""
    config = alembic_config(tmp_path, "seqid_tickets", in_metadata=False)
    existed = sa.inspect(engine).has_table("seqid_tickets")
    (tmp_path / "versions" / "0001_tickets.py").write_text(
        textwrap.dedent(
            '''
            """tickets"""
            revision = "0001"
            down_revision = None
            from alembic import op
            import seqid_orm.sqlalchemy.alembic

            def upgrade():
                if not op.get_bind().dialect.has_table(op.get_bind(), "seqid_tickets"):
                    op.create_ticket_table()

            def downgrade():
                pass
            '''
        )
    )
    try:
        run(engine, config, alembic_command.upgrade, "head")
        assert sa.inspect(engine).has_table("seqid_tickets")
        second = autogenerate(engine, config, "again")
        assert "drop_table" not in second and "drop_ticket_table" not in second
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
            if not existed:
                conn.execute(sa.text("DROP TABLE IF EXISTS seqid_tickets"))
