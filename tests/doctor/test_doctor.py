"""seqid doctor on real PostgreSQL, MariaDB and SQLite databases filled with the keys users arrive with.

Each database gets a private namespace (a PostgreSQL schema, a MariaDB database, a SQLite file) with
one table per kind of key, 20,000 rows each: random UUIDv4, UUIDv7, a COMB with its time in the last
six bytes and version nibble 4 (as RT.Comb's SQL Server provider writes them), NHibernate's COMB
(SQL Server datetime in the last six bytes), a BIGINT identity, Snowflake ids, ULID text, and UUIDv4
as 32 hex digits (Django's UUIDField off PostgreSQL/MariaDB). Every kind and in_order must come out
right, as measured by the database's own ORDER BY, and the database must be unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")

import seqid_orm  # noqa: E402
import seqid_orm.schema.doctor  # noqa: E402
from seqid_orm.errors import DatabaseUnavailableError, InvalidArgumentError  # noqa: E402
from seqid_orm.ids.layout import Layout  # noqa: E402
from seqid_orm.ids.text import encode_base32  # noqa: E402
from seqid_orm.schema.doctor import StatementDeadline, failing, render  # noqa: E402
from seqid_orm.sqlalchemy.doctor import diagnose  # noqa: E402
from tests.conftest import MYSQL_URL, POSTGRES_URL  # noqa: E402

ROWS = 20_000


def comb_last_v4(when: dt.datetime) -> uuid.UUID:
    """Unix milliseconds in the last six bytes, version 4 and the RFC variant kept (RT.Comb's SqlCombProvider)."""
    raw = bytearray(os.urandom(16))
    raw[10:16] = int(when.timestamp() * 1000).to_bytes(6, "big")
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(raw))


def comb_nhibernate(now: dt.datetime) -> uuid.UUID:
    """NHibernate's GuidCombGenerator: SQL Server datetime (days since 1900, 1/300 s of the day) in
    the last six bytes."""
    naive = now.replace(tzinfo=None)
    days = (naive - dt.datetime(1900, 1, 1)).days
    ticks = int((naive - naive.replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds() * 300)
    raw = bytearray(os.urandom(16))
    raw[10:12], raw[12:16] = days.to_bytes(2, "big"), ticks.to_bytes(4, "big")
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(raw))


UUID_TYPE = {"postgresql": "uuid", "mysql": "BINARY(16)", "sqlite": "BLOB"}
IDENTITY = {
    "postgresql": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    "mysql": "BIGINT AUTO_INCREMENT PRIMARY KEY",
    "sqlite": "INTEGER PRIMARY KEY",
}


def keys(kind: str, vendor: str) -> list[object]:
    """``ROWS`` keys of ``kind``, their times spread over two hours as rows written over time are (a
    burst of keys made within milliseconds would leave the doctor's pivots little room between them)."""
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
    spread = [start + dt.timedelta(seconds=n * 0.36) for n in range(ROWS)]
    ticks = iter(int(when.timestamp() * 1e9) for when in spread)
    snowflake = seqid_orm.Snowflake(worker_id=7, clock=lambda: next(ticks))
    make: dict[str, Callable[[dt.datetime], object]] = {
        "v4": lambda _: uuid.uuid4(),
        "v7": seqid_orm.comb_at,
        "comb_last": comb_last_v4,
        "nhibernate": comb_nhibernate,
        "snowflake": lambda _: snowflake.next_id(),
        "ulid": lambda when: encode_base32(seqid_orm.comb_at(when)),
        "hex_v4": lambda _: uuid.uuid4().hex,
    }
    values = [make[kind](when) for when in spread]
    if vendor != "postgresql":
        values = [v.bytes if isinstance(v, uuid.UUID) else v for v in values]
    return values


# kind -> (column type, what the doctor must find: kind, format, in_order)
TABLES = {
    "v4": ("uuid", "random-uuid", "uuid4", None),
    "v7": ("uuid", "time-ordered", "uuid7", True),
    "comb_last": ("uuid", "time-ordered", "comb-time-last", False),
    "nhibernate": ("uuid", "time-ordered", "comb-time-last-datetime", False),
    "ident": ("identity", "integer-sequence", None, None),
    "snowflake": ("BIGINT", "snowflake", "twitter-snowflake", True),
    "ulid": ("CHAR(26)", "text", "ulid", True),
    "hex_v4": ("CHAR(32)", "random-uuid", "uuid4", None),
}


# Tables of random keys with time-ordered ones made since: "adopted" by seqid (keys after the old ones where the
# engine needs them, plain UUIDv7 elsewhere), "inside" by a plain UUIDv7 default on every engine.
MIXED = ("adopted", "inside")


