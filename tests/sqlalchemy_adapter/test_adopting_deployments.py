"""Adoption where real applications run, on the shared PostgreSQL (the engine that gets adopted keys): the
swap's migration written by Alembic's autogenerate and applied, then application processes of their own
(tests/sqlalchemy_adapter/adopting_worker.py) as a role without SELECT, under row-level security with tenants
served in both orders, with a schema per tenant, after a TRUNCATE under a running process, and beside
sentinel keys.  In every case: one width across processes (the migration's record), new keys after every
old key (the sentinels excepted, which stay above) and in creation order, every old row found.
"""

from __future__ import annotations

import secrets
import sys
import uuid
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")
from alembic.migration import MigrationContext  # noqa: E402
from alembic.operations import Operations  # noqa: E402

from seqid_orm import describe  # noqa: E402
from seqid_orm.errors import InvalidArgumentError  # noqa: E402
from seqid_orm.ids.adopted import leading_ones, record_of  # noqa: E402
from seqid_orm.sqlalchemy import alembic as seqid_alembic  # noqa: E402, F401 - registers the operations
from tests.line_worker import LineWorker, started  # noqa: E402
from tests.sqlalchemy_adapter.test_adopting import _autogenerate_and_upgrade, _project  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OLD = 20_000


def workers(url: str, table: str, count: int):
    """``count`` application processes (adopting_worker.py) on ``url``'s ``table``, stopped after the block."""
    command = [sys.executable, "-m", "tests.sqlalchemy_adapter.adopting_worker", url, table]
    return started(count, lambda: LineWorker(command, cwd=ROOT))


def _url(engine, **parts: str) -> str:
    return engine.url.set(**parts).render_as_string(hide_password=False)


def _make_legacy(conn, table: str, rows: int, tenant_column: bool = False) -> None:
    tenant = ", tenant text DEFAULT current_setting('seqid.tenant', true)" if tenant_column else ""
    conn.exec_driver_sql(
        f"CREATE TABLE {table} (id uuid PRIMARY KEY, n integer NOT NULL, note varchar(20) NOT NULL{tenant})"
    )
    conn.exec_driver_sql(
        f"INSERT INTO {table} (id, n, note) SELECT gen_random_uuid(), -g, 'old' FROM generate_series(1, {rows}) g"
    )


def _recorded(conn, table: str) -> int | None:
    comment = conn.exec_driver_sql(
        f"SELECT col_description('{table}'::regclass, a.attnum) FROM pg_attribute a "
        f"WHERE a.attrelid = '{table}'::regclass AND a.attname = 'id'"
    ).scalar_one()
    return record_of(comment)


def _by_key(conn, table: str) -> list[tuple[int, str]]:
    return [(r.n, r.note) for r in conn.exec_driver_sql(f"SELECT n, note FROM {table} ORDER BY id")]


def _assert_adopted_order(rows: list[tuple[int, str]], old: int, sentinels: int = 0) -> None:
    """The old rows first (the sentinels last), then every new row in creation order (n increasing)."""
    body = rows[: len(rows) - sentinels] if sentinels else rows
    assert all(note == "old" for _, note in body[:old]), "a new key sorts among the old ones"
    new = [n for n, note in body[old:]]
    assert all(note == "new" for _, note in body[old:])
    assert new == sorted(new), "new keys out of creation order"
    if sentinels:
        assert all(note == "sentinel" for _, note in rows[-sentinels:])


@pytest.fixture
def table(pg_engine):
    name = f"t_{secrets.token_hex(4)}"
    yield name
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name} CASCADE")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}_version")


def _migrate(pg_engine, tmp_path, table: str) -> str:
    """What a user runs after swapping the key: autogenerate (with seqid's env.py) and upgrade."""
    script = _autogenerate_and_upgrade(pg_engine, _project(tmp_path, table))
    assert f"op.adopt_seqid_keys('{table}', 'id'" in script, script
    return script


