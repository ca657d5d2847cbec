"""``op.add_seqid_column`` where deployments run it (issue 73): through PgBouncer in transaction pooling, under
a role's ``statement_timeout``, on partitioned and ICU-collated tables, on MariaDB's own ``uuid`` keys, on a
table with no statistics, with the triggers held back or refused, and from several pods at once.  Each ends
done, or refused with a typed error before the schema changed; the application never reads a setting it did
not set."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

import seqid_orm.sqlalchemy.alembic  # noqa: E402, F401 - registers op.add_seqid_column, as env.py does
from seqid_orm.errors import MigrationRefusedError  # noqa: E402
from tests import system  # noqa: E402
from tests.conftest import POSTGRES_URL  # noqa: E402
from tests.servers.pgbouncer import PrivatePgBouncer  # noqa: E402
from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _table(engine, table: str, rows: int, *, key: str | None = None, fill: str | None = None) -> None:
    """``table`` (``key``, an integer identity by default, created_at, note) with ``rows`` rows made server
    side, analyzed."""
    pg = engine.dialect.name == "postgresql"
    key = key or ("id bigserial PRIMARY KEY" if pg else "id bigint AUTO_INCREMENT PRIMARY KEY")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {table} ({key}, created_at {'timestamptz' if pg else 'datetime(6)'}, note text)"
        )
        if rows:
            series = f"generate_series(1, {rows}) g" if pg else f"seq_1_to_{rows} g"
            when = "now() - g * interval '1 second'" if pg else "now(6) - INTERVAL g.seq SECOND"
            conn.exec_driver_sql(fill or f"INSERT INTO {table} (created_at, note) SELECT {when}, 'old' FROM {series}")
        conn.exec_driver_sql(f"ANALYZE {table}" if pg else f"ANALYZE TABLE {table}")


def _drop(engine, *tables: str) -> None:
    with engine.begin() as conn:
        for table in tables:
            conn.exec_driver_sql(
                f"DROP TABLE IF EXISTS {table}" + (" CASCADE" if engine.dialect.name == "postgresql" else "")
            )


def _keyed(engine, table: str) -> tuple[int, int, int, bool]:
    """(rows, rows with a key, distinct keys, whether the old rows sort by their time)."""
    with engine.connect() as conn:
        total, keyed, distinct = conn.exec_driver_sql(
            f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {table}"
        ).one()
        times = (
            conn.exec_driver_sql(f"SELECT created_at FROM {table} WHERE note = 'old' ORDER BY seq_id").scalars().all()
        )
    return total, keyed, distinct, times == sorted(times)


def _columns(engine, table: str) -> set[str]:
    with engine.connect() as conn:
        return {c["name"] for c in sa.inspect(conn).get_columns(table)}


def _op(engine, fn) -> None:
    """``fn(op)`` in a migration whose transaction Alembic begins (so the online steps may commit)."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    with engine.connect() as conn:
        context = MigrationContext.configure(conn)
        with context.begin_transaction():
            fn(Operations(context))


# --- PgBouncer in transaction pooling ------------------------------------------------------------------------


class _Application(threading.Thread):
    """The application behind the same pooler: each statement outside a transaction (any server connection),
    its session settings read back as it sees them, and a row read by key, until stopped."""

    def __init__(self, url: str, table: str) -> None:
        super().__init__(daemon=True)
        # an application behind PgBouncer 1.18 turns psycopg's prepared statements off, as its docs say
        self.engine = sa.create_engine(
            url, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT", connect_args={"prepare_threshold": None}
        )
        self.table, self.stop = table, threading.Event()
        self.seen: dict[str, set[str]] = {"lock_timeout": set(), "statement_timeout": set()}
        self.errors: list[str] = []
        self.statements = 0

    def run(self) -> None:
        with self.engine.connect() as conn:
            while not self.stop.is_set():
                try:
                    for name in self.seen:
                        self.seen[name].add(conn.exec_driver_sql(f"SHOW {name}").scalar_one())
                    conn.exec_driver_sql(f"SELECT note FROM {self.table} WHERE id = 17").all()
                    self.statements += 3
                except Exception as exc:  # every error the application meets counts
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                time.sleep(0.002)
        self.engine.dispose()


