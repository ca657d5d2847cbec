"""Composite foreign keys to a re-keyed table (a tenant's column beside the key, as multi-tenant schemas hold
their children to their tenant), through Alembic's command API on the shared PostgreSQL and MariaDB, for
integer keys and UUIDs kept as text: the key's column of each composite key changes, the others stay, the
parent's unique index the key references is copied over the new key and swapped with the others; the key is
in the catalog with its name, its columns and their order after the contract; the old release's rows and the
new release's are held to it at every step (a row of another tenant's parent refused); every child points at
the same parent; each way back gives the catalog as it was."""

from __future__ import annotations

import secrets
import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import _url  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey_indexes import CASES, _columns, _indexes  # noqa: E402

ROWS = 400


@pytest.fixture(params=CASES)
def tenants(request):
    """``(engine, kind, tables)``: a parent ``a`` of ``ROWS`` rows keyed by ``kind``, each of a tenant (1-4),
    unique on ``(id, tenant)`` and on ``(tenant, id)``; ``c`` whose required composite key ``(a_id, tenant)``
    cascades its parent's delete, and ``d`` whose nullable one ``(tenant, a_id)`` leads with the tenant (on
    PostgreSQL ``MATCH FULL``)."""
    vendor, kind = request.param
    engine = request.getfixturevalue("pg_engine" if vendor == "postgresql" else "mysql_engine")
    tag = secrets.token_hex(3)
    t = {n: f"rkc_{n}_{tag}" for n in ("a", "c", "d")}
    pg = vendor == "postgresql"
    serial = "bigserial" if pg else "bigint AUTO_INCREMENT"
    key, ref = (serial, "bigint") if kind == "integer" else ("char(36)", "char(36)")
    a, c, d = t["a"], t["c"], t["d"]
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {a} (id {key} PRIMARY KEY, tenant int NOT NULL, "
            f"CONSTRAINT {a}_id_tenant UNIQUE (id, tenant), CONSTRAINT {a}_tenant_id UNIQUE (tenant, id))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c} (id {serial} PRIMARY KEY, a_id {ref} NOT NULL, tenant int NOT NULL, "
            f"CONSTRAINT {c}_fk FOREIGN KEY (a_id, tenant) REFERENCES {a} (id, tenant) ON DELETE CASCADE)"
        )
        full = " MATCH FULL" if pg else ""
        conn.exec_driver_sql(
            f"CREATE TABLE {d} (id {serial} PRIMARY KEY, tenant int, a_id {ref}, "
            f"CONSTRAINT {d}_fk FOREIGN KEY (tenant, a_id) REFERENCES {a} (tenant, id){full})"
        )
        if pg:  # as a user indexes a composite key (MariaDB makes its own)
            conn.exec_driver_sql(f"CREATE INDEX {c}_a ON {c} (a_id, tenant)")
        if kind == "integer":
            rows = [{"t": n % 4 + 1} for n in range(ROWS)]
            conn.execute(sa.text(f"INSERT INTO {a} (tenant) VALUES (:t)"), rows)
        else:
            rows = [{"k": str(uuid.uuid4()), "t": n % 4 + 1} for n in range(ROWS)]
            conn.execute(sa.text(f"INSERT INTO {a} (id, tenant) VALUES (:k, :t)"), rows)
        conn.exec_driver_sql(f"INSERT INTO {c} (a_id, tenant) SELECT id, tenant FROM {a}")
        conn.exec_driver_sql(f"INSERT INTO {c} (a_id, tenant) SELECT id, tenant FROM {a}")
        conn.exec_driver_sql(f"INSERT INTO {d} (tenant, a_id) SELECT tenant, id FROM {a}")
        conn.exec_driver_sql(f"INSERT INTO {d} (tenant, a_id) VALUES (NULL, NULL)")
    yield engine, kind, t
    with engine.begin() as conn:
        for name in (d, c, a):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}" + (" CASCADE" if pg else ""))
        for name in sa.inspect(conn).get_table_names():
            if (name.startswith("seqid_fill_rkc_") and tag in name) or name.startswith(f"v_{tag}_"):
                conn.exec_driver_sql(f"DROP TABLE {name}")


