"""bulk_insert on each real database: keys made in one batch in the connection's layout, rows through the
engine's fast path (PostgreSQL's binary COPY), everything checked before anything is sent, one transaction."""

from __future__ import annotations

import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, bulk_insert  # noqa: E402
from tests.ordering import check_time_ordered  # noqa: E402


@pytest.fixture
def table(engine, table_name):
    metadata = sa.MetaData()
    made = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(), primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("payload", sa.String(100)),
        sa.Column("ref", SeqUUID(), nullable=True),
    )
    metadata.create_all(engine)
    yield made
    metadata.drop_all(engine)


def statements(engine):
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    return seen, lambda: sa.event.remove(engine, "before_cursor_execute", record)


def test_rows_go_in_with_keys_in_the_connections_layout_and_order(engine, table):
    rows = [{"n": i, "payload": "x" * 100, "ref": None} for i in range(12_345)]
    seen, stop = statements(engine)
    try:
        with engine.begin() as conn:
            keys = bulk_insert(conn, table, rows)
    finally:
        stop()
    assert len(keys) == len(set(keys)) == 12_345 and all(isinstance(k, uuid.UUID) for k in keys)
    with engine.connect() as conn:
        stored = conn.execute(sa.select(table.c.id, table.c.n).order_by(table.c.id)).all()
    assert [r.n for r in stored] == list(range(12_345))  # ORDER BY id, asked of the database: the rows' order
    assert [r.id for r in stored] == keys
    inserts = [s for s in seen if s.lstrip().upper().startswith("INSERT")]
    if engine.dialect.name == "postgresql":
        assert inserts == []  # COPY FROM STDIN, not an INSERT
    else:
        assert 1 <= len(inserts) <= 2  # one executemany per 10,000 rows


def test_bad_rows_raise_before_anything_is_sent(engine, table):
    good = {"n": 1, "payload": "a", "ref": None}
    cases = [
        ([good, {"n": 2, "payload": "b", "ref": "zzz"}], InvalidIDError),  # SeqUUID's own check, as an INSERT's
        ([good, {"n": 2, "payload": "b"}], InvalidArgumentError),  # a row without a column the others give
        ([good, {**good, "nope": 1}], InvalidArgumentError),
        ([{"nope": 1}], InvalidArgumentError),
        ([{1: 1}], InvalidArgumentError),  # a column's position is not its name
        ([good, ("n", 2)], ArgumentTypeError),
        ([("n", 99)], ArgumentTypeError),  # the first row too, before its items are read as column names
    ]
    for rows, error in cases:
        seen, stop = statements(engine)
        try:
            with pytest.raises(error), engine.begin() as conn:
                bulk_insert(conn, table, rows)
        finally:
            stop()
        assert not [s for s in seen if "INSERT" in s.upper() or "COPY" in s.upper()], rows
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def test_a_load_that_fails_midway_leaves_none_of_its_rows(engine, table):
    given = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    with engine.begin() as conn:
        bulk_insert(conn, table, [{"id": given, "n": 0, "payload": "kept", "ref": None}])
    rows = [{"id": uuid.uuid4(), "n": i, "payload": "p", "ref": None} for i in range(1, 5000)]
    rows[4321]["id"] = given  # the server refuses this one, after accepting the others
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        bulk_insert(conn, table, rows)
    with engine.connect() as conn:
        assert conn.execute(sa.select(table.c.payload)).scalars().all() == ["kept"]


def test_inside_the_callers_transaction_a_failed_load_rolls_back_to_its_savepoint(engine, table):
    with engine.begin() as conn:
        bulk_insert(conn, table, [{"n": 1, "payload": "before", "ref": None}])
        dup = bulk_insert(conn, table, [{"n": 2, "payload": "second", "ref": None}])[0]
        with pytest.raises(sa.exc.IntegrityError):
            bulk_insert(conn, table, [{"id": dup, "n": 3, "payload": "dup", "ref": None}])
        bulk_insert(conn, table, [{"n": 4, "payload": "after", "ref": None}])
    with engine.connect() as conn:
        kept = conn.execute(sa.select(table.c.payload).order_by(table.c.id)).scalars().all()
    assert kept == ["before", "second", "after"]


def test_refusals_of_the_arguments(engine, table):
    with engine.begin() as conn:
        assert bulk_insert(conn, table, []) == []
        with pytest.raises(ArgumentTypeError):
            bulk_insert(conn, "a table", [{"n": 1}])
    with pytest.raises(ArgumentTypeError):
        bulk_insert(engine, table, [{"n": 1}])  # type: ignore[arg-type]