@pytest.mark.slow
def test_through_pgbouncer_the_migration_changes_no_session_of_the_application(pg_engine, tmp_path):
    """The migration and the application share PgBouncer's two server connections in transaction pooling; the
    migration with psycopg's defaults (it prepares a statement run five times).  Before: the DDL's ``SET lock_timeout``
    stayed on the server connection the pooler picked, and the application's statements ran under 500 ms
    (and after the migration), and a backfill's fifth batch failed on a prepared statement another server
    connection did not have.  Now: the application reads only its own settings, from the first statement to
    200 after the migration, meets no error, and every row is keyed."""
    system.need("pgbouncer")
    table = f"pgb_{secrets.token_hex(4)}"
    _table(pg_engine, table, 20_000)
    body = f'    op.add_seqid_column("{table}", "seq_id", from_timestamp="created_at", batch_size=500)'
    try:
        with PrivatePgBouncer("transaction", pool_size=2) as bouncer:
            app = _Application(bouncer.url, table)
            app.start()
            time.sleep(0.5)
            run = upgrade(project(tmp_path / "p", f"{table}_version", body), bouncer.url)
            _out, said = run.communicate(timeout=240)
            after, until = app.statements, time.monotonic() + 60
            while app.statements < after + 200 and time.monotonic() < until:
                time.sleep(0.01)
            app.stop.set()
            app.join(30)
        assert run.returncode == 0, said[-3000:]
        assert app.errors == [], app.errors[:3]
        assert app.seen == {"lock_timeout": {"0"}, "statement_timeout": {"0"}}, app.seen
        total, keyed, distinct, ordered = _keyed(pg_engine, table)
        assert total == keyed == distinct == 20_000 and ordered
    finally:
        _drop(pg_engine, table, f"{table}_version", f"seqid_fill_{table}_seq_id")


