"""``op.add_seqid_column`` on a table of 100,000 rows while the application reads and writes it, on the shared
PostgreSQL and MariaDB, through Alembic's command line in a process of its own (tests/traffic.py is the
application: it inserts as the old code does, without the new column, and reads rows by key, each statement
allowed to wait 1 s for a lock on PostgreSQL and 2 s on MariaDB, the issue's targets, so any longer wait is
an error the database reports).  Then a run killed half-way through its batches and run again: every row
filled exactly once (an audit trigger counts each write of the key), none missed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

ROOT = Path(__file__).resolve().parents[2]
ROWS = 100_000
WAIT_MS = {"postgresql": 1000, "mysql": 2000}

ENV_PY = """
from alembic import context
import sqlalchemy as sa
import seqid_orm.sqlalchemy.alembic  # noqa: F401 - seqid's operations

engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=sa.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None, version_table="{table}_version")
    with context.begin_transaction():
        context.run_migrations()
"""

MIGRATION = '''
"""online column"""
revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

from alembic import op
import seqid_orm.sqlalchemy.alembic


def upgrade():
    op.add_seqid_column("{table}", "seq_id", from_timestamp="created_at", batch_size={batch})


def downgrade():
    op.drop_seqid_column("{table}", "seq_id")
'''


@pytest.fixture(params=["pg_engine", "mysql_engine"])
def big(request, tmp_path):
    """(engine, table, Alembic project dir): a table of ROWS rows, an Alembic project with the migration."""
    engine = request.getfixturevalue(request.param)
    table = f"online_{os.getpid()}_{int(time.time() * 1000) % 100000}"
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, created_at timestamptz, note text)")
            conn.exec_driver_sql(
                f"INSERT INTO {table} (created_at, note) SELECT now() - g * interval '1 second', 'old' "
                f"FROM generate_series(1, {ROWS}) g"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE TABLE {table} (id bigint AUTO_INCREMENT PRIMARY KEY, created_at datetime(6), note varchar(20))"
            )
            conn.exec_driver_sql(
                f"INSERT INTO {table} (created_at, note) SELECT now(6) - INTERVAL seq SECOND, 'old' "
                f"FROM seq_1_to_{ROWS}"
            )
        conn.exec_driver_sql(f"ANALYZE TABLE {table}" if engine.dialect.name == "mysql" else f"ANALYZE {table}")
    (tmp_path / "versions").mkdir()
    (tmp_path / "env.py").write_text(ENV_PY.format(table=table))
    (tmp_path / "script.py.mako").write_text("")
    (tmp_path / "versions" / "0001_online.py").write_text(MIGRATION.format(table=table, batch=2000))
    try:
        yield engine, table, tmp_path
    finally:
        with engine.begin() as conn:
            for name in (table, f"{table}_version", f"{table}_audit", "seqid_backfills"):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


def _upgrade(engine, project: Path) -> subprocess.Popen:
    url = engine.url.render_as_string(hide_password=False)
    code = textwrap.dedent(
        f"""
        from alembic import command
        from alembic.config import Config
        config = Config()
        config.set_main_option("script_location", {str(project)!r})
        config.set_main_option("sqlalchemy.url", {url!r})
        command.upgrade(config, "head")
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextlib.contextmanager
def traffic(engine, table: str, tmp_path: Path):
    """The application's traffic for the block: yields a function that stops it and returns what it saw."""
    out, stop = tmp_path / "traffic.json", tmp_path / "traffic.stop"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.traffic",
            engine.url.render_as_string(hide_password=False),
            table,
            str(out),
            str(stop),
            f"--wait-ms={WAIT_MS[engine.dialect.name]}",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not Path(str(out) + ".ready").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read() if process.stderr else ""
        time.sleep(0.05)

    def finish() -> dict:
        stop.write_text("")
        process.wait(60)
        return json.loads(out.read_text())

    try:
        yield finish
    finally:
        if process.poll() is None:
            stop.write_text("")
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _check_column(engine, table: str) -> None:
    """Every row has a key, unique, NOT NULL, and the old rows sort by their time; old code still inserts."""
    with engine.connect() as conn:
        total, filled, distinct = conn.exec_driver_sql(
            f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {table}"
        ).one()
        assert total == filled == distinct and total >= ROWS
        times = conn.exec_driver_sql(f"SELECT created_at FROM {table} WHERE note = 'old' ORDER BY seq_id").scalars().all()
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
def test_the_column_is_added_and_filled_while_the_application_reads_and_writes(big):
    engine, table, project = big
    with traffic(engine, table, project) as finish:
        time.sleep(0.5)  # the application is running before the migration starts
        migration = _upgrade(engine, project)
        out, err = migration.communicate(timeout=600)
        seen = finish()
    assert seen["errors"] == [], seen["errors"][:3]  # no statement waited past its lock timeout, none failed
    assert migration.returncode == 0, err[-3000:]
    assert "(done)" in err and "rows/s" in err  # the progress on the console
    assert seen["inserts"] > 10 and seen["reads"] > 10
    _check_column(engine, table)


