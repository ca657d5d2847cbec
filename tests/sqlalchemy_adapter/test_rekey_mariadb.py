"""An integer key changed to a seqid key with every foreign key to it on MariaDB, through Alembic's command API in
processes of their own, on the shared MariaDB: a parent of 100,000 rows (``bigint AUTO_INCREMENT``) that
references itself, a child whose foreign key is nullable (``ON DELETE SET NULL``) and one whose is not (``ON DELETE
CASCADE``).  MariaDB's ``BEFORE INSERT`` trigger sees 0 for an ``AUTO_INCREMENT`` key, so the parents release N
inserts after the expand step keep a ``NULL`` new key until the contract step keys them (its keys come late,
seqid_orm.vendors.mariadb.Rekey): release N's writers run through the expand step, which is killed in its batches
and run again; the contract waits on a held table, is killed, is run again; release N+1's writers after; every
row keyed from its integer, every child on its parent, ``ORDER BY`` the new key in the integers' order; then the
way back to the tables as they were."""

from __future__ import annotations

import secrets
import time

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm.ids.layout import Layout  # noqa: E402
from seqid_orm.ids.rekeyed import integer_key  # noqa: E402
from tests.sqlalchemy_adapter.rekey_traffic import Writers  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import (  # noqa: E402
    PARENTS,
    _beside_old_writers,
    _held_killed_and_run_again,
    _migration,
    _run,
    _undone_filling,
    _url,
)


@pytest.fixture
def graph(mysql_engine):
    tag = secrets.token_hex(3)
    p, c1, c2 = f"rkm_parent_{tag}", f"rkm_child1_{tag}", f"rkm_child2_{tag}"
    with mysql_engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {p} (id bigint AUTO_INCREMENT PRIMARY KEY, name varchar(20), boss_id bigint, "
            f"CONSTRAINT {p}_boss FOREIGN KEY (boss_id) REFERENCES {p} (id))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c1} (id bigint AUTO_INCREMENT PRIMARY KEY, parent_id bigint, "
            f"CONSTRAINT {c1}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c2} (id bigint AUTO_INCREMENT PRIMARY KEY, parent_id bigint NOT NULL, "
            f"CONSTRAINT {c2}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT CONCAT('p', seq) FROM seq_1_to_{PARENTS}")
        conn.exec_driver_sql(f"UPDATE {p} SET boss_id = id - 1 WHERE id > 1")
        conn.exec_driver_sql(
            f"INSERT INTO {c1} (parent_id) SELECT IF(seq %% 10 = 0, NULL, (seq * 7919) %% {PARENTS} + 1) "
            f"FROM seq_1_to_{PARENTS}"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c2} (parent_id) SELECT (seq * 104729) %% {PARENTS} + 1 FROM seq_1_to_{PARENTS}"
        )
        conn.exec_driver_sql(f"ANALYZE TABLE {p}, {c1}, {c2}")
    yield p, c1, c2
    with mysql_engine.begin() as conn:
        for table in (c2, c1, p):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        for name in sa.inspect(conn).get_table_names():
            if tag in name and (name.startswith("seqid_fill_") or name.startswith("v")):
                conn.exec_driver_sql(f"DROP TABLE {name}")


def _parents_of(engine, child: str, parent: str, parent_int: str) -> dict[int, int | None]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT c.id, p.{parent_int} FROM {child} c LEFT JOIN {parent} p ON p.id = c.parent_id"
        ).all()
    return {int(i): (None if n is None else int(n)) for i, n in rows}


def _columns(engine, tables) -> dict[str, dict[str, str]]:
    with engine.connect() as conn:
        return {t: {c["name"]: str(c["type"]) for c in sa.inspect(conn).get_columns(t)} for t in tables}