# --- a role's statement_timeout ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _role_with_timeout(engine, table: str, timeout: str):
    """A login role with ``statement_timeout`` set for it (as production roles often have), owning ``table``
    and allowed to create the migration's own tables."""
    from seqid_orm.allocation.stores.lock_sql import lock_sql

    role = f"{table}_r"
    with engine.begin() as conn:
        conn.exec_driver_sql(lock_sql("postgresql", "seqid_migration_locks").create)
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"ALTER ROLE {role} SET statement_timeout = '{timeout}'")
        conn.exec_driver_sql(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON seqid_migration_locks TO {role}")
        conn.exec_driver_sql(f"ALTER TABLE {table} OWNER TO {role}")
    try:
        yield role
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP OWNED BY {role} CASCADE")
            conn.exec_driver_sql(f"DROP ROLE {role}")


@pytest.mark.slow
def test_a_role_statement_timeout_neither_cancels_the_index_build_nor_reaches_a_pooled_session(pg_engine, tmp_path):
    """The migration's role has ``statement_timeout = 1s``; an older transaction keeps the unique index's
    concurrent build waiting 3 s.  Before: the build was cancelled, and each run dropped its invalid index and
    was cancelled again.  Directly connected, the build runs without the role's time-out, finishes once the old
    transaction ends, and the session has its 1 s again after; through PgBouncer in transaction pooling seqid may
    not change the session, so the migration is refused before anything changes, naming the way."""
    system.need("pgbouncer")
    table = f"to_{secrets.token_hex(4)}"
    _table(pg_engine, table, 3_000)
    body = f'    op.add_seqid_column("{table}", "seq_id", from_timestamp="created_at")'
    try:
        with _role_with_timeout(pg_engine, table, "1s") as role:
            with PrivatePgBouncer("transaction", pool_size=2, users=(role,)) as bouncer:
                refused = upgrade(project(tmp_path / "pooled", f"{table}_v1", body), bouncer.url_for(role))
                _out, said = refused.communicate(timeout=120)
            assert refused.returncode != 0
            assert "MigrationRefusedError" in last_error(said) and "statement_timeout=1s" in said, said[-2000:]
            assert "direct connection" in said
            assert "seq_id" not in _columns(pg_engine, table)  # nothing changed
            direct = pg_engine.url.set(username=role).render_as_string(hide_password=False)
            with pg_engine.connect() as holder:
                holder.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
                holder.exec_driver_sql("SELECT count(*) FROM pg_class").scalar()  # an older snapshot
                run = upgrade(project(tmp_path / "direct", f"{table}_v2", body), direct)
                time.sleep(3)  # the build waits on it, three times the role's time-out
                assert run.poll() is None
                holder.exec_driver_sql("COMMIT")
            _out, said = run.communicate(timeout=120)
            assert run.returncode == 0, said[-3000:]
            assert "runs without this session's statement_timeout (1s)" in said
            total, keyed, distinct, ordered = _keyed(pg_engine, table)
            assert total == keyed == distinct == 3_000 and ordered
            with pg_engine.connect() as conn:
                valid = conn.exec_driver_sql(
                    "SELECT bool_and(i.indisvalid) FROM pg_index i WHERE i.indrelid = to_regclass(%s)", (table,)
                ).scalar_one()
            assert valid
    finally:
        _drop(pg_engine, table, f"{table}_v1", f"{table}_v2", f"seqid_fill_{table}_seq_id")


def test_the_session_setting_lifted_for_the_build_is_put_back_on_a_direct_connection(pg_engine, table_name):
    """On a session of its own (direct), the role's time-out is lifted for the concurrent build only: the
    same connection reads its own value again afterwards."""
    from seqid_orm.schema.online import OnlineColumn, add_column, owns_session
    from seqid_orm.sqlalchemy import SeqUUID
    from seqid_orm.sqlalchemy.alembic.online import _OnlineIO

    _table(pg_engine, table_name, 200)
    where = SeqUUID().target(pg_engine.dialect)
    col = OnlineColumn(
        vendor="postgresql",
        table=table_name,
        column="seq_id",
        keys=("id",),
        column_type="uuid",
        default_sql=where.server_default.sql,
        storage=where.storage,
        layout=where.layout,
        key_casts=("bigint",),
    )
    # a connection of its own, whose session setting goes with it
    own = sa.create_engine(POSTGRES_URL, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with own.connect() as conn:
            conn.exec_driver_sql("SET statement_timeout = '45s'")
            io = _OnlineIO(conn)
            assert owns_session(io, col)
            add_column(io, col, say=str)
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar_one() == "45s"
        assert _keyed(pg_engine, table_name)[:3] == (200, 200, 200)
    finally:
        own.dispose()
        _drop(pg_engine, table_name, col.progress_table)


# --- shapes of tables ----------------------------------------------------------------------------------------------


def test_a_partitioned_table_is_refused_a_unique_key_before_any_change_and_takes_a_plain_one(pg_engine, table_name):
    """A unique index on a partitioned PostgreSQL table must contain its partition key.  Before: every row
    was filled, then the concurrent index failed (FeatureNotSupported), and a re-run walked the table again.
    Now a unique key is refused before anything changes, naming the partition key; ``unique=False`` adds and
    fills the column on every partition and makes it NOT NULL."""
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {table_name} (id bigint, region text, created_at timestamptz, note text, "
            "PRIMARY KEY (id, region)) PARTITION BY LIST (region)"
        )
        for region in ("eu", "us"):
            conn.exec_driver_sql(
                f"CREATE TABLE {table_name}_{region} PARTITION OF {table_name} FOR VALUES IN ('{region}')"
            )
        conn.exec_driver_sql(
            f"INSERT INTO {table_name} SELECT g, CASE WHEN mod(g, 2) = 0 THEN 'eu' ELSE 'us' END, "
            "now() - g * interval '1 second', 'old' FROM generate_series(1, 4000) g"
        )
    try:
        with pytest.raises(MigrationRefusedError, match=r"partitioned \(by region\).*unique=False"):
            _op(pg_engine, lambda op: op.add_seqid_column(table_name, "seq_id", from_timestamp="created_at"))
        assert "seq_id" not in _columns(pg_engine, table_name)
        _op(pg_engine, lambda op: op.add_seqid_column(table_name, "seq_id", from_timestamp="created_at", unique=False))
        total, keyed, distinct, ordered = _keyed(pg_engine, table_name)
        assert total == keyed == distinct == 4000 and ordered
        with pg_engine.connect() as conn:
            nullable = {c["name"]: c["nullable"] for c in sa.inspect(conn).get_columns(f"{table_name}_eu")}["seq_id"]
        assert nullable is False
    finally:
        _drop(pg_engine, table_name, f"seqid_fill_{table_name}_seq_id")


def test_a_text_key_in_an_icu_collation_is_walked_and_filled(pg_engine, table_name):
    """Keys of ``varchar COLLATE "en-x-icu"``: before, the first batch's cast (``varchar(36) COLLATE ...[]``)
    was invalid SQL.  Now the keyset walk compares in the column's own collation: every row once, in time."""
    fill = (
        f"INSERT INTO {table_name} (id, created_at, note) SELECT 'K' || lpad(g::text, 6, '0') || "
        "CASE WHEN mod(g, 2) = 0 THEN 'a' ELSE 'B' END, now() - g * interval '1 second', 'old' "
        "FROM generate_series(1, 5000) g"
    )
    _table(pg_engine, table_name, 5000, key='id varchar(36) COLLATE "en-x-icu" PRIMARY KEY', fill=fill)
    try:
        _op(
            pg_engine, lambda op: op.add_seqid_column(table_name, "seq_id", from_timestamp="created_at", batch_size=700)
        )
        total, keyed, distinct, ordered = _keyed(pg_engine, table_name)
        assert total == keyed == distinct == 5000 and ordered
    finally:
        _drop(pg_engine, table_name, f"seqid_fill_{table_name}_seq_id")


def test_a_table_keyed_by_mariadbs_own_uuid_type_is_migrated(mysql_engine, table_name):
    """The keys Django 5's ``UUIDField`` makes on MariaDB: before, the first batch declared the key ``UUID PATH``
    in ``JSON_TABLE``, a syntax error (1064), and every re-run failed the same way."""
    _table(mysql_engine, table_name, 5000, key="id uuid NOT NULL DEFAULT uuid() PRIMARY KEY")
    try:
        _op(
            mysql_engine,
            lambda op: op.add_seqid_column(table_name, "seq_id", from_timestamp="created_at", batch_size=700),
        )
        total, keyed, distinct, ordered = _keyed(mysql_engine, table_name)
        assert total == keyed == distinct == 5000 and ordered
    finally:
        _drop(mysql_engine, table_name, f"seqid_fill_{table_name}_seq_id")


def test_a_table_without_statistics_is_counted_before_the_migrations_transaction_is_chosen(pg_engine, table_name):
    """Right after a load or a restore no ANALYZE has run: the planner says 0 rows (-1 on 14+).  Before, a
    20,000-row table passed the size guard as 0 rows and was filled inside a transaction Alembic did not begin,
    holding the table throughout.  Now the rows are counted (up to the line), and it is refused before anything
    changes, naming the way."""
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {table_name} (id bigserial PRIMARY KEY, created_at timestamptz, note text) "
            "WITH (autovacuum_enabled = false)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {table_name} (created_at, note) SELECT now(), 'old' FROM generate_series(1, 20000)"
        )
        estimate = conn.exec_driver_sql(f"SELECT reltuples FROM pg_class WHERE oid = '{table_name}'::regclass").scalar()
    assert estimate <= 0  # no statistics
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    try:
        with pg_engine.begin() as conn, pytest.raises(MigrationRefusedError, match="over 10,000 rows"):
            Operations(MigrationContext.configure(conn)).add_seqid_column(table_name, "seq_id")
        assert "seq_id" not in _columns(pg_engine, table_name)
    finally:
        _drop(pg_engine, table_name)


# --- triggers ------------------------------------------------------------------------------------------------------


def _audited(engine, table: str) -> None:
    """A row trigger that counts every update of ``table`` (an audit log)."""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table}_audit (id bigint NOT NULL)")
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(
                f"CREATE FUNCTION {table}_audit() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN INSERT INTO {table}_audit VALUES (NEW.id); RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_audit AFTER UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION {table}_audit()"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_audit AFTER UPDATE ON {table} FOR EACH ROW "
                f"INSERT INTO {table}_audit VALUES (NEW.id)"
            )


