"""A shared table's integer key changed with the foreign keys of a schema per tenant (seqid_orm.schema.rekey), on
the shared PostgreSQL: each tenant's schema holds a table of the same name as the others' (and as one in the
shared table's own schema) whose foreign key references the shared table, with an index over it; every step run
through Alembic in a process of its own, then each way back.  The catalog names every table with its schema; the
search path's schema alone used to be read, and such a foreign key was refused."""

from __future__ import annotations

import secrets

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from tests.sqlalchemy_adapter.test_conversions import _column_type  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import _catalog, _parents_of  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey_inheritance import _stepper  # noqa: E402

PARENTS = 3_000


def _key_type(engine, table: str, column: str) -> str:
    with engine.connect() as conn:
        return _column_type(conn, table, column)


@pytest.fixture
def tenants(pg_engine):
    """``(parent, [children])``: a shared parent of 3,000 rows in the search path's schema, and a table named
    ``orders_<tag>`` in it and in two tenants' schemas (one schema's name needs quoting), each with a foreign key to the
    parent and an index over it and another column."""
    tag = secrets.token_hex(3)
    p = f"rk_shared_{tag}"
    schemas = [f"rk_tenant_a_{tag}", f'rk Tenant "b" {tag}']

    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    children = [f"orders_{tag}", *(f"{q(s)}.orders_{tag}" for s in schemas)]
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY, name text)")
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT 'p' || g FROM generate_series(1, {PARENTS}) g")
        for s in schemas:
            conn.exec_driver_sql(f"CREATE SCHEMA {q(s)}")
        for n, child in enumerate(children):
            conn.exec_driver_sql(
                f"CREATE TABLE {child} (id bigserial PRIMARY KEY, note text, "
                f"parent_id bigint REFERENCES {p} (id) ON DELETE CASCADE)"
            )
            conn.exec_driver_sql(f"CREATE INDEX ix_{tag} ON {child} (parent_id, note)")
            conn.exec_driver_sql(
                f"INSERT INTO {child} (note, parent_id) SELECT 'o' || g, (g * {7 + n}) %% {PARENTS} + 1 "
                f"FROM generate_series(1, {PARENTS * 2}) g"
            )
    yield p, children
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS orders_{tag}, {p} CASCADE")
        for s in schemas:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {q(s)} CASCADE")
        left = [n for n in sa.inspect(conn).get_table_names() if n.startswith(("seqid_fill_", "v_")) and tag in n]
        for name in left:
            conn.exec_driver_sql(f'DROP TABLE "{name}"')


def test_a_shared_tables_key_changes_with_the_foreign_keys_of_each_tenants_schema(pg_engine, tenants, tmp_path):
    """Expand, contract: the key and the three tables' foreign keys are uuids, each order on the parent it had, the
    foreign keys valid, each index over the new column under its old name in its own schema; the undo of the
    contract and of the expand give back the tables as they were, in every schema."""
    p, children = tenants
    url = pg_engine.url.render_as_string(hide_password=False)
    tables = (p, *children)
    before = _catalog(pg_engine, tables)
    rows = {c: _parents_of(pg_engine, c, "parent_id", p, "id") for c in children}
    run = _stepper(tmp_path, url, f"v_{p}", iter(range(100)))

    run(f'    op.rekey_expand("{p}")')
    run(f'    op.rekey_contract("{p}")')
    assert _key_type(pg_engine, p, "id") == "uuid"
    for child in children:
        assert _key_type(pg_engine, child, "parent_id") == "uuid", child
        # the same parent as before, by the integer the parent keeps
        assert _parents_of(pg_engine, child, "parent_id", p, "id_int") == rows[child], child
    with pg_engine.connect() as conn:
        oids = [conn.execute(sa.text("SELECT to_regclass(:t)::oid"), {"t": t}).scalar() for t in tables]
        invalid = conn.execute(
            sa.text(
                "SELECT conrelid::regclass::text, conname FROM pg_constraint "
                "WHERE conrelid = ANY(:t) AND NOT convalidated"
            ),
            {"t": oids},
        ).all()
        # each table's index of that name: its first column's type, and whether it is in the table's schema
        indexes = {
            t: conn.execute(
                sa.text(
                    "SELECT format_type(a.atttypid, a.atttypmod), c.relnamespace = r.relnamespace FROM pg_index i "
                    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class r ON r.oid = i.indrelid "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
                    "WHERE i.indrelid = to_regclass(:t) AND c.relname = :i"
                ),
                {"t": t, "i": f"ix_{p.rsplit('_', 1)[1]}"},
            ).all()
            for t in children
        }
    assert invalid == []
    assert indexes == {t: [("uuid", True)] for t in children}  # under its name, over the new column, beside it
    with pg_engine.begin() as conn:  # the new release writes an order of the second tenant by its parent's key
        key = conn.exec_driver_sql(f"SELECT id FROM {p} WHERE name = 'p5'").scalar()
        conn.execute(sa.text(f"INSERT INTO {children[2]} (note, parent_id) VALUES ('new', :k)"), {"k": key})
        conn.execute(sa.text(f"DELETE FROM {children[2]} WHERE note = 'new'"))

    run(f'    op.rekey_undo_contract("{p}")')
    run(f'    op.rekey_undo_expand("{p}")')
    assert _catalog(pg_engine, tables) == before
    assert {c: _parents_of(pg_engine, c, "parent_id", p, "id") for c in children} == rows


