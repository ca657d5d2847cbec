"""created_in: the rows made in [start, end), asked of the primary key, on each real database and
storage; the database's ORDER BY puts them in time order, and its plan reads the key's index."""

from __future__ import annotations

import datetime as dt
import json

import pytest

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

from seqid_orm import comb_at, uuid_time_nextval  # noqa: E402
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError  # noqa: E402
from seqid_orm.ids.prefixed import time_prefix_bounds  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, created_in  # noqa: E402

STORAGES = {"postgresql": ["native", "binary", "text", "hex"], "mysql": ["native", "binary", "hex"]}
START = dt.datetime(2026, 11, 3, 0, 0, tzinfo=dt.timezone.utc)
ROWS = 3_000


def _fill(engine, table):
    """ROWS keys made at times one minute apart (the key's own time: comb_at, random within its
    millisecond), in the layout the connection chose for the column; plus the edges of the range."""
    with engine.connect() as conn:
        layout = table.c.id.type.target(conn.dialect).layout
    whens = [START + dt.timedelta(minutes=n) for n in range(ROWS)]
    whens += [START + dt.timedelta(hours=10), START + dt.timedelta(hours=12, milliseconds=-1)]
    rows = [{"id": comb_at(when, layout), "made": _ms(when)} for when in whens]
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"ANALYZE {table.name}")
    return whens


def _ms(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)


def _plan(conn, engine, statement) -> str:
    """The database's plan for ``statement``, its bounds written in as SQL literals."""
    sql = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    prefix = {"postgresql": "EXPLAIN (FORMAT JSON) ", "mysql": "EXPLAIN FORMAT=JSON ", "sqlite": "EXPLAIN QUERY PLAN "}
    rows = conn.exec_driver_sql(prefix[engine.dialect.name] + sql.replace("%", "%%")).all()
    return json.dumps([list(map(str, r)) for r in rows]).replace("\\", "")


@pytest.mark.parametrize("storage_index", range(4))
def test_the_rows_of_a_time_range_come_from_the_keys_index_in_time_order(engine, metadata, table_name, storage_index):
    storages = STORAGES.get(engine.dialect.name, ["binary", "text", "hex"])
    if storage_index >= len(storages):
        return  # this database has fewer storages
    storage = storages[storage_index]
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(storage), primary_key=True),
        sa.Column("made", sa.BigInteger(), nullable=False),  # Unix ms: every database keeps them exactly
    )
    metadata.create_all(engine)
    whens = _fill(engine, table)
    low, high = START + dt.timedelta(hours=10), START + dt.timedelta(hours=12)
    with engine.connect() as conn:
        where = created_in(conn, table.c.id, low, high)
        statement = sa.select(table.c.made).where(where).order_by(table.c.id)
        made = conn.execute(statement).scalars().all()
        plan = _plan(conn, engine, sa.select(table.c.made).where(where))
    expected = sorted(_ms(w) for w in whens if low <= w < high)
    assert made == expected, storage  # every row of [low, high) and no other, in time order by ORDER BY id
    assert len(made) == 2 * 60 + 2  # the minutes, the edge at low again, the last ms before high
    name = engine.dialect.name
    if name == "postgresql":
        assert "Index" in plan and f"{table_name}_pkey" in plan, plan
    elif name == "mysql":
        assert '"key": "PRIMARY"' in plan.replace("\\", "") and '"access_type": "range"' in plan.replace("\\", ""), plan
    else:
        assert "USING PRIMARY KEY" in plan or "USING INDEX sqlite_autoindex" in plan, plan


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "seqid_range_orders"
    id: Mapped[object] = mapped_column(SeqUUID(), primary_key=True)


def test_a_mapped_attribute_and_a_session_and_the_refusals(sqlite_engine):
    Base.metadata.create_all(sqlite_engine)
    try:
        with Session(sqlite_engine) as session:
            now = dt.datetime.now(dt.timezone.utc)
            session.add_all([Order(id=comb_at(now - dt.timedelta(days=d))) for d in range(5)])
            session.commit()
            found = session.scalars(
                sa.select(Order).where(created_in(session, Order.id, now - dt.timedelta(days=2, hours=1), now))
            ).all()
            assert len(found) == 2  # made 1 and 2 days ago; today's is at `now`, excluded
            with pytest.raises(InvalidArgumentError, match="after end"):
                created_in(session, Order.id, now, now - dt.timedelta(days=1))
            with pytest.raises(InvalidArgumentError, match="timezone-aware"):
                created_in(session, Order.id, now.replace(tzinfo=None), now)
            with pytest.raises(ArgumentTypeError, match="SeqUUID, SortableText or SnowflakeID column"):
                created_in(session, sa.column("x", sa.Integer), now, now)
    finally:
        Base.metadata.drop_all(sqlite_engine)


