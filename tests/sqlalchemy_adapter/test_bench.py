"""The insert benchmark on each real database: structure and engine counters, never timings."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import statistics

import pytest

sa = pytest.importorskip("sqlalchemy")
import seqid_orm  # noqa: E402
from seqid_orm.cli.bench import report, runner  # noqa: E402
from seqid_orm.cli.bench.cpu import is_local_host  # noqa: E402
from seqid_orm.cli.bench.keys import KINDS  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID  # noqa: E402


def url_of(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


@pytest.fixture
def prefix(table_name) -> str:
    """Per-test table names, so runs sharing a server do not collide."""
    return f"{table_name}_"


def _sqlite_without_unhex(engine) -> bool:
    import sqlite3

    return engine.dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 41)


def test_every_kind_inserts_its_rows_and_reports(engine, prefix):
    # sa-uuid7 needs uuid-utils (the bench extra; the main test environment has it, nox's core
    # sessions do not)
    installed = [k for k, kind in KINDS.items() if kind.available()]
    run = runner.run(
        url_of(engine), rows=3000, kinds=installed, batch=500, progress=None, keep_tables=True, table_prefix=prefix
    )
    # SQLite before 3.41 cannot build a BLOB default (no unhex()): comb-db is skipped with a note
    kinds = [k for k in installed if k != "comb-db" or not _sqlite_without_unhex(engine)]
    assert (kinds != installed) == any(n.startswith("comb-db skipped") and "unhex" in n for n in run.notes)
    try:
        with engine.connect() as conn:
            for name in kinds:
                table = runner.table_name_for(name, prefix)
                assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar() == 3000
            if engine.dialect.name == "sqlite":  # integer keys are the rowid; other keys get WITHOUT ROWID
                for name in ("bigint", "snowflake"):
                    table = runner.table_name_for(name, prefix)
                    assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table} WHERE rowid = id")).scalar() == 3000
                with pytest.raises(sa.exc.OperationalError, match="rowid"):
                    conn.execute(sa.text(f"SELECT rowid FROM {runner.table_name_for('comb', prefix)}"))
    finally:
        with engine.begin() as conn:
            for name in KINDS:
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {runner.table_name_for(name, prefix)}"))
    recs = {r["key"]: r for r in runner.result_rows(run)}
    assert set(recs) == set(kinds)
    assert all(len(r.chunks) >= 2 for r in run.results)
    assert recs["bigint"]["time_vs_bigint"] == 1.0
    assert all(r["client_cpu_us_per_row"] > 0 for r in recs.values())
    if engine.dialect.name != "sqlite" and is_local_host(engine.url.host):  # the server's own CPU, read from /proc
        from seqid_orm.cli.bench import cpu

        with engine.connect() as conn:  # absent where /proc cannot say (MariaDB's pid file is its owner's)
            measured = cpu.server_pid(conn) is not None  # found as root: test_server_cpu_is_the_servers_own
        assert [r.get("server_cpu_us_per_row", -1) >= 0 for r in recs.values()] == [measured] * len(recs)
    if engine.dialect.name == "postgresql":
        assert all(r["wal_B_per_row"] > 0 for r in recs.values())
        assert all("fpi_per_1k_rows" in r for r in recs.values())  # buffer stats may lag a second
    if engine.dialect.name == "mysql":
        assert all(r["wal_B_per_row"] > 0 for r in recs.values())  # InnoDB's redo log, by its LSN
        assert all("page_splits_per_1k_rows" in r for r in recs.values())
        assert all(0 < r["hit_ratio"] <= 1 for r in recs.values())
    # sizes are the engine's own figures for each kind's table, and bytes_per_row is their sum per row
    for r in run.results:
        assert r.sizes["table_bytes"] > 0
        assert recs[r.kind]["bytes_per_row"] == round((r.sizes["table_bytes"] + r.sizes["index_bytes"]) / 3000, 1)
    md = report.markdown([run])
    assert md.count("\n") == len(kinds) + 1 and "| key |" in md
    rows = list(csv.DictReader(io.StringIO(report.to_csv([run]))))
    assert [r["key"] for r in rows] == kinds
    data = json.loads(report.to_json([run]))
    expected = "mariadb" if getattr(engine.dialect, "is_mariadb", False) else engine.dialect.name
    assert data[0]["dialect"] == expected and len(data[0]["timelines"]["comb"]) >= 2


def test_rounds_rotate_the_order_and_report_median_ratios(engine, prefix):
    kinds = ["bigint", "comb", "comb-db", "snowflake"]
    run = runner.run(url_of(engine), rows=1500, kinds=kinds, batch=500, progress=None, table_prefix=prefix, repeat=3)
    ran = [k for k in kinds if k != "comb-db" or not _sqlite_without_unhex(engine)]
    assert len(run.rounds) == 3 and all(list(rnd) == ran for rnd in run.rounds)
    # every kind starts one round, so none always carries the machine's drift at the start or end
    assert run.orders == [ran[i:] + ran[:i] for i in range(3)]
    recs = {r["key"]: r for r in runner.result_rows(run)}
    for kind in ran:
        seconds = [rnd[kind].seconds for rnd in run.rounds]
        ratios = [rnd[kind].seconds / rnd["bigint"].seconds for rnd in run.rounds]
        assert recs[kind]["time_vs_bigint"] == round(statistics.median(ratios), 3)
        assert recs[kind]["time_vs_bigint_range"] == f"{min(ratios):.2f}-{max(ratios):.2f}"
        # the other columns come from the kind's median round
        assert {r.kind: r for r in run.results}[kind].seconds == statistics.median(seconds)
    with engine.connect() as conn:  # no table is left behind by any round
        names = sa.inspect(conn).get_table_names()
    assert not [n for n in names if n.startswith(prefix)]
    data = json.loads(report.to_json([run]))[0]
    assert data["rounds"] == 3 and data["orders"] == run.orders and len(data["round_seconds"]["comb"]) == 3
    with pytest.raises(ValueError, match="repeat must be"):
        runner.run(url_of(engine), rows=10, kinds=["bigint"], progress=None, repeat=0)


@pytest.mark.parametrize("via", ["core", "bulk"])
def test_an_async_drivers_url_runs_through_that_driver(engine, prefix, via):
    """asyncpg / aiomysql / aiosqlite: the rows arrive through the async driver (its connections are the
    ones the server sees), ordered by the database as the key promises."""
    pytest.importorskip("greenlet")
    from tests.conftest import ASYNC_DRIVERS

    url = engine.url.set(drivername=ASYNC_DRIVERS[engine.dialect.name])
    run = runner.run(
        url.render_as_string(hide_password=False),
        rows=1200,
        kinds=["bigint", "comb"],
        batch=400,
        via=via,
        progress=None,
        keep_tables=True,
        table_prefix=prefix,
    )
    assert run.url.startswith(ASYNC_DRIVERS[engine.dialect.name] + "://")
    try:
        with engine.connect() as conn:
            for name in ("bigint", "comb"):
                table = runner.table_name_for(name, prefix)
                assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar() == 1200
            comb = sa.Table(runner.table_name_for("comb", prefix), sa.MetaData(), sa.Column("id", SeqUUID()))
            ids = conn.execute(sa.select(comb.c.id).order_by(comb.c.id)).scalars()  # read back by SeqUUID itself
            made = [seqid_orm.timestamp_of(v) for v in ids]
            assert made == sorted(made)  # the database's order is the time order
    finally:
        with engine.begin() as conn:
            for name in ("bigint", "comb"):
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {runner.table_name_for(name, prefix)}"))
    assert [r.kind for r in run.results] == ["bigint", "comb"] and all(r.rows == 1200 for r in run.results)


@pytest.mark.parametrize(
    ("fixture", "busy_sql"),
    [
        ("pg_engine", "SELECT count(*) FROM generate_series(1, 4000000)"),
        ("mysql_engine", "SELECT BENCHMARK(3000000, MD5('seqid'))"),
    ],
)
def test_server_cpu_is_the_servers_own(request, fixture, busy_sql):

    from seqid_orm.cli.bench import cpu

    engine = request.getfixturevalue(fixture)
    if not is_local_host(engine.url.host):
        pytest.fail(f"{engine.url.host} is not this machine: the server-CPU figures need a local server")
    with engine.connect() as conn:
        if engine.dialect.name == "mysql":
            pid_file, datadir = conn.execute(sa.text("SELECT @@GLOBAL.pid_file, @@GLOBAL.datadir")).one()
            path = os.path.join(datadir, pid_file)
            if os.path.exists(path) and not os.access(path, os.R_OK):
                pytest.skip(f"the MariaDB pid file {path} is not readable by uid {os.getuid()} (root's CI reads it)")
        pid = cpu.server_pid(conn)
        assert pid is not None
        if engine.dialect.name == "postgresql":  # the postmaster is the parent of this session's backend
            backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            assert cpu._stat(backend)[1] == str(pid)
        server_before = cpu.process_tree_seconds(pid)
        conn.execute(sa.text(busy_sql)).all()
        server_after = cpu.process_tree_seconds(pid)
    # the counter read from /proc belongs to the server: a query that only the server works on moves
    # it (behaviour, not a timing: no ratio of CPU times is asserted, see `seqid bench` for those)
    assert server_after > server_before


def test_orm_path_and_bad_arguments(sqlite_engine, prefix):
    from sqlalchemy.orm import Session

    mappers = []

    def record(state):
        if state.is_insert:
            mappers.append(state.bind_mapper)

    sa.event.listen(Session, "do_orm_execute", record)
    try:
        run = runner.run(
            url_of(sqlite_engine), rows=1000, kinds=["comb"], batch=250, via="orm", progress=None, table_prefix=prefix
        )
    finally:
        sa.event.remove(Session, "do_orm_execute", record)
    assert run.via == "orm" and run.results[0].rows == 1000
    # each batch is an ORM bulk INSERT against a mapped class, not a Core insert run through a Session
    assert len(mappers) == 4 and all(m is not None and m.local_table.name.startswith(prefix) for m in mappers)
    with pytest.raises(ValueError, match="unknown key kinds"):
        runner.run(url_of(sqlite_engine), rows=10, kinds=["nope"], progress=None)
    with pytest.raises(ValueError, match="via must be one of core, orm, session"):
        runner.run(url_of(sqlite_engine), rows=10, kinds=["comb"], via="raw", progress=None)


def test_unit_of_work_path_batches_keys_made_anywhere(engine, prefix):
    """--via session: objects through add_all + commit; database-made keys get the sentinel."""
    kinds = ["bigint", "comb"] + ([] if _sqlite_without_unhex(engine) else ["comb-db"])
    inserts: dict[str, int] = dict.fromkeys(kinds, 0)

    def count(conn, cursor, statement, parameters, context, executemany):
        for kind in kinds:  # \b: the comb table's name is also the start of comb_db's
            if re.match(rf"\s*INSERT INTO {runner.table_name_for(kind, prefix)}\b", statement, re.IGNORECASE):
                inserts[kind] += 1

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", count)
    try:
        run = runner.run(
            url_of(engine), rows=1000, kinds=kinds, batch=250, via="session", progress=None, table_prefix=prefix
        )
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", count)
    assert [r.rows for r in run.results] == [1000] * len(kinds) and run.via == "session"
    # one executemany or INSERT ... RETURNING per commit, never one statement per object
    assert inserts["comb"] == 4
    if "comb-db" in inserts:
        assert inserts["comb-db"] == 4


def test_cli_bench(tmp_path, capsys):
    from seqid_orm.cli import main

    out = tmp_path / "out"
    assert main(["bench", "--rows", "2000", "--keys", "bigint,uuid4,comb", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "sqlite 3." in printed and "x BIGINT" in printed and "random UUIDv4 took" in printed
    assert {p.name for p in out.iterdir()} >= {"results.md", "results.csv", "results.json"}
    assert "| sqlite" in (out / "results.md").read_text()
    assert main(["bench", "--keys", "bogus"]) == 2
    assert "unknown --keys" in capsys.readouterr().err
    for bad in ("0", "two"):
        with pytest.raises(SystemExit) as exit_:
            main(["bench", "--repeat", bad])
        assert exit_.value.code == 2 and "--repeat" in capsys.readouterr().err
    assert main(["bench", "--url", "postgresql+psycopg://nobody@127.0.0.1:1/none", "--rows", "10", "--quiet"]) == 2
    assert "cannot reach" in capsys.readouterr().err


def test_a_bare_postgresql_url_without_psycopg2_points_at_the_installed_driver():
    """SQLAlchemy 2.0 maps postgresql:// to psycopg2, which the postgres extra does not install;
    2.1 maps it to psycopg 3, which it does."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['psycopg2'] = None; from seqid_orm.__main__ import main; "
        "sys.exit(main(['bench', '--url', 'postgresql://postgres@127.0.0.1/test', '--rows', '10', '--quiet']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if sa.__version__.startswith("2.0."):
        assert done.returncode == 2
        assert "postgresql+psycopg://" in done.stderr and "psycopg2" in done.stderr
    else:
        assert done.returncode == 0, done.stderr


def test_the_bulk_path_inserts_every_kind(engine, prefix):
    """via="bulk" (bulk_insert: COPY on PostgreSQL): every row of every kind arrives, database-made keys included."""
    installed = [k for k, kind in KINDS.items() if kind.available()]
    run = runner.run(
        url_of(engine), rows=1500, kinds=installed, batch=500, via="bulk", progress=None, table_prefix=prefix
    )
    kinds = [k for k in installed if k != "comb-db" or not _sqlite_without_unhex(engine)]
    assert [r.kind for r in run.results] == kinds and all(r.rows == 1500 for r in run.results)
    assert all(r.sizes["table_bytes"] > 0 for r in run.results if engine.dialect.name != "sqlite" or r.sizes)