def test_a_role_without_select_writes_the_recorded_keys_after_every_old_one(pg_engine, tmp_path, table):
    """INSERT alone, no SELECT: the record is in the catalog every role reads; Python-made keys and the
    database's own (an INSERT of another application, without the key) both get the recorded width."""
    role = f"seqid_w_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        _make_legacy(conn, table, OLD)
    _migrate(pg_engine, tmp_path, table)
    with pg_engine.begin() as conn:
        width = _recorded(conn, table)
        Operations(MigrationContext.configure(conn)).set_seqid_default(table, "id")  # other programs' inserts
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT INSERT ON {table} TO {role}")
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {role}")
    assert width is not None and 16 <= width <= 28
    try:
        with workers(_url(pg_engine, username=role), table, 2) as (one, two):
            assert one.widths("insert 10 0") == [width]
            assert two.ask("blind 10 10") == {"ok": True}
            assert one.widths("insert 10 20") == [width]
        writer = sa.create_engine(pg_engine.url.set(username=role), poolclass=sa.NullPool)
        with writer.begin() as conn:  # another program: no key in the INSERT, the database's default makes it
            conn.exec_driver_sql(f"INSERT INTO {table} (n, note) SELECT 30 + g, 'new' FROM generate_series(0, 9) g")
        writer.dispose()
        with pg_engine.connect() as conn:
            rows = _by_key(conn, table)
            made = conn.exec_driver_sql(f"SELECT id FROM {table} WHERE n >= 0").scalars().all()
        _assert_adopted_order(rows, OLD)
        assert {describe(u).parts.get("above") for u in made} == {width} and len(made) == 40
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {table}")
            conn.exec_driver_sql(f"REVOKE ALL ON SCHEMA public FROM {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")