def test_an_adopted_column_is_asked_for_its_adopted_keys(pg_engine, table_name):
    """A PostgreSQL column that held uuid4 keys gets adopted keys (one bits first, then the time):
    the bounds are adopted keys too, read from the column as its default reads it."""
    from seqid_orm.sqlalchemy import seq_uuid_default

    metadata = sa.MetaData()
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default),
        sa.Column("n", sa.Integer, nullable=False),
    )
    metadata.create_all(pg_engine)
    try:
        old = sa.create_engine(pg_engine.url, poolclass=sa.NullPool)  # the application before seqid
        with old.begin() as conn:
            conn.execute(
                sa.text(f"INSERT INTO {table_name} (id, n) SELECT gen_random_uuid(), -g FROM generate_series(1, 500) g")
            )
        old.dispose()
        before = dt.datetime.now(dt.timezone.utc)
        with pg_engine.begin() as conn:
            conn.execute(table.insert(), [{"n": i} for i in range(50)])  # new keys from the default
        after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(milliseconds=1)
        with pg_engine.connect() as conn:
            found = conn.execute(
                sa.select(table.c.n, table.c.id).where(created_in(conn, table.c.id, before, after)).order_by(table.c.id)
            ).all()
        assert [r.n for r in found] == list(range(50))  # only the new rows, in the order made
        assert all(r.id.version == 8 for r in found)  # adopted keys
    finally:
        metadata.drop_all(pg_engine)


def test_a_backfill_many_to_a_millisecond_keeps_its_order_in_the_database(engine, metadata, table_name):
    """Imported rows that keep their times, a hundred to each of five milliseconds (comb_at with
    bound="next" in the column's layout): ORDER BY id gives them back in the order they came, and
    created_in finds one millisecond's hundred."""
    table = sa.Table(
        table_name, metadata, sa.Column("id", SeqUUID(), primary_key=True), sa.Column("n", sa.Integer, nullable=False)
    )
    metadata.create_all(engine)
    with engine.connect() as conn:
        layout = table.c.id.type.target(conn.dialect).layout
    whens = [START + dt.timedelta(milliseconds=ms) for ms in range(5) for _ in range(100)]
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": comb_at(w, layout, "next"), "n": n} for n, w in enumerate(whens)])
    with engine.connect() as conn:
        assert conn.execute(sa.select(table.c.n).order_by(table.c.id)).scalars().all() == list(range(500))
        third = created_in(conn, table.c.id, START + dt.timedelta(milliseconds=2), START + dt.timedelta(milliseconds=3))
        assert conn.execute(sa.select(table.c.n).where(third).order_by(table.c.id)).scalars().all() == list(
            range(200, 300)
        )


@pytest.mark.parametrize("kind", ["bsv", "base32", "snowflake"])
def test_text_and_snowflake_keys_are_asked_by_their_own_bounds(engine, metadata, table_name, kind):
    """SortableText keys by their kind's bounds, SnowflakeID keys by their generator's profile:
    exactly [start, end) in time order, read through the key's index."""
    from seqid_orm import Snowflake
    from seqid_orm.ids.text import encode_base32, encode_bsv
    from seqid_orm.sqlalchemy import SnowflakeID, SortableText

    generator = Snowflake(worker_id=5)
    key_type = SnowflakeID() if kind == "snowflake" else SortableText(kind)
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", key_type, primary_key=True),
        sa.Column("made", sa.BigInteger, nullable=False),
    )
    metadata.create_all(engine)
    epoch_ticks = 621_355_968_000_000_000

    def key(when: dt.datetime, n: int) -> object:
        if kind == "snowflake":
            return generator.min_id_at(when) | n % 4096
        if kind == "base32":
            return encode_base32(comb_at(when))
        ticks = _ms(when) * 10_000 + epoch_ticks
        return encode_bsv(ticks.to_bytes(8, "big") + n.to_bytes(16, "big"))

    whens = [START + dt.timedelta(minutes=n) for n in range(ROWS)]
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": key(w, n), "made": _ms(w)} for n, w in enumerate(whens)])
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"ANALYZE {table.name}")
    low, high = START + dt.timedelta(hours=10), START + dt.timedelta(hours=12)
    with engine.connect() as conn:
        where = created_in(conn, table.c.id, low, high, generator=generator)
        made = conn.execute(sa.select(table.c.made).where(where).order_by(table.c.id)).scalars().all()
        plan = _plan(conn, engine, sa.select(table.c.made).where(where))
    assert made == sorted(_ms(w) for w in whens if low <= w < high), kind
    name = engine.dialect.name
    if name == "postgresql":
        assert "Index" in plan and f"{table_name}_pkey" in plan, plan
    elif name == "mysql":
        assert '"key": "PRIMARY"' in plan and '"access_type": "range"' in plan, plan
    else:
        assert "USING PRIMARY KEY" in plan or "USING INDEX sqlite_autoindex" in plan or "INTEGER PRIMARY KEY" in plan, (
            plan
        )
    with pytest.raises(ArgumentTypeError, match="generator="), engine.connect() as conn:
        created_in(conn, sa.Column("id", SnowflakeID()), low, high)


