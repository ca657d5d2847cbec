"""A key of UUIDs kept as text (``char(36)``: Django's ``UUIDField`` before 5.0 on MariaDB, hand-made tables on
PostgreSQL) changed to the database's ``uuid`` type with every foreign key to it, online, through Alembic's
command API in processes of their own, on the shared PostgreSQL and MariaDB: a parent of 100,000 rows that
references itself, a child whose foreign key is nullable (``ON DELETE SET NULL``) and one whose is not (``ON
DELETE CASCADE``); release N's writers (text keys) during the expand step, which is killed in its batches and run
again; the contract waited on by a held lock, killed, run again; release N+1's writers (seqid keys) after; every
child on its parent, row by row; every constraint there; then the way back, refused until the new release's
rows have their text, and the expand taken back to the tables as they were."""

from __future__ import annotations

import secrets
import time

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from tests.sqlalchemy_adapter.alembic_project import last_error, upgrade  # noqa: E402
from tests.sqlalchemy_adapter.rekey_traffic import Writers  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import (  # noqa: E402
    _beside_old_writers,
    _held_killed_and_run_again,
    _migration,
    _run,
    _undone_filling,
    _url,
)

PARENTS = 100_000
#: Rows of each child table: past REWRITE_UP_TO_ROWS, which convert_uuid_storage rewrites in place up to
CHILDREN = 120_000


@pytest.fixture(params=["postgresql", "mariadb"])
def where(request):
    """``(engine, (parent, child1, child2))``: the tables of text keys, made and filled on that server: 100,000
    parents and 120,000 children in each child table."""
    engine = request.getfixturevalue("pg_engine" if request.param == "postgresql" else "mysql_engine")
    tag = secrets.token_hex(3)
    p, c1, c2 = f"rkt_parent_{tag}", f"rkt_child1_{tag}", f"rkt_child2_{tag}"
    pg = request.param == "postgresql"
    serial = "bigserial" if pg else "bigint AUTO_INCREMENT"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {p} (id char(36) PRIMARY KEY, name varchar(20), boss_id char(36), "
            f"CONSTRAINT {p}_boss FOREIGN KEY (boss_id) REFERENCES {p} (id))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c1} (id {serial} PRIMARY KEY, parent_id char(36), "
            f"CONSTRAINT {c1}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c2} (id {serial} PRIMARY KEY, parent_id char(36) NOT NULL, "
            f"CONSTRAINT {c2}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE CASCADE)"
        )
        if pg:
            conn.exec_driver_sql(
                f"INSERT INTO {p} (id, name) SELECT md5('k' || g)::uuid::text, 'p' || g "
                f"FROM generate_series(1, {PARENTS}) g"
            )
            numbered = f"(SELECT id, row_number() OVER (ORDER BY name) AS n FROM {p})"
            conn.exec_driver_sql(
                f"INSERT INTO {c1} (parent_id) SELECT CASE WHEN g %% 10 = 0 THEN NULL ELSE x.id END "
                f"FROM generate_series(1, {CHILDREN}) g "
                f"JOIN {numbered} x ON x.n = (g::bigint * 7919) %% {PARENTS} + 1"
            )
            conn.exec_driver_sql(
                f"INSERT INTO {c2} (parent_id) SELECT x.id FROM generate_series(1, {CHILDREN}) g "
                f"JOIN {numbered} x ON x.n = (g::bigint * 104729) %% {PARENTS} + 1"
            )
            conn.exec_driver_sql(f"ANALYZE {p}; ANALYZE {c1}; ANALYZE {c2}")
        else:
            conn.exec_driver_sql(f"INSERT INTO {p} (id, name) SELECT UUID(), CONCAT('p', seq) FROM seq_1_to_{PARENTS}")
            conn.exec_driver_sql(f"CREATE TEMPORARY TABLE n_{tag} (n bigint PRIMARY KEY, id char(36))")
            conn.exec_driver_sql(f"INSERT INTO n_{tag} SELECT row_number() OVER (ORDER BY name), id FROM {p}")
            conn.exec_driver_sql(
                f"INSERT INTO {c1} (parent_id) SELECT IF(seq %% 10 = 0, NULL, x.id) FROM seq_1_to_{CHILDREN} "
                f"JOIN n_{tag} x ON x.n = (seq * 7919) %% {PARENTS} + 1"
            )
            conn.exec_driver_sql(
                f"INSERT INTO {c2} (parent_id) SELECT x.id FROM seq_1_to_{CHILDREN} "
                f"JOIN n_{tag} x ON x.n = (seq * 104729) %% {PARENTS} + 1"
            )
            conn.exec_driver_sql(f"ANALYZE TABLE {p}, {c1}, {c2}")
        conn.exec_driver_sql(
            f"UPDATE {p} SET boss_id = (SELECT min(id) FROM (SELECT id FROM {p}) a) WHERE name <> 'p1'"
        )
    yield engine, (p, c1, c2)
    with engine.begin() as conn:
        for table in (c2, c1, p):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}" + (" CASCADE" if pg else ""))
        for table, column in ((p, "id"), (c1, "parent_id"), (c2, "parent_id"), (p, "boss_id")):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS seqid_fill_{table}_{column}_seqid")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS v_{p}, v2_{p}, v3_{p}, v4_{p}, v5_{p}")


