"""The benchmark harnesses in benchmarks/ on each real database: they insert what they say, start and stop
their private servers, and clean up; never timings."""

from __future__ import annotations

import json
import os

import pytest

sa = pytest.importorskip("sqlalchemy")


def url_of(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


@pytest.fixture
def prefix(table_name) -> str:
    """Per-test table names, so runs sharing a server do not collide."""
    return f"{table_name}_"


def test_generation_benchmark_reports_every_generator_against_uuid4():
    from benchmarks import generation

    rows = generation.run(calls=2000, rounds=1, batch=100)
    names = [r["generator"] for r in rows]
    assert names[0] == "uuid.uuid4 (baseline)" and rows[0]["cost_vs_uuid4"] == 1.0
    assert {"seqid uuid7", "seqid comb time_last", "seqid Snowflake.next_id", "seqid bsv"} <= set(names)
    # the column default, timed per row as SQLAlchemy calls it, in both kinds of statement
    defaults = {r["generator"]: r for r in rows if "row default" in str(r["generator"])}
    assert set(defaults) == {
        "seqid SQLAlchemy row default, 100-row statement",
        "seqid SQLAlchemy row default, one-row statements",
    }
    assert all(float(str(r["ns_per_id"])) > 0 for r in defaults.values())
    assert "| seqid uuid7 |" in generation.markdown(rows)


def test_small_memory_postgres_is_private_and_small(pg_engine):
    import shutil

    from tests.servers.private import small_postgres

    if shutil.which("runuser") is None and __import__("os").geteuid() == 0:
        pytest.fail("running as root needs runuser to start a private PostgreSQL")
    with small_postgres(url_of(pg_engine)) as url:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW shared_buffers")).scalar() == "16MB"
            assert engine.url.port != pg_engine.url.port
        engine.dispose()
    with pytest.raises(sa.exc.OperationalError):
        sa.create_engine(url, connect_args={"connect_timeout": 2}).connect()


def test_small_memory_mariadb_is_private_and_small(mysql_engine):
    """A private server with a 32 MB buffer pool: the shared one is never reconfigured."""
    from tests.servers.private import small_mariadb

    def pool_size(engine):
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT @@GLOBAL.innodb_buffer_pool_size")).scalar())

    shared = pool_size(mysql_engine)
    with small_mariadb(url_of(mysql_engine)) as url:
        private = sa.create_engine(url)
        assert private.url.port != mysql_engine.url.port
        assert pool_size(private) == 32 * 2**20
        private.dispose()
    assert pool_size(mysql_engine) == shared
    with pytest.raises(sa.exc.OperationalError):
        sa.create_engine(url, connect_args={"connect_timeout": 2}).connect()


def test_cli_small_memory_runs_on_a_private_postgres(pg_engine, capsys):
    from benchmarks.insert import main

    url = url_of(pg_engine)
    assert main(["--url", url, "--small-memory", "--rows", "2000", "--keys", "bigint,comb", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["notes"] == ["small-memory mode"]
    assert data[0]["url"] != sa.make_url(url).render_as_string(hide_password=True)  # not the shared server
    assert [r["key"] for r in data[0]["results"]] == ["bigint", "comb"]


def test_the_insert_paths_benchmark_inserts_along_every_path_and_cleans_up(engine, prefix):
    """Every path really inserts (the tables are counted after each path), on every database."""
    from benchmarks import insert_paths

    counted: list[tuple[str, str, int]] = []
    real_insert = insert_paths._insert

    def counting_insert(path, key, engines, tables, rows, batch):
        seconds = real_insert(path, key, engines, tables, rows, batch)
        with engine.connect() as conn:
            counted.append((path, key, conn.scalar(sa.select(sa.func.count()).select_from(tables[key]))))
        return seconds

    insert_paths._insert = counting_insert
    try:
        result = insert_paths.run(url_of(engine), rows=1200, rounds=2, batch=500, prefix=prefix)
    finally:
        insert_paths._insert = real_insert
    paths = ["executemany", "insertmanyvalues", "orm-bulk"] + (["copy"] if engine.dialect.driver == "psycopg" else [])
    assert list(result["paths"]) == paths
    assert sorted(counted) == sorted((p, k, 1200) for p in paths for k in insert_paths.KEYS for _ in range(2))
    for figures in result["paths"].values():
        low, high = figures["seqid_vs_bigint_range"]
        assert 0 < low <= figures["seqid_vs_bigint_median"] <= high
    assert not [t for t in sa.inspect(engine).get_table_names() if t.startswith(prefix)]


def test_the_ticket_benchmark_reports_rates_round_trips_and_latency(sqlite_ticket_url, capsys):
    from benchmarks import tickets

    args = ["--url", sqlite_ticket_url, "--blocks", "1,100", "--repeat", "1"]
    assert tickets.main([*args, "--scale", "0.02", "--index-rows", "0", "--quiet", "--json"]) == 0
    found = {m["what"]: m for m in json.loads(capsys.readouterr().out)["sequences"]}
    assert set(found) == {"block 1", "block 1, no prefetch", "block 100", "block 100, no prefetch"}
    assert found["block 100, no prefetch"]["round_trips_per_1000"] == 10
    assert found["block 1, no prefetch"]["round_trips_per_1000"] == 1000
    for m in found.values():
        assert m["ids_per_s"] > 0 and set(m["latency_ns"]) == {"p50", "p99", "p99.9", "max"}


@pytest.mark.etcd
@pytest.mark.system("etcd")
def test_the_ticket_benchmark_measures_a_private_etcd_cluster_beside_redis(redis_url, capsys):
    from benchmarks import tickets
    from tests.system import need

    need("etcd")
    args = ["--url", redis_url, "--etcd-cluster", "3", "--blocks", "100", "--repeat", "2", "--scale", "0.01"]
    assert tickets.main([*args, "--index-rows", "0", "--quiet", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["sequences"]
    servers = {m["server"].split(":")[0] for m in found}
    assert servers == {"redis", "etcd"}
    etcd = {m["what"]: m for m in found if m["server"].startswith("etcd")}
    assert set(etcd) == {"block 100", "block 100, no prefetch"}  # etcd has no counter of its own to compare
    assert etcd["block 100, no prefetch"]["round_trips_per_1000"] == 10


def test_the_pg_expression_benchmark_measures_every_candidate_and_drops_its_tables(pg_engine, capsys):
    """benchmarks.pg_expression reports every candidate; its order counts come from ORDER BY id."""
    import shutil

    from benchmarks import pg_expression

    if shutil.which("psql") is None:
        pytest.fail("psql (the PostgreSQL client) is needed by benchmarks.pg_expression")
    url = pg_engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    assert pg_expression.main(["--url", url, "--rows", "3000", "--rounds", "1"]) == 0
    rows = {
        cells[0]: cells[1:]
        for line in capsys.readouterr().out.splitlines()[2:]
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert set(pg_expression.CANDIDATES) | {"BIGINT identity"} <= set(rows)
    assert rows["BIGINT identity"][1].startswith("1.00") and rows["BIGINT identity"][3] == "0"
    assert int(rows["gen_random_uuid()"][3].replace(",", "")) > 1000  # random keys: about half out of order
    assert int(rows["seqid one reading (now)"][3].replace(",", "")) <= 30  # ties within a microsecond only
    # its tables are seqid_expr_<pid>_<n>; other tests may create tables meanwhile (the suite runs in parallel)
    assert not [t for t in sa.inspect(pg_engine).get_table_names() if t.startswith(f"seqid_expr_{os.getpid()}_")]


@pytest.mark.slow
def test_the_scale_benchmark_loads_every_kind_on_private_small_servers(pg_engine, mysql_engine, tmp_path):
    """benchmarks.scale starts its private servers, loads every kind by both paths, writes its files, stops them."""
    from benchmarks import scale

    out = tmp_path / "scale"
    assert scale.main(["--rows", "3000", "--batch", "1000", "--out", str(out)]) == 0
    data = json.loads((out / "scale.json").read_text())
    assert [d["label"] for d in data] == [
        "postgresql via bulk",
        "postgresql via core",
        "mariadb via bulk",
        "mariadb via core",
    ]
    for d in data:
        assert [r["key"] for r in d["results"]] == scale.KINDS
        assert all(r["rows"] == 3000 for r in d["results"])
        assert d["url"] not in (url_of(pg_engine), url_of(mysql_engine))  # never the shared servers
    assert (out / "scale.md").read_text().count("| bigint |") == 4


def test_the_limits_command_reports_ratios_targets_and_regressions():
    """benchmarks.limits: each seqid generator over the fastest peer of its round (a stand-in peer
    here), a target per family, and a saved run compared: only a ratio >10 % worse is named."""
    import uuid

    from benchmarks import limits

    def slow_peer() -> object:  # a "peer" far slower than any seqid generator
        for _ in range(50):
            uuid.uuid4()
        return None

    rows = limits.generation(
        rounds=2,
        calls=300,
        batch=100,
        peers=({"slow": slow_peer}, {"slow batch": lambda n: [slow_peer() for _ in range(n)]}),
    )
    by = {r["what"].split(" (")[0]: r for r in rows}
    assert {
        "seqid uuid7",
        "seqid time_last",
        "seqid Snowflake.next_id",
        "seqid base32",
        "seqid comb_batch time_first",
    } <= set(by)
    assert by["seqid uuid7"]["ratio"] < 1 and by["seqid uuid7"]["met"] is True  # faster than fifty uuid4s
    assert by["floor: a bare v7 in Python"]["target"] is None
    table = limits.markdown(rows)
    assert "| generation | seqid uuid7 (" in table and "≤ 2.00 | yes |" in table
    saved = {limits._key(r): r["ratio"] for r in rows}
    assert limits.regressions(rows, saved) == []
    worse = [{**r, "ratio": r["ratio"] * 1.2} if r["what"].startswith("seqid uuid7") else r for r in rows]
    assert [line.split(":")[1].strip() for line in limits.regressions(worse, saved)] == ["seqid uuid7"]


def test_the_limits_command_times_database_made_keys_against_identity(pg_engine):
    from benchmarks import limits

    url = url_of(pg_engine).replace("+psycopg", "")
    (row,) = limits.database_made(url, None, rows=2_000, rounds=1)
    assert row["what"].startswith("PostgreSQL ") and row["what"].endswith("seqid expression")
    assert row["ratio"] > 0 and row["target"] == 1.62