@pytest.mark.parametrize("order", ["empty tenant first", "full tenant first"])
def test_row_level_security_gives_every_tenant_the_recorded_keys_in_either_order(pg_engine, tmp_path, table, order):
    """Tenant a has no rows, tenant b has them all; each application process sees only its tenant's rows.
    The adoption run by a role that row-level security limits is refused; run by the owner, it records one
    width, which processes serving the tenants in either order all use."""
    role = f"seqid_app_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        _make_legacy(conn, table, 0, tenant_column=True)
        conn.exec_driver_sql("SET seqid.tenant = 'b'")
        conn.exec_driver_sql(
            f"INSERT INTO {table} (id, n, note) SELECT gen_random_uuid(), -g, 'old' FROM generate_series(1, {OLD}) g"
        )
        conn.exec_driver_sql(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        conn.exec_driver_sql(
            f"CREATE POLICY tenants ON {table} USING (tenant = current_setting('seqid.tenant', true)) "
            f"WITH CHECK (tenant = current_setting('seqid.tenant', true))"
        )
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT ON {table} TO {role}")
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {role}")
    app = sa.create_engine(pg_engine.url.set(username=role), poolclass=sa.NullPool)
    try:
        with app.begin() as conn, pytest.raises(InvalidArgumentError, match="row-level security hides rows"):
            conn.exec_driver_sql("SET seqid.tenant = 'a'")
            Operations(MigrationContext.configure(conn)).adopt_seqid_keys(table, "id")
        app.dispose()
        with pg_engine.connect() as conn:
            assert _recorded(conn, table) is None  # the refusal wrote nothing
        with pg_engine.begin() as conn:  # the swap's migration, as the table's owner (autogenerate writes this op)
            Operations(MigrationContext.configure(conn)).adopt_seqid_keys(table, "id")
            width = _recorded(conn, table)
        tenants = ["a", "b"] if order == "empty tenant first" else ["b", "a"]
        n = 0
        with workers(_url(pg_engine, username=role), table, 2) as (first, second):
            for k, worker in enumerate((first, second)):
                for t in tenants if k == 0 else tenants[::-1]:
                    worker.ask(f"tenant {t}")
                    assert worker.widths(f"insert 20 {n}") == [width]
                    n += 20
        with pg_engine.connect() as conn:
            rows = _by_key(conn, table)
        _assert_adopted_order(rows, OLD)
    finally:
        app.dispose()
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {table}")
            conn.exec_driver_sql(f"REVOKE ALL ON SCHEMA public FROM {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")


def test_a_schema_per_tenant_gets_each_tables_own_record_as_the_search_path_changes(pg_engine, tmp_path):
    """Two tenants' schemas hold a table of the same name: a's empty, b's full of random keys.  The migration
    runs once per schema (search_path set, as schema-per-tenant projects run it) and records each table's
    own width; one application process switching the search_path per request (SET, and SET LOCAL inside a
    transaction) makes each table's own keys, never the other's."""
    tag = secrets.token_hex(3)
    schemas = [f"tenant_a_{tag}", f"tenant_b_{tag}"]
    table = "orders"
    with pg_engine.begin() as conn:
        for k, schema in enumerate(schemas):
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
            conn.exec_driver_sql(f"SET search_path TO {schema}")
            _make_legacy(conn, table, 0 if k == 0 else OLD)
        conn.exec_driver_sql("SET search_path TO DEFAULT")
    try:
        for schema in schemas:
            with pg_engine.begin() as conn:
                conn.exec_driver_sql(f"SET LOCAL search_path TO {schema}")
                Operations(MigrationContext.configure(conn)).adopt_seqid_keys(table, "id")
        with pg_engine.connect() as conn:
            widths = [_recorded(conn, f"{schema}.{table}") for schema in schemas]
        assert widths[0] == 0 and 16 <= widths[1] <= 28  # an empty table: plain keys, for good
        n = 0
        with workers(_url(pg_engine), table, 1) as (worker,):
            for _step in range(3):
                for k, schema in enumerate(schemas):
                    worker.ask(f"path {schema}")
                    assert worker.widths(f"insert 10 {n}") == [widths[k]]
                    # the other tenant's table inside one transaction only: SET LOCAL
                    assert worker.widths(f"insert 5 {n + 10} local-path {schemas[1 - k]}") == [widths[1 - k]]
                    n += 15
        with pg_engine.connect() as conn:
            for k, schema in enumerate(schemas):
                rows = _by_key(conn, f"{schema}.{table}")
                _assert_adopted_order(rows, 0 if k == 0 else OLD)
                assert sum(1 for _, note in rows if note == "new") == 45
    finally:
        with pg_engine.begin() as conn:
            for schema in schemas:
                conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_truncate_under_a_running_process_keeps_the_recorded_width_for_it_and_for_new_ones(
    pg_engine, tmp_path, table
):
    with pg_engine.begin() as conn:
        _make_legacy(conn, table, OLD)
    _migrate(pg_engine, tmp_path, table)
    with pg_engine.connect() as conn:
        width = _recorded(conn, table)
    with workers(_url(pg_engine), table, 1) as (running,):
        assert running.widths("insert 10 0") == [width]
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"TRUNCATE {table}")  # a drained queue table
        with workers(_url(pg_engine), table, 1) as (started_after,):
            assert started_after.widths("insert 10 10") == [width]  # the record, not the empty table
            assert running.widths("insert 10 20") == [width]
            assert started_after.widths("raw 10 30") == [width]
    with pg_engine.connect() as conn:
        assert [n for n, _ in _by_key(conn, table)] == list(range(10, 40))  # one width: creation order


def test_sentinel_keys_above_the_others_stay_above_and_do_not_widen_the_recorded_keys(pg_engine, tmp_path, table):
    """Ten crafted keys at the top of the range (the Max UUID among them: more than the eight a process
    reads): the migration reads past them, records the width the random keys need, and every process uses
    it; new keys sort after every random key and before the sentinels."""
    sentinels = ["ffffffff-ffff-ffff-ffff-ffffffffffff"] + [f"ffffffff-ffff-4fff-bfff-fffffffffff{k}" for k in range(9)]
    with pg_engine.begin() as conn:
        _make_legacy(conn, table, OLD)
        for key in sentinels:
            conn.exec_driver_sql(f"INSERT INTO {table} VALUES ('{key}', -999999, 'sentinel')")
    _migrate(pg_engine, tmp_path, table)
    with pg_engine.connect() as conn:
        width = _recorded(conn, table)
        top_random = conn.exec_driver_sql(
            f"SELECT id FROM {table} WHERE note = 'old' ORDER BY id DESC LIMIT 1"
        ).scalar()
    # the width the random keys need (one more one bit than the largest has, at least 16), not the sentinels'
    assert width == min(max(leading_ones(top_random.bytes) + 1, 16), 28) < 48
    with workers(_url(pg_engine), table, 2) as (one, two):
        assert one.widths("insert 10 0") == [width]
        assert two.widths("insert 10 10") == [width]
    with pg_engine.connect() as conn:
        rows = _by_key(conn, table)
    _assert_adopted_order(rows, OLD, sentinels=len(sentinels))