def _audit_rows(engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}_audit").scalar_one())


def test_the_backfill_fires_row_triggers_unless_told_not_to_where_the_database_allows(pg_engine, mysql_engine):
    """By default each backfilled row fires the table's row triggers once (an audit row each, as the docs say);
    ``fire_triggers=False`` holds them back for the batches on PostgreSQL (``session_replication_role``, a
    role allowed to set it); MariaDB has no such switch, and the option is refused there before any change."""
    pg_table, my_table = f"tr_{secrets.token_hex(4)}", f"tr_{secrets.token_hex(4)}"
    for engine, table in ((pg_engine, pg_table), (mysql_engine, my_table)):
        _table(engine, table, 1500)
        _audited(engine, table)
    try:
        _op(
            pg_engine,
            lambda op: op.add_seqid_column(pg_table, "seq_id", from_timestamp="created_at", fire_triggers=False),
        )
        assert _keyed(pg_engine, pg_table)[:3] == (1500, 1500, 1500)
        assert _audit_rows(pg_engine, pg_table) == 0
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE {pg_table} SET note = 'new' WHERE id = 1")  # the trigger is on again
        assert _audit_rows(pg_engine, pg_table) == 1
        with pytest.raises(MigrationRefusedError, match="no switch that keeps a table's triggers"):
            _op(mysql_engine, lambda op: op.add_seqid_column(my_table, "seq_id", fire_triggers=False))
        assert "seq_id" not in _columns(mysql_engine, my_table)
        _op(mysql_engine, lambda op: op.add_seqid_column(my_table, "seq_id", from_timestamp="created_at"))
        assert _audit_rows(mysql_engine, my_table) == 1500  # once per row, as the docs say
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {pg_table}_audit() CASCADE")
        for engine, table in ((pg_engine, pg_table), (mysql_engine, my_table)):
            _drop(engine, table, f"{table}_audit", f"seqid_fill_{table}_seq_id")