@pytest.mark.big  # 100,000 parents, 200,000 children: the late keys walked by key, the swap under writers
def test_an_integer_key_changes_on_mariadb_while_both_releases_write(mysql_engine, graph, tmp_path):
    p, c1, c2 = graph
    engine, url = mysql_engine, _url(mysql_engine)
    columns = _columns(engine, graph)
    before = {t: _parents_of(engine, t, p, "id") for t in (c1, c2)}

    expand = _migration(tmp_path, "expand", f'    op.rekey_expand("{p}", batch_size=1000)', f"v_{p}_1")
    _beside_old_writers(expand, url, engine, graph, tmp_path)  # none waited past its 1 s lock time-outs
    with engine.connect() as conn:
        late = conn.exec_driver_sql(f"SELECT count(*) FROM {p} WHERE id_seqid IS NULL").scalar()
        keyed = conn.exec_driver_sql(f"SELECT id, id_seqid FROM {p} WHERE id_seqid IS NOT NULL").all()
        children = conn.exec_driver_sql(f"SELECT parent_id, parent_id_seqid FROM {c2}").all()
    assert late > 0  # release N's inserts after the trigger: their AUTO_INCREMENT key came after it
    assert all(str(k) == str(integer_key(n, Layout.TIME_FIRST)) for n, k in keyed)
    assert all(str(k) == str(integer_key(n, Layout.TIME_FIRST)) for n, k in children)  # in step throughout

    _held_killed_and_run_again(
        _migration(tmp_path, "contract", f'    op.rekey_contract("{p}")', f"v_{p}_2"), url, engine, c2
    )
    new = Writers(url, graph, tmp_path, "new")
    time.sleep(0.5)
    seen = new.stop()
    assert seen["errors"] == [] and seen["writes"] > 0, seen

    with engine.connect() as conn:
        old_rows = conn.exec_driver_sql(f"SELECT id_int, id FROM {p} WHERE name <> 'new'").all()
        ints = [n for (n,) in conn.exec_driver_sql(f"SELECT id_int FROM {p} ORDER BY id").all()]
        for table in (c1, c2):
            moved = conn.exec_driver_sql(
                f"SELECT count(*) FROM {table} c LEFT JOIN {p} x ON x.id = c.parent_id "
                "WHERE c.parent_id_int IS NOT NULL AND (x.id_int IS NULL OR x.id_int <> c.parent_id_int)"
            ).scalar()
            assert moved == 0, table  # every row, release N's too, on the parent its integer named
        refs = conn.execute(
            sa.text(
                "SELECT TABLE_NAME, CONSTRAINT_NAME, DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS "
                "WHERE CONSTRAINT_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = :p"
            ),
            {"p": p},
        ).all()
    assert all(str(k) == str(integer_key(n, Layout.TIME_FIRST)) for n, k in old_rows)  # the late ones keyed too
    assert ints == sorted(ints)  # ORDER BY the new key: the integers' order, the new release's after
    # InnoDB's RESTRICT and NO ACTION are one rule ("FOREIGN KEY Constraints"); a key added in place reads as the
    # second
    rules = sorted((t, n, "RESTRICT" if r == "NO ACTION" else r) for t, n, r in refs)
    assert rules == sorted([(c1, f"{c1}_fk", "SET NULL"), (c2, f"{c2}_fk", "CASCADE"), (p, f"{p}_boss", "RESTRICT")])
    for table in (c1, c2):
        after = _parents_of(engine, table, p, "id_int")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the foreign key holds
        conn.exec_driver_sql(f"INSERT INTO {c2} (parent_id) VALUES ('00000000-0000-7000-8000-0000ffffffff')")

    # refused while release N+1's children have no integer: each refusal's UPDATE, as it names it
    _undone_filling(_migration(tmp_path, "back", f'    op.rekey_undo_contract("{p}")', f"v_{p}_3"), url, engine)
    _run(_migration(tmp_path, "undo", f'    op.rekey_undo_expand("{p}")', f"v_{p}_4"), url)
    assert _columns(engine, graph) == columns
    for table in (c1, c2):
        after = _parents_of(engine, table, p, "id")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
