"""A shared table's integer key changed with the foreign keys of a schema per tenant (seqid_orm.schema.rekey), on
the shared PostgreSQL: each tenant's schema holds a table of the same name as the others' (and as one in the
shared table's own schema) whose foreign key references the shared table, with an index over it; every step run
through Alembic in a process of its own, then each way back.  The catalog names every table with its schema; the
search path's schema alone used to be read, and such a foreign key was refused."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402
from tests.sqlalchemy_adapter.test_conversions import _column_type  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import _catalog, _parents_of  # noqa: E402

PARENTS = 3_000


def _run(where: Path, url: str) -> None:
    run = upgrade(where, url)
    _out, err = run.communicate(timeout=600)
    assert run.returncode == 0, last_error(err) or err[-2000:]


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
    steps = iter(range(100))

    def run(body: str) -> None:
        n = next(steps)
        _run(project(tmp_path / f"m{n}", f"v_{p}_{n}", body), url)

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