def test_a_second_autogenerate_after_the_adoption_writes_nothing(pg_engine, tmp_path, table):
    """The record lives in the column's comment, beside the words the metadata gives it: a comment change
    autogenerate finds in the same migration (here the metadata's none, for words only the database had)
    is written by the adoption, after it, so the record stays; then nothing is left to write."""
    with pg_engine.begin() as conn:
        _make_legacy(conn, table, 1000)
        conn.exec_driver_sql(f"COMMENT ON COLUMN {table}.id IS 'the order''s key'")
    script = _migrate(pg_engine, tmp_path, table)
    assert f"op.adopt_seqid_keys('{table}', 'id', comment=None)" in script and "op.alter_column" not in script
    assert "op.drop_seqid_record" in script  # the downgrade
    with pg_engine.connect() as conn:
        comment = conn.exec_driver_sql(f"SELECT col_description('{table}'::regclass, 1)").scalar_one()
    assert record_of(comment) is not None and comment.startswith("[seqid adopted=")
    config = _project(tmp_path, table)
    with pg_engine.begin() as conn:
        config.attributes["connection"] = conn
        from alembic import command

        revision = command.revision(config, message="again", autogenerate=True)
    again = Path(revision.path).read_text()
    assert "op." not in again.split("def upgrade():")[1].split("def downgrade():")[0], again


def test_the_adoption_refuses_a_column_it_cannot_read_whole_and_writes_nothing(pg_engine, table):
    role = f"seqid_r_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        _make_legacy(conn, table, 100)
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT INSERT ON {table} TO {role}")
    limited = sa.create_engine(pg_engine.url.set(username=role), poolclass=sa.NullPool)
    try:
        with limited.begin() as conn, pytest.raises(InvalidArgumentError, match="may not read the column's keys"):
            Operations(MigrationContext.configure(conn)).adopt_seqid_keys(table, "id")
        with pg_engine.connect() as conn:
            assert _recorded(conn, table) is None
    finally:
        limited.dispose()
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {table}")
            conn.exec_driver_sql(f"DROP ROLE {role}")