def test_holding_triggers_back_is_refused_before_any_change_to_a_role_that_may_not(pg_engine, table_name):
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    _table(pg_engine, table_name, 100)
    role = f"{table_name}_r"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role}")
        conn.exec_driver_sql(f"ALTER TABLE {table_name} OWNER TO {role}")
        conn.exec_driver_sql(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
    own = sa.create_engine(POSTGRES_URL, poolclass=sa.NullPool)  # its SET ROLE goes with it
    try:
        with own.connect() as conn:
            conn.exec_driver_sql(f"SET ROLE {role}")
            conn.commit()
            context = MigrationContext.configure(conn)
            refused = pytest.raises(MigrationRefusedError, match="session_replication_role")
            with refused, context.begin_transaction():
                Operations(context).add_seqid_column(table_name, "seq_id", fire_triggers=False)
        assert "seq_id" not in _columns(pg_engine, table_name)
    finally:
        own.dispose()
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP OWNED BY {role} CASCADE")
            conn.exec_driver_sql(f"DROP ROLE {role}")


# --- several pods at once ----------------------------------------------------------------------------------------


PODS = [
    pytest.param("postgresql", 2, id="postgresql-2"),
    pytest.param("postgresql", 5, id="postgresql-5"),
    pytest.param("pgbouncer", 2, id="pgbouncer-2"),
    pytest.param("pgbouncer", 5, id="pgbouncer-5"),
    pytest.param("mysql", 5, id="mariadb-5"),
    pytest.param("sqlite", 5, id="sqlite-5"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("server", "pods"), PODS)
def test_pods_running_alembic_upgrade_at_once_take_turns_under_the_migration_lock(server, pods, request, tmp_path):
    """Several pods start ``alembic upgrade head`` together, with ``migration_lock`` in env.py: the first
    holds the lock, the others wait, then find nothing to do.  Every pod exits 0, the migration's own table is
    created once, every row keyed once (before: 10 of 12 races ended one pod with a raw driver error)."""
    if server == "sqlite":
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.sqlite3'}")
    else:
        engine = request.getfixturevalue("pg_engine" if server in ("postgresql", "pgbouncer") else "mysql_engine")
    table = f"pods_{secrets.token_hex(4)}"
    if server == "sqlite":
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, created_at timestamp, note text)")
            conn.exec_driver_sql(
                f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 3000) "
                f"INSERT INTO {table} (created_at, note) SELECT datetime('now', '-' || n || ' seconds'), 'old' FROM g"
            )
    else:
        _table(engine, table, 3000)
    storage = ', storage="hex"' if server == "sqlite" else ""  # SQLite 3.40 builds no BLOB default
    body = (
        f'    op.create_table("{table}_extra", sa.Column("id", sa.Integer, primary_key=True))\n'
        f'    op.add_seqid_column("{table}", "seq_id", from_timestamp="created_at", batch_size=300{storage})'
    )
    where = project(tmp_path / "p", f"{table}_version", body, locked=True)
    stack = contextlib.ExitStack()
    try:
        url = engine.url.render_as_string(hide_password=False)
        if server == "pgbouncer":
            system.need("pgbouncer")
            url = stack.enter_context(PrivatePgBouncer("transaction", pool_size=3)).url
        runs = [upgrade(where, url) for _ in range(pods)]
        said = [run.communicate(timeout=240)[1] for run in runs]
        failed = [text[-2500:] for text, run in zip(said, runs, strict=True) if run.returncode]
        assert [run.returncode for run in runs] == [0] * pods, failed
        total, keyed, distinct, ordered = _keyed(engine, table)
        assert total == keyed == distinct == 3000 and ordered
        with engine.connect() as conn:
            assert conn.exec_driver_sql(f"SELECT version_num FROM {table}_version").scalars().all() == ["0001"]
            assert sa.inspect(conn).has_table(f"{table}_extra")
    finally:
        stack.close()
        _drop(engine, table, f"{table}_extra", f"{table}_version", f"seqid_fill_{table}_seq_id")
        if server == "sqlite":
            engine.dispose()


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_two_runs_of_the_same_operation_take_turns_and_the_second_finds_the_work_done(engine, table_name, capfd):
    """Without a lock around the whole run, seqid's operation holds one of its own (per table and column):
    two runs started together never meet half-way (before: DeadlockDetected, UndefinedTable, DuplicateColumn,
    Duplicate key name); the second waits, then says there is nothing to do."""
    _table(engine, table_name, 4000)
    outcomes: list[object] = []

    def run() -> None:
        try:
            _op(
                engine,
                lambda op: op.add_seqid_column(table_name, "seq_id", from_timestamp="created_at", batch_size=200),
            )
            outcomes.append(None)
        except Exception as exc:  # handed to the test's thread
            outcomes.append(exc)

    try:
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert outcomes == [None, None], outcomes
        total, keyed, distinct, ordered = _keyed(engine, table_name)
        assert total == keyed == distinct == 4000 and ordered
        assert "nothing to do" in capfd.readouterr().err
    finally:
        _drop(engine, table_name, f"seqid_fill_{table_name}_seq_id")


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_a_connection_seqid_reads_the_server_on_is_handed_over_outside_any_transaction(engine):
    """seqid reads what only the server can tell on an engine's first connection (PostgreSQL's ``version()``,
    MariaDB's UUID binding).  Before, that read left psycopg's connection in a transaction until the
    application's first statement: behind PgBouncer in transaction pooling an idle connection then held a
    server connection, and five pods waiting for the migration lock with their connection open exhausted
    the pool (StoreTimeoutError)."""
    fresh = sa.create_engine(engine.url, poolclass=sa.NullPool)  # a new engine: its first connection is read
    try:
        with fresh.connect() as conn:
            dbapi = conn.connection.dbapi_connection
            if engine.dialect.name == "postgresql":
                assert dbapi.info.transaction_status == 0  # psycopg's IDLE
            else:
                with dbapi.cursor() as cursor:
                    cursor.execute("SELECT @@in_transaction")
                    assert cursor.fetchone()[0] == 0
            assert hasattr(fresh.dialect, "seqid_flavor" if engine.dialect.name == "postgresql" else "seqid_uuid_bind")
    finally:
        fresh.dispose()