def mixed_keys(name: str, vendor: str) -> list[object]:
    """``ROWS`` random keys, then ``ROWS // 2`` time-ordered ones over the last two hours."""
    old = [uuid.uuid4() for _ in range(ROWS)]
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
    spread = [start + dt.timedelta(seconds=n * 0.72) for n in range(ROWS // 2)]
    above = 0
    if name == "adopted":
        where = seqid_orm.vendors.target(
            vendor if vendor != "mysql" else "mariadb", (15,) if vendor == "postgresql" else (10, 11, 9), "binary"
        )
        above = where.above_for([max(old)])
    new = [seqid_orm.comb_at(when, Layout.TIME_FIRST, above=above) for when in spread]
    return [u if vendor == "postgresql" else u.bytes for u in old + new]


def _fill(engine, vendor: str) -> None:
    with engine.begin() as conn:
        for name in MIXED:
            conn.exec_driver_sql(f"CREATE TABLE {name} (id {UUID_TYPE[vendor]} NOT NULL PRIMARY KEY, note VARCHAR(10))")
            conn.execute(
                sa.text(f"INSERT INTO {name} (id) VALUES (:id)"), [{"id": k} for k in mixed_keys(name, vendor)]
            )
        for name, (column, *_rest) in TABLES.items():
            if column == "identity":
                conn.exec_driver_sql(f"CREATE TABLE {name} (id {IDENTITY[vendor]}, note VARCHAR(10))")
                conn.execute(sa.text(f"INSERT INTO {name} (note) VALUES (:n)"), [{"n": "x"}] * ROWS)
                continue
            sql_type = UUID_TYPE[vendor] if column == "uuid" else column
            conn.exec_driver_sql(f"CREATE TABLE {name} (id {sql_type} NOT NULL PRIMARY KEY, note VARCHAR(10))")
            conn.execute(sa.text(f"INSERT INTO {name} (id) VALUES (:id)"), [{"id": k} for k in keys(name, vendor)])


@pytest.fixture(scope="module", params=["sqlite_engine", "pg_engine", "mysql_engine"])
def filled(request, tmp_path_factory):
    """(vendor, URL of the private namespace, engine on it), the tables filled (the parameter names
    the server's fixture, so the test earns its server marker)."""
    request.getfixturevalue(request.param)  # skipped, or failed under SEQID_REQUIRE_DBS=1, when it is down
    vendor = {"sqlite_engine": "sqlite", "pg_engine": "postgresql", "mysql_engine": "mysql"}[request.param]
    name = f"seqid_doctor_{secrets.token_hex(3)}"
    if vendor == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('doctor') / 'legacy.db'}"
        engine = sa.create_engine(url)
        _fill(engine, vendor)
        yield vendor, url, engine
        engine.dispose()
        return
    admin = sa.create_engine(POSTGRES_URL if vendor == "postgresql" else MYSQL_URL, poolclass=sa.NullPool)
    if vendor == "postgresql":
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {name}")
        url = f"{POSTGRES_URL}?options=-csearch_path%3D{name}"
    else:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        url = MYSQL_URL.rsplit("/", 1)[0] + f"/{name}"
    engine = sa.create_engine(url)
    try:
        _fill(engine, vendor)
        if vendor == "postgresql":
            with engine.begin() as conn:
                conn.exec_driver_sql("ANALYZE")
        yield vendor, url, engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE" if vendor == "postgresql" else f"DROP DATABASE {name}")
        admin.dispose()


def scope(url: str) -> dict[str, list[str]]:
    """The private schema of a PostgreSQL URL of the fixture (its search_path): the doctor reads every
    schema, and the shared database holds other tests' schemas too."""
    return {"schemas": [url.rsplit("search_path%3D", 1)[1]]} if "search_path%3D" in url else {}


def scope_args(url: str) -> list[str]:
    """:func:`scope` as the command line's ``--schema``."""
    return [arg for name in scope(url).get("schemas", []) for arg in ("--schema", name)]


def _state(vendor: str, url: str, engine) -> object:
    """What must not change: PostgreSQL's write counters and sequential scans per table, MariaDB's
    table checksums, the SQLite file's bytes."""
    if vendor == "sqlite":
        return hashlib.sha256(Path(url.removeprefix("sqlite:///")).read_bytes()).hexdigest()
    with engine.connect() as conn:
        if vendor == "postgresql":
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            return conn.exec_driver_sql(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_live_tup, n_dead_tup, seq_scan "
                "FROM pg_stat_user_tables WHERE schemaname = current_schema() ORDER BY relname"
            ).all()
        return conn.exec_driver_sql(f"CHECKSUM TABLE {', '.join([*TABLES, *MIXED])}").all()


def test_every_kind_and_order_is_found_and_the_database_is_unchanged(filled):
    vendor, url, engine = filled
    time.sleep(1.2)  # PostgreSQL's backends report their counters at most once a second
    before = _state(vendor, url, engine)
    findings = {f.table: f for f in diagnose(url, sample=500, **scope(url))}
    time.sleep(1.2)
    assert _state(vendor, url, engine) == before
    assert set(findings) == {*TABLES, *MIXED}
    for table, (_column, kind, fmt, in_order) in TABLES.items():
        found = findings[table]
        assert (found.kind, found.format, found.in_order) == (kind, fmt, in_order), (table, found)
        assert found.primary and found.column == "id" and found.sampled >= 200
    assert findings["v7"].needed_layout == Layout.TIME_FIRST.value
    assert findings["comb_last"].keys_layout == Layout.TIME_LAST.value
    assert findings["comb_last"].in_order_share < 0.7  # PostgreSQL, MariaDB and SQLite compare bytes 0.. first
    assert "seq_uuid_pk(" in findings["v4"].advice and "SeqUUIDField(primary_key=True" in findings["v4"].advice
    assert 'storage="hex"' in findings["hex_v4"].advice
    report = render(list(findings.values()))
    assert report.splitlines()[1].split()[0] in ("v4.id", "hex_v4.id")  # the worst first
    if vendor == "postgresql":
        # the index beside one built in key order: UUIDv7 and the identity sit at the ideal, random keys above it
        for table in ("v7", "ident", "snowflake"):
            assert findings[table].index_bytes <= findings[table].ideal_index_bytes * 1.05, findings[table]
        assert findings["v4"].index_bytes > findings["v4"].ideal_index_bytes * 1.15, findings["v4"]
        assert findings["v7"].rows == ROWS
    if vendor == "mysql":
        # InnoDB's primary key is the table: its size is the table's (before: it printed "-"); no ideal
        for table in TABLES:
            assert findings[table].index_bytes >= 16384 and findings[table].ideal_index_bytes is None, findings[table]


def test_a_table_adopted_by_seqid_is_told_from_an_untouched_one_and_from_keys_landing_among_old_ones(filled):
    """Random keys with seqid's since: kind "adopted", where the new keys land and what helps (nothing, or a
    REINDEX); UUIDv7 keys among old random ones are a problem only where the engine splits those pages half."""
    vendor, url, _engine = filled
    findings = {f.table: f for f in diagnose(url, sample=500, **scope(url))}
    untouched, adopted, inside = findings["v4"], findings["adopted"], findings["inside"]
    assert untouched.kind == "random-uuid" and untouched.new_keys is None
    assert (adopted.kind, inside.kind) == ("adopted", "adopted")
    assert adopted.in_order and inside.in_order
    half = vendor == "postgresql"
    assert (adopted.half_splits, inside.half_splits) == (half, half)
    assert adopted.new_keys_format == ("adopted" if half else "uuid7") and inside.new_keys_format == "uuid7"
    assert adopted.new_keys == ("after-old-keys" if half else "among-old-keys")
    assert inside.new_keys == "among-old-keys"
    assert adopted.problem is None
    if half:
        assert inside.problem == "inside-old-keys" and "REINDEX" in inside.advice and "seq_uuid_pk()" in inside.advice
        assert "append after them" in adopted.advice
    else:
        assert inside.problem is None and "nothing to do" in inside.advice
    as_json = json.loads(seqid_orm.schema.doctor.render_json([adopted]))["findings"][0]
    assert as_json["new_keys"] == adopted.new_keys and as_json["half_splits"] is half
    assert failing(list(findings.values()), ["inside-old-keys"]) == ([inside] if half else [])


@pytest.fixture(params=["sqlite_engine", "pg_engine"])
def churned(request, tmp_path):
    """(vendor, URL) of a private namespace with three tables that stay: PostgreSQL and SQLite (not beside the
    shared MariaDB: concurrent DDL beside information_schema reads crashed it once, tests/conftest.py)."""
    request.getfixturevalue(request.param)
    vendor = {"sqlite_engine": "sqlite", "pg_engine": "postgresql"}[request.param]
    name = f"seqid_churn_{secrets.token_hex(3)}"
    if vendor == "sqlite":
        url = f"sqlite:///{tmp_path / 'churned.db'}"
    else:
        admin = sa.create_engine(POSTGRES_URL, poolclass=sa.NullPool)
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {name}")
        url = f"{POSTGRES_URL}?options=-csearch_path%3D{name}"
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    with engine.begin() as conn:
        for table in ("stays_a", "stays_b", "stays_c"):
            conn.exec_driver_sql(f"CREATE TABLE {table} (id {UUID_TYPE[vendor]} NOT NULL PRIMARY KEY)")
            values = [uuid.uuid4() if vendor == "postgresql" else uuid.uuid4().bytes for _ in range(2000)]
            conn.execute(sa.text(f"INSERT INTO {table} (id) VALUES (:id)"), [{"id": v} for v in values])
    engine.dispose()
    try:
        yield vendor, url
    finally:
        if vendor == "postgresql":
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
            admin.dispose()


def test_a_schema_other_sessions_change_while_the_doctor_reads_still_gets_its_report(churned):
    """Another session creates, fills and drops tables in a loop (a migration, a test, temporary tables):
    each run reports every table that stays, and none that went (PostgreSQL's catalog gave a NULL size for
    a relation dropped under it, and the whole report was lost)."""
    vendor, url = churned
    stop, failures, cycles = threading.Event(), [], [0]

    def churn() -> None:
        churner = sa.create_engine(url, poolclass=sa.NullPool)
        try:
            while not stop.is_set():
                name = f"churn_{cycles[0] % 3}"
                with churner.begin() as conn:
                    conn.exec_driver_sql(f"CREATE TABLE {name} (id {UUID_TYPE[vendor]} NOT NULL PRIMARY KEY)")
                    values = [uuid.uuid4() if vendor == "postgresql" else uuid.uuid4().bytes for _ in range(20)]
                    conn.execute(sa.text(f"INSERT INTO {name} (id) VALUES (:id)"), [{"id": v} for v in values])
                with churner.begin() as conn:
                    conn.exec_driver_sql(f"DROP TABLE {name}")
                cycles[0] += 1
        except Exception as exc:  # the churn itself must not fail silently
            failures.append(exc)
        finally:
            churner.dispose()

    thread = threading.Thread(target=churn, name="schema-churn", daemon=True)
    thread.start()
    try:
        for _ in range(30):
            findings = diagnose(url, sample=100, timeout=30, **scope(url))
            assert {"stays_a", "stays_b", "stays_c"} <= {f.table for f in findings}
            assert not [f for f in findings if f.kind == "unreadable"], findings
    finally:
        stop.set()
        thread.join(30)
    assert not failures and cycles[0] >= 30


def test_the_cli_prints_json_and_fails_on_what_it_is_told(filled):
    _vendor, url, _ = filled
    run = [sys.executable, "-m", "seqid_orm", "doctor", url, *scope_args(url)]
    done = subprocess.run([*run, "--json", "--fail-on", "random-uuid"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["errors"] == []
    rows = document["findings"]
    assert {"table", "column", "kind", "in_order", "advice"} <= set(rows[0])
    assert {r["table"] for r in rows if r["kind"] == "random-uuid"} == {"v4", "hex_v4"}
    clean = subprocess.run([*run, "--fail-on", "unknown"], capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stderr
    assert "v4.id" in clean.stdout and "random-uuid" in clean.stdout
    ordered = subprocess.run([*run, "--fail-on", "out-of-order"], capture_output=True, text=True, timeout=120)
    assert ordered.returncode == 1 and "comb_last.id (out-of-order)" in ordered.stdout


def test_fail_on_names_only_what_exists():
    with pytest.raises(InvalidArgumentError, match="--fail-on takes"):
        failing([], ["random"])
    done = subprocess.run(
        [sys.executable, "-m", "seqid_orm", "doctor", "sqlite:///x.db", "--fail-on", "random"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "expected some of random-uuid" in done.stderr


def test_bad_urls_and_unreachable_servers_are_typed_errors(tmp_path, pg_engine):
    with pytest.raises(InvalidArgumentError, match="not a database URL"):
        diagnose("no url at all")
    with pytest.raises(InvalidArgumentError, match="SQLite file"):
        diagnose("sqlite://")
    missing = tmp_path / "missing.db"
    with pytest.raises(DatabaseUnavailableError, match="unable to open"):
        diagnose(f"sqlite:///{missing}")
    assert not missing.exists()  # opened read-only: nothing is created
    with pytest.raises(DatabaseUnavailableError, match=r"127\.0\.0\.1") as info:
        diagnose("postgresql+psycopg://postgres:secret@127.0.0.1:1/test")
    assert "secret" not in str(info.value)
    done = subprocess.run(
        [sys.executable, "-m", "seqid_orm", "doctor", "postgresql+psycopg://postgres@127.0.0.1:1/test"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("seqid: error:") and "Traceback" not in done.stderr


def test_a_read_that_outlives_the_timeout_is_refused_in_time(pg_engine):
    """A table locked by another transaction blocks the doctor's reads: statement_timeout ends them,
    and that table's line says so (before: it cost the whole report); the other tables are read."""
    name = f"seqid_doctor_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {name}")
        conn.exec_driver_sql(f"CREATE TABLE {name}.locked (id uuid PRIMARY KEY)")
        conn.exec_driver_sql(f"CREATE TABLE {name}.readable (id uuid PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {name}.readable SELECT gen_random_uuid() FROM generate_series(1, 300)")
    locker = pg_engine.connect()
    try:
        locker.exec_driver_sql(f"LOCK TABLE {name}.locked IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        found = {
            f.table: f for f in diagnose(f"{POSTGRES_URL}?options=-csearch_path%3D{name}", timeout=1, schemas=[name])
        }
        assert time.monotonic() - started < 10
        assert found["locked"].kind == "unreadable" and "statement timeout" in found["locked"].advice
        assert "locked.id (unreadable): not read: QueryCanceled" in render(list(found.values()))
        assert found["readable"].kind == "random-uuid" and found["readable"].sampled == 300
    finally:
        locker.rollback()
        locker.close()
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")


def test_the_doctor_cannot_write_even_if_it_tried(tmp_path):
    """The session it reads in refuses writes: SQLite opened mode=ro."""
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    engine.dispose()
    from seqid_orm.sqlalchemy.doctor import read_only_url

    ro = sa.create_engine(read_only_url(url))
    with ro.connect() as conn, pytest.raises(sa.exc.OperationalError, match="readonly"):
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    ro.dispose()


@pytest.mark.parametrize("vendor", ["postgresql", "mysql"])
def test_a_server_that_accepts_and_never_answers_is_given_up_on_in_time(vendor, request):
    """Before: killed at 90 s with --timeout 2 (no connect or handshake deadline).  A proxy that
    accepts the connection and forwards nothing, as a frozen server or a dropped link looks."""
    from tests.servers.proxy import StallableProxy

    request.getfixturevalue("pg_engine" if vendor == "postgresql" else "mysql_engine")
    proxy = StallableProxy(5432 if vendor == "postgresql" else 3306)
    proxy.stall()
    url = (
        f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test"
        if vendor == "postgresql"
        else f"mysql+pymysql://root@127.0.0.1:{proxy.port}/test"
    )
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError):
            diagnose(url, timeout=2)
        assert time.monotonic() - started < 2 + 3  # its connect deadline, not forever
    finally:
        proxy.close()


@pytest.mark.parametrize("vendor", ["postgresql", "mariadb", "sqlite"])
def test_odd_names_and_a_table_it_may_not_read_leave_the_rest_of_the_report(vendor, request, tmp_path):
    """Before: a table named ``a :b`` with a column ``:pivot`` was "A value is required for bind
    parameter 'b'" and no report at all; now every table has its line."""
    import sqlalchemy as sa

    if vendor == "sqlite":
        url = f"sqlite:///{tmp_path / 'odd.sqlite3'}"
        engine = sa.create_engine(url)
    else:
        engine = request.getfixturevalue("pg_engine" if vendor == "postgresql" else "mysql_engine")
        url = engine.url.render_as_string(hide_password=False)
    q = engine.dialect.identifier_preparer.quote
    odd, plain = f"odd :b {secrets.token_hex(2)}", f"plain_{secrets.token_hex(3)}"
    uuid_type = "uuid" if vendor == "postgresql" else "char(36)"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {q(odd)} ({q(':pivot')} {uuid_type} PRIMARY KEY)")
        conn.exec_driver_sql(f"CREATE TABLE {q(plain)} (id {uuid_type} PRIMARY KEY)")
        for table in (odd, plain):
            rows = [{"v": str(uuid.uuid4())} for _ in range(200)]
            escaped = q(table).replace(":", "\\:")  # text()'s own way to say a colon is no parameter
            conn.execute(sa.text(f"INSERT INTO {escaped} VALUES (:v)"), rows)
    try:
        found = {f.table: f for f in diagnose(url, timeout=5)}
        assert found[odd].column == ":pivot" and found[odd].kind == "random-uuid", found[odd]
        assert found[plain].kind == "random-uuid" and found[plain].sampled == 200
    finally:
        with engine.begin() as conn:
            for table in (odd, plain):
                conn.exec_driver_sql(f"DROP TABLE {q(table)}")
        if vendor == "sqlite":
            engine.dispose()


def test_a_sqlite_database_locked_by_another_connection_is_given_up_on_at_the_timeout(tmp_path):
    """Before: with another connection in `BEGIN EXCLUSIVE` the doctor waited 6.3 s at
    `--timeout 2` (the driver's own busy wait); now the wait is the doctor's timeout."""
    path = tmp_path / "locked.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("CREATE TABLE t (id char(36) PRIMARY KEY)")
        holder.executemany("INSERT INTO t VALUES (?)", [(str(uuid.uuid4()),) for _ in range(50)])
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="database is locked"):
            diagnose(f"sqlite:///{path}", timeout=1)
        assert time.monotonic() - started < 1 + 3  # its timeout, not the driver's 5 s or more
        holder.execute("ROLLBACK")
        assert {f.table: f.kind for f in diagnose(f"sqlite:///{path}", timeout=1)} == {"t": "random-uuid"}
    finally:
        holder.close()


def test_the_sqlite_statement_deadline_interrupts_a_long_statement_and_each_read_rearms_it():
    """SQLite has no statement timeout: StatementDeadline, the progress handler both adapters
    install, ends a statement that runs past the deadline and gives the next read its own."""
    now = [100.0]
    deadline = StatementDeadline(2, clock=lambda: now[0])
    conn = sqlite3.connect(":memory:")
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    try:
        deadline.install(conn)
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):  # not armed yet: at once
            conn.execute(endless).fetchone()
        deadline.start()
        assert conn.execute("SELECT count(*) FROM (SELECT 1 UNION ALL SELECT 2)").fetchone() == (2,)
        now[0] += 1.9  # inside the 2 s
        assert deadline.expired() == 0
        now[0] += 0.2
        assert deadline.expired() == 1
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            conn.execute(endless).fetchone()  # ends only by the deadline
        deadline.start()
        assert deadline.expired() == 0
        deadline.uninstall(conn)
        now[0] += 10
        limited = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100000) SELECT count(*) FROM n"
        assert conn.execute(limited).fetchone() == (100000,)  # no handler left to interrupt it
    finally:
        conn.close()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "2"])
def test_the_statement_deadline_refuses_a_timeout_that_is_not_seconds(bad):
    with pytest.raises(InvalidArgumentError, match="timeout must be seconds"):
        StatementDeadline(bad)


def test_every_schema_is_read_and_a_partitioned_table_is_one_line(pg_engine):
    """Before: only current_schema() was read, so 2,000 random keys in another schema passed
    `--fail-on random-uuid`, and a partitioned table was listed once per partition.  Now every
    schema is read (outside the current one a table is `schema.table`), `--schema` narrows it,
    and a partitioned table is one line whose rows and index bytes are its partitions'."""
    base, other = f"seqid_doc_{secrets.token_hex(3)}", f"seqid_other_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        for schema in (base, other):
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        conn.exec_driver_sql(f"CREATE TABLE {base}.seq (id bigint PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {base}.seq SELECT g FROM generate_series(1, 500) g")
        conn.exec_driver_sql(f"CREATE TABLE {other}.legacy (id uuid PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {other}.legacy SELECT gen_random_uuid() FROM generate_series(1, 2000)")
        conn.exec_driver_sql(
            f"CREATE TABLE {other}.events (id uuid, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at)"
        )
        conn.exec_driver_sql(f"CREATE TABLE {other}.logs (id uuid PRIMARY KEY, n int) PARTITION BY HASH (id)")
        for k in range(3):
            conn.exec_driver_sql(
                f"CREATE TABLE {other}.logs_{k} PARTITION OF {other}.logs FOR VALUES WITH (MODULUS 3, REMAINDER {k})"
            )
        conn.exec_driver_sql(f"INSERT INTO {other}.logs SELECT gen_random_uuid(), g FROM generate_series(1, 900) g")
        conn.exec_driver_sql(f"ANALYZE {other}.legacy, {other}.logs")
    url = f"{POSTGRES_URL}?options=-csearch_path%3D{base}"
    try:
        found = {f.table: f for f in diagnose(url, schemas=[base, other])}
        assert set(found) == {"seq", f"{other}.legacy", f"{other}.logs"}, set(found)
        assert found[f"{other}.legacy"].kind == "random-uuid" and found[f"{other}.legacy"].sampled >= 200
        logs = found[f"{other}.logs"]
        assert logs.kind == "random-uuid" and logs.rows == 900, logs
        with pg_engine.connect() as conn:
            leaf_bytes = conn.exec_driver_sql(
                f"SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid IN "
                f"('{other}.logs_0'::regclass, '{other}.logs_1'::regclass, '{other}.logs_2'::regclass)"
            ).scalar_one()
        assert logs.index_bytes == leaf_bytes > 0
        # --schema narrows; without it every schema is read, this one's among them
        assert {f.table for f in diagnose(url, schemas=[base])} == {"seq"}
        assert f"{other}.legacy" in {f.table for f in diagnose(url, timeout=5)}
        cli = [sys.executable, "-m", "seqid_orm", "doctor", url, "--schema", base, "--schema", other]
        done = subprocess.run([*cli, "--fail-on", "random-uuid"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and f"{other}.legacy.id (random-uuid)" in done.stdout, done.stdout + done.stderr
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {base} CASCADE")
            conn.exec_driver_sql(f"DROP SCHEMA {other} CASCADE")


@pytest.mark.parametrize("bad", ["public", [], [""], [3]])
def test_schemas_must_be_a_list_of_names(bad, tmp_path):
    with pytest.raises(InvalidArgumentError, match="schemas must be a list of schema names"):
        diagnose(f"sqlite:///{tmp_path / 'x.db'}", schemas=bad)


def test_schemas_are_refused_where_the_database_has_none(mysql_engine):
    with pytest.raises(InvalidArgumentError, match="schemas are PostgreSQL's schemas and SQLite's attached"):
        diagnose(MYSQL_URL, schemas=["test"])


def test_sqlites_attached_databases_are_read_and_named_schema_table(tmp_path):
    """Before: the doctor read SQLite's main database only.  An engine that attaches a second
    file on each connection: its tables are read too, named ``schema.table``; ``schemas`` narrows."""
    main, archive = tmp_path / "main.db", tmp_path / "archive.db"
    for path, table in ((main, "orders"), (archive, "old_orders")):
        conn = sqlite3.connect(path)
        conn.execute(f"CREATE TABLE {table} (id char(36) PRIMARY KEY)")
        conn.executemany(f"INSERT INTO {table} VALUES (?)", [(str(uuid.uuid4()),) for _ in range(300)])
        conn.commit()
        conn.close()
    engine = sa.create_engine(f"sqlite:///{main}")

    @sa.event.listens_for(engine, "connect")
    def attach(dbapi_connection, _record):
        dbapi_connection.execute(f"ATTACH DATABASE '{archive}' AS archive")

    try:
        found = {f.table: f for f in diagnose(engine)}
        assert set(found) == {"orders", "archive.old_orders"}, found
        assert all(f.kind == "random-uuid" and f.sampled >= 200 for f in found.values())
        assert [f.table for f in diagnose(engine, schemas=["archive"])] == ["archive.old_orders"]
    finally:
        engine.dispose()


def test_a_text_key_of_one_uuid_and_many_characters_and_a_key_of_mixed_storage_classes_are_read(tmp_path, pg_engine):
    """Before: a text key column holding one UUID string below keys of many distinct characters
    made a pivot past 128 bits ("int is out of range", no report at all), and a SQLite key column
    of several storage classes ended in an untyped OverflowError with exit status 1.  Now each
    column reads as one kind of value, and both have their line."""
    rng = secrets.SystemRandom()
    chars = [chr(0x4E00 + i) for i in range(400)]
    words = ["".join(rng.choice(chars) for _ in range(20)) for _ in range(500)]
    low_uuid = str(uuid.UUID(int=1 << 120))  # sorts before every CJK word
    path = tmp_path / "mixed.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE words (k text PRIMARY KEY)")
    conn.executemany("INSERT INTO words VALUES (?)", [(low_uuid,), *((w,) for w in words)])
    conn.execute("CREATE TABLE mixed (k PRIMARY KEY)")  # no type: each value keeps its own storage class
    values = [*range(1, 300), 2.5e30, 5e30, b"\x01" * 16, *(f"text{i}" for i in range(300)), str(uuid.uuid4())]
    conn.executemany("INSERT INTO mixed VALUES (?)", [(v,) for v in values])
    conn.commit()
    conn.close()
    found = {f.table: f for f in diagnose(f"sqlite:///{path}")}
    assert found["words"].kind == "unknown" and found["words"].sampled > 200, found["words"]
    assert found["mixed"].kind == "unknown" and found["mixed"].sampled > 0, found["mixed"]
    done = subprocess.run(
        [sys.executable, "-m", "seqid_orm", "doctor", f"sqlite:///{path}", "--fail-on", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # nothing random, and no error
    assert "words.k" in done.stdout and "mixed.k" in done.stdout

    schema = f"seqid_doc_{secrets.token_hex(3)}"
    with pg_engine.begin() as c:
        c.exec_driver_sql(f"CREATE SCHEMA {schema}")
        c.exec_driver_sql(f"CREATE TABLE {schema}.words (k text PRIMARY KEY)")
        c.execute(sa.text(f"INSERT INTO {schema}.words VALUES (:k)"), [{"k": low_uuid}, *({"k": w} for w in words)])
    try:
        (words_line,) = diagnose(f"{POSTGRES_URL}?options=-csearch_path%3D{schema}", schemas=[schema])
        assert words_line.table == "words" and words_line.kind == "unknown" and words_line.sampled > 200
    finally:
        with pg_engine.begin() as c:
            c.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql+psycopg://postgres:secret@127.0.0.1:1/test", "DatabaseUnavailableError"),
        ("sqlite:///{tmp}/missing.db", "DatabaseUnavailableError"),
        ("no url at all", "InvalidArgumentError"),
    ],
)
def test_json_is_one_document_also_when_the_run_cannot_check(url, error, tmp_path):
    """Before: with `--json` a run that could not check printed nothing on stdout; now it prints
    the same document as ever, no findings and the error that stopped it, with exit status 2 and
    the one-line error on stderr (no password in either)."""
    done = subprocess.run(
        [sys.executable, "-m", "seqid_orm", "doctor", url.format(tmp=tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("seqid: error:"), done.stderr
    document = json.loads(done.stdout)
    assert document["findings"] == []
    assert [e["type"] for e in document["errors"]] == [error] and document["errors"][0]["message"]
    assert "secret" not in done.stdout + done.stderr


def _finding(table: str, kind: str = "random-uuid", sampled: int = 500, **extra: object):
    from seqid_orm.schema.doctor import Finding

    fields = {
        "table": table,
        "column": "id",
        "primary": True,
        "sql_type": "uuid",
        "kind": kind,
        "format": "uuid4" if kind == "random-uuid" else None,
        "in_order": None,
        "in_order_share": None,
        "keys_layout": None,
        "needed_layout": None,
        "rows": 9_999_871 if sampled else 0,
        "index_bytes": 406_000_000 if sampled else 8192,
        "ideal_index_bytes": 313_000_000 if sampled else None,
        "sampled": sampled,
        "advice": "SQLAlchemy: id: Mapped[uuid.UUID] = seq_uuid_pk(); Django: SeqUUIDField(primary_key=True, "
        "editable=False). Migration: Django writes one AlterField, no SQL on PostgreSQL and MariaDB; Alembic: "
        "none (the column type stays). Existing rows keep their keys.",
    }
    return Finding(**{**fields, **extra})


def test_the_report_reads_at_80_columns_with_every_name_whole_and_empty_tables_in_one_line():
    """Before: rows were 123 columns wide, advice lines about 400 characters, `table.column` cut at
    36 characters (two Wagtail rows looked the same), and 43 of 88 rows were empty tables shown as
    "unknown".  Now a row fits 80 columns, names are whole, advice wraps, and the empty tables
    share one line."""
    long_a = "wagtailcore_groupcollectionpermission_a"
    long_b = "wagtailcore_groupcollectionpermission_b"
    findings = [
        _finding("orders"),
        _finding(long_a, kind="integer-sequence", advice="fine: new keys append at the end of the index."),
        _finding(long_b, kind="integer-sequence", advice="fine: new keys append at the end of the index."),
        *(_finding(f"empty_{i}", kind="unknown", sampled=0, advice="nothing") for i in range(40)),
    ]
    report = render(findings)
    lines = report.splitlines()
    table = lines[: lines.index("")] if "" in lines else lines
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    # whole, on a line of its own above its row: the two rows differ
    assert f"{long_a}.id" in table and f"{long_b}.id" in table
    row_a = table[table.index(f"{long_a}.id") + 1]
    assert row_a.startswith(" ") and row_a.split()[0] == "integer-sequence"
    assert "40 empty table(s)" in report and sum("empty_" in line for line in table[:4]) == 0
    row = next(line for line in table if line.startswith("orders.id"))
    assert row.split()[1:] == ["random-uuid", "uuid4", "-", "10.0M", "387.2", "MB", "1.30"]
    advice = report[report.index("orders.id (random-uuid):") :]
    assert advice.count("\n") >= 2 and "Existing rows keep their keys." in advice.replace("\n  ", " ")


def test_the_advice_fits_a_unique_column_beside_the_key_and_a_key_kept_as_text(tmp_path):
    """Before: a unique column that is not the key was told `primary_key=True`, and a UUID key kept
    as `char(36)` (django-silk's, django-q2's) was told its change runs no SQL, where Django alters
    the column's type and drops and re-adds each foreign key to it."""
    path = tmp_path / "advice.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE requests (id char(36) PRIMARY KEY)")
    conn.execute("CREATE TABLE tokens (id integer PRIMARY KEY, token char(36) UNIQUE)")
    conn.executemany("INSERT INTO requests VALUES (?)", [(str(uuid.uuid4()),) for _ in range(300)])
    conn.executemany("INSERT INTO tokens (token) VALUES (?)", [(str(uuid.uuid4()),) for _ in range(300)])
    conn.commit()
    conn.close()
    found = {(f.table, f.column): f for f in diagnose(f"sqlite:///{path}")}
    key = found[("requests", "id")]
    assert key.kind == "random-uuid" and key.primary
    assert 'seq_uuid_pk(storage="text")' in key.advice and "SeqUUIDField(primary_key=True" in key.advice
    assert "changes the column's type" in key.advice and "no SQL" not in key.advice
    token = found[("tokens", "token")]
    assert token.kind == "random-uuid" and not token.primary
    assert "primary_key" not in token.advice and "seq_uuid_pk" not in token.advice
    assert 'SeqUUID(storage="text"), unique=True' in token.advice and "SeqUUIDField(unique=True" in token.advice


@pytest.mark.parametrize("vendor", ["postgresql", "mariadb", "sqlite"])
def test_a_multi_table_childs_pointer_is_sent_to_its_parent(vendor, request, tmp_path):
    """Before: a multi-table child's pointer (its key, a foreign key to its parent's) was given
    the fix that belongs on the parent.  Now the child's line names the parent and changes nothing
    there."""
    name = f"seqid_mti_{secrets.token_hex(3)}"
    if vendor == "sqlite":
        url = f"sqlite:///{tmp_path / 'mti.sqlite3'}"
        admin, key_type = None, "char(36)"
    elif vendor == "postgresql":
        admin, key_type = request.getfixturevalue("pg_engine"), "uuid"
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {name}")
        url = f"{POSTGRES_URL}?options=-csearch_path%3D{name}"
    else:
        admin, key_type = request.getfixturevalue("mysql_engine"), "char(36)"
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        url = MYSQL_URL.rsplit("/", 1)[0] + f"/{name}"
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE TABLE place (id {key_type} PRIMARY KEY)")
            conn.exec_driver_sql(
                f"CREATE TABLE restaurant (place_ptr_id {key_type} PRIMARY KEY, "
                "FOREIGN KEY (place_ptr_id) REFERENCES place (id))"
            )
            keys = [{"k": str(uuid.uuid4())} for _ in range(300)]
            conn.execute(sa.text("INSERT INTO place VALUES (:k)"), keys)
            conn.execute(sa.text("INSERT INTO restaurant VALUES (:k)"), keys)
        found = {f.table: f for f in diagnose(url, **({"schemas": [name]} if vendor == "postgresql" else {}))}
        parent, child = found["place"], found["restaurant"]
        assert parent.kind == child.kind == "random-uuid"
        assert parent.references is None and "SeqUUIDField(primary_key=True" in parent.advice
        assert child.references == "place", child
        assert "foreign key to place" in child.advice and "SeqUUIDField" not in child.advice
    finally:
        engine.dispose()
        if vendor == "postgresql":
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
        elif vendor == "mariadb":
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP DATABASE {name}")


@pytest.fixture
def mariadb_database(mysql_engine):
    """The URL of a MariaDB database of the test's own, dropped after it."""
    name = f"seqid_doctor_{secrets.token_hex(3)}"
    admin = sa.create_engine(MYSQL_URL, poolclass=sa.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield MYSQL_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {name}")
        admin.dispose()


def test_mariadbs_uuid_type_is_sampled_in_its_own_order(mysql_engine, mariadb_database):
    """MariaDB's ``UUID`` type compares versions 1-5 group-swapped (node first, time last) and the
    others byte by byte: pivots made in the integer order start runs where MariaDB's order does not
    put them, and the runs overlap (200-800 distinct keys of the 1,000 asked).  Made in
    MariaDB's own order, each run is keys of its own; the kinds and orders stay what they were (a
    version-4 COMB with its time last *is* in order there)."""
    with mysql_engine.connect() as conn:
        version = conn.dialect.server_version_info
    if not conn.dialect.is_mariadb or tuple(version[:2]) < (10, 7):
        pytest.fail(f"this test needs MariaDB 10.7 or newer (its UUID type), the server is {version}")
    url = mariadb_database
    engine = sa.create_engine(url)
    expected = {"v4": ("random-uuid", None), "v7": ("time-ordered", True), "comb_last": ("time-ordered", True)}
    try:
        with engine.begin() as conn:
            for table in expected:
                conn.exec_driver_sql(f"CREATE TABLE {table} (id UUID NOT NULL PRIMARY KEY)")
                rows = [{"id": str(k)} for k in keys(table, "postgresql")]  # UUIDs, as text the type parses
                conn.execute(sa.text(f"INSERT INTO {table} (id) VALUES (:id)"), rows)
        findings = {f.table: f for f in diagnose(url, sample=1000)}
        for table, (kind, in_order) in expected.items():
            found = findings[table]
            assert (found.kind, found.in_order) == (kind, in_order), found
            assert found.sampled >= 950, (table, found.sampled)  # of 1,000 asked: the runs do not overlap
    finally:
        engine.dispose()


def test_a_unique_index_beside_an_innodb_key_has_its_size_and_ideal_from_innodbs_statistics(mariadb_database):
    """Before: MariaDB's index sizes printed as '-'.  A unique BINARY(16) column beside a BIGINT key:
    its leaf pages come from InnoDB's own statistics, and beside them the pages the same index takes
    built in key order.  Filled in key order it sits at the ideal; filled with random UUIDs, well above."""
    url = mariadb_database
    engine = sa.create_engine(url)
    tokens = [uuid.uuid4().bytes for _ in range(ROWS)]
    try:
        with engine.begin() as conn:
            for table, values in (("in_order", sorted(tokens)), ("random", tokens)):
                conn.exec_driver_sql(
                    f"CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BINARY(16) NOT NULL UNIQUE)"
                )
                conn.execute(sa.text(f"INSERT INTO {table} (token) VALUES (:t)"), [{"t": t} for t in values])
                conn.exec_driver_sql(f"ANALYZE TABLE {table}")
        found = {(f.table, f.column): f for f in diagnose(url)}
        ordered, scattered = found[("in_order", "token")], found[("random", "token")]
        for f in (ordered, scattered):
            assert not f.primary and f.index_bytes and f.ideal_index_bytes, f
            assert f.ideal_index_bytes == ordered.ideal_index_bytes  # one ideal for the same keys
        assert 0.95 <= ordered.index_bytes / ordered.ideal_index_bytes <= 1.08, ordered
        assert scattered.index_bytes / scattered.ideal_index_bytes >= 1.25, scattered
        assert found[("random", "id")].index_bytes >= 16384 and found[("random", "id")].ideal_index_bytes is None
        report = render(list(found.values()))
        assert any(line.startswith("random.token") and line.split()[-1] != "-" for line in report.splitlines())
    finally:
        engine.dispose()


def test_a_table_emptied_between_the_doctors_two_reads_gives_no_sample():
    """Scripted reads: the smallest keys come back, then the largest are none (the table was dropped and
    made again between the two statements, its rows not yet committed). Before: an IndexError that lost
    the whole report, seen once in CI beside the churn test above."""
    from seqid_orm.schema.doctor import KeyColumn, _sample

    class Emptied:
        def __init__(self):
            self.statements: list[str] = []

        def fetch(self, sql, params):
            self.statements.append(sql)
            return [] if "DESC" in sql else [(uuid.uuid4().bytes,) for _ in range(3)]

        def recover(self):
            raise AssertionError("nothing failed")

    reads = Emptied()
    assert _sample(reads, "sqlite", KeyColumn("t", "id", "BLOB", True), 100) == []
    assert len(reads.statements) == 2


def _states(vendor: str) -> dict[str, tuple[list[uuid.UUID], int | None]]:
    """Each adoption state as a column's keys (and the record its comment holds): ROWS random keys, then keys
    made since over the last two hours."""
    old = [uuid.uuid4() for _ in range(ROWS)]
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
    when = [start + dt.timedelta(seconds=n * 0.72) for n in range(ROWS // 2)]
    # what the adopting migration decides: from the largest keys as the database orders them (a uuid
    # compares its bytes), largest first; an unordered list judged its first random key, and the width
    # came out too narrow (keys inside the old ones) or 0 about one run in three
    largest = sorted(old, key=lambda key: key.bytes, reverse=True)
    width = seqid_orm.vendors.target(vendor, (15,), "native").above_for(largest, rows=len(old))

    def made(above: int, times: list[dt.datetime]) -> list[uuid.UUID]:
        return [seqid_orm.comb_at(t, Layout.TIME_FIRST, above=above) for t in times]

    half = len(when) // 2
    high = [uuid.UUID(int=((1 << 128) - 1) ^ (k + 1)) for k in range(3)]  # three keys above even the widest
    return {
        "recorded": (old + made(width, when), width),
        "untouched": (old, None),
        "plain_among_old": (old + made(0, when), None),
        "adopted_and_plain": (made(width, when[:half]) + made(0, when[half:]), None),  # emptied under processes
        "two_widths": (old + made(width, when[:half]) + made(width + 4, when[half:]), None),
        "below_high_old_keys": (old + high + made(width, when), width),
    }


def test_the_doctor_tells_every_adoption_state_apart_and_reads_the_record(pg_engine):
    """On PostgreSQL, which splits inner pages half: adopted and recorded (nothing to do), untouched (swap),
    UUIDv7 among the old keys (adopt), adopted keys beside plain ones and two widths (processes that judged
    the column differently: record it), adopted keys below a few high old keys (not random keys: fine)."""
    schema = f"seqid_states_{secrets.token_hex(3)}"
    states = _states("postgresql")
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        for name, (values, record) in states.items():
            conn.exec_driver_sql(f"CREATE TABLE {schema}.{name} (id uuid PRIMARY KEY)")
            conn.execute(sa.text(f"INSERT INTO {schema}.{name} (id) VALUES (:id)"), [{"id": k} for k in values])
            if record is not None:
                conn.exec_driver_sql(f"COMMENT ON COLUMN {schema}.{name}.id IS '[seqid adopted={record}]'")
    try:
        found = {f.table.split(".")[-1]: f for f in diagnose(POSTGRES_URL, sample=500, schemas=[schema])}
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    width = states["recorded"][1]
    recorded = found["recorded"]
    assert (recorded.kind, recorded.problem, recorded.record, recorded.widths) == ("adopted", None, width, (width,))
    assert "recorded" in recorded.advice and "duplicate keys a year" in recorded.advice
    untouched = found["untouched"]
    assert (untouched.kind, untouched.problem) == ("random-uuid", "random-uuid")
    assert "op.adopt_seqid_keys" in untouched.advice and "AdoptSeqUUID" in untouched.advice
    among = found["plain_among_old"]
    assert (among.kind, among.problem, among.new_keys) == ("adopted", "inside-old-keys", "among-old-keys")
    assert "op.adopt_seqid_keys" in among.advice
    mixed = found["adopted_and_plain"]
    assert (mixed.kind, mixed.problem, mixed.widths, mixed.new_keys_format) == (
        "adopted",
        "widths-disagree",
        (0, width),
        "mixed",
    )
    assert "plain UUIDv7 and after" in mixed.advice and "Record the adoption" in mixed.advice
    two = found["two_widths"]
    assert (two.problem, two.widths) == ("widths-disagree", (width, width + 4))
    high = found["below_high_old_keys"]
    assert (high.kind, high.problem, high.new_keys, high.kept_above) == ("adopted", None, "after-old-keys", 3)
    assert "stay on the index's rightmost page" in high.advice


@pytest.mark.parametrize("vendor", ["postgresql", "mysql"])
def test_a_table_the_doctor_has_read_stays_free_for_a_migration_while_it_reads_the_next(vendor, request):
    """The doctor read a database in one transaction, so every table it had read stayed locked until
    its last read (PostgreSQL's ACCESS SHARE, MariaDB's metadata lock): a migration's ALTER TABLE of a
    table read early waited for the whole run, and every query of the application then queued behind
    that ALTER; a DROP TABLE in another session deadlocked with it (CI: `DeadlockDetected` on a test's
    DROP while another worker's doctor read the database).  Each read is now a transaction of its own:
    while the doctor waits on a table another session holds, an ALTER TABLE of one it read goes through
    at once, and the report still comes."""
    name = f"seqid_doctor_{secrets.token_hex(3)}"
    if vendor == "postgresql":
        admin, url, where = request.getfixturevalue("pg_engine"), f"{POSTGRES_URL}", f"{name}."
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {name}")
    else:
        url = request.getfixturevalue("mariadb_database")
        admin, where = sa.create_engine(url, poolclass=sa.NullPool), ""
    with admin.begin() as conn:
        for table in ("a_read", "b_held"):
            key = "uuid" if vendor == "postgresql" else "BINARY(16)"
            conn.exec_driver_sql(f"CREATE TABLE {where}{table} (id {key} PRIMARY KEY)")
        rows = ", ".join(
            f"(x'{uuid.uuid4().hex}')" if vendor != "postgresql" else f"('{uuid.uuid4()}')" for _ in range(50)
        )
        for table in ("a_read", "b_held"):  # an empty table's keys are not sampled
            conn.exec_driver_sql(f"INSERT INTO {where}{table} (id) VALUES {rows}")
    holder, migrator = admin.connect(), admin.connect()
    found: list[object] = []
    try:
        if vendor == "postgresql":
            holder.exec_driver_sql(f"LOCK TABLE {name}.b_held IN ACCESS EXCLUSIVE MODE")
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%b_held%'"
                " AND pid <> pg_backend_pid()"
            )
            migrator.exec_driver_sql("SET lock_timeout = '2s'")
        else:
            holder.exec_driver_sql("LOCK TABLES b_held WRITE")
            waiting = (
                "SELECT count(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for table metadata%'"
                " AND INFO LIKE '%b_held%'"
            )
            migrator.exec_driver_sql("SET SESSION lock_wait_timeout = 2")
        schemas = [name] if vendor == "postgresql" else None
        doctor = threading.Thread(target=lambda: found.extend(diagnose(url, timeout=20, schemas=schemas)), daemon=True)
        doctor.start()

        def doctor_waits() -> bool:  # a connection a poll: a transaction keeps its first view of the sessions
            with admin.connect() as watcher:
                return bool(watcher.execute(sa.text(waiting)).scalar())

        until = time.monotonic() + 15
        while not doctor_waits() and time.monotonic() < until:
            time.sleep(0.05)
        assert doctor_waits(), "the doctor never came to the held table"
        # before: the doctor's one transaction kept a_read locked, and this waited out its 2 s lock
        # time-out (LockNotAvailable, 1205); no timed assert, which a busy machine could fail
        migrator.exec_driver_sql(f"ALTER TABLE {where}a_read ADD COLUMN note INT")
        migrator.commit()
        assert doctor.is_alive()  # the doctor was still waiting, mid-run, while the ALTER went through
    finally:
        holder.rollback()
        if vendor != "postgresql":
            holder.exec_driver_sql("UNLOCK TABLES")
        holder.close()
        migrator.close()
        doctor.join(30)
        with admin.begin() as conn:
            if vendor == "postgresql":
                conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
        if vendor != "postgresql":
            admin.dispose()
    assert not doctor.is_alive()
    assert {f.table.rsplit(".", 1)[-1] for f in found} >= {"a_read", "b_held"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("vendor", ["postgresql", "mysql"])
def test_the_doctor_hands_no_read_only_session_back_to_the_callers_engine(vendor, request):
    """`diagnose(engine)` made a connection of the caller's pool read-only, with the doctor's statement
    time-out, and handed it back: the application's next write on it failed ("cannot execute INSERT in
    a read-only transaction", MariaDB's 1792).  The doctor's connection is now closed at the end."""
    url = POSTGRES_URL if vendor == "postgresql" else MYSQL_URL
    engine = sa.create_engine(url, pool_size=1, max_overflow=0)  # one connection: the doctor's, then the app's
    table = f"seqid_doctor_app_{secrets.token_hex(3)}"
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE TABLE {table} (id INT PRIMARY KEY)")
        diagnose(engine, timeout=5, schemas=["public"] if vendor == "postgresql" else None)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO {table} (id) VALUES (1)")
            read_only = "SHOW transaction_read_only" if vendor == "postgresql" else "SELECT @@session.tx_read_only"
            assert str(conn.exec_driver_sql(read_only).scalar()) in ("off", "0")
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        engine.dispose()


@pytest.mark.parametrize("timeout", [2, 5])
def test_a_mariadb_table_another_session_holds_costs_only_its_own_line(mysql_engine, mariadb_database, timeout):
    """``LOCK TABLES ... WRITE`` in another session (a dump, a migration): a read of that table waits for its
    metadata lock.  Before, ``seqid doctor --timeout 2`` (and ``5``) ended in DatabaseUnavailableError, ``Lost
    connection ... (timed out)``, exit 2, with no finding at all: the driver's read time-out was the statement's
    own bound, and cut the connection before the server ended the wait.  Now the server ends it first (its
    statement and lock-wait bounds; the driver waits a little longer): the held table's line says it was not
    read, and the others are reported."""
    admin = sa.create_engine(mariadb_database, poolclass=sa.NullPool)
    rows = ", ".join(f"(x'{uuid.uuid4().hex}')" for _ in range(50))
    with admin.begin() as conn:
        for table in ("a_free", "b_held", "c_free"):
            conn.exec_driver_sql(f"CREATE TABLE {table} (id BINARY(16) PRIMARY KEY)")
            conn.exec_driver_sql(f"INSERT INTO {table} (id) VALUES {rows}")
    holder = admin.connect()
    try:
        holder.exec_driver_sql("LOCK TABLES b_held WRITE")
        run = subprocess.run(
            [sys.executable, "-m", "seqid_orm", "doctor", mariadb_database, "--timeout", str(timeout), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        holder.exec_driver_sql("UNLOCK TABLES")
        holder.close()
        admin.dispose()
    assert run.returncode == 0, run.stderr[-2000:]
    document = json.loads(run.stdout)
    assert document["errors"] == []
    found = {f["table"].rsplit(".", 1)[-1]: f for f in document["findings"]}
    assert set(found) >= {"a_free", "b_held", "c_free"}
    held = found["b_held"]
    assert held["kind"] == "unreadable" and "Lost connection" not in held["advice"], held
    assert found["a_free"]["kind"] == found["c_free"]["kind"] == "random-uuid"


def test_an_integer_key_gets_its_plan_and_what_no_foreign_key_follows(pg_engine, mysql_engine):
    """Each integer primary key of the current schema: the plan names the operations, every foreign key to it
    (a self-reference, a child), the rows, the time at the measured rate, the locks, and a generic relation
    (an object id beside a content type, as Django's admin log) that no foreign key links; a key the change
    cannot keep (a composite foreign key to it) gets the refusal's reason; on MariaDB the reason it is not
    online there.  The CLI prints it."""
    schema = f"seqid_rk_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        conn.exec_driver_sql(f"SET LOCAL search_path = {schema}")
        conn.exec_driver_sql("CREATE TABLE author (id bigserial PRIMARY KEY, mentor_id bigint REFERENCES author)")
        conn.exec_driver_sql(
            "CREATE TABLE book (id bigserial PRIMARY KEY, author_id bigint REFERENCES author ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE admin_log (id serial PRIMARY KEY, content_type_id int NOT NULL, object_id text)"
        )
        conn.exec_driver_sql("CREATE TABLE shelf (id int, n int, PRIMARY KEY (id, n))")
        conn.exec_driver_sql(
            "CREATE TABLE slot (id serial PRIMARY KEY, s int, n int, FOREIGN KEY (s, n) REFERENCES shelf)"
        )
        conn.exec_driver_sql("INSERT INTO author (mentor_id) SELECT NULL FROM generate_series(1, 3000)")
        conn.exec_driver_sql("INSERT INTO book (author_id) SELECT g %% 3000 + 1 FROM generate_series(1, 6000) g")
        conn.exec_driver_sql("INSERT INTO admin_log (content_type_id, object_id) VALUES (1, '7')")
        conn.exec_driver_sql("CREATE INDEX book_by_author ON book (author_id)")  # as Django indexes a ForeignKey
        conn.exec_driver_sql("ANALYZE author; ANALYZE book")
    url = f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    try:
        found = {f.table: f for f in diagnose(url, schemas=[schema])}
        plan = found["author"].plan
        assert plan is not None and "rekey_expand / RekeyExpand" in plan, plan
        assert "2 table(s) and 2 foreign key(s)" in plan and "book.author_id (ON DELETE SET NULL)" in plan, plan
        assert "author.mentor_id (ON DELETE NO ACTION)" in plan and "about 9,000 rows" in plan, plan
        assert "admin_log.object_id (text)" in plan and "id_int" in plan, plan
        assert "indexes over those columns, copied then swapped: book.book_by_author;" in plan, plan
        assert found["book"].plan is not None and "0 foreign key(s)" in found["book"].plan
        assert "shelf" not in found  # a composite key: not a single-column key the doctor reads
        cli = [sys.executable, "-m", "seqid_orm", "doctor", url, "--schema", schema]
        done = subprocess.run(cli, capture_output=True, text=True, timeout=120)
        assert "author.id (plan): change it to seqid keys online" in done.stdout, done.stdout + done.stderr
        with pg_engine.begin() as conn:  # a composite foreign key to the key: the key's column follows
            conn.exec_driver_sql(f"SET LOCAL search_path = {schema}")
            conn.exec_driver_sql("ALTER TABLE book ADD COLUMN n bigint, ADD UNIQUE (id, n)")
            conn.exec_driver_sql(
                "CREATE TABLE quote (id serial PRIMARY KEY, b bigint, n bigint, "
                "FOREIGN KEY (b, n) REFERENCES book (id, n))"
            )
        found = {f.table: f for f in diagnose(url, schemas=[schema])}
        assert "1 foreign key(s): quote.b (with n, ON DELETE NO ACTION)" in found["book"].plan, found["book"].plan
        with pg_engine.begin() as conn:  # a child keyed by its foreign key (multi-table inheritance): it follows
            conn.exec_driver_sql(f"SET LOCAL search_path = {schema}")
            conn.exec_driver_sql("CREATE TABLE special (book_ptr_id bigint PRIMARY KEY REFERENCES book)")
            conn.exec_driver_sql("CREATE TABLE note (id serial PRIMARY KEY, s bigint REFERENCES special)")
        found = {f.table: f for f in diagnose(url, schemas=[schema])}
        plan = found["book"].plan
        assert "It touches 4 table(s) and 3 foreign key(s)" in plan, plan  # its own child with it
        assert "special.book_ptr_id (ON DELETE NO ACTION) (its key, which changes with it)" in plan, plan
        assert "note.s (ON DELETE NO ACTION)" in plan, plan
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    table, texts, child = (f"seqid_rk_{secrets.token_hex(3)}" for _ in range(3))
    with mysql_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (id bigint AUTO_INCREMENT PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {table} () VALUES (), (), ()")
        conn.exec_driver_sql(f"CREATE TABLE {texts} (id char(36) PRIMARY KEY)")
        conn.exec_driver_sql(
            f"CREATE TABLE {child} (id int AUTO_INCREMENT PRIMARY KEY, t char(36) REFERENCES {texts} (id))"
        )
        conn.execute(sa.text(f"INSERT INTO {texts} VALUES (:k)"), [{"k": str(uuid.uuid4())} for _ in range(300)])
        conn.exec_driver_sql(f"INSERT INTO {child} (t) SELECT id FROM {texts}")
    try:
        found = {f.table: f for f in diagnose(MYSQL_URL)}
        mine = found[table]
        assert mine.plan is not None and "(docs/how-to/migrate.md, integer keys)" in mine.plan, mine.plan
        assert "get their keys, and the new foreign keys are added, in the contract step" in mine.plan, mine.plan
        text_key = found[texts]  # UUIDs kept as text: changed online on MariaDB
        assert text_key.plan is not None and "(docs/how-to/migrate.md, text keys)" in text_key.plan, text_key
        assert f"1 foreign key(s): {child}.t (ON DELETE RESTRICT)" in text_key.plan, text_key.plan
        assert text_key.kind == "random-uuid" and "rekey_expand" in text_key.advice, text_key.advice
    finally:
        with mysql_engine.begin() as conn:
            for name in (table, child, texts):
                conn.exec_driver_sql(f"DROP TABLE {name}")


def test_on_sqlite_an_integer_key_gets_the_rebuilds_plan(tmp_path):
    """SQLite: the plan names the rebuild (the expand changes nothing, the contract makes the tables again in
    one transaction), every foreign key to the key from the catalog, the rows; a composite foreign key to it
    gets the refusal's reason."""
    url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE author (id INTEGER PRIMARY KEY, mentor_id bigint REFERENCES author (id))")
        conn.exec_driver_sql("CREATE TABLE book (id INTEGER PRIMARY KEY, author_id bigint REFERENCES author)")
        conn.exec_driver_sql("INSERT INTO author (mentor_id) VALUES (NULL), (1), (1)")
        conn.exec_driver_sql("INSERT INTO book (author_id) VALUES (1), (2)")
    found = {f.table: f for f in diagnose(url)}
    plan = found["author"].plan
    assert plan is not None and "by a rebuild of its tables" in plan, plan
    assert "2 table(s) again with 2 foreign key(s): author.mentor_id, book.author_id" in plan, plan
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE pair (a bigint, b bigint, FOREIGN KEY (a, b) REFERENCES book (id, id))")
    found = {f.table: f for f in diagnose(url)}
    assert found["book"].plan is not None and "several columns" in found["book"].plan, found["book"].plan
    engine.dispose()
