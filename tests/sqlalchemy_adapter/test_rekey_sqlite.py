"""``op.rekey_expand`` / ``op.rekey_contract`` on SQLite, through Alembic's command API in processes of their own: the
expand changes nothing, the contract makes the key's table and every table that references it again (each of its
own ``CREATE TABLE`` text with the columns' types edited; the keys' column a ``BLOB``, as ``SeqUUID`` declares it
there) and keys every row by its integer, with SQLite's foreign keys on in ``env.py`` (a rebuild with them on would
be a ``DELETE`` that cascades).  A parent that references itself, a child whose foreign key is nullable (``SET
NULL``), one whose is not (``CASCADE``), a many-to-many table's unique pair, a composite foreign key: every row on
the same parent (row by row, by the integers the keys carry), ``ORDER BY`` the key in the integers' order, the pair
still unique; the way back refused while a row the new release inserted is there, nothing changed, then done."""

from __future__ import annotations

import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm.ids.layout import Layout  # noqa: E402
from seqid_orm.ids.rekeyed import integer_of  # noqa: E402
from seqid_orm.schema.rebuild import read  # noqa: E402
from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402

ROWS = 500

#: env.py as an application with SQLite's foreign keys on writes it (SQLAlchemy's documented connect event)
ENV_PY = """
from alembic import context
import sqlalchemy as sa
import seqid_orm.sqlalchemy.alembic  # noqa: F401

engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=sa.NullPool)
sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys = ON"))
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None, version_table="{version}")
    with context.begin_transaction():
        context.run_migrations()
"""


@pytest.fixture
def graph(tmp_path):
    url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys = ON"))
    with engine.begin() as conn:
        for statement in (
            "CREATE TABLE a (id INTEGER PRIMARY KEY AUTOINCREMENT, name varchar(20) NOT NULL, "
            "boss_id bigint REFERENCES a (id) ON DELETE SET NULL)",
            "CREATE INDEX a_boss ON a (boss_id)",
            "CREATE UNIQUE INDEX a_id_name ON a (id, name)",
            # a composite foreign key: the key beside another column of the parent
            "CREATE TABLE q (id INTEGER PRIMARY KEY, a_id bigint NOT NULL, name varchar(20) NOT NULL, "
            "FOREIGN KEY (a_id, name) REFERENCES a (id, name) ON DELETE CASCADE)",
            "CREATE TABLE c1 (id INTEGER PRIMARY KEY, a_id bigint REFERENCES a (id) ON DELETE SET NULL)",
            "CREATE TABLE c2 (id INTEGER PRIMARY KEY, a_id bigint NOT NULL REFERENCES a (id) ON DELETE CASCADE)",
            "CREATE TABLE tag (id INTEGER PRIMARY KEY)",
            "CREATE TABLE a_tags (id INTEGER PRIMARY KEY, a_id bigint NOT NULL REFERENCES a (id), "
            "tag_id bigint NOT NULL REFERENCES tag (id), CONSTRAINT a_tags_pair UNIQUE (a_id, tag_id))",
        ):
            conn.exec_driver_sql(statement)
        rows = f"(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {ROWS}) SELECT n FROM g)"
        conn.exec_driver_sql(f"INSERT INTO a (id, name) SELECT n * 3, 'a' || n FROM {rows}")  # gaps, as deletes leave
        conn.exec_driver_sql("UPDATE a SET boss_id = id - 3 WHERE id > 3")
        conn.exec_driver_sql(f"INSERT INTO c1 (a_id) SELECT CASE WHEN n % 5 = 0 THEN NULL ELSE n * 3 END FROM {rows}")
        conn.exec_driver_sql(f"INSERT INTO c2 (a_id) SELECT (n * 7) % {ROWS} * 3 + 3 FROM {rows}")
        conn.exec_driver_sql("INSERT INTO tag (id) VALUES (1), (2)")
        conn.exec_driver_sql(f"INSERT INTO a_tags (a_id, tag_id) SELECT n * 3, 1 + n % 2 FROM {rows}")
        conn.exec_driver_sql(f"INSERT INTO q (a_id, name) SELECT n * 3, 'a' || n FROM {rows} WHERE n % 2 = 0")
    yield engine, url
    engine.dispose()