@pytest.mark.parametrize("engine", ["postgresql", "mysql"], indirect=True)
def test_a_role_that_may_not_alter_the_table_changes_nothing(engine, table_name):
    """A role that may read and write the table and create tables, but not alter this one (PostgreSQL: not
    its owner; MariaDB: no ALTER grant).  PostgreSQL is asked before any change and refuses by name; MariaDB's
    first ALTER says so, and the progress table this run made is gone with it: nothing is left behind."""
    from seqid_orm.allocation.stores.lock_sql import lock_sql

    _table(engine, table_name, 100)
    pg = engine.dialect.name == "postgresql"
    role = f"{table_name}_r"
    with engine.begin() as conn:
        conn.exec_driver_sql(lock_sql(engine.dialect.name, "seqid_migration_locks").create)
        if pg:
            conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
            conn.exec_driver_sql(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
            conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE ON {table_name} TO {role}")
            conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON seqid_migration_locks TO {role}")
        else:
            database = engine.url.database
            conn.exec_driver_sql(f"CREATE USER '{role}'@'%%'")
            # everything but ALTER, database-wide (a table it creates gets no grant of its own)
            grants = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP"
            conn.exec_driver_sql(f"GRANT {grants} ON {database}.* TO '{role}'@'%%'")
    other = sa.create_engine(engine.url.set(username=role, password=None), poolclass=sa.NullPool)
    try:
        expected = MigrationRefusedError if pg else sa.exc.DBAPIError
        with pytest.raises(expected, match="may not alter" if pg else "ALTER command denied"):
            _op(other, lambda op: op.add_seqid_column(table_name, "seq_id"))
        assert "seq_id" not in _columns(engine, table_name)
        with engine.connect() as conn:
            assert not sa.inspect(conn).has_table(f"seqid_fill_{table_name}_seq_id")
    finally:
        other.dispose()
        with engine.begin() as conn:
            if pg:
                conn.exec_driver_sql(f"DROP OWNED BY {role} CASCADE")
                conn.exec_driver_sql(f"DROP ROLE {role}")
            else:
                conn.exec_driver_sql(f"DROP USER '{role}'@'%%'")
        _drop(engine, table_name, f"seqid_fill_{table_name}_seq_id")


def test_a_concurrent_index_build_chosen_in_a_deadlock_is_cleared_and_built_again(pg_engine, caplog):
    """``CREATE INDEX CONCURRENTLY`` waits for every older transaction; one of them then asks for the table's
    ``SHARE UPDATE EXCLUSIVE`` (an ANALYZE, as autovacuum's: what failed a rekey on PostgreSQL 18 in CI), and the
    server ends the build as the deadlock's victim, leaving an invalid index.  The step clears it and builds
    again: the index ends valid, and the log says why."""
    import logging

    from seqid_orm.ids.layout import Layout
    from seqid_orm.schema.online import OnlineColumn, _run_step
    from seqid_orm.sqlalchemy.alembic.online import _OnlineIO
    from seqid_orm.vendors import Step, Storage

    table = f"dl_{secrets.token_hex(4)}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, v int)")
        conn.exec_driver_sql(f"INSERT INTO {table} (v) SELECT g FROM generate_series(1, 1000) g")
    col = OnlineColumn(
        vendor="postgresql",
        table=table,
        column="v",
        keys=("id",),
        column_type="integer",
        default_sql=None,
        storage=Storage.NATIVE,
        layout=Layout.TIME_FIRST,
    )
    index = f"ix_{table}_v"
    step = Step(
        f"CREATE INDEX CONCURRENTLY {index} ON {table} (v)",
        concurrent=True,
        undo=f"DROP INDEX CONCURRENTLY IF EXISTS {index}",
    )
    older = pg_engine.connect()
    older.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
    older.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar()  # an older snapshot the build waits for

    def analyze_then_end() -> None:
        time.sleep(0.5)  # the build waits for this transaction by then
        try:
            older.exec_driver_sql(f"ANALYZE {table}")  # waits for the build's lock: the deadlock
        finally:
            older.rollback()

    thread = threading.Thread(target=analyze_then_end)
    try:
        with caplog.at_level(logging.INFO, logger="seqid_orm"):
            thread.start()
            with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                _run_step(_OnlineIO(conn), col, step)
        thread.join(30)
        assert any("chosen in a deadlock" in r.getMessage() for r in caplog.records), caplog.text
        with pg_engine.connect() as conn:
            valid = conn.exec_driver_sql(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                (index,),
            ).all()
        assert valid == [(True,)]
    finally:
        thread.join(30)
        older.close()
        _drop(pg_engine, table)
