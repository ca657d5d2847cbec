"""A table's integer key changed with the tables keyed by their foreign key to it (Django's multi-table
inheritance: a child's primary key is its link to its parent's row), two levels deep, and a table whose foreign
key references the child's key, on the shared PostgreSQL through Alembic in processes of their own: expand,
contract, the new release's rows, then each way back.  Such a child was refused before any change."""

from __future__ import annotations

import random
import secrets
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm.errors import MigrationRefusedError  # noqa: E402
from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402
from tests.sqlalchemy_adapter.test_rekey import _catalog  # noqa: E402

PLACES = 3_000


@pytest.fixture
def tree(pg_engine):
    """``(place, restaurant, italian, review)``: 3,000 places; a restaurant for two places in three, keyed by its
    link to its place (deferrable, ON DELETE CASCADE, as Django makes it); an Italian restaurant for one
    restaurant in two, keyed by its link to its restaurant; 5,000 reviews of restaurants."""
    tag = secrets.token_hex(3)
    place, restaurant, italian, review = (f"mti_{n}_{tag}" for n in ("place", "restaurant", "italian", "review"))
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {place} (id bigserial PRIMARY KEY, name text NOT NULL)")
        conn.exec_driver_sql(
            f"CREATE TABLE {restaurant} (place_ptr_id bigint PRIMARY KEY REFERENCES {place} (id) "
            "ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, seats int NOT NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {italian} (restaurant_ptr_id bigint PRIMARY KEY REFERENCES {restaurant} (place_ptr_id) "
            "ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, pizza boolean NOT NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {review} (id bigserial PRIMARY KEY, "
            f"restaurant_id bigint NOT NULL REFERENCES {restaurant} (place_ptr_id), stars int NOT NULL)"
        )
        conn.exec_driver_sql(f"INSERT INTO {place} (name) SELECT 'p' || g FROM generate_series(1, {PLACES}) g")
        conn.exec_driver_sql(f"INSERT INTO {restaurant} SELECT id, id %% 50 FROM {place} WHERE id %% 3 <> 0")
        conn.exec_driver_sql(
            f"INSERT INTO {italian} SELECT place_ptr_id, true FROM {restaurant} WHERE place_ptr_id %% 2 = 0"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {review} (restaurant_id, stars) SELECT r.place_ptr_id, g %% 5 "
            f"FROM generate_series(1, 5000) g JOIN {restaurant} r ON r.place_ptr_id = (g * 7) %% {PLACES} + 1"
        )
    yield place, restaurant, italian, review
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {review}, {italian}, {restaurant}, {place} CASCADE")
        left = [n for n in sa.inspect(conn).get_table_names() if tag in n and n.startswith(("seqid_fill_", "v_"))]
        for name in left:
            conn.exec_driver_sql(f'DROP TABLE "{name}"')


def _run(where: Path, url: str) -> str:
    run = upgrade(where, url)
    _out, err = run.communicate(timeout=600)
    assert run.returncode == 0, last_error(err) or err[-2000:]
    return err


def _stepper(tmp: Path, url: str, version: str, steps) -> Callable[[str], str]:
    """A function running one migration's ``upgrade()`` body to its end in a process of its own, each in its own
    project and version table (``version`` and the next of ``steps``): what it said."""

    def run(body: str) -> str:
        n = next(steps)
        return _run(project(tmp / f"m{n}", f"{version}_{n}", body), url)

    return run


def _links(engine, tables: tuple[str, str, str, str], by: str) -> list[tuple]:
    """Every link as names: each restaurant's place, each Italian's restaurant's place, each review's place, read
    through the key columns (``by``: the integers' suffix, ``""`` for the key columns as they are)."""
    place, restaurant, italian, review = tables
    with engine.connect() as conn:
        return sorted(
            conn.exec_driver_sql(
                f"SELECT 'r', r.seats, p.name FROM {restaurant} r JOIN {place} p ON p.id{by} = r.place_ptr_id{by} "
                f"UNION ALL SELECT 'i', 0, p.name FROM {italian} i JOIN {restaurant} r "
                f"ON r.place_ptr_id{by} = i.restaurant_ptr_id{by} JOIN {place} p ON p.id{by} = r.place_ptr_id{by} "
                f"UNION ALL SELECT 'v', v.id, p.name FROM {review} v JOIN {restaurant} r "
                f"ON r.place_ptr_id{by} = v.restaurant_id{by} JOIN {place} p ON p.id{by} = r.place_ptr_id{by}"
            ).all()
        )