def _foreign_keys(engine, tables) -> set[tuple[str, str, tuple[str, ...], str, tuple[str, ...]]]:
    """Each foreign key: ``(table, name, its columns, the table it references, their columns)``, in order."""
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        return {
            (t, f["name"], tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
            for t in tables
            for f in inspector.get_foreign_keys(t)
        }


def _parents(engine, t, kept: str) -> list[tuple[object, ...]]:
    """Each child row's parent, by the old keys (the kept ones once contracted): ``(table, child id, parent)``."""
    with engine.connect() as conn:
        return sorted(
            (name, *row)
            for name in ("c", "d")
            for row in conn.exec_driver_sql(
                f"SELECT x.id, p.{kept}, p.tenant FROM {t[name]} x JOIN {t['a']} p ON p.id = x.a_id"
            ).all()
        )


def test_a_composite_foreign_key_follows_its_key_and_holds_both_releases_to_the_tenant(tenants, tmp_path):
    engine, kind, t = tenants
    url, a, c, d = _url(engine), t["a"], t["c"], t["d"]
    tables = tuple(t.values())
    tag = a.rsplit("_", 1)[1]
    steps = iter(range(100))

    def run(body: str) -> None:
        where = project(tmp_path / f"m{next(steps)}", f"v_{tag}_{next(steps)}", body)
        migrated = upgrade(where, url)
        _out, err = migrated.communicate(timeout=300)
        assert migrated.returncode == 0, last_error(err) or err[-2000:]

    def refused(statement: str, values: dict[str, object]) -> None:
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(sa.text(statement), values)

    before = (_indexes(engine, tables), _columns(engine, tables), _foreign_keys(engine, tables))
    run(f'    op.rekey_expand("{a}")')
    with engine.connect() as conn:  # the old release: a parent of tenant 2, its children by the old key
        other = conn.exec_driver_sql(f"SELECT id FROM {a} WHERE tenant = 3 LIMIT 1").scalar()
    with engine.begin() as conn:
        if kind == "integer":
            conn.exec_driver_sql(f"INSERT INTO {a} (tenant) VALUES (2)")
            old = conn.exec_driver_sql(f"SELECT max(id) FROM {a}").scalar()
        else:
            old = str(uuid.uuid4())
            conn.execute(sa.text(f"INSERT INTO {a} (id, tenant) VALUES (:k, 2)"), {"k": old})
        conn.execute(sa.text(f"INSERT INTO {c} (a_id, tenant) VALUES (:k, 2)"), {"k": old})
        conn.execute(sa.text(f"INSERT INTO {d} (tenant, a_id) VALUES (2, :k)"), {"k": old})
    refused(f"INSERT INTO {c} (a_id, tenant) VALUES (:k, 2)", {"k": other})  # another tenant's parent
    refused(f"INSERT INTO {d} (tenant, a_id) VALUES (2, :k)", {"k": other})
    parents = _parents(engine, t, "id")  # the old release's rows with the others

    run(f'    op.rekey_contract("{a}")')
    kept = "id_int" if kind == "integer" else "id_text"
    assert _foreign_keys(engine, tables) == before[2]  # each key with its name, columns and their order
    assert _parents(engine, t, kept) == sorted(parents)
    with engine.connect() as conn:  # the new release: seqid keys
        new, new_other = (
            conn.exec_driver_sql(f"SELECT id FROM {a} WHERE tenant = {n} ORDER BY id LIMIT 1").scalar() for n in (2, 3)
        )
        [key_type] = [col["type"] for col in sa.inspect(conn).get_columns(a) if col["name"] == "id"]
        assert "UUID" in str(key_type).upper(), key_type  # the seqid key, in the type the server compares
        new, new_other = str(new), str(new_other)
    refused(f"INSERT INTO {c} (a_id, tenant) VALUES (:k, 2)", {"k": new_other})
    refused(f"INSERT INTO {d} (tenant, a_id) VALUES (2, :k)", {"k": new_other})
    if engine.dialect.name == "postgresql":  # MATCH FULL kept: a half-null key refused
        refused(f"INSERT INTO {d} (tenant, a_id) VALUES (NULL, :k)", {"k": new})
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO {c} (a_id, tenant) VALUES (:k, 2)"), {"k": new})
        # its old key, for the way back
        conn.exec_driver_sql(
            f"UPDATE {c} SET a_{kept} = (SELECT {kept} FROM {a} WHERE {a}.id = {c}.a_id) WHERE a_{kept} IS NULL"
        )
        conn.execute(sa.text(f"DELETE FROM {d} WHERE a_id = :k"), {"k": new})
        conn.execute(sa.text(f"DELETE FROM {a} WHERE id = :k"), {"k": new})  # its children in c with it
        assert conn.execute(sa.text(f"SELECT count(*) FROM {c} WHERE a_id = :k"), {"k": new}).scalar() == 0
    parents = _parents(engine, t, kept)

    run(f'    op.rekey_undo_contract("{a}")')
    assert _foreign_keys(engine, tables) >= before[2]
    assert _parents(engine, t, "id") == parents
    refused(f"INSERT INTO {c} (a_id, tenant) VALUES (:k, 2)", {"k": other})
    run(f'    op.rekey_undo_expand("{a}")')
    assert (_indexes(engine, tables), _columns(engine, tables), _foreign_keys(engine, tables)) == before


def test_a_second_foreign_key_from_the_same_column_is_refused_before_any_change(tenants, tmp_path):
    """Two foreign keys from one column (a plain one beside the tenant's composite one): the new column could
    follow one, so the expand step is refused before any change, naming the column."""
    engine, _kind, t = tenants
    url, a, c = _url(engine), t["a"], t["c"]
    tables = tuple(t.values())
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {c} ADD CONSTRAINT {c}_plain FOREIGN KEY (a_id) REFERENCES {a} (id)")
    before = (_indexes(engine, tables), _columns(engine, tables), _foreign_keys(engine, tables))
    where = project(tmp_path / "two", f"v_{a.rsplit('_', 1)[1]}_two", f'    op.rekey_expand("{a}")')
    migrated = upgrade(where, url)
    _out, err = migrated.communicate(timeout=300)
    assert migrated.returncode != 0
    assert "MigrationRefusedError" in last_error(err) and "two foreign keys" in last_error(err), err[-2000:]
    assert (_indexes(engine, tables), _columns(engine, tables), _foreign_keys(engine, tables)) == before