@pytest.mark.slow
def test_a_migration_killed_in_its_batches_and_run_again_writes_every_row_once(big):
    """The column is there (a first run got that far), an audit trigger counts every write of a key; the run
    is killed once its batches are under way, run again, and finishes: each old row written exactly once."""
    engine, table, project = big
    with engine.begin() as conn:
        pg = engine.dialect.name == "postgresql"
        kind = "uuid" if pg else str(seqid_type(engine))
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN seq_id {kind} NULL")
        conn.exec_driver_sql(f"CREATE TABLE {table}_audit (id bigint NOT NULL)")
        if pg:
            conn.exec_driver_sql(
                f"CREATE FUNCTION pg_temp_audit_{table}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN INSERT INTO {table}_audit VALUES (NEW.id); RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_audit AFTER UPDATE OF seq_id ON {table} FOR EACH ROW "
                f"WHEN (OLD.seq_id IS DISTINCT FROM NEW.seq_id) EXECUTE FUNCTION pg_temp_audit_{table}()"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_audit AFTER UPDATE ON {table} FOR EACH ROW "
                f"BEGIN IF NOT (OLD.seq_id <=> NEW.seq_id) THEN INSERT INTO {table}_audit VALUES (NEW.id); END IF; END"
            )
    try:
        first = _upgrade(engine, project)
        deadline = time.monotonic() + 300
        while True:  # its batches are under way: kill it between two of them, or inside one
            with engine.connect() as conn:
                done = conn.exec_driver_sql(f"SELECT count(*) FROM {table}_audit").scalar_one()
            if done >= ROWS // 4 or first.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert first.poll() is None, first.communicate()[1][-2000:]  # still running: killed half-way
        first.send_signal(signal.SIGKILL)
        first.wait()
        with engine.connect() as conn:
            before = conn.exec_driver_sql(f"SELECT count(*) FROM {table}_audit").scalar_one()
            assert 0 < before < ROWS
        again = _upgrade(engine, project)
        _out, err = again.communicate(timeout=600)
        assert again.returncode == 0, err[-3000:]
        assert "resuming after" in err
        with engine.connect() as conn:
            twice = conn.exec_driver_sql(
                f"SELECT count(*) FROM (SELECT id FROM {table}_audit GROUP BY id HAVING count(*) > 1) d"
            ).scalar_one()
            written = conn.exec_driver_sql(f"SELECT count(DISTINCT id) FROM {table}_audit").scalar_one()
            left = conn.exec_driver_sql(f"SELECT count(*) FROM {table} WHERE seq_id IS NULL").scalar_one()
            progress = sa.inspect(conn).has_table("seqid_backfills")
        assert (twice, written, left) == (0, ROWS, 0)  # every old row once, none missed
        assert not progress  # the progress it kept is gone
        _check_column(engine, table)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {table}_audit" + (f" ON {table}" if pg else ""))
            if pg:
                conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS pg_temp_audit_{table}()")


def seqid_type(engine) -> str:
    from seqid_orm.sqlalchemy import SeqUUID

    return str(SeqUUID().compile(dialect=engine.dialect))


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_a_storage_conversion_of_a_big_table_is_refused_naming_the_online_ways(engine, table_name):
    """convert_uuid_storage rewrites the table while holding it: above REWRITE_UP_TO_ROWS rows it is refused
    before anything changes, naming the ways that touch no row or hold nothing, unless allow_rewrite=True."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import seqid_orm.sqlalchemy.alembic  # noqa: F401 - registers op.convert_uuid_storage, as env.py does
    from seqid_orm.errors import InvalidArgumentError
    from seqid_orm.vendors.conversions import REWRITE_UP_TO_ROWS

    rows = REWRITE_UP_TO_ROWS + 50_000
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table_name} (id char(32) PRIMARY KEY)")
        if pg:
            conn.exec_driver_sql(
                f"INSERT INTO {table_name} SELECT replace(gen_random_uuid()::text, '-', '') FROM generate_series(1, {rows})"
            )
        else:
            conn.exec_driver_sql(
                f"INSERT INTO {table_name} SELECT lower(replace(uuid(), '-', '')) FROM seq_1_to_{rows}"
            )
        conn.exec_driver_sql(f"ANALYZE {table_name}" if pg else f"ANALYZE TABLE {table_name}")
    try:
        with engine.begin() as conn, pytest.raises(InvalidArgumentError) as refused:
            Operations(MigrationContext.configure(conn)).convert_uuid_storage(table_name, "id", from_storage="hex")
        said = str(refused.value)
        assert f"rewrites {table_name} (about" in said and "allow_rewrite=True" in said
        assert 'seq_uuid_pk(storage="...")' in said and ("pgroll" in said if pg else "gh-ost" in said)
        with engine.connect() as conn:
            kind = next(c["type"] for c in sa.inspect(conn).get_columns(table_name) if c["name"] == "id")
        assert isinstance(kind, sa.CHAR)  # nothing changed
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table_name}")
