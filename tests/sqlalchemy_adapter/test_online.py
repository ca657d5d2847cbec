"""``op.add_seqid_column`` on a table of 100,000 rows while the application reads and writes it, on the shared
PostgreSQL and MariaDB, through Alembic's command API in a process of its own (benchmarks/online.py's harness
at the tests' size: tests/traffic.py is the application, the old code inserting without the new column, the
new code with it once it is there, a reader by key, each statement allowed to wait 1 s for a lock on
PostgreSQL and 2 s on MariaDB, the issue's targets, so any longer wait is an error the database reports).
Then a run killed at a random point of its batches and run again: every row written exactly once (an audit
trigger counts each write of the key), none missed.  And the refusal of a big storage conversion.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import secrets
import threading
import time
import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from benchmarks.online import kill_and_resume, make_table, measure, project  # noqa: E402

ROWS = 100_000
WAIT_MS = {"postgresql": 1000, "mysql": 2000}


@pytest.fixture(params=["pg_engine", "mysql_engine"])
def big(request, tmp_path):
    """(engine, URL, table): a table of ROWS rows with created_at (dropped after, with what the runs left)."""
    engine = request.getfixturevalue(request.param)
    table = f"online_{os.getpid()}_{int(time.time() * 1000) % 100000}"
    make_table(engine, table, ROWS)
    try:
        yield engine, engine.url.render_as_string(hide_password=False), table
    finally:
        with engine.begin() as conn:
            for name in (table, f"{table}_version", f"{table}_audit", f"seqid_fill_{table}_seq_id"):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


def _check_column(engine, table: str) -> None:
    """Every row has a key, unique, NOT NULL, and the old rows sort by their time; old code still inserts."""
    with engine.connect() as conn:
        total, filled, distinct = conn.exec_driver_sql(
            f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {table}"
        ).one()
        assert total == filled == distinct and total >= ROWS
        times = conn.exec_driver_sql(f"SELECT created_at FROM {table} WHERE note = 'old' ORDER BY seq_id").scalars()
        times = times.all()
        assert times == sorted(times)  # the old rows in the index in the order they were made
        inspector = sa.inspect(conn)
        column = next(c for c in inspector.get_columns(table) if c["name"] == "seq_id")
        assert column["nullable"] is False
        uniques = [u["column_names"] for u in inspector.get_unique_constraints(table)]
        uniques += [i["column_names"] for i in inspector.get_indexes(table) if i["unique"]]
        assert ["seq_id"] in uniques
    with engine.begin() as conn:  # the application's old code, after the migration: its rows get keys
        conn.exec_driver_sql(f"INSERT INTO {table} (created_at, note) VALUES (CURRENT_TIMESTAMP, 'after')")
        assert conn.exec_driver_sql(f"SELECT seq_id FROM {table} WHERE note = 'after'").scalar_one() is not None


@pytest.mark.slow
def test_the_column_is_added_and_filled_while_the_application_reads_and_writes(big, tmp_path):
    engine, url, table = big
    seen = measure(url, table, tmp_path, project(tmp_path, table, online=True), wait_ms=WAIT_MS[engine.dialect.name])
    assert seen["errors"] == [], seen["errors"][:3]  # no statement waited past its lock timeout, none failed
    assert seen["returncode"] == 0, seen["said"]
    assert "(done)" in seen["said"] and "rows/s" in seen["said"]  # the progress on the console
    assert seen["inserts"] > 10 and seen["reads"] > 10 and seen["new_inserts"] > 10  # old and new code wrote
    _check_column(engine, table)


@pytest.mark.slow
def test_a_migration_killed_in_its_batches_and_run_again_writes_every_row_once(big, tmp_path):
    """The column is there (a first run got that far), an audit trigger counts every write of a key; the run
    is killed at a random point of its batches, run again, and finishes: each old row written exactly once."""
    engine, url, table = big
    done = kill_and_resume(engine, url, table, tmp_path, ROWS)
    assert done["rerun_ok"] and done["rerun_said"], done  # it said it resumed
    assert 0 < done["killed_after_rows"] < ROWS, done  # killed half-way
    assert (done["rows_written_twice"], done["rows_written"], done["rows_missing"]) == (0, ROWS, 0), done
    assert not done["progress_table_left"]  # the progress it kept is gone
    _check_column(engine, table)


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_a_storage_conversion_of_a_big_table_is_refused_naming_the_online_ways(engine, table_name):
    """convert_uuid_storage rewrites the table while holding it: above REWRITE_UP_TO_ROWS rows a conversion that
    cannot run online (here to BINARY(16) storage; a text key made uuid runs online: test_rekey_text.py) is
    refused before anything changes, naming the ways that touch no row or hold nothing, unless
    allow_rewrite=True."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import seqid_orm.sqlalchemy.alembic  # noqa: F401 - registers op.convert_uuid_storage, as env.py does
    from seqid_orm.errors import InvalidArgumentError
    from seqid_orm.schema.conversions import REWRITE_UP_TO_ROWS

    pg = engine.dialect.name == "postgresql"
    _hex_key_table(engine, table_name, REWRITE_UP_TO_ROWS + 50_000)
    try:
        with engine.begin() as conn, pytest.raises(InvalidArgumentError) as refused:
            Operations(MigrationContext.configure(conn)).convert_uuid_storage(
                table_name, "id", from_storage="hex", to_storage="binary"
            )
        said = str(refused.value)
        assert f"rewrites {table_name} (about" in said and "allow_rewrite=True" in said
        assert 'seq_uuid_pk(storage="...")' in said and ("pgroll" in said if pg else "gh-ost" in said)
        with engine.connect() as conn:
            kind = next(c["type"] for c in sa.inspect(conn).get_columns(table_name) if c["name"] == "id")
        assert isinstance(kind, sa.CHAR)  # nothing changed
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table_name}")