def _mariadb_catalog(engine, tables: list[tuple[str, str]]) -> dict[str, set]:
    """What MariaDB's catalog says each ``(database, table)`` is made of: columns, indexes, foreign keys, triggers."""
    read = {
        "columns": "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = :s AND TABLE_NAME = :t",
        "indexes": "SELECT INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX), MIN(NON_UNIQUE) "
        "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = :s AND TABLE_NAME = :t GROUP BY INDEX_NAME",
        "foreign keys": "SELECT k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, "
        "k.REFERENCED_COLUMN_NAME, r.DELETE_RULE FROM information_schema.KEY_COLUMN_USAGE k "
        "JOIN information_schema.REFERENTIAL_CONSTRAINTS r ON r.CONSTRAINT_SCHEMA = k.TABLE_SCHEMA "
        "AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME "
        "WHERE k.TABLE_SCHEMA = :s AND k.TABLE_NAME = :t",
        "triggers": "SELECT TRIGGER_SCHEMA, TRIGGER_NAME FROM information_schema.TRIGGERS "
        "WHERE EVENT_OBJECT_SCHEMA = :s AND EVENT_OBJECT_TABLE = :t",
    }
    with engine.connect() as conn:
        return {
            k: {(s, t, *row) for s, t in tables for row in conn.execute(sa.text(q), {"s": s, "t": t}).all()}
            for k, q in read.items()
        }


def test_on_mariadb_a_shared_tables_key_changes_with_the_foreign_keys_of_each_tenants_database(mysql_engine, tmp_path):
    """MariaDB's other schemas are other databases: a table of the same name in two tenants' databases (and in the
    current one), each with a foreign key to the shared table and an index over it.  Every read names each with
    its database, and each trigger lives in its table's (MariaDB keeps a trigger there); expand, contract, the new
    release's row, then each way back gives the catalog as it was, in every database."""
    engine = mysql_engine
    tag = secrets.token_hex(3)
    p, child = f"rk_shared_{tag}", f"orders_{tag}"
    here = engine.url.database
    tenants = [f"rk_tenant_a_{tag}", f"rk_tenant_b_{tag}"]
    tables = [(here, p), (here, child), *((t, child) for t in tenants)]
    url = engine.url.render_as_string(hide_password=False)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigint AUTO_INCREMENT PRIMARY KEY, name varchar(20))")
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT CONCAT('p', seq) FROM seq_1_to_{PARENTS}")
        for t in tenants:
            conn.exec_driver_sql(f"CREATE DATABASE {t}")
        for n, (db, table) in enumerate(tables[1:]):
            conn.exec_driver_sql(
                f"CREATE TABLE {db}.{table} (id bigint AUTO_INCREMENT PRIMARY KEY, note varchar(20), "
                f"parent_id bigint, FOREIGN KEY (parent_id) REFERENCES {here}.{p} (id) ON DELETE CASCADE)"
            )
            conn.exec_driver_sql(f"CREATE INDEX ix_{tag} ON {db}.{table} (parent_id, note)")
            conn.exec_driver_sql(
                f"INSERT INTO {db}.{table} (note, parent_id) SELECT CONCAT('o', seq), (seq * {7 + n}) %% {PARENTS} + 1 "
                f"FROM seq_1_to_{PARENTS * 2}"
            )

    def links(by: str) -> dict[str, list]:
        with engine.connect() as conn:
            return {
                db: sorted(
                    conn.exec_driver_sql(
                        f"SELECT c.id, x.name FROM {db}.{table} c JOIN {p} x ON x.id{by} = c.parent_id{by}"
                    ).all()
                )
                for db, table in tables[1:]
            }

    try:
        before, rows = _mariadb_catalog(engine, tables), links("")
        run = _stepper(tmp_path, url, f"v_{tag}", iter(range(100)))

        run(f'    op.rekey_expand("{p}")')
        run(f'    op.rekey_contract("{p}")')
        with engine.connect() as conn:
            kinds = conn.exec_driver_sql(
                "SELECT TABLE_SCHEMA, DATA_TYPE FROM information_schema.COLUMNS WHERE COLUMN_NAME = 'parent_id' "
                f"AND TABLE_NAME = '{child}'"
            ).all()
            orphans = [
                conn.exec_driver_sql(
                    f"SELECT count(*) FROM {db}.{table} c LEFT JOIN {p} x ON x.id = c.parent_id WHERE x.id IS NULL"
                ).scalar()
                for db, table in tables[1:]
            ]
        assert sorted(kinds) == sorted((db, "uuid") for db, _ in tables[1:]) and orphans == [0, 0, 0]
        assert links("_int") == rows  # each order on the parent it had, by the integers both keep
        with engine.begin() as conn:  # the new release writes an order of a tenant by its parent's key
            key = conn.exec_driver_sql(f"SELECT id FROM {p} WHERE name = 'p5'").scalar()
            conn.execute(sa.text(f"INSERT INTO {tenants[1]}.{child} (note, parent_id) VALUES ('new', :k)"), {"k": key})
            conn.exec_driver_sql(f"DELETE FROM {tenants[1]}.{child} WHERE note = 'new'")
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the foreign key holds
            conn.exec_driver_sql(f"INSERT INTO {tenants[0]}.{child} (note, parent_id) VALUES ('x', UUID())")
        run(f'    op.rekey_undo_contract("{p}")')
        run(f'    op.rekey_undo_expand("{p}")')
        after = _mariadb_catalog(engine, tables)
        assert after == before, {k: before[k] ^ after[k] for k in before}
        assert links("") == rows
    finally:
        with engine.begin() as conn:
            for t in tenants:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {t}")
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {child}, {p}")
            for name in sa.inspect(conn).get_table_names():
                if tag in name and name.startswith(("seqid_fill_", "v_")):
                    conn.exec_driver_sql(f"DROP TABLE `{name}`")