def _parents(engine, child: str, column: str, parent: str, parent_text: str) -> dict[object, str | None]:
    """Each child row's parent, by the parent's text key (``parent_text``), through ``column``'s join."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT c.id, p.{parent_text} FROM {child} c LEFT JOIN {parent} p ON p.id = c.{column}"
        ).all()
    return {str(i).lower(): (None if t is None else str(t).lower()) for i, t in rows}


def _key_type(engine, table: str) -> str:
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            query = (
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = to_regclass(:t) AND attname = 'id'"
            )
        else:
            query = (
                "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                "AND TABLE_NAME = :t AND COLUMN_NAME = 'id'"
            )
        return str(conn.execute(sa.text(query), {"t": table}).scalar())


@pytest.mark.big  # 100,000 parents; the text path's SQL is the server's, tested here on 15 and MariaDB 10.11
def test_uuids_kept_as_text_become_the_uuid_type_with_their_foreign_keys_while_both_releases_write(where, tmp_path):
    engine, (p, c1, c2) = where
    url = _url(engine)
    text_type = _key_type(engine, p)
    before = {t: _parents(engine, t, "parent_id", p, "id") for t in (c1, c2)}
    bosses = _parents(engine, p, "boss_id", p, "id")

    expand = _migration(tmp_path, "expand", f'    op.rekey_expand("{p}", batch_size=1000)', f"v_{p}")
    _beside_old_writers(expand, url, engine, (p, c1, c2), tmp_path, "--text-keys")
    assert _key_type(engine, p) == text_type

    _held_killed_and_run_again(
        _migration(tmp_path, "contract", f'    op.rekey_contract("{p}")', f"v2_{p}"), url, engine, c2
    )
    assert _key_type(engine, p) == "uuid"
    new = Writers(url, (p, c1, c2), tmp_path, "new")
    time.sleep(0.5)
    seen = new.stop()
    assert seen["errors"] == [] and seen["writes"] > 0, seen

    for table in (c1, c2):  # every row the old release left points where it pointed
        after = _parents(engine, table, "parent_id", p, "id_text")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    after_bosses = _parents(engine, p, "boss_id", p, "id_text")  # by the row's new key: its text, as before
    assert {k: v for k, v in after_bosses.items() if k in bosses} == bosses
    with engine.connect() as conn:
        for table in (c1, c2):
            orphans = conn.exec_driver_sql(
                f"SELECT count(*) FROM {table} c LEFT JOIN {p} x ON x.id = c.parent_id "
                "WHERE c.parent_id IS NOT NULL AND x.id IS NULL"
            ).scalar()
            assert orphans == 0
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the foreign key holds
        conn.exec_driver_sql(f"INSERT INTO {c2} (parent_id) VALUES ('00000000-0000-7000-8000-000000000001')")

    # the way back: refused while the new release's rows have no text, then the old key and foreign keys again
    back = _migration(tmp_path, "back", f'    op.rekey_undo_contract("{p}")', f"v3_{p}")
    refused = upgrade(back, url)
    _out, err = refused.communicate(timeout=300)
    assert refused.returncode != 0 and "fill them first: " in last_error(err), err[-2000:]
    assert _key_type(engine, p) == "uuid"  # refused before any change
    _undone_filling(back, url, engine)
    assert _key_type(engine, p) == text_type
    for table in (c1, c2):
        after = _parents(engine, table, "parent_id", p, "id")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    _run(_migration(tmp_path, "undo", f'    op.rekey_undo_expand("{p}")', f"v4_{p}"), url)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            left = conn.exec_driver_sql(
                f"SELECT count(*) FROM pg_attribute WHERE attrelid IN ('{p}'::regclass, '{c1}'::regclass, "
                f"'{c2}'::regclass) AND attname LIKE '%%seqid%%' AND NOT attisdropped"
            ).scalar()
        else:
            left = conn.exec_driver_sql(
                "SELECT count(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                f"AND TABLE_NAME IN ('{p}', '{c1}', '{c2}') AND COLUMN_NAME LIKE '%%seqid%%'"
            ).scalar()
    assert left == 0


@pytest.mark.big  # 100,000 parents: past the rows convert_uuid_storage rewrites in place
def test_convert_uuid_storage_of_a_big_text_key_runs_online_while_the_old_code_writes(where, tmp_path):
    """``op.convert_uuid_storage(p, "id", from_storage="text")`` of a table past REWRITE_UP_TO_ROWS, in one
    release: online (the expand and contract steps back to back, the text columns dropped after), killed in its
    batches and run again, while code that writes the keys as text goes on throughout, into the uuid column too
    once it is swapped in; the same UUIDs after, every child on its parent, no column of seqid's left."""
    engine, (p, c1, c2) = where
    url = _url(engine)
    before = {t: _parents(engine, t, "parent_id", p, "id") for t in (c1, c2)}
    bosses = _parents(engine, p, "boss_id", p, "id")
    with engine.connect() as conn:
        columns = {t: {c["name"] for c in sa.inspect(conn).get_columns(t)} for t in (p, c1, c2)}

    body = f'    op.convert_uuid_storage("{p}", "id", from_storage="text")'
    convert = _migration(tmp_path, "convert", body, f"v_{p}")
    # unprepared: a statement PostgreSQL prepared while the key was text keeps its text parameter after the swap
    _beside_old_writers(convert, url, engine, (p, c1, c2), tmp_path, "--text-keys", "--unprepared")
    assert _key_type(engine, p) == "uuid"
    with engine.connect() as conn:
        # the same columns (the key's now last: SELECT * reads it there)
        assert {t: {c["name"] for c in sa.inspect(conn).get_columns(t)} for t in (p, c1, c2)} == columns
    for table in (c1, c2):  # the same UUIDs: each old child on the parent it had
        after = _parents(engine, table, "parent_id", p, "id")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    after_bosses = _parents(engine, p, "boss_id", p, "id")
    assert {k: v for k, v in after_bosses.items() if k in bosses} == bosses
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the foreign key holds
        conn.exec_driver_sql(f"INSERT INTO {c2} (parent_id) VALUES ('00000000-0000-7000-8000-000000000001')")