def _hex_key_table(engine, table_name: str, rows: int, autovacuum: bool = True) -> None:
    """A table of ``rows`` text keys (32 hex digits), analyzed."""
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        if pg:
            conn.exec_driver_sql(
                f"CREATE TABLE {table_name} (id char(32) PRIMARY KEY) WITH (autovacuum_enabled = {autovacuum})"
            )
            conn.exec_driver_sql(
                f"INSERT INTO {table_name} SELECT replace(gen_random_uuid()::text, '-', '') "
                f"FROM generate_series(1, {rows})"
            )
        else:
            conn.exec_driver_sql(f"CREATE TABLE {table_name} (id char(32) PRIMARY KEY)")
            conn.exec_driver_sql(
                f"INSERT INTO {table_name} SELECT lower(replace(uuid(), '-', '')) FROM seq_1_to_{rows}"
            )
        conn.exec_driver_sql(f"ANALYZE {table_name}" if pg else f"ANALYZE TABLE {table_name}")


@contextlib.contextmanager
def _overestimated(engine, table_name: str, rows: int, estimate: int):
    """A table of ``rows`` keys that the planner puts at about ``estimate`` while this lasts. PostgreSQL:
    ANALYZE saw ``estimate`` rows before the rest were deleted (autovacuum off, so nothing counts them
    again). InnoDB keeps its sampled count in step with each insert and delete as it is made: another
    transaction holds ``estimate - rows`` rows inserted and not committed, which no other reader sees."""
    if engine.dialect.name == "postgresql":
        _hex_key_table(engine, table_name, estimate, autovacuum=False)
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f"DELETE FROM {table_name} WHERE id IN (SELECT id FROM {table_name} LIMIT {estimate - rows})"
            )
        yield
        return
    _hex_key_table(engine, table_name, rows)
    with engine.connect() as other:
        other.exec_driver_sql(
            f"INSERT INTO {table_name} SELECT lower(replace(uuid(), '-', '')) FROM seq_1_to_{estimate - rows}"
        )
        try:
            yield
        finally:
            other.rollback()


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_a_table_its_estimate_puts_past_the_line_is_judged_by_its_rows(engine, table_name):
    """The refusal turns on the rows, not on the planner's sample of them: a table of exactly
    REWRITE_UP_TO_ROWS rows whose estimate says 50,000 more is counted (read up to the line and one more)
    and converts (InnoDB put such a table at 100,001 in CI and refused it); a role that may not read the
    table is judged by the estimate."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import seqid_orm.sqlalchemy.alembic
    from seqid_orm.schema.conversions import REWRITE_UP_TO_ROWS
    from seqid_orm.schema.online import rows_past, table_rows

    vendor = "postgresql" if engine.dialect.name == "postgresql" else "mariadb"
    try:
        with _overestimated(engine, table_name, REWRITE_UP_TO_ROWS, REWRITE_UP_TO_ROWS + 50_000):
            with engine.connect() as conn:
                fetch = seqid_orm.sqlalchemy.alembic.online._OnlineIO(conn).fetch
                estimate = table_rows(fetch, vendor, table_name)
                counted = rows_past(fetch, vendor, table_name, REWRITE_UP_TO_ROWS)
                with_less_room = rows_past(fetch, vendor, table_name, REWRITE_UP_TO_ROWS - 1)
            unreadable = _estimate_as_a_role_without_select(engine, table_name, vendor)
            if vendor == "postgresql":  # MariaDB's ALTER waits for the open insert to end
                with engine.begin() as conn:
                    Operations(MigrationContext.configure(conn)).convert_uuid_storage(
                        table_name, "id", from_storage="hex"
                    )
        assert estimate is not None and estimate > REWRITE_UP_TO_ROWS + 25_000  # the sample still sees them
        assert counted == REWRITE_UP_TO_ROWS and with_less_room == estimate  # past 99,999: the estimate
        assert unreadable == estimate
        if vendor == "mariadb":  # its estimate back at the rows, give or take ANALYZE's sample (CI's 100,001)
            with engine.begin() as conn:
                Operations(MigrationContext.configure(conn)).convert_uuid_storage(table_name, "id", from_storage="hex")
        with engine.connect() as conn:
            kind = next(c["type"] for c in sa.inspect(conn).get_columns(table_name) if c["name"] == "id")
            left = conn.execute(sa.text(f"SELECT COUNT(*) FROM {table_name}")).scalar_one()
        assert not isinstance(kind, sa.CHAR) and left == REWRITE_UP_TO_ROWS  # converted, every row kept
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table_name}")


def _estimate_as_a_role_without_select(engine, table_name: str, vendor: str) -> int | None:
    """What :func:`rows_past` says of ``table_name`` to a role that may alter it but not read it."""
    from seqid_orm.schema.conversions import REWRITE_UP_TO_ROWS
    from seqid_orm.schema.online import rows_past
    from seqid_orm.sqlalchemy.alembic.online import _OnlineIO

    role = f"{table_name}_r"
    if vendor == "postgresql":
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE ROLE {role}")
            conn.commit()
            try:
                conn.exec_driver_sql(f"SET ROLE {role}")
                return rows_past(_OnlineIO(conn).fetch, vendor, table_name, REWRITE_UP_TO_ROWS)
            finally:
                conn.rollback()
                conn.exec_driver_sql("RESET ROLE")
                conn.exec_driver_sql(f"DROP ROLE {role}")
                conn.commit()
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE USER '{role}'@'%'"))
        conn.execute(sa.text(f"GRANT ALTER, INSERT ON {engine.url.database}.{table_name} TO '{role}'@'%'"))
    try:
        other = sa.create_engine(engine.url.set(username=role, password=""))
        try:
            with other.connect() as conn:
                return rows_past(_OnlineIO(conn).fetch, vendor, table_name, REWRITE_UP_TO_ROWS)
        finally:
            other.dispose()
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP USER '{role}'@'%'"))


class _ScriptedIO:
    """The online steps' I/O on an autocommit connection, which runs ``meanwhile`` once, right after the
    statement that creates the progress table: the moment another migration's end used to drop a progress
    table shared by every backfill, before this one had written its row in it."""

    def __init__(self, conn, meanwhile) -> None:
        self.conn, self.meanwhile = conn, meanwhile

    def fetch(self, sql, params):
        return [tuple(row) for row in self.conn.execute(sa.text(sql), params).all()]

    def run(self, sql, params):
        count = (self.conn.execute(sa.text(sql), params) if params else self.conn.exec_driver_sql(sql)).rowcount
        if "CREATE TABLE IF NOT EXISTS" in sql and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return count

    def socket_ends(self):
        from seqid_orm.calls.drivers import socket_ends

        return socket_ends(self.conn.connection.dbapi_connection)

    @contextlib.contextmanager
    def transaction(self):  # the server's own: an autocommit connection's begin() is SQLAlchemy's alone
        self.conn.exec_driver_sql("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.exec_driver_sql("ROLLBACK")
            raise
        self.conn.exec_driver_sql("COMMIT")


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_two_columns_filled_at_once_keep_their_own_progress(engine):
    """Two tables' columns added at once (two tenants' migrations, two applications in one database): the
    one that ends while the other has just begun leaves the other's progress alone, and both finish with
    every row keyed and no progress table left."""
    from seqid_orm.schema.online import OnlineColumn, add_column
    from seqid_orm.sqlalchemy import SeqUUID

    where = SeqUUID().target(engine.dialect)
    pg = engine.dialect.name == "postgresql"
    tables = [f"t_{secrets.token_hex(4)}" for _ in range(2)]
    columns = [
        OnlineColumn(
            vendor=where.vendor,
            table=name,
            column="seq_id",
            keys=("id",),
            column_type=str(SeqUUID().compile(dialect=engine.dialect)),
            default_sql=where.server_default.sql,
            storage=where.storage,
            layout=where.layout,
            key_casts=("bigint",) if pg else (),
        )
        for name in tables
    ]
    with engine.begin() as conn:
        for name in tables:
            conn.exec_driver_sql(f"CREATE TABLE {name} (id bigint PRIMARY KEY)")
            conn.exec_driver_sql(f"INSERT INTO {name} (id) VALUES " + ", ".join(f"({i})" for i in range(1, 251)))
    said: list[str] = []
    try:
        with engine.connect() as mine, engine.connect() as theirs:
            mine = mine.execution_options(isolation_level="AUTOCOMMIT")
            theirs = theirs.execution_options(isolation_level="AUTOCOMMIT")
            other = _ScriptedIO(theirs, None)
            io = _ScriptedIO(mine, lambda: add_column(other, columns[1], batch_size=100, say=said.append))
            add_column(io, columns[0], batch_size=100, say=said.append)
            assert io.meanwhile is None  # the other migration ran, in the middle of this one
            names = set(sa.inspect(mine).get_table_names())
        for name in tables:
            with engine.connect() as conn:
                total, keyed, distinct = conn.exec_driver_sql(
                    f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {name}"
                ).one()
            assert total == keyed == distinct == 250, name
        assert not {c.progress_table for c in columns} & names  # each dropped its own at its end
        assert sum("(done)" in line for line in said) == 2
    finally:
        with engine.begin() as conn:
            for column in columns:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {column.progress_table}")
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {column.table}")


def test_the_unique_index_waits_for_an_older_transaction_instead_of_failing(pg_engine):
    """PostgreSQL's concurrent index build waits for every transaction of the database with an older
    snapshot, another table's included.  Under the DDL's half-second lock timeout that wait was cut short,
    left an invalid index, and the next attempt failed on its name (``DuplicateTable``: CI, beside other
    tests' transactions).  The build stops no reader or writer, so it waits, watched here from this thread:
    still waiting three timeouts on, done once the transaction ends, the index valid."""
    from seqid_orm.schema.online import LOCK_TIMEOUT_MS, OnlineColumn, add_column
    from seqid_orm.sqlalchemy import SeqUUID

    where = SeqUUID().target(pg_engine.dialect)
    table = f"t_{secrets.token_hex(4)}"
    col = OnlineColumn(
        vendor=where.vendor,
        table=table,
        column="seq_id",
        keys=("id",),
        column_type="uuid",
        default_sql=where.server_default.sql,
        storage=where.storage,
        layout=where.layout,
        key_casts=("bigint",),
    )
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (id bigint PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {table} (id) SELECT generate_series(1, 500)")
    outcome: list[BaseException | None] = []

    def migrate() -> None:
        try:
            with pg_engine.connect() as conn:
                add_column(_ScriptedIO(conn.execution_options(isolation_level="AUTOCOMMIT"), None), col, say=str)
            outcome.append(None)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    try:
        with pg_engine.connect() as holder, pg_engine.connect() as watch:
            holder.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.exec_driver_sql("SELECT count(*) FROM pg_class").scalar()  # a snapshot, on no table of ours
            worker = threading.Thread(target=migrate, daemon=True)
            worker.start()
            waited_since = None
            deadline = time.monotonic() + 60
            while worker.is_alive() and time.monotonic() < deadline:
                waiting = watch.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE 'CREATE UNIQUE INDEX CONCURRENTLY%' AND query LIKE :t"
                    ),
                    {"t": f"%{table}%"},
                ).scalar()
                watch.rollback()
                if waiting and waited_since is None:
                    waited_since = time.monotonic()
                if waited_since is not None and time.monotonic() - waited_since > 3 * LOCK_TIMEOUT_MS / 1000:
                    break
                time.sleep(0.05)
            assert waited_since is not None, outcome  # the build waited for the older transaction
            assert worker.is_alive(), outcome  # and still waits, three timeouts on
            holder.exec_driver_sql("COMMIT")
            worker.join(60)
        assert not worker.is_alive() and outcome == [None], outcome
        with pg_engine.connect() as conn:
            valid = conn.exec_driver_sql(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                f"WHERE i.indrelid = '{table}'::regclass AND c.relname = '{col.index_name}'"
            ).scalar_one()
            total, keyed = conn.exec_driver_sql(f"SELECT count(*), count(DISTINCT seq_id) FROM {table}").one()
        assert valid and total == keyed == 500
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {col.progress_table}")
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")


AUTOGENERATE_ENV = """
from alembic import context
import sqlalchemy as sa
from seqid_orm.sqlalchemy import DatabaseSeqUUID, SeqUUID
from seqid_orm.sqlalchemy.alembic import render_item

metadata = sa.MetaData()
sa.Table(
    "{table}",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("created_at", sa.DateTime),
    sa.Column("seq_id", SeqUUID({storage}), nullable=False{extra}),
)
engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=sa.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_item=render_item,
        include_name=lambda name, type_, parents: type_ != "table" or name == "{table}",
        version_table="{table}_version",
    )
    with context.begin_transaction():
        context.run_migrations()