@pytest.mark.parametrize("storage", ["native", "binary", "text", "hex"])
def test_database_made_keys_read_the_clock_once_at_a_millisecond_boundary(pg_engine, storage):
    """The clock forced across millisecond boundaries: a function standing for clock_timestamp() answers
    instants 0.4 ms apart, counting its calls.  Each key of the plain (13-17) and the adopted default is
    made from exactly one reading and carries that reading's millisecond, at every width (the expression
    of four readings carried a time up to 65,536 ms early at width 32)."""
    from seqid_orm.sqlalchemy import SeqUUID

    name = f"seqid_test_clock_{secrets.token_hex(3)}"
    start = "2026-12-01 12:00:00.999800+00"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TEMP SEQUENCE {name}_calls")
        conn.exec_driver_sql(
            f"CREATE FUNCTION pg_temp.{name}() RETURNS timestamptz LANGUAGE sql VOLATILE AS "
            f"$$ SELECT '{start}'::timestamptz + (nextval('{name}_calls') - 1) * interval '400 microseconds' $$"
        )
        base = SeqUUID(storage=storage).target(pg_engine.dialect)
        for width in (0, 16, 20, 28, 32):
            default = base.adopted(width).server_default if width else base.server_default
            assert default.setup or not width, width  # an adopted key is its function's, on every version
            for statement in default.setup:
                conn.exec_driver_sql(statement)
            conn.exec_driver_sql(f"SELECT setval('{name}_calls', 1, false)")
            sql = default.sql.replace("clock_timestamp()", f"pg_temp.{name}()")
            if "uuidv7()" in sql:  # PostgreSQL 18's keys read its own clock (uuidv7()): no reading to force,
                # so each key's millisecond lies between two readings of the server's clock taken around it
                assert pg_engine.dialect.server_version_info >= (18,), (width, sql)
                # (three statements: an aggregate's query reads clock_timestamp() after it has made every key)
                before_ms = int(conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one().timestamp() * 1000)
                keys = conn.exec_driver_sql(f"SELECT ({sql}) FROM generate_series(1, 200)").scalars().all()
                after_ms = int(conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one().timestamp() * 1000)
                for key in keys:
                    info = describe(key if isinstance(key, uuid.UUID) else _as_uuid(key))
                    assert before_ms <= int(info.timestamp.timestamp() * 1000) <= after_ms, (width, info)
                    assert info.parts.get("above", 0) == width, (width, info)
                continue
            assert f"pg_temp.{name}()" in sql, sql  # the forced clock is the one the key reads
            keys = conn.exec_driver_sql(f"SELECT ({sql}) FROM generate_series(1, 200)").scalars().all()
            calls = conn.exec_driver_sql(f"SELECT last_value FROM {name}_calls").scalar_one()
            assert calls == 200, (width, calls)  # one reading a key
            made = [describe(k if isinstance(k, uuid.UUID) else _as_uuid(k)) for k in keys]
            for i, info in enumerate(made):  # the i-th reading: start + 0.4 ms * i
                expected_us = 999_800 + 400 * i
                ms = 12 * 3600_000 + expected_us // 1000
                assert (
                    info.timestamp.hour * 3600_000
                    + info.timestamp.minute * 60_000
                    + (info.timestamp.second * 1000 + info.timestamp.microsecond // 1000)
                    == ms
                ), (width, i, info)
                assert info.parts.get("above", 0) == width


def _as_uuid(value: object) -> uuid.UUID:
    if isinstance(value, (bytes, memoryview)):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(str(value))


def test_a_read_of_the_column_that_fails_is_a_typed_error_naming_the_statement(pg_engine, table):
    """A migration holds the table (ACCESS EXCLUSIVE, its transaction open) while an application process
    with a short statement_timeout makes its first key: the read of the keys times out, and the insert fails
    with ColumnReadError naming that statement (the driver's error as its cause), not the driver's error
    under the INSERT's SQL; nothing is written."""
    from seqid_orm.errors import ColumnReadError
    from seqid_orm.sqlalchemy import bulk_insert
    from tests.sqlalchemy_adapter.test_adopting import _Models

    with pg_engine.begin() as conn:
        _make_legacy(conn, table, 100)
    impatient = sa.create_engine(pg_engine.url, connect_args={"options": "-c statement_timeout=300"})
    holder = pg_engine.connect()
    try:
        holder.exec_driver_sql(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        models = _Models(table)
        with impatient.begin() as conn, pytest.raises(ColumnReadError) as raised:
            bulk_insert(conn, models.table, [{"n": 1, "note": "new"}])
        assert 'ORDER BY "id" DESC LIMIT 8' in str(raised.value) and "statement timeout" in str(raised.value)
        assert raised.value.__cause__ is not None
    finally:
        holder.rollback()
        holder.close()
        impatient.dispose()
    with pg_engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one() == 100


def test_a_connection_the_server_dropped_mid_transaction_closes_with_the_servers_error(pg_engine):
    """seqid's rollback listener (the search-path record, on every Engine of the process) must not turn a
    connection the server dropped into PendingRollbackError: the driver's disconnect surfaces, and closing
    the connection raises nothing (found by a lease store call cut off at its deadline)."""
    with pg_engine.connect() as killer, pg_engine.connect() as conn:
        killer.execution_options(isolation_level="AUTOCOMMIT")
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        killer.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
        with pytest.raises(sa.exc.OperationalError) as raised:
            conn.exec_driver_sql("SELECT 1")
        assert raised.value.connection_invalidated
        conn.close()  # the rollback of the dropped transaction: no PendingRollbackError