def test_a_key_changes_with_the_tables_keyed_by_their_link_to_it_and_theirs(pg_engine, tree, tmp_path):
    """Expand, contract: every key and link is a uuid, each child's key its parent's row's new key (the same
    function of the same integer), each link to the same row as before, every constraint valid, the children's
    primary keys on their new columns; the new release writes a place, its restaurant and an Italian one; the way
    back is refused until the rows it wrote have integers, filled as the refusal says, then gives back the tables
    as they were."""
    place, restaurant, italian, review = tree
    url = pg_engine.url.render_as_string(hide_password=False)
    before = _catalog(pg_engine, tree)
    links = _links(pg_engine, tree, "")
    steps = iter(range(100))
    run = _stepper(tmp_path, url, f"v_{place}", steps)

    run(f'    op.rekey_expand("{place}")')
    run(f'    op.rekey_contract("{place}")')
    with pg_engine.connect() as conn:
        types = conn.exec_driver_sql(
            "SELECT attrelid::regclass::text, attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            f"WHERE attrelid IN ('{place}'::regclass, '{restaurant}'::regclass, '{italian}'::regclass, "
            f"'{review}'::regclass) AND attname IN ('id', 'place_ptr_id', 'restaurant_ptr_id', 'restaurant_id')"
        ).all()
        keys = conn.exec_driver_sql(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'p' "
            f"AND conrelid IN ('{restaurant}'::regclass, '{italian}'::regclass)"
        ).all()
        invalid = conn.exec_driver_sql(
            f"SELECT conname FROM pg_constraint WHERE conrelid IN ('{place}'::regclass, '{restaurant}'::regclass, "
            f"'{italian}'::regclass, '{review}'::regclass) AND NOT convalidated"
        ).all()
        # each restaurant's key is its place's new key, row by row (its integer the place's)
        strays = conn.exec_driver_sql(
            f"SELECT count(*) FROM {restaurant} r JOIN {place} p ON p.id_int = r.place_ptr_id_int "
            "WHERE p.id <> r.place_ptr_id"
        ).scalar()
    id_of = {"id": place, "place_ptr_id": restaurant, "restaurant_ptr_id": italian, "restaurant_id": review}
    assert sorted(t for t in types if t[:2] != (review, "id")) == sorted((id_of[c], c, "uuid") for c in id_of)
    assert sorted(keys) == [(italian, "PRIMARY KEY (restaurant_ptr_id)"), (restaurant, "PRIMARY KEY (place_ptr_id)")]
    assert invalid == [] and strays == 0
    assert _links(pg_engine, tree, "") == links  # through the uuids: the same rows
    with pg_engine.begin() as conn:  # the new release: a place, its restaurant and its Italian restaurant
        new = conn.exec_driver_sql(f"INSERT INTO {place} (name) VALUES ('new') RETURNING id").scalar()
        conn.execute(sa.text(f"INSERT INTO {restaurant} (place_ptr_id, seats) VALUES (:k, 7)"), {"k": new})
        conn.execute(sa.text(f"INSERT INTO {italian} (restaurant_ptr_id, pizza) VALUES (:k, false)"), {"k": new})
    with pytest.raises(sa.exc.IntegrityError), pg_engine.begin() as conn:  # the link still holds
        conn.exec_driver_sql(f"INSERT INTO {restaurant} (place_ptr_id, seats) VALUES (gen_random_uuid(), 1)")

    err = ""
    for _ in range(4):  # the way back: refused while the new rows have no integer, filled as each refusal says
        n = next(steps)
        attempt = upgrade(project(tmp_path / f"m{n}", f"v_{place}_{n}", f'    op.rekey_undo_contract("{place}")'), url)
        _out, err = attempt.communicate(timeout=600)
        if attempt.returncode == 0:
            break
        assert "fill them first: " in last_error(err), err[-2000:]
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(last_error(err).split("fill them first: ", 1)[1])
    else:
        raise AssertionError(err[-2000:])
    with pg_engine.connect() as conn:
        new_int = conn.exec_driver_sql(f"SELECT id FROM {place} WHERE name = 'new'").scalar()
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {italian} WHERE restaurant_ptr_id = {new_int}").scalar() == 1
    run(f'    op.rekey_undo_expand("{place}")')
    assert _catalog(pg_engine, tree) == before
    assert _links(pg_engine, tree, "") == sorted([*links, ("r", 7, "new"), ("i", 0, "new")])


class _OldRelease(threading.Thread):
    """Release N's code on the tables while the expand step runs: a place and its restaurant by their integers
    in one transaction, now and then a place deleted (its restaurant with it), each statement waiting at most
    1 s for a lock; what failed is kept."""

    def __init__(self, url: str, place: str, restaurant: str) -> None:
        super().__init__(daemon=True)
        self.engine = sa.create_engine(url, poolclass=sa.NullPool)
        self.place, self.restaurant = place, restaurant
        self.stop, self.errors, self.writes = threading.Event(), [], 0

    def run(self) -> None:
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SET lock_timeout = '1s'")
            conn.commit()
            while not self.stop.is_set():
                try:
                    with conn.begin():
                        made = conn.exec_driver_sql(
                            f"INSERT INTO {self.place} (name) VALUES ('w') RETURNING id"
                        ).scalar()
                        conn.execute(
                            sa.text(f"INSERT INTO {self.restaurant} (place_ptr_id, seats) VALUES (:p, 1)"), {"p": made}
                        )
                        if made % 5 == 0:
                            conn.execute(sa.text(f"DELETE FROM {self.place} WHERE id = :p"), {"p": made - 1})
                    self.writes += 1
                except Exception as exc:  # what the old release would see
                    self.errors.append(repr(exc)[:300])
                self.stop.wait(0.01)
        self.engine.dispose()


@pytest.mark.big  # 100,000 places: a kill lands in the batches; its smaller twin above runs every step
def test_a_keyed_child_follows_through_a_kill_while_the_old_release_writes(pg_engine, tmp_path):
    """100,000 places and 66,666 restaurants: the expand step killed in the restaurants' batches (their new
    column, which is their new key) and run again, while release N's code writes places and restaurants by
    integers and deletes places; then the contract.  The writer saw no error; every restaurant's key is its
    place's, row by row by the integers both keep."""
    tag = secrets.token_hex(3)
    place, restaurant = f"mti_big_place_{tag}", f"mti_big_restaurant_{tag}"
    url = pg_engine.url.render_as_string(hide_password=False)
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {place} (id bigserial PRIMARY KEY, name text NOT NULL)")
        conn.exec_driver_sql(
            f"CREATE TABLE {restaurant} (place_ptr_id bigint PRIMARY KEY REFERENCES {place} (id) "
            "ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, seats int NOT NULL)"
        )
        conn.exec_driver_sql(f"INSERT INTO {place} (name) SELECT 'p' || g FROM generate_series(1, 100000) g")
        conn.exec_driver_sql(f"INSERT INTO {restaurant} SELECT id, id %% 50 FROM {place} WHERE id %% 3 <> 0")
        conn.exec_driver_sql(f"ANALYZE {place}; ANALYZE {restaurant}")
    old = _OldRelease(url, place, restaurant)
    try:
        expand = project(tmp_path / "expand", f"v_{tag}_1", f'    op.rekey_expand("{place}", batch_size=1000)')
        old.start()
        run = upgrade(expand, url)
        kill_at, done = random.randint(6_000, 60_000), 0
        while run.poll() is None and done < kill_at:
            try:
                with pg_engine.connect() as conn:
                    done = int(
                        conn.exec_driver_sql(
                            f"SELECT coalesce(max(done), 0) FROM seqid_fill_{restaurant}_place_ptr_id_seqid"
                        ).scalar()
                    )
            except sa.exc.ProgrammingError:  # not made yet: the places' batches come first
                pass
            time.sleep(0.01)
        run.send_signal(signal.SIGKILL)
        run.wait()
        assert run.returncode == -signal.SIGKILL and done > 0, (run.returncode, done)  # killed in its batches
        _run(expand, url)
        time.sleep(0.3)
        old.stop.set()
        old.join(30)
        assert old.errors == [] and old.writes > 0, (old.errors[:3], old.writes)
        _run(project(tmp_path / "contract", f"v_{tag}_2", f'    op.rekey_contract("{place}")'), url)
        with pg_engine.connect() as conn:
            strays = conn.exec_driver_sql(
                f"SELECT count(*) FROM {restaurant} r LEFT JOIN {place} p ON p.id_int = r.place_ptr_id_int "
                "WHERE p.id IS DISTINCT FROM r.place_ptr_id"
            ).scalar()
            restaurants = conn.exec_driver_sql(f"SELECT count(*) FROM {restaurant}").scalar()
        assert strays == 0 and restaurants > 66_000, (strays, restaurants)
    finally:
        old.stop.set()
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {restaurant}, {place} CASCADE")
            for name in sa.inspect(conn).get_table_names():
                if tag in name and name.startswith(("seqid_fill_", "v_")):
                    conn.exec_driver_sql(f'DROP TABLE "{name}"')


def _mariadb_catalog(engine, tables: tuple[str, ...]) -> dict[str, set]:
    """What MariaDB's catalog says the tables are made of: columns (type, NULL, default, extra), indexes (columns,
    unique), foreign keys (columns, referenced columns, rules), triggers."""
    where = "TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN :t"
    read = {
        "columns": f"SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA "
        f"FROM information_schema.COLUMNS WHERE {where}",
        "indexes": "SELECT TABLE_NAME, INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX), MIN(NON_UNIQUE) "
        f"FROM information_schema.STATISTICS WHERE {where} GROUP BY TABLE_NAME, INDEX_NAME",
        "foreign keys": "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, GROUP_CONCAT(k.COLUMN_NAME), k.REFERENCED_TABLE_NAME, "
        "GROUP_CONCAT(k.REFERENCED_COLUMN_NAME), r.DELETE_RULE FROM information_schema.KEY_COLUMN_USAGE k "
        "JOIN information_schema.REFERENTIAL_CONSTRAINTS r ON r.CONSTRAINT_SCHEMA = k.TABLE_SCHEMA "
        "AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME "
        "WHERE k.TABLE_SCHEMA = DATABASE() AND k.TABLE_NAME IN :t GROUP BY 1, 2, 4, 6",
        "triggers": "SELECT EVENT_OBJECT_TABLE, TRIGGER_NAME FROM information_schema.TRIGGERS "
        "WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE IN :t",
    }
    with engine.connect() as conn:
        return {
            k: set(conn.execute(sa.text(q).bindparams(sa.bindparam("t", expanding=True)), {"t": list(tables)}).all())
            for k, q in read.items()
        }


class _Killed(Exception):
    """The run stopped where a kill would have stopped it."""


def test_on_mariadb_a_key_changes_with_the_tables_keyed_by_their_link_to_it(mysql_engine, tmp_path):
    """The same tables on MariaDB, where each step is its own statements (its DDL does not roll back): expand,
    contract (the keyed children's steps, then the parent's) stopped right after the children's, as a kill
    there would, and run again; the new release's rows; the way back refused until they have integers, stopped
    after the children's way back, and run again; then the catalog as it was."""
    from seqid_orm.schema import rekey
    from seqid_orm.sqlalchemy.alembic.online import _OnlineIO
    from seqid_orm.sqlalchemy.alembic.rekey import _plan

    engine = mysql_engine
    tag = secrets.token_hex(3)
    place, restaurant, italian, review = (f"mti_{n}_{tag}" for n in ("place", "restaurant", "italian", "review"))
    tables = (place, restaurant, italian, review)
    url = engine.url.render_as_string(hide_password=False)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {place} (id bigint AUTO_INCREMENT PRIMARY KEY, name varchar(20) NOT NULL)")
        conn.exec_driver_sql(
            f"CREATE TABLE {restaurant} (place_ptr_id bigint PRIMARY KEY, seats int NOT NULL, "
            f"CONSTRAINT {restaurant}_fk FOREIGN KEY (place_ptr_id) REFERENCES {place} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {italian} (restaurant_ptr_id bigint PRIMARY KEY, pizza bool NOT NULL, "
            f"CONSTRAINT {italian}_fk FOREIGN KEY (restaurant_ptr_id) REFERENCES {restaurant} (place_ptr_id))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {review} (id bigint AUTO_INCREMENT PRIMARY KEY, restaurant_id bigint NOT NULL, "
            f"stars int NOT NULL, CONSTRAINT {review}_fk FOREIGN KEY (restaurant_id) "
            f"REFERENCES {restaurant} (place_ptr_id))"
        )
        conn.exec_driver_sql(f"INSERT INTO {place} (name) SELECT CONCAT('p', seq) FROM seq_1_to_{PLACES}")
        conn.exec_driver_sql(f"INSERT INTO {restaurant} SELECT id, id %% 50 FROM {place} WHERE id %% 3 <> 0")
        conn.exec_driver_sql(
            f"INSERT INTO {italian} SELECT place_ptr_id, true FROM {restaurant} WHERE place_ptr_id %% 2 = 0"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {review} (restaurant_id, stars) SELECT r.place_ptr_id, seq %% 5 FROM seq_1_to_5000 "
            f"JOIN {restaurant} r ON r.place_ptr_id = (seq * 7) %% {PLACES} + 1"
        )
    try:
        before = _mariadb_catalog(engine, tables)
        links = _links(engine, tables, "")
        steps = iter(range(100))
        run = _stepper(tmp_path, url, f"v_{tag}", steps)

        run(f'    op.rekey_expand("{place}")')
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            io = _OnlineIO(conn)
            plan = _plan(conn, place, None)
            assert [h.table for h in plan.heirs] == [restaurant] and [h.table for h in plan.heirs[0].heirs] == [italian]

            def stop_after_the_children() -> None:  # the migration lock's check, before each step: a kill here
                if rekey.state(io, plan.heirs[0]) == "contracted":
                    raise _Killed

            with pytest.raises(_Killed):
                rekey.contract(io, plan, say=lambda _: None, guard=stop_after_the_children)
            assert rekey.state(io, plan) == "expanded"  # the restaurants' key swapped, the places' not
        run(f'    op.rekey_contract("{place}")')  # run again: it goes on with the places'
        with engine.connect() as conn:
            kinds = conn.exec_driver_sql(
                "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                f"DATABASE() AND TABLE_NAME LIKE 'mti\\_%%\\_{tag}' AND COLUMN_NAME IN ('id', 'place_ptr_id', "
                "'restaurant_ptr_id', 'restaurant_id')"
            ).all()
            keys = conn.exec_driver_sql(
                "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = "
                f"DATABASE() AND CONSTRAINT_NAME = 'PRIMARY' AND TABLE_NAME IN ('{restaurant}', '{italian}')"
            ).all()
            strays = conn.exec_driver_sql(
                f"SELECT count(*) FROM {restaurant} r JOIN {place} p ON p.id_int = r.place_ptr_id_int "
                "WHERE p.id <> r.place_ptr_id"
            ).scalar()
        expected = [
            (place, "id"),
            (restaurant, "place_ptr_id"),
            (italian, "restaurant_ptr_id"),
            (review, "restaurant_id"),
        ]
        assert sorted(k for k in kinds if k[:2] != (review, "id")) == sorted((t, c, "uuid") for t, c in expected)
        assert sorted(keys) == [(italian, "restaurant_ptr_id"), (restaurant, "place_ptr_id")] and strays == 0
        assert _links(engine, tables, "") == links
        with engine.begin() as conn:  # the new release: a place (its key made in Python), its restaurants
            new = str(uuid.uuid4())
            conn.execute(sa.text(f"INSERT INTO {place} (id, name) VALUES (:k, 'new')"), {"k": new})
            conn.execute(sa.text(f"INSERT INTO {restaurant} (place_ptr_id, seats) VALUES (:k, 7)"), {"k": new})
            conn.execute(sa.text(f"INSERT INTO {italian} (restaurant_ptr_id, pizza) VALUES (:k, false)"), {"k": new})
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the link still holds
            conn.exec_driver_sql(f"INSERT INTO {restaurant} (place_ptr_id, seats) VALUES (UUID(), 1)")

        n = next(steps)  # the way back refused first for the restaurant's integer: filled from its place's
        body = f'    op.rekey_undo_contract("{place}")'
        refused = upgrade(project(tmp_path / f"m{n}", f"v_{tag}_{n}", body), url)
        _out, err = refused.communicate(timeout=600)
        assert refused.returncode != 0 and f"{restaurant}: 1 rows have no old key" in last_error(err), err[-2000:]
        with engine.begin() as conn:
            conn.exec_driver_sql(last_error(err).split("fill them first: ", 1)[1])
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            io = _OnlineIO(conn)
            heir = _plan(conn, place, None).heirs[0]
            for _ in range(4):  # the restaurants' way back alone, as a run killed after their steps leaves it
                try:
                    rekey.undo_contract(io, heir)
                    break
                except MigrationRefusedError as refused:  # the new rows without integers: filled as it says
                    conn.exec_driver_sql(str(refused).split("fill them first: ", 1)[1])
            assert rekey.state(io, heir) == "expanded"
        err = ""
        for _ in range(4):  # refused while the new rows have no integer, filled as each refusal says
            n = next(steps)
            body = f'    op.rekey_undo_contract("{place}")'
            attempt = upgrade(project(tmp_path / f"m{n}", f"v_{tag}_{n}", body), url)
            _out, err = attempt.communicate(timeout=600)
            if attempt.returncode == 0:
                break
            assert "fill them first: " in last_error(err), err[-2000:]
            with engine.begin() as conn:
                conn.exec_driver_sql(last_error(err).split("fill them first: ", 1)[1])
        else:
            raise AssertionError(err[-2000:])
        run(f'    op.rekey_undo_expand("{place}")')
        after = _mariadb_catalog(engine, tables)
        assert after == before, {k: (before[k] ^ after[k]) for k in before}
        assert _links(engine, tables, "") == sorted([*links, ("r", 7, "new"), ("i", 0, "new")])
    finally:
        with engine.begin() as conn:
            for table in (review, italian, restaurant, place):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
            for name in sa.inspect(conn).get_table_names():
                if tag in name and name.startswith(("seqid_fill_", "v_")):
                    conn.exec_driver_sql(f"DROP TABLE `{name}`")