def _run(tmp_path, url: str, body: str, n: list[int], ok: bool = True) -> str:
    n[0] += 1
    where = project(tmp_path / f"m{n[0]}", f"v_{n[0]}", f"    op.{body}")
    (where / "env.py").write_text(ENV_PY.format(version=f"v_{n[0]}"))
    migrated = upgrade(where, url)
    _out, err = migrated.communicate(timeout=300)
    assert (migrated.returncode == 0) == ok, err[-3000:]
    return err


def _links(engine, column: str = "id") -> dict[str, set]:
    """Each child's rows and the integer of the parent each points at: ``column`` the key's integer (``id``),
    or ``None`` to read the integer out of the seqid key."""

    def n(value):
        if value is None or column is not None:
            return value
        found = integer_of(read(value), Layout.TIME_FIRST)
        assert found is not None, value
        return found

    with engine.connect() as conn:
        return {
            t: {(n(k) if t == "a" else k, n(v)) for k, v in conn.exec_driver_sql(f"SELECT {key}, {ref} FROM {t}")}
            for t, key, ref in (("a", "id", "boss_id"), ("c1", "id", "a_id"), ("c2", "id", "a_id"), ("q", "id", "a_id"))
        } | {"a_tags": {(n(k), t) for k, t in conn.exec_driver_sql("SELECT a_id, tag_id FROM a_tags")}}


def _schema(engine) -> list:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT name, sql FROM sqlite_master ORDER BY name").all()
    return [r for r in rows if "v_" not in r[0]]  # Alembic's version tables apart


def test_on_sqlite_the_contract_makes_the_tables_again_and_keys_every_row_by_its_integer(graph, tmp_path):
    engine, url = graph
    n = [0]
    before, schema = _links(engine), _schema(engine)
    names = [r[0] for r in engine.connect().exec_driver_sql("SELECT name FROM a ORDER BY id").all()]
    with engine.begin() as conn:  # the last parent's key never given again (AUTOINCREMENT), though it is gone
        conn.exec_driver_sql(f"UPDATE a SET boss_id = NULL WHERE boss_id = {3 * ROWS}")
        for t in ("c1", "c2", "a_tags", "q"):
            conn.exec_driver_sql(f"DELETE FROM {t} WHERE a_id = {3 * ROWS}")
        conn.exec_driver_sql(f"DELETE FROM a WHERE id = {3 * ROWS}")
    before, schema = _links(engine), _schema(engine)
    names = names[:-1]

    _run(tmp_path, url, 'rekey_expand("a")', n)
    assert _schema(engine) == schema  # nothing changed
    _run(tmp_path, url, 'rekey_contract("a")', n)
    with engine.connect() as conn:
        types = {
            (t, r[1]): r[2].lower()
            for t in ("a", "c1", "c2", "a_tags", "q")
            for r in conn.exec_driver_sql(f"PRAGMA table_info({t})")
            if r[1] in ("id", "a_id", "boss_id")
        }
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        assert [r[0] for r in conn.exec_driver_sql("SELECT name FROM a ORDER BY id")] == names
        indexes = {r[1] for r in conn.exec_driver_sql("PRAGMA index_list(a)")}
    assert {k: v for k, v in types.items() if k[1] != "id" or k[0] == "a"} == {
        ("a", "id"): "blob",
        ("a", "boss_id"): "blob",
        ("c1", "a_id"): "blob",
        ("c2", "a_id"): "blob",
        ("a_tags", "a_id"): "blob",
        ("q", "a_id"): "blob",
    }, types
    assert "a_boss" in indexes
    assert _links(engine, None) == before  # every row on the parent it had, all five tables

    with engine.connect() as conn:  # the pair still unique, by the seqid keys; a cascade still cascades
        held = conn.exec_driver_sql("SELECT a_id, tag_id FROM a_tags LIMIT 1").one()
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO a_tags (a_id, tag_id) VALUES (?, ?)", tuple(held))
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the composite key: the other's name
        conn.exec_driver_sql("INSERT INTO q (a_id, name) VALUES (?, 'not its name')", (held[0],))
    with engine.begin() as conn:
        gone = conn.exec_driver_sql("SELECT a_id FROM c2 ORDER BY id LIMIT 1").scalar()
        conn.exec_driver_sql("DELETE FROM a_tags WHERE a_id = ?", (gone,))
        conn.exec_driver_sql("UPDATE a SET boss_id = NULL WHERE boss_id = ?", (gone,))
        conn.exec_driver_sql("DELETE FROM a WHERE id = ?", (gone,))
        assert conn.exec_driver_sql("SELECT count(*) FROM c2 WHERE a_id = ?", (gone,)).scalar() == 0
        conn.exec_driver_sql("INSERT INTO a (id, name) VALUES (?, 'new')", (uuid.uuid4().bytes,))
    after, contracted = _links(engine, "id"), _schema(engine)

    said = _run(tmp_path, url, 'rekey_undo_contract("a")', n, ok=False)
    assert "MigrationRefusedError" in last_error(said) and "carry no integer" in last_error(said), said[-2000:]
    assert (_links(engine, "id"), _schema(engine)) == (after, contracted)  # nothing changed
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM a WHERE name = 'new'")
    _run(tmp_path, url, 'rekey_undo_contract("a")', n)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        assert conn.exec_driver_sql("SELECT type FROM pragma_table_info('a') WHERE name = 'id'").scalar() == "INTEGER"
        text = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'a'").scalar()
        mark = conn.exec_driver_sql("SELECT seq FROM sqlite_sequence WHERE name = 'a'").scalar()
    assert "AUTOINCREMENT" in text and mark == 3 * ROWS, (text, mark)  # as it was: the gone key not given again
    g = integer_of(read(gone), Layout.TIME_FIRST)  # what deleting that parent did, by its integer
    expected = {
        "a": {(k, None if v == g else v) for k, v in before["a"] if k != g},
        "c1": {(k, None if v == g else v) for k, v in before["c1"]},
        "c2": {(k, v) for k, v in before["c2"] if v != g},
        "q": {(k, v) for k, v in before["q"] if v != g},
        "a_tags": {(k, t) for k, t in before["a_tags"] if k != g},
    }
    assert _links(engine) == expected  # every row on its integer parent again


