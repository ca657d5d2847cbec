"""A re-keyed table's children keep their other indexes over the changed columns, through Alembic's command API on
the shared PostgreSQL and MariaDB: Django's many-to-many table (its unique pair and its foreign key's own index),
a many-to-many table of the table with itself (both columns change: one copy over both new columns), a one-to-one
key's ``UNIQUE``, the parent's own indexes that hold its key beside another column, a many-to-many table between
two tables re-keyed together.  After the contract each index
is there under its name, over the same column names, and the new release's duplicates are refused as the old
release's were; each way back gives the catalog as it was.  An index seqid cannot make again of its columns, a
child whose primary key is its foreign key, and a foreign key to a child's one-to-one column are refused before
any change."""

from __future__ import annotations

import json
import secrets

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import _url  # noqa: E402

ROWS = 300

CASES = [
    pytest.param((vendor, kind), id=f"{vendor}-{kind}", marks=() if n == 0 else pytest.mark.matrix)
    for n, (vendor, kind) in enumerate(
        [("postgresql", "integer"), ("postgresql", "text"), ("mariadb", "integer"), ("mariadb", "text")]
    )
]


@pytest.fixture(params=CASES)
def graph(request):
    """``(engine, kind, tables)``: a parent ``a`` of ``ROWS`` rows keyed by ``kind``, a ``tag`` table, Django's
    many-to-many table ``a_tags``, ``a_friends`` (``a`` with itself), ``one`` (a one-to-one key), filled."""
    vendor, kind = request.param
    engine = request.getfixturevalue("pg_engine" if vendor == "postgresql" else "mysql_engine")
    tag = secrets.token_hex(3)
    t = {n: f"rkx_{n}_{tag}" for n in ("a", "tag", "a_tags", "a_friends", "one")}
    pg = vendor == "postgresql"
    serial = "bigserial" if pg else "bigint AUTO_INCREMENT"
    key, ref = (serial, "bigint") if kind == "integer" else ("char(36)", "char(36)")
    a = t["a"]
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {a} (id {key} PRIMARY KEY, name varchar(20))")
        conn.exec_driver_sql(f"CREATE INDEX {a}_id_name ON {a} (id, name)")  # the parent's own, over its key
        conn.exec_driver_sql(f"CREATE UNIQUE INDEX {a}_name_id ON {a} (name, id)")
        conn.exec_driver_sql(f"CREATE TABLE {t['tag']} (id {serial} PRIMARY KEY)")
        conn.exec_driver_sql(  # as Django makes a ManyToManyField's table (names shortened)
            f"CREATE TABLE {t['a_tags']} (id {serial} PRIMARY KEY, a_id {ref} NOT NULL, tag_id bigint NOT NULL, "
            f"CONSTRAINT {t['a_tags']}_a_fk FOREIGN KEY (a_id) REFERENCES {a} (id), "
            f"CONSTRAINT {t['a_tags']}_tag_fk FOREIGN KEY (tag_id) REFERENCES {t['tag']} (id), "
            f"CONSTRAINT {t['a_tags']}_a_id_tag_id_uniq UNIQUE (a_id, tag_id))"
        )
        conn.exec_driver_sql(f"CREATE INDEX {t['a_tags']}_a_id ON {t['a_tags']} (a_id)")
        conn.exec_driver_sql(f"CREATE INDEX {t['a_tags']}_tag_id ON {t['a_tags']} (tag_id)")
        conn.exec_driver_sql(
            f"CREATE TABLE {t['a_friends']} (id {serial} PRIMARY KEY, from_a_id {ref} NOT NULL, "
            f"to_a_id {ref} NOT NULL, CONSTRAINT {t['a_friends']}_from FOREIGN KEY (from_a_id) REFERENCES {a} (id), "
            f"CONSTRAINT {t['a_friends']}_to FOREIGN KEY (to_a_id) REFERENCES {a} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(f"CREATE UNIQUE INDEX {t['a_friends']}_pair ON {t['a_friends']} (from_a_id, to_a_id)")
        conn.exec_driver_sql(
            f"CREATE TABLE {t['one']} (id {serial} PRIMARY KEY, a_id {ref} UNIQUE, "
            f"CONSTRAINT {t['one']}_fk FOREIGN KEY (a_id) REFERENCES {a} (id) ON DELETE SET NULL)"
        )
        if kind == "integer" and pg:
            conn.exec_driver_sql(f"INSERT INTO {a} (name) SELECT 'a' || g FROM generate_series(1, {ROWS}) g")
        elif kind == "integer":
            conn.exec_driver_sql(f"INSERT INTO {a} (name) SELECT CONCAT('a', seq) FROM seq_1_to_{ROWS}")
        elif pg:
            conn.exec_driver_sql(
                f"INSERT INTO {a} SELECT gen_random_uuid()::text, 'a' || g FROM generate_series(1, {ROWS}) g"
            )
        else:
            conn.exec_driver_sql(f"INSERT INTO {a} SELECT UUID(), CONCAT('a', seq) FROM seq_1_to_{ROWS}")
        conn.exec_driver_sql(f"INSERT INTO {t['tag']} (id) VALUES (1), (2), (3)")
        ids = [r[0] for r in conn.exec_driver_sql(f"SELECT id FROM {a} ORDER BY name").all()]
        for n, x in enumerate(ids):
            conn.execute(sa.text(f"INSERT INTO {t['a_tags']} (a_id, tag_id) VALUES (:a, 1), (:a, 2)"), {"a": x})
            conn.execute(
                sa.text(f"INSERT INTO {t['a_friends']} (from_a_id, to_a_id) VALUES (:a, :b)"),
                {"a": x, "b": ids[(n + 1) % len(ids)]},
            )
            if n % 2:
                conn.execute(sa.text(f"INSERT INTO {t['one']} (a_id) VALUES (:a)"), {"a": x})
    yield engine, kind, t
    with engine.begin() as conn:
        for name in ("one", "a_friends", "a_tags", "tag", "a"):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {t[name]}" + (" CASCADE" if pg else ""))
        for name in sa.inspect(conn).get_table_names():
            if (name.startswith("seqid_fill_rkx_") and tag in name) or name.startswith(f"v_{tag}_"):
                conn.exec_driver_sql(f"DROP TABLE {name}")


def _indexes(engine, tables) -> set[tuple[str, str, tuple[str, ...], bool]]:
    """Each index but the primary key: ``(table, name, columns in order, unique)``, as the catalog says."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            rows = conn.execute(
                sa.text(
                    "SELECT c.relname, ic.relname, ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) "
                    "WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n "
                    "ORDER BY k.o), i.indisunique FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                    "JOIN pg_class ic ON ic.oid = i.indexrelid WHERE c.relname = ANY(:t) AND NOT i.indisprimary"
                ),
                {"t": list(tables)},
            ).all()
            return {(t, n, tuple(c), bool(u)) for t, n, c, u in rows}
        rows = conn.execute(
            sa.text(
                "SELECT TABLE_NAME, INDEX_NAME, JSON_ARRAYAGG(COLUMN_NAME ORDER BY SEQ_IN_INDEX), MIN(NON_UNIQUE) = 0 "
                "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN :t "
                "AND INDEX_NAME <> 'PRIMARY' GROUP BY TABLE_NAME, INDEX_NAME"
            ).bindparams(sa.bindparam("t", expanding=True)),
            {"t": list(tables)},
        ).all()
        return {(t, n, tuple(json.loads(c)), bool(u)) for t, n, c, u in rows}


def _columns(engine, tables) -> set[tuple[str, str]]:
    with engine.connect() as conn:
        return {(t, c["name"]) for t in tables for c in sa.inspect(conn).get_columns(t)}


def test_a_childs_other_indexes_over_its_foreign_key_hold_the_new_release_to_them(graph, tmp_path):
    engine, kind, t = graph
    url, a = _url(engine), t["a"]
    tables = tuple(t.values())
    steps = iter(range(100))

    def run(body: str) -> None:
        where = project(tmp_path / f"m{next(steps)}", f"v_{a.rsplit('_', 1)[1]}_{next(steps)}", body)
        migrated = upgrade(where, url)
        _out, err = migrated.communicate(timeout=300)
        assert migrated.returncode == 0, last_error(err) or err[-2000:]

    before, columns = _indexes(engine, tables), _columns(engine, tables)
    run(f'    op.rekey_expand("{a}")')
    expanded = _indexes(engine, tables)
    run(f'    op.rekey_contract("{a}")')
    after = _indexes(engine, tables)
    # every index there under its name, over the same column names (now the seqid columns), as unique as it was
    assert before <= after, before - after
    kept = "id_int" if kind == "integer" else "id_text"
    assert {(x[0], x[2]) for x in after - before} <= {
        (a, (kept,)),  # the old key, unique (old URLs)
        (t["a_friends"], ("to_a_id",)),  # the new foreign key's own index, where no copy leads with it (PostgreSQL)
    }, after - before
    with engine.connect() as conn:
        a_tags_a = conn.exec_driver_sql(f"SELECT a_id FROM {t['a_tags']} LIMIT 1").scalar()
        friend = conn.exec_driver_sql(f"SELECT from_a_id, to_a_id FROM {t['a_friends']} LIMIT 1").one()
        one_a = conn.exec_driver_sql(f"SELECT a_id FROM {t['one']} WHERE a_id IS NOT NULL LIMIT 1").scalar()
        [(new_type,)] = conn.exec_driver_sql(f"SELECT id FROM {a} LIMIT 1").all()
    assert not isinstance(new_type, int)  # the seqid key
    duplicates = [
        (f"INSERT INTO {t['a_tags']} (a_id, tag_id) VALUES (:x, 1)", {"x": a_tags_a}),
        (f"INSERT INTO {t['a_friends']} (from_a_id, to_a_id) VALUES (:x, :y)", {"x": friend[0], "y": friend[1]}),
        (f"INSERT INTO {t['one']} (a_id) VALUES (:x)", {"x": one_a}),
    ]
    for statement, values in duplicates:  # the new release's duplicates, by its seqid keys
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(sa.text(statement), values)
    with engine.begin() as conn:  # and a pair that is new is taken
        conn.execute(sa.text(f"INSERT INTO {t['a_tags']} (a_id, tag_id) VALUES (:x, 3)"), {"x": a_tags_a})
    with engine.begin() as conn:  # its old key, for the way back
        conn.exec_driver_sql(
            f"UPDATE {t['a_tags']} SET a_{kept} = (SELECT {kept} FROM {a} WHERE {a}.id = {t['a_tags']}.a_id) "
            "WHERE tag_id = 3"
        )

    run(f'    op.rekey_undo_contract("{a}")')
    # the children's as expanded, and the parent's own two (its unique indexes over the key alone are the
    # vendor's: the key, or beside it)
    own = {f"{a}_id_name", f"{a}_name_id", f"{a}_id_name_seqid", f"{a}_name_id_seqid"}
    undone = _indexes(engine, tables)
    assert {x for x in undone if x[0] != a or x[1] in own} == {x for x in expanded if x[0] != a or x[1] in own}
    run(f'    op.rekey_undo_expand("{a}")')
    assert _indexes(engine, tables) == before
    assert _columns(engine, tables) == columns


def test_an_index_seqid_cannot_copy_a_key_made_of_the_foreign_key_and_a_key_to_it_are_refused_before_any_change(
    graph, tmp_path
):
    engine, kind, t = graph
    url, a = _url(engine), t["a"]
    pg = engine.dialect.name == "postgresql"
    tables = tuple(t.values())
    with engine.begin() as conn:  # PostgreSQL: a partial index; MariaDB: a descending one (10.8+)
        if pg:
            conn.exec_driver_sql(f"CREATE INDEX {t['one']}_some ON {t['one']} (a_id) WHERE id > 10")
        else:
            conn.exec_driver_sql(f"CREATE INDEX {t['one']}_some ON {t['one']} (a_id DESC)")
    before, columns = _indexes(engine, tables), _columns(engine, tables)
    where = project(tmp_path / "refused", f"v_{a.rsplit('_', 1)[1]}_r", f'    op.rekey_expand("{a}")')
    refused = upgrade(where, url)
    _out, err = refused.communicate(timeout=300)
    assert refused.returncode != 0
    assert "MigrationRefusedError" in last_error(err) and f"{t['one']}_some" in last_error(err), err[-2000:]
    assert (_indexes(engine, tables), _columns(engine, tables)) == (before, columns)

    with engine.begin() as conn:  # Django's multi-table inheritance: the child's key is its foreign key
        conn.exec_driver_sql(f"DROP INDEX {t['one']}_some" + ("" if pg else f" ON {t['one']}"))
        ref = "bigint" if kind == "integer" else "char(36)"
        conn.exec_driver_sql(
            f"CREATE TABLE {t['one']}_mti (a_ptr_id {ref} PRIMARY KEY, "
            f"CONSTRAINT {t['one']}_mti_fk FOREIGN KEY (a_ptr_id) REFERENCES {a} (id) ON DELETE CASCADE)"
        )
    try:
        before = _indexes(engine, (*tables, f"{t['one']}_mti"))
        where = project(tmp_path / "mti", f"v_{a.rsplit('_', 1)[1]}_m", f'    op.rekey_expand("{a}")')
        refused = upgrade(where, url)
        _out, err = refused.communicate(timeout=300)
        # it changes with the table (tests/sqlalchemy_adapter/test_rekey_inheritance.py): and back here
        assert refused.returncode == 0, last_error(err) or err[-2000:]
        back = project(tmp_path / "mti-back", f"v_{a.rsplit('_', 1)[1]}_mb", f'    op.rekey_undo_expand("{a}")')
        undone = upgrade(back, url)
        _out, err = undone.communicate(timeout=300)
        assert undone.returncode == 0, last_error(err) or err[-2000:]
        assert _indexes(engine, (*tables, f"{t['one']}_mti")) == before
        assert _columns(engine, tables) == columns

        with engine.begin() as conn:  # a foreign key to the one-to-one column itself (Django's to_field)
            conn.exec_driver_sql(f"DROP TABLE {t['one']}_mti")
            conn.exec_driver_sql(
                f"CREATE TABLE {t['one']}_to (id int PRIMARY KEY, a_id {ref}, "
                f"CONSTRAINT {t['one']}_to_fk FOREIGN KEY (a_id) REFERENCES {t['one']} (a_id))"
            )
        before = _indexes(engine, (*tables, f"{t['one']}_to"))
        where = project(tmp_path / "to", f"v_{a.rsplit('_', 1)[1]}_t", f'    op.rekey_expand("{a}")')
        refused = upgrade(where, url)
        _out, err = refused.communicate(timeout=300)
        assert refused.returncode != 0
        assert "to_field" in last_error(err) and t["one"] in last_error(err), err[-2000:]
        assert _indexes(engine, (*tables, f"{t['one']}_to")) == before
        assert _columns(engine, tables) == columns
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {t['one']}_mti")
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {t['one']}_to")


def test_a_many_to_many_table_between_two_tables_re_keyed_together_holds_its_pair_at_every_step(graph, tmp_path):
    """``a`` and ``tag`` re-keyed together, as makemigrations writes a project's run (both expands, then both
    contracts), Django's many-to-many table between them (its unique pair holds a column of each): one copy of
    the pair holds both's new columns, whichever expand comes second makes it, either contract swaps it.  Both
    orders of the contracts; at every step each release's duplicate pair is refused; the way back in Django's
    order (the contracts undone in reverse, then the expands) gives the catalog as it was."""
    engine, _kind, t = graph
    url, a, tag, pair = _url(engine), t["a"], t["tag"], t["a_tags"]
    tables = tuple(t.values())
    steps = iter(range(100))

    def run(*ops: str) -> None:
        body = "\n".join(f"    op.{op}" for op in ops)
        where = project(tmp_path / f"m{next(steps)}", f"v_{a.rsplit('_', 1)[1]}_{next(steps)}", body)
        migrated = upgrade(where, url)
        _out, err = migrated.communicate(timeout=300)
        assert migrated.returncode == 0, last_error(err) or err[-2000:]

    def refuses_a_held_pair() -> None:
        with engine.connect() as conn:
            held = conn.exec_driver_sql(f"SELECT a_id, tag_id FROM {pair} LIMIT 1").one()
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # as the release of each key writes it
            conn.execute(sa.text(f"INSERT INTO {pair} (a_id, tag_id) VALUES (:a, :t)"), {"a": held[0], "t": held[1]})

    def the_pair() -> tuple:
        return next(x for x in _indexes(engine, tables) if x[1] == f"{pair}_a_id_tag_id_uniq")

    before, columns = _indexes(engine, tables), _columns(engine, tables)
    for first, second in ((a, tag), (tag, a)):  # expanded in this order, contracted in this order
        run(f'rekey_expand("{first}")', f'rekey_expand("{second}")')
        refuses_a_held_pair()
        copy = next(x for x in _indexes(engine, tables) if x[1] == f"{pair}_a_id_tag_id_uniq_seqid")
        assert copy[2:] == (("a_id_seqid", "tag_id_seqid"), True), copy  # one copy, both's new columns
        run(f'rekey_contract("{first}")')
        refuses_a_held_pair()
        run(f'rekey_contract("{second}")')
        assert the_pair()[2:] == (("a_id", "tag_id"), True)
        with engine.connect() as conn:
            kinds = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns(pair)}
        assert all(str(kinds[c]).lower() == "uuid" for c in ("a_id", "tag_id")), kinds
        refuses_a_held_pair()
        run(f'rekey_undo_contract("{second}")', f'rekey_undo_contract("{first}")')  # Django's way back
        refuses_a_held_pair()
        assert the_pair()[2:] == (("a_id", "tag_id"), True)
        run(f'rekey_undo_expand("{second}")')
        left = "a_id_seqid, tag_id" if first == a else "a_id, tag_id_seqid"  # first's copy, as its expand made it
        assert (f"{pair}_a_id_tag_id_uniq_seqid", tuple(left.split(", "))) in {x[1:3] for x in _indexes(engine, tables)}
        refuses_a_held_pair()
        run(f'rekey_undo_expand("{first}")')
        assert _indexes(engine, tables) == before
        assert _columns(engine, tables) == columns