@pytest.mark.parametrize("storage_index", range(4))
def test_time_prefixed_keys_are_asked_by_their_prefixes_across_a_wrap(engine, metadata, table_name, storage_index):
    """uuid_time_nextval keys (60-second intervals, 256 of them: a lap of 256 minutes), one every six
    seconds for 300 minutes from a lap's start; a range over the wrap is two ranges of the key's index,
    and holds the rows of the lap before that share its prefixes, as the family's keys tell no lap."""
    storages = STORAGES.get(engine.dialect.name, ["binary", "text", "hex"])
    if storage_index >= len(storages):
        return
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(storages[storage_index]), primary_key=True),
        sa.Column("second", sa.Integer(), nullable=False),
    )
    metadata.create_all(engine)
    lap = 256 * 60
    start = dt.datetime.fromtimestamp(int(START.timestamp()) // lap * lap, dt.timezone.utc)  # prefix 0
    with engine.connect() as conn:
        layout = table.c.id.type.target(conn.dialect).prefix_layout
    seconds = range(0, 300 * 60, 6)
    rows = [
        {"id": uuid_time_nextval(60, 256, layout, now=start + dt.timedelta(seconds=s)), "second": s} for s in seconds
    ]
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"ANALYZE {table.name}")
    low, high = start + dt.timedelta(minutes=250), start + dt.timedelta(minutes=262)
    with engine.connect() as conn:
        where = created_in(conn, table.c.id, low, high, time_prefix=(60, 256))
        found = conn.execute(sa.select(table.c.second).where(where).order_by(table.c.id)).scalars().all()
        plan = _plan(conn, engine, sa.select(table.c.second).where(where))
    # every row of [low, high), and those of the lap before with the same prefixes (minutes 0-5)
    assert sorted(found) == [s for s in seconds if 250 * 60 <= s < 262 * 60 or s < 6 * 60]
    prefixes = [s // 60 % 256 for s in found]
    assert prefixes == sorted(prefixes)  # in key order by prefix: 0-5, then 250-255 (the rest is random)
    name = engine.dialect.name
    if name == "postgresql":
        assert f"{table_name}_pkey" in plan, plan
    elif name == "mysql":
        assert '"key": "PRIMARY"' in plan and '"access_type": "range"' in plan, plan
    else:
        assert "USING PRIMARY KEY" in plan or "USING INDEX sqlite_autoindex" in plan, plan


def test_time_prefix_bounds_are_one_range_two_or_the_whole_lap():
    lap_start = dt.datetime.fromtimestamp(1_000 * 256 * 60, dt.timezone.utc)
    one = time_prefix_bounds(lap_start, lap_start + dt.timedelta(minutes=3), 60, 256)
    assert [(lo.bytes[0], hi.bytes[0]) for lo, hi in one] == [(0, 2)]
    assert one[0][0].bytes[1:] == bytes([0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0])  # version and variant
    wrap = time_prefix_bounds(lap_start - dt.timedelta(minutes=1), lap_start + dt.timedelta(minutes=1), 60, 256)
    assert [(lo.bytes[0], hi.bytes[0]) for lo, hi in wrap] == [(255, 255), (0, 0)]
    whole = time_prefix_bounds(lap_start, lap_start + dt.timedelta(minutes=256), 60, 256)
    assert [(lo.bytes[0], hi.bytes[0]) for lo, hi in whole] == [(0, 255)]
    assert time_prefix_bounds(lap_start, lap_start, 60, 256) == []
    half = time_prefix_bounds(lap_start, lap_start + dt.timedelta(seconds=60, microseconds=1), 60, 256)
    assert [(lo.bytes[0], hi.bytes[0]) for lo, hi in half] == [(0, 1)]  # the second at 60 s is in the range
    with pytest.raises(InvalidArgumentError, match="after end"):
        time_prefix_bounds(lap_start, lap_start - dt.timedelta(seconds=1))
    with pytest.raises(InvalidArgumentError, match="timezone-aware"):
        time_prefix_bounds(dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 2))
    with pytest.raises(ArgumentTypeError, match="time_prefix"):
        created_in(None, sa.Column("id", sa.Integer), lap_start, lap_start, time_prefix=(60, 256))
    # a backfill: the key of a given time has that time's prefix, whether it is asked as a datetime or seconds
    when = lap_start + dt.timedelta(minutes=7, seconds=5)
    as_datetime, as_seconds = uuid_time_nextval(60, 256, now=when), uuid_time_nextval(60, 256, now=when.timestamp())
    assert as_datetime.bytes[0] == as_seconds.bytes[0] == 7
    with pytest.raises(InvalidArgumentError, match="1970"):
        uuid_time_nextval(now=dt.datetime(1969, 12, 31, tzinfo=dt.timezone.utc))