def test_on_sqlite_a_table_keyed_by_its_link_to_the_parent_and_the_tables_that_reference_it_follow(tmp_path):
    """Multi-table inheritance made by hand: ``restaurant``'s key is its link to its place, and ``review``
    references the restaurant's key.  The contract makes the three tables again (the reviews' too, which do not
    reference the places), every review on its restaurant on its place; the way back gives the integers back."""
    url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys = ON"))
    with engine.begin() as conn:
        for statement in (
            "CREATE TABLE place (id INTEGER PRIMARY KEY, name varchar(20) NOT NULL)",
            "CREATE TABLE restaurant (place_ptr_id bigint NOT NULL PRIMARY KEY REFERENCES place (id) "
            "ON DELETE CASCADE, seats integer NOT NULL)",
            "CREATE TABLE review (id INTEGER PRIMARY KEY, restaurant_id bigint NOT NULL "
            "REFERENCES restaurant (place_ptr_id) ON DELETE CASCADE)",
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 90) "
            "INSERT INTO place (id, name) SELECT n * 2, 'p' || n FROM g",
            "INSERT INTO restaurant SELECT id, id FROM place WHERE id % 3 <> 0",
            "INSERT INTO review (restaurant_id) SELECT place_ptr_id FROM restaurant",
        ):
            conn.exec_driver_sql(statement)
    read_all = (
        "SELECT v.id, p.name, r.seats FROM review v JOIN restaurant r ON r.place_ptr_id = v.restaurant_id "
        "JOIN place p ON p.id = r.place_ptr_id ORDER BY v.id"
    )
    with engine.connect() as conn:
        before = conn.exec_driver_sql(read_all).all()
    assert len(before) == 60
    n = [0]
    _run(tmp_path, url, 'rekey_contract("place")', n)
    with engine.connect() as conn:
        assert conn.exec_driver_sql(read_all).all() == before
        kinds = conn.exec_driver_sql("SELECT DISTINCT typeof(restaurant_id) FROM review").all()
        ints = {integer_of(read(k), Layout.TIME_FIRST) for (k,) in conn.exec_driver_sql("SELECT id FROM place")}
    assert kinds == [("blob",)] and ints == {2 * i for i in range(1, 91)}
    _run(tmp_path, url, 'rekey_undo_contract("place")', n)
    with engine.connect() as conn:
        assert conn.exec_driver_sql(read_all).all() == before
        assert conn.exec_driver_sql("SELECT DISTINCT typeof(restaurant_id) FROM review").all() == [("integer",)]
    engine.dispose()