def test_a_driver_with_named_parameters_gets_each_value_under_its_name(tmp_path):
    """The values go to the driver already converted, matched to the statement's parameter names where
    the driver takes names (sqlite3 with SQLAlchemy's ``paramstyle="named"``, as psycopg2 or oracledb would)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'named.sqlite3'}", paramstyle="named")
    metadata = sa.MetaData()
    table = sa.Table(
        "named",
        metadata,
        sa.Column("id", SeqUUID(), primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("ref", SeqUUID(), nullable=True),
    )
    metadata.create_all(engine)
    refs = [uuid.uuid4() for _ in range(50)]
    try:
        with engine.begin() as conn:
            keys = bulk_insert(conn, table, [{"ref": ref, "n": i} for i, ref in enumerate(refs)])
        with engine.connect() as conn:
            stored = conn.execute(sa.select(table.c.id, table.c.n, table.c.ref).order_by(table.c.id)).all()
        assert [(r.id, r.n, r.ref) for r in stored] == list(zip(keys, range(50), refs, strict=True))
    finally:
        engine.dispose()


def test_uuid_columns_other_than_the_key_keep_their_values_and_nulls(engine, table):
    refs = [uuid.uuid4() if i % 3 else None for i in range(5_000)]
    with engine.begin() as conn:
        keys = bulk_insert(conn, table, [{"n": i, "payload": None, "ref": r} for i, r in enumerate(refs)])
    with engine.connect() as conn:
        stored = conn.execute(sa.select(table.c.id, table.c.ref, table.c.payload).order_by(table.c.n)).all()
    assert [r.id for r in stored] == keys
    assert [r.ref for r in stored] == refs
    assert {r.payload for r in stored} == {None}


def test_a_load_whose_keys_it_makes_fails_midway_and_leaves_none_of_its_rows(engine, table):
    """The keys are made while the rows stream (PostgreSQL): a row the server refuses late in the load
    still takes every row of it back."""
    rows = [{"n": i, "payload": "p", "ref": None} for i in range(9_000)]
    rows[8_765]["n"] = None  # NOT NULL: refused by the server, not by the column type
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        bulk_insert(conn, table, rows)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def test_keys_left_to_the_database_go_in_one_batched_statement(engine, table_name):
    """make_keys=False with DatabaseSeqUUID: the INSERT reads no key back (a RETURNING makes PyMySQL and
    mysqlclient send an executemany row by row, 16x BIGINT's time at scale), and the database's keys
    come out in the order the rows went in."""
    from seqid_orm.sqlalchemy import DatabaseSeqUUID

    storage = "text" if engine.dialect.name == "sqlite" else None  # SQLite < 3.41 has no BLOB default
    metadata = sa.MetaData()
    made = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(storage), primary_key=True, server_default=DatabaseSeqUUID(storage)),
        sa.Column("n", sa.Integer, nullable=False),
    )
    metadata.create_all(engine)
    seen, stop = statements(engine)
    try:
        with engine.begin() as conn:
            assert bulk_insert(conn, made, [{"n": i} for i in range(3_000)], make_keys=False) == [None] * 3_000
    finally:
        stop()
        with engine.connect() as conn:
            stored = conn.execute(sa.select(made.c.n, made.c.id).order_by(made.c.id)).all()
        metadata.drop_all(engine)
    assert not [s for s in seen if "RETURNING" in s.upper()]
    assert len({r.id for r in stored}) == 3_000
    check_time_ordered(engine.dialect.name, engine.dialect.server_version_info or (), [tuple(r) for r in stored])


STORAGES = {"postgresql": ["native", "binary", "text", "hex"], "mysql": ["native", "binary", "text", "hex"]}


def check_every_storage(engine, table_name):
    for storage in STORAGES.get(engine.dialect.name, ["binary", "text", "hex"]):
        metadata = sa.MetaData()
        made = sa.Table(
            f"{table_name}_{storage}",
            metadata,
            sa.Column("id", SeqUUID(storage), primary_key=True),
            sa.Column("n", sa.Integer, nullable=False),
            sa.Column("code", sa.CHAR(3)),  # no binary form in psycopg: PostgreSQL takes COPY's text form
        )
        metadata.create_all(engine)
        try:
            with engine.begin() as conn:
                keys = bulk_insert(conn, made, [{"n": i, "code": f"{i % 1000:03}"} for i in range(2_500)])
            with engine.connect() as conn:
                stored = conn.execute(sa.select(made.c.id, made.c.n, made.c.code).order_by(made.c.id)).all()
        finally:
            metadata.drop_all(engine)
        assert [r.n for r in stored] == list(range(2_500)), storage  # ORDER BY id: the order they were made
        assert [r.id for r in stored] == keys, storage
        assert [r.code for r in stored] == [f"{i % 1000:03}" for i in range(2_500)], storage


def test_keys_made_from_ints_read_back_as_made_on_every_storage(engine, table_name):
    """Keys bulk_insert makes go to the driver as bytes or hex made straight from their ints (no
    uuid.UUID) where the driver takes those: on every storage they read back as returned, in order."""
    check_every_storage(engine, table_name)


@pytest.mark.mysql
@pytest.mark.mysqlclient
def test_keys_made_from_ints_through_mysqlclient(table_name):
    """mysqlclient takes MariaDB's UUID as hex where PyMySQL takes bytes."""
    from tests.conftest import MYSQL_URL
    from tests.system import need

    need("mysqlclient")
    engine = sa.create_engine(MYSQL_URL.replace("+pymysql", "+mysqldb"))
    try:
        check_every_storage(engine, table_name)
    finally:
        engine.dispose()