"""


@pytest.mark.parametrize("engine", ["sqlite", "postgresql", "mysql"], indirect=True)
@pytest.mark.parametrize(
    ("extra", "written"),
    [
        (", unique=True", "op.add_seqid_column('{table}', 'seq_id'{storage}, server_default=False)"),
        (
            ", unique=True, server_default=DatabaseSeqUUID({storage_arg})",
            "op.add_seqid_column('{table}', 'seq_id'{storage})",
        ),
        ("", "op.add_seqid_column('{table}', 'seq_id'{storage}, server_default=False, unique=False)"),
    ],
    ids=["unique", "with-database-default", "not-unique"],
)
def test_autogenerate_writes_a_key_column_added_to_a_table_with_rows_as_the_online_operation(
    engine, tmp_path, table_name, extra, written
):
    """A non-null SeqUUID column added to a model whose table has rows: autogenerate writes
    op.add_seqid_column (Alembic's add_column(..., nullable=False) fails on the first row), as the metadata
    declares it; upgrade fills every row, a second autogenerate finds nothing, downgrade takes it away."""
    from alembic import command
    from alembic.config import Config

    url = engine.url.render_as_string(hide_password=False)
    storage = "'hex'" if engine.dialect.name == "sqlite" else ""  # SQLite < 3.41 cannot build a BLOB default
    extra, written = (
        extra.format(storage_arg=storage),
        written.format(table=table_name, storage=storage and f", storage={storage}"),
    )
    (tmp_path / "versions").mkdir()
    (tmp_path / "env.py").write_text(AUTOGENERATE_ENV.format(table=table_name, extra=extra, storage=storage))
    (tmp_path / "script.py.mako").write_text(
        '"""${message}"""\nrevision = ${repr(up_revision)}\ndown_revision = ${repr(down_revision)}\n'
        "from alembic import op\nimport sqlalchemy as sa\n${imports if imports else ''}\n\n"
        "def upgrade():\n    ${upgrades if upgrades else 'pass'}\n\n\n"
        "def downgrade():\n    ${downgrades if downgrades else 'pass'}\n"
    )
    config = Config()
    config.set_main_option("script_location", str(tmp_path))
    config.set_main_option("sqlalchemy.url", url)

    def script(message: str) -> str:
        command.revision(config, message=message, autogenerate=True)
        return next(p for p in (tmp_path / "versions").glob("*.py") if message in p.read_text()).read_text()

    with engine.begin() as conn:
        old = sa.Table(  # the model before the key column, as the application's last migration made it
            table_name,
            sa.MetaData(),
            sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
            sa.Column("created_at", sa.DateTime),
        )
        old.create(conn)
        conn.execute(
            sa.text(f"INSERT INTO {table_name} (id, created_at) VALUES (:i, CURRENT_TIMESTAMP)"),
            [{"i": i} for i in range(1, 1201)],
        )
    try:
        first = script("add")
        assert written in first, first
        assert "op.add_column" not in first and "create_unique_constraint" not in first, first
        unique = ", unique=False" if "unique=False" in written else ""
        assert f"op.drop_seqid_column('{table_name}', 'seq_id'{unique})" in first, first
        command.upgrade(config, "head")
        with engine.connect() as conn:
            total, keyed, distinct = conn.exec_driver_sql(
                f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {table_name}"
            ).one()
            inspector = sa.inspect(conn)
            column = next(c for c in inspector.get_columns(table_name) if c["name"] == "seq_id")
            uniques = [u["column_names"] for u in inspector.get_unique_constraints(table_name)]
            uniques += [i["column_names"] for i in inspector.get_indexes(table_name) if i["unique"]]
            default = column.get("default")
        assert total == keyed == distinct == 1200 and column["nullable"] is False
        assert (["seq_id"] in uniques) == ("unique=True" in extra)
        assert (default is not None) == ("DatabaseSeqUUID" in extra), default
        second = script("again")
        assert "op." not in second.split("def upgrade")[1], second  # nothing left to change
        command.downgrade(config, "base")
        with engine.connect() as conn:
            assert "seq_id" not in {c["name"] for c in sa.inspect(conn).get_columns(table_name)}
    finally:
        with engine.begin() as conn:
            for name in (table_name, f"{table_name}_version", f"seqid_fill_{table_name}_seq_id"):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


KEY_SHAPES = {  # the primary key each table has: its DDL per server, its columns, and how to make row r's key
    "bigint": ({"postgresql": "id bigint", "mysql": "id bigint"}, ("id",), lambda r: (r,)),
    "composite": (
        {"postgresql": "id bigint, region varchar(8)", "mysql": "id bigint, region varchar(8)"},
        ("id", "region"),
        lambda r: (r // 3, ("eu", "us", "ap")[r % 3]),
    ),
    "bytes": ({"postgresql": "id bytea", "mysql": "id binary(16)"}, ("id",), lambda r: (r.to_bytes(16, "big"),)),
    "uuid": (  # the database's own UUID type (MariaDB's: what Django 5's UUIDField makes there)
        {"postgresql": "id uuid", "mysql": "id uuid"},
        ("id",),
        lambda r: (str(uuid.UUID(int=(r << 80) | (4 << 76) | (2 << 62) | r)),),
    ),
    "timestamp": (
        {"postgresql": "id timestamp", "mysql": "id datetime(6)"},
        ("id",),
        lambda r: (_dt.datetime(2020, 1, 1) + _dt.timedelta(seconds=r),),
    ),
}


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
@pytest.mark.parametrize("shape", sorted(KEY_SHAPES))
@pytest.mark.parametrize("storage", [None, "binary"])
@pytest.mark.parametrize("typed", [True, False], ids=["key-types-known", "key-types-unknown"])
@pytest.mark.parametrize("made", ["server", "python"])
def test_a_backfill_walks_every_kind_of_primary_key_and_resumes_after_a_kill(engine, shape, storage, typed, made):
    """Keys of one column and of two, of bytes, of a type JSON cannot carry, with their types known or not;
    the old rows' keys made by the server (a batch is a key range) or by Python (one parameter a batch:
    arrays, a JSON document; or a list of rows where the key types are not known): killed after two batches
    and run again, every row gets one key, of its own time, and the run says it resumed."""
    from seqid_orm.schema.online import OnlineColumn, backfill
    from seqid_orm.sqlalchemy import SeqUUID

    server = engine.dialect.name
    ddl, names, key_of = KEY_SHAPES[shape]
    table = f"t_{secrets.token_hex(4)}"
    kind = SeqUUID(storage=storage)
    where = kind.target(engine.dialect)
    column_type = str(kind.compile(dialect=engine.dialect))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {table} ({ddl[server]}, created_at timestamp NULL, seq_id {column_type} NULL, "
            f"PRIMARY KEY ({', '.join(names)}))"
        )
        rows = [
            dict(zip(names, key_of(r), strict=True)) | {"at": _dt.datetime(2024, 1, 1) + _dt.timedelta(minutes=r)}
            for r in range(1, 1001)
        ]
        marks = ", ".join(f":{n}" for n in names)
        conn.execute(sa.text(f"INSERT INTO {table} ({', '.join(names)}, created_at) VALUES ({marks}, :at)"), rows)
    with engine.connect() as conn:
        casts = tuple(
            str(c["type"].compile(dialect=engine.dialect))
            for n in names
            for c in sa.inspect(conn).get_columns(table)
            if c["name"] == n
        )
    column = OnlineColumn(
        vendor=where.vendor,
        table=table,
        column="seq_id",
        keys=names,
        column_type=column_type,
        default_sql=where.server_default.sql,
        storage=where.storage,
        layout=where.layout,
        stamp="created_at",
        key_casts=casts if typed else (),
        server_keys=made == "server",
    )
    said: list[str] = []
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            with pytest.raises(_Killed):
                backfill(_KilledAfter(conn, 2), column, batch_size=150, say=said.append)
            backfill(_ScriptedIO(conn, None), column, batch_size=150, say=said.append)
        assert any("resuming after 300 rows" in line for line in said), said
        with engine.connect() as conn:
            total, keyed, distinct = conn.exec_driver_sql(
                f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {table}"
            ).one()
            times = conn.exec_driver_sql(f"SELECT created_at FROM {table} ORDER BY seq_id").scalars().all()
        assert total == keyed == distinct == 1000
        assert times == sorted(times)  # each row's key of its own time, as the server orders them
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {column.progress_table}")


class _Killed(Exception):
    pass


class _KilledAfter(_ScriptedIO):
    """Dies, as a killed process would, after ``batches`` committed batches (the next one never begins); a
    transaction that records no batch's progress (a DDL statement's own, bounded by SET LOCAL) is not one."""

    def __init__(self, conn, batches: int) -> None:
        super().__init__(conn, None)
        self.batches = batches
        self.recorded = False

    def run(self, sql, params):
        self.recorded = self.recorded or (sql.startswith("UPDATE") and "SET last_key" in sql)
        return super().run(sql, params)

    @contextlib.contextmanager
    def transaction(self):
        if self.batches == 0:
            raise _Killed
        self.recorded = False
        with super().transaction():
            yield
        if self.recorded:
            self.batches -= 1