@pytest.mark.parametrize(
    "vendor, bad",
    [("postgresql", "not a uuid"), ("mariadb", "756bed0d3922cb307bf6928b493479d9")],  # an MD5: no RFC variant
)
def test_a_text_that_the_uuid_type_refuses_is_refused_before_any_change(vendor, bad, tmp_path, request):
    """A key the database's uuid type would not take (text that is no UUID; on MariaDB 10.11 also a UUID of
    another variant, as an MD5's hex): the backfill would stop at its row, so the expand step is refused
    before it changes anything, naming the column and the count."""
    engine = request.getfixturevalue("pg_engine" if vendor == "postgresql" else "mysql_engine")
    p = f"rkt_bad_{secrets.token_hex(3)}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id char(36) PRIMARY KEY, name varchar(20))")
        conn.exec_driver_sql(
            f"INSERT INTO {p} VALUES ('0190a5d4-b1e2-7c3d-8e4f-5a6b7c8d9e0f', 'good'), ('{bad}', 'bad')"
        )
    try:
        run = upgrade(_migration(tmp_path, "expand", f'    op.rekey_expand("{p}")', f"v_{p}"), _url(engine))
        _out, err = run.communicate(timeout=300)
        assert run.returncode != 0
        said = last_error(err)
        assert "MigrationRefusedError" in said and f"{p}.id holds 1 values that are not a UUID" in said, said
        with engine.connect() as conn:
            columns = conn.exec_driver_sql(
                "SELECT count(*) FROM information_schema.columns WHERE table_name = "
                f"'{p}' AND column_name LIKE '%%seqid%%'"
            ).scalar()
        assert columns == 0
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {p}, v_{p}")
