"""A table's integer key changed to a seqid key with every foreign key to it (seqid_orm.schema.rekey), as a
deployment runs it: on the shared PostgreSQL, a parent of 100,000 rows that references itself, a child whose
foreign key is nullable (ON DELETE SET NULL) and one whose is not (ON DELETE CASCADE); the expand migration run
through Alembic in a process of its own while the old release's code writes integers, killed in its batches and
run again; the contract migration waited on by a held lock, killed, run again, then the new release writing seqid
keys; every child row checked to point at the same parent as before, every constraint there and valid.
"""

from __future__ import annotations

import random
import secrets
import signal
import time
import uuid
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm.ids.layout import ORDER_BYTES, Layout  # noqa: E402
from seqid_orm.ids.rekeyed import integer_key, integer_of  # noqa: E402
from seqid_orm.vendors import Storage, rules_for  # noqa: E402
from tests.sqlalchemy_adapter.alembic_project import last_error, project, upgrade  # noqa: E402
from tests.sqlalchemy_adapter.rekey_traffic import Writers  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARENTS = 100_000


def _url(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


@pytest.fixture
def graph(pg_engine):
    """``(parent, child1, child2)``: 100,000 parents each but the first led by the one before, 100,000 children
    with a nullable foreign key (every tenth without a parent) and 100,000 with a required one (the
    benchmark's hold 5,000,000)."""
    tag = secrets.token_hex(3)
    p, c1, c2 = f"rk_parent_{tag}", f"rk_child1_{tag}", f"rk_child2_{tag}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {p} (id bigserial PRIMARY KEY, name text, boss_id bigint REFERENCES {p} (id))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c1} (id bigserial PRIMARY KEY, parent_id bigint REFERENCES {p} (id) ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c2} (id bigserial PRIMARY KEY, "
            f"parent_id bigint NOT NULL REFERENCES {p} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT 'p' || g FROM generate_series(1, {PARENTS}) g")
        conn.exec_driver_sql(f"UPDATE {p} SET boss_id = id - 1 WHERE id > 1")
        conn.exec_driver_sql(
            f"INSERT INTO {c1} (parent_id) "
            f"SELECT CASE WHEN g %% 10 = 0 THEN NULL ELSE (g::bigint * 7919) %% {PARENTS} + 1 END "
            f"FROM generate_series(1, {PARENTS}) g"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c2} (parent_id) SELECT (g::bigint * 104729) %% {PARENTS} + 1 "
            f"FROM generate_series(1, {PARENTS}) g"
        )
        conn.exec_driver_sql(f"ANALYZE {p}; ANALYZE {c1}; ANALYZE {c2}")
    yield p, c1, c2
    for attempt in range(5):  # a killed run's backend may still hold a lock; a doctor beside may deadlock a drop
        try:
            with pg_engine.begin() as conn:
                for table in (c2, c1, p):
                    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")
                conn.exec_driver_sql(
                    f"DROP TABLE IF EXISTS seqid_fill_{p}_id_seqid, seqid_fill_{c1}_parent_id_seqid, "
                    f"seqid_fill_{c2}_parent_id_seqid, seqid_fill_{p}_boss_id_seqid, v_{p}_1, v_{p}_2"
                )
            break
        except sa.exc.OperationalError:
            if attempt == 4:
                raise
            time.sleep(1)


def _migration(tmp: Path, name: str, body: str, version: str) -> Path:
    return project(tmp / name, version, body)


def _run(where: Path, url: str) -> None:
    run = upgrade(where, url)
    _out, err = run.communicate(timeout=600)
    assert run.returncode == 0, last_error(err) or err[-2000:]


def _kill_in_batches(where: Path, url: str, engine, progress_table: str) -> int:
    """Run ``where``'s migration, SIGKILL it at a random point of its batches (on a starved machine the kill
    may come later in the step: still before the migration ends, or it fails); the rows it had done."""
    kill_at = random.randint(PARENTS // 10, PARENTS * 9 // 10)
    run = upgrade(where, url)
    done = 0
    while run.poll() is None:
        try:  # the progress table, once the run has made it
            with engine.connect() as conn:
                done = int(conn.exec_driver_sql(f"SELECT coalesce(max(done), 0) FROM {progress_table}").scalar())
        except sa.exc.ProgrammingError:
            pass
        if done >= kill_at:
            run.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    run.wait()
    assert run.returncode == -signal.SIGKILL, (run.returncode, done)  # killed before it ended
    return done


def _beside_old_writers(where: Path, url: str, engine, tables: tuple[str, str, str], tmp: Path, *options: str) -> dict:
    """``where``'s migration beside release N's writers (``options``: theirs), SIGKILLed at a random point of
    its batches and run again to the end; what the writers saw, who saw no error."""
    old = Writers(url, tables, tmp, "old", *options)
    try:
        done = _kill_in_batches(where, url, engine, f"seqid_fill_{tables[0]}_id_seqid")
        assert done > 0, done  # killed after a batch: the writers' rows may take it past PARENTS
        _run(where, url)  # run again: it goes on and finishes
        time.sleep(0.5)  # the old release goes on writing on the expanded tables
    finally:
        seen = old.stop()
    assert seen["errors"] == [] and seen["writes"] > 0, seen
    return seen


def _hold(engine, table: str):
    """A session holding ``table`` as an application's open transaction does: a read in it."""
    holder = engine.connect()
    holder.exec_driver_sql("BEGIN" if engine.dialect.name == "postgresql" else "START TRANSACTION")
    holder.exec_driver_sql(f"SELECT 1 FROM {table} LIMIT 1").all()
    return holder


def _held_killed_and_run_again(where: Path, url: str, engine, held: str) -> None:
    """``where``'s contract migration waiting for ``held``, which an application's transaction holds, killed
    while it waits, then run again once the transaction ends."""
    holder = _hold(engine, held)
    waiting = upgrade(where, url)
    time.sleep(2.0)
    assert waiting.poll() is None  # it waits for the held table, a lock's wait at a time
    waiting.send_signal(signal.SIGKILL)
    waiting.wait()
    holder.rollback()
    holder.close()
    _run(where, url)


def _undone_filling(where: Path, url: str, engine) -> None:
    """``where``'s ``rekey_undo_contract`` run: refused while release N+1's rows have no old key, each refusal's
    ``UPDATE`` run as it names it (the table's own, then each child's), then done."""
    err = ""
    for _ in range(6):
        again = upgrade(where, url)
        _out, err = again.communicate(timeout=300)
        if again.returncode == 0:
            return
        assert "fill them first: " in last_error(err), err[-2000:]
        with engine.begin() as conn:
            conn.exec_driver_sql(last_error(err).split("fill them first: ", 1)[1])
    raise AssertionError(err[-2000:])


def _parents_of(engine, child: str, column: str, parent: str, parent_int: str) -> dict[int, int | None]:
    """Each child row's parent, by the parent's integer (``parent_int``), through ``column``'s join."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT c.id, p.{parent_int} FROM {child} c LEFT JOIN {parent} p ON p.id = c.{column}"
        ).all()
    return {int(i): (None if n is None else int(n)) for i, n in rows}


def test_the_integer_keys_sort_as_the_database_compares_them_below_every_new_key(pg_engine):
    """What the change rests on, by PostgreSQL's ORDER BY: the keys of integers sort as the integers, below a key
    made now; the server's function makes the key Python does, and none for a negative integer."""
    numbers = sorted(
        {0, 1, 2, 255, 256, (1 << 48) - 1, 1 << 48, (1 << 62) - 1, 1 << 62, (1 << 63) - 1}
        | {random.getrandbits(63) for _ in range(500)}
    )
    rules = rules_for("postgresql").REKEY
    name = f"seqid_test_ik_{secrets.token_hex(3)}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(rules.integer_function(name, Layout.TIME_FIRST, Storage.NATIVE))
        try:
            shuffled = random.sample(numbers, len(numbers))
            conn.exec_driver_sql("CREATE TEMP TABLE ik (n numeric, k uuid)")
            conn.execute(
                sa.text("INSERT INTO ik VALUES (:n, :k)"),
                [{"n": n, "k": integer_key(n, Layout.TIME_FIRST)} for n in shuffled],
            )
            conn.exec_driver_sql("INSERT INTO ik VALUES (-1, NULL)")
            by_key = [int(n) for (n,) in conn.exec_driver_sql("SELECT n FROM ik WHERE k IS NOT NULL ORDER BY k").all()]
            assert by_key == numbers
            made = conn.exec_driver_sql(f"SELECT n, {name}(n::bigint) FROM ik").all()
            assert all(k == (integer_key(int(n), Layout.TIME_FIRST) if n >= 0 else None) for n, k in made)
            now_key = rules_for("postgresql").server_default((15,), Storage.NATIVE, 0).sql  # a key made now
            assert conn.exec_driver_sql(
                f"SELECT (SELECT k FROM ik ORDER BY k DESC NULLS LAST LIMIT 1) < {now_key}"
            ).scalar()
            assert all(
                integer_of(integer_key(n, Layout.TIME_FIRST), Layout.TIME_FIRST, ORDER_BYTES) == n for n in numbers
            )
        finally:
            conn.exec_driver_sql(f"DROP FUNCTION {name}(bigint)")


@pytest.mark.big  # its smaller twin on every version: test_each_step_has_its_way_back
def test_an_integer_key_and_its_foreign_keys_change_while_the_old_release_writes(pg_engine, graph, tmp_path):
    p, c1, c2 = graph
    url = _url(pg_engine)
    expand = _migration(tmp_path, "expand", f'    op.rekey_expand("{p}", batch_size=1000)', f"v_{p}_1")
    # no statement of the old release waited for a lock past its lock_timeout (1 s): it would have failed, and
    # _beside_old_writers asserts none did; the wall time of its longest statement, which a busy machine
    # stretches too (CI's once 1.11 s), is the benchmark's figure (python -m benchmarks.rekey), not a test's
    _beside_old_writers(expand, url, pg_engine, graph, tmp_path)
    with pg_engine.connect() as conn:
        # every row's key is its integer's, its parent's too (a Python reading, not the server's function)
        for table, source, target in (
            (p, "id", "id_seqid"),
            (p, "boss_id", "boss_id_seqid"),
            (c1, "parent_id", "parent_id_seqid"),
            (c2, "parent_id", "parent_id_seqid"),
        ):
            rows = conn.exec_driver_sql(f"SELECT {source}, {target} FROM {table}").all()
            assert all(
                (k is None) == (n is None) and (n is None or k == integer_key(n, Layout.TIME_FIRST)) for n, k in rows
            ), table
        ids = [n for (n,) in conn.exec_driver_sql(f"SELECT id FROM {p} ORDER BY id_seqid").all()]
        assert ids == sorted(ids)  # ORDER BY the new key reads the rows as ORDER BY id did
    before = {t: _parents_of(pg_engine, t, "parent_id", p, "id") for t in (c1, c2)}
    bosses = _parents_of(pg_engine, p, "boss_id", p, "id")

    # the contract step waits for a table the application holds, is killed, and is run again
    contract = _migration(tmp_path, "contract", f'    op.rekey_contract("{p}")', f"v_{p}_2")
    holder = pg_engine.connect()
    holder.exec_driver_sql(f"BEGIN; LOCK TABLE {c2} IN ACCESS SHARE MODE; SELECT 1 FROM {c2} LIMIT 1")
    waiting = upgrade(contract, url)
    time.sleep(2.0)
    assert waiting.poll() is None  # its swap waits (half a second at a time, tried again)
    waiting.send_signal(signal.SIGKILL)
    waiting.wait()
    holder.exec_driver_sql("ROLLBACK")
    holder.close()
    with pg_engine.connect() as conn:
        kind = conn.execute(
            sa.text(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = to_regclass(:t) AND attname = 'id'"
            ),
            {"t": p},
        ).scalar()
    assert kind == "bigint"  # the killed swap changed nothing
    _run(contract, url)
    new = Writers(_url(pg_engine), graph, tmp_path, "new")
    time.sleep(0.5)
    seen = new.stop()
    assert seen["errors"] == [] and seen["writes"] > 0, seen

    with pg_engine.connect() as conn:
        kinds = dict(
            conn.execute(
                sa.text(
                    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = to_regclass(:t) "
                    "AND attnum > 0 AND NOT attisdropped"
                ),
                {"t": p},
            ).all()
        )
        assert kinds["id"] == "uuid" and kinds["id_int"] == "bigint" and "id_seqid" not in kinds
        constraints = conn.execute(
            sa.text(
                "SELECT conrelid::regclass::text, contype, convalidated, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid IN (to_regclass(:p), to_regclass(:a), to_regclass(:b)) ORDER BY 1, 4"
            ),
            {"p": p, "a": c1, "b": c2},
        ).all()
        assert all(valid for _t, _k, valid, _d in constraints), constraints
        defs = {(t, d) for t, _k, _v, d in constraints}
        assert (p, "PRIMARY KEY (id)") in defs
        assert (c1, f"FOREIGN KEY (parent_id) REFERENCES {p}(id) ON DELETE SET NULL") in defs
        assert (c2, f"FOREIGN KEY (parent_id) REFERENCES {p}(id) ON DELETE CASCADE") in defs
        assert (p, f"FOREIGN KEY (boss_id) REFERENCES {p}(id)") in defs
        for table in (c1, c2):
            orphans = conn.exec_driver_sql(
                f"SELECT count(*) FROM {table} c LEFT JOIN {p} x ON x.id = c.parent_id "
                "WHERE c.parent_id IS NOT NULL AND x.id IS NULL"
            ).scalar()
            assert orphans == 0
    with pytest.raises(sa.exc.IntegrityError), pg_engine.begin() as conn:  # the old integer stays unique
        conn.exec_driver_sql(f"INSERT INTO {p} (id, id_int, name) VALUES (gen_random_uuid(), 1, 'dup')")
    # every row the old release wrote points where it pointed, through the new keys
    for table in (c1, c2):
        after = _parents_of(pg_engine, table, "parent_id", p, "id_int")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    with pg_engine.connect() as conn:
        after_bosses = dict(
            conn.exec_driver_sql(f"SELECT c.id_int, b.id_int FROM {p} c LEFT JOIN {p} b ON b.id = c.boss_id").all()
        )
    assert {k: v for k, v in after_bosses.items() if k in bosses} == bosses
    with pg_engine.connect() as conn:
        newest = conn.exec_driver_sql(f"SELECT id FROM {p} WHERE name = 'new' ORDER BY id LIMIT 1").scalar()
        oldest = conn.exec_driver_sql(f"SELECT id FROM {p} WHERE name <> 'new' ORDER BY id DESC LIMIT 1").scalar()
        assert isinstance(newest, uuid.UUID) and oldest < newest  # the old rows sort below every new key


def _catalog(engine, tables: tuple[str, ...]) -> dict[str, set]:
    """What the tables are made of, as the catalog says: columns (type, NOT NULL, default), constraints (their
    definition and whether validated), indexes, triggers."""
    with engine.connect() as conn:
        read = {
            "columns": "SELECT attrelid::regclass::text, attname, format_type(atttypid, atttypmod), attnotnull, "
            "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a LEFT JOIN pg_attrdef d "
            "ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE attrelid = ANY(:t) AND attnum > 0 "
            "AND NOT attisdropped",
            "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), convalidated "
            "FROM pg_constraint WHERE conrelid = ANY(:t)",
            "indexes": "SELECT indrelid::regclass::text, indexrelid::regclass::text, pg_get_indexdef(indexrelid), "
            "indisvalid FROM pg_index WHERE indrelid = ANY(:t)",
            "triggers": "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE tgrelid = ANY(:t) "
            "AND NOT tgisinternal",
        }
        oids = [conn.execute(sa.text("SELECT to_regclass(:t)::oid"), {"t": t}).scalar() for t in tables]
        return {k: set(conn.execute(sa.text(q), {"t": oids}).all()) for k, q in read.items()}


def test_each_step_has_its_way_back(pg_engine, tmp_path):
    """Expand then its undo leaves the tables as they were (catalog and rows); expand, contract, a row the new
    release wrote, and the undo of the contract: refused, naming the rows and the statement that fills them;
    filled, the undo gives the integer key and foreign keys back (valid, every child on its parent), and the undo
    of the expand the tables as they were, but for the new release's rows."""
    tag = secrets.token_hex(3)
    p, c = f"rk_back_p_{tag}", f"rk_back_c_{tag}"
    url = _url(pg_engine)
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY, name text)")
        conn.exec_driver_sql(
            f"CREATE TABLE {c} (id bigserial PRIMARY KEY, parent_id integer REFERENCES {p} (id) ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT 'p' || g FROM generate_series(1, 2000) g")
        conn.exec_driver_sql(
            f"INSERT INTO {c} (parent_id) SELECT CASE WHEN g %% 7 = 0 THEN NULL ELSE g %% 2000 + 1 END "
            "FROM generate_series(1, 5000) g"
        )
    try:
        before = _catalog(pg_engine, (p, c))
        rows = _parents_of(pg_engine, c, "parent_id", p, "id")
        steps = iter(range(100))

        def run(body: str) -> None:
            _run(_migration(tmp_path, f"m{next(steps)}", body, f"v_{tag}_{next(steps)}"), url)

        run(f'    op.rekey_expand("{p}")')
        assert _catalog(pg_engine, (p, c)) != before
        run(f'    op.rekey_undo_expand("{p}")')
        assert _catalog(pg_engine, (p, c)) == before
        assert _parents_of(pg_engine, c, "parent_id", p, "id") == rows

        run(f'    op.rekey_expand("{p}")')
        run(f'    op.rekey_contract("{p}")')
        with pg_engine.begin() as conn:  # the new release writes a parent and a child by their seqid keys
            new_id = conn.exec_driver_sql(f"INSERT INTO {p} (name) VALUES ('new') RETURNING id").scalar()
            conn.execute(sa.text(f"INSERT INTO {c} (parent_id) VALUES (:k)"), {"k": new_id})
        where = _migration(tmp_path, "undo-refused", f'    op.rekey_undo_contract("{p}")', f"v_{tag}_refused")
        refused = upgrade(where, url)
        _out, err = refused.communicate(timeout=300)
        assert refused.returncode != 0
        assert "MigrationRefusedError" in last_error(err) and "1 rows have no old key in parent_id_int" in err, err
        with pg_engine.connect() as conn:
            assert (
                conn.execute(
                    sa.text(
                        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass(:t) "
                        "AND attname = 'id'"
                    ),
                    {"t": p},
                ).scalar()
                == "uuid"
            )  # refused before any change
        with pg_engine.begin() as conn:  # the statement the refusal names, as it names it
            conn.exec_driver_sql(last_error(err).split("fill them first: ", 1)[1])
        run(f'    op.rekey_undo_contract("{p}")')
        with pg_engine.connect() as conn:
            new_int = conn.exec_driver_sql(f"SELECT id FROM {p} WHERE name = 'new'").scalar()
        assert isinstance(new_int, int)
        assert _parents_of(pg_engine, c, "parent_id", p, "id") == {**rows, max(rows) + 1: new_int}
        run(f'    op.rekey_undo_expand("{p}")')
        assert _catalog(pg_engine, (p, c)) == before
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {c}, {p} CASCADE")
            for table, column in ((p, "id"), (c, "parent_id")):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS seqid_fill_{table}_{column}_seqid")
            versions = [n for n in sa.inspect(conn).get_table_names() if n.startswith(f"v_{tag}_")]
            for name in versions:  # each migration's own version table
                conn.exec_driver_sql(f"DROP TABLE {name}")


AUTOGEN_ENV = """
import pathlib
from alembic import context
from seqid_orm.sqlalchemy.alembic import render_item, writer

namespace = {}
exec((pathlib.Path(context.config.get_main_option("script_location")) / "models.py").read_text(), namespace)
connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=namespace["metadata"],
    render_item=render_item,
    process_revision_directives=writer,
    include_name=lambda name, type_, parents: type_ != "table" or name in namespace["metadata"].tables,
    version_table=namespace["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
"""

AUTOGEN_MODELS = """
import sqlalchemy as sa
from seqid_orm.sqlalchemy import SeqUUID

version_table = "v_{p}"
metadata = sa.MetaData()
key = {key}
sa.Table("{p}", metadata, sa.Column("id", key, primary_key=True), sa.Column("name", sa.Text))
sa.Table(
    "{c}",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("parent_id", {fk}, sa.ForeignKey("{p}.id", ondelete="CASCADE"), nullable=False),
)
"""


def test_autogenerate_writes_the_change_of_an_integer_key_as_two_revisions(pg_engine, tmp_path):
    """The models' integer key made a ``SeqUUID`` (the key and the foreign key to it): autogenerate, with seqid's
    writer, writes two revisions, the expand (release N) and the contract (release N+1), no ``alter_column``
    (which PostgreSQL refuses: bigint cannot be cast to uuid); upgraded one after the other, downgraded back."""
    from alembic import command
    from alembic.config import Config

    from tests.sqlalchemy_adapter.test_alembic import SCRIPT_MAKO

    tag = secrets.token_hex(3)
    p, c = f"rk_auto_p_{tag}", f"rk_auto_c_{tag}"
    (tmp_path / "versions").mkdir()
    (tmp_path / "env.py").write_text(AUTOGEN_ENV)
    (tmp_path / "script.py.mako").write_text(SCRIPT_MAKO)
    config = Config()
    config.set_main_option("script_location", str(tmp_path))

    def models(key: str, fk: str) -> None:
        (tmp_path / "models.py").write_text(AUTOGEN_MODELS.format(p=p, c=c, key=key, fk=fk))

    def run(fn, *args, **kwargs):
        with pg_engine.connect() as conn:  # not in a transaction: Alembic begins it, the batches commit theirs
            config.attributes["connection"] = conn
            done = fn(config, *args, **kwargs)
            conn.commit()
            return done

    def key_type() -> str:
        with pg_engine.connect() as conn:
            return conn.execute(
                sa.text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass(:t) "
                    "AND attname = 'id'"
                ),
                {"t": p},
            ).scalar()

    try:
        models("sa.BigInteger", "sa.BigInteger")
        run(command.revision, message="tables", autogenerate=True)
        run(command.upgrade, "head")
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT 'p' || g FROM generate_series(1, 500) g")
            conn.exec_driver_sql(f"INSERT INTO {c} (parent_id) SELECT g %% 500 + 1 FROM generate_series(1, 1000) g")
        models("SeqUUID()", "SeqUUID()")
        made = run(command.revision, message="seqid keys", autogenerate=True)
        expand, contract = made
        assert contract.down_revision == expand.revision
        expand_text, contract_text = Path(expand.path).read_text(), Path(contract.path).read_text()
        assert f"op.rekey_expand({p!r})" in expand_text and f"op.rekey_undo_expand({p!r})" in expand_text
        assert f"op.rekey_contract({p!r})" in contract_text and f"op.rekey_undo_contract({p!r})" in contract_text
        assert "alter_column" not in expand_text + contract_text and "rekey_contract" not in expand_text
        run(command.upgrade, expand.revision)  # release N
        assert key_type() == "bigint"
        run(command.upgrade, "head")  # release N+1
        assert key_type() == "uuid"
        again = run(command.revision, message="again", autogenerate=True)
        assert "alter_column" not in Path(again.path).read_text()  # the models and the database agree
        Path(again.path).unlink()
        run(command.downgrade, expand.revision)
        assert key_type() == "bigint"
        run(command.downgrade, "-1")
        with pg_engine.connect() as conn:
            left = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_attribute WHERE attrelid IN (to_regclass(:p), to_regclass(:c)) "
                    "AND attname LIKE '%%seqid%%' AND NOT attisdropped"
                ),
                {"p": p, "c": c},
            ).scalar()
        assert left == 0 and key_type() == "bigint"
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {c}, {p}, v_{p} CASCADE")
            for table, column in ((p, "id"), (c, "parent_id")):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS seqid_fill_{table}_{column}_seqid")


@pytest.mark.slow
def test_a_role_statement_timeout_cancels_no_index_build_and_reaches_no_pooled_session(pg_engine, tmp_path):
    """The migration's role has ``statement_timeout = 1s``, and an older transaction keeps the concurrent index
    builds waiting 3 s.  Through PgBouncer in transaction pooling seqid may not change the session: the expand
    step is refused before any change, naming the way.  Directly connected, the builds run without the role's
    time-out (said in the log), finish once the old transaction ends, and every index is valid."""
    from tests import system
    from tests.servers.pgbouncer import PrivatePgBouncer
    from tests.sqlalchemy_adapter.test_online_deployments import _role_with_timeout

    system.need("pgbouncer")
    tag = secrets.token_hex(3)
    p, c = f"rk_role_p_{tag}", f"rk_role_c_{tag}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY, name text)")
        conn.exec_driver_sql(f"CREATE TABLE {c} (id bigserial PRIMARY KEY, parent_id bigint REFERENCES {p} (id))")
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT 'p' || g FROM generate_series(1, 3000) g")
        conn.exec_driver_sql(f"INSERT INTO {c} (parent_id) SELECT g %% 3000 + 1 FROM generate_series(1, 3000) g")
        conn.exec_driver_sql(f"CREATE INDEX {c}_by_parent ON {c} (parent_id)")  # copied, then built back
    body = f'    op.rekey_expand("{p}")'
    try:
        with _role_with_timeout(pg_engine, p, "1s") as role:
            with pg_engine.begin() as conn:
                conn.exec_driver_sql(f"ALTER TABLE {c} OWNER TO {role}")
            with PrivatePgBouncer("transaction", pool_size=2, users=(role,)) as bouncer:
                refused = upgrade(_migration(tmp_path, "pooled", body, f"v_{p}_1"), bouncer.url_for(role))
                _out, said = refused.communicate(timeout=120)
            assert refused.returncode != 0
            assert "MigrationRefusedError" in last_error(said) and "statement_timeout=1s" in said, said[-2000:]
            assert "the indexes' concurrent builds" in said and "direct connection" in said
            with pg_engine.connect() as conn:
                made = conn.exec_driver_sql(
                    f"SELECT count(*) FROM pg_attribute WHERE attrelid IN ('{p}'::regclass, '{c}'::regclass) "
                    "AND attname LIKE '%%seqid%%' AND NOT attisdropped"
                ).scalar()
            assert made == 0  # refused before any change
            direct = pg_engine.url.set(username=role).render_as_string(hide_password=False)

            def past_an_older_snapshot(where: Path) -> None:
                """``where`` run directly while an older snapshot keeps its concurrent builds waiting 3 s, three
                times the role's time-out: it finishes once the snapshot ends, the time-out lifted (said)."""
                with pg_engine.connect() as holder:
                    holder.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
                    holder.exec_driver_sql("SELECT count(*) FROM pg_class").scalar()
                    run = upgrade(where, direct)
                    time.sleep(3)
                    assert run.poll() is None, run.communicate()[1][-3000:]
                    holder.exec_driver_sql("COMMIT")
                _out, said = run.communicate(timeout=120)
                assert run.returncode == 0, said[-3000:]
                assert "runs without this session's statement_timeout (1s)" in said

            past_an_older_snapshot(_migration(tmp_path, "direct", body, f"v_{p}_2"))
            with pg_engine.connect() as conn:
                valid = conn.exec_driver_sql(
                    f"SELECT bool_and(indisvalid), count(*) FROM pg_index WHERE indrelid IN ('{p}'::regclass, "
                    f"'{c}'::regclass)"
                ).one()
            assert valid == (True, 6)  # two keys, the two unique ones of the table, the child's index and its copy

            # contracted, then taken back: the child's index is built again over the kept column, concurrently,
            # without the role's time-out either
            _run(_migration(tmp_path, "contract", f'    op.rekey_contract("{p}")', f"v_{p}_3"), direct)
            past_an_older_snapshot(_migration(tmp_path, "back", f'    op.rekey_undo_contract("{p}")', f"v_{p}_4"))
            with pg_engine.connect() as conn:
                kept = conn.exec_driver_sql(
                    "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class x "
                    f"ON x.oid = i.indexrelid WHERE x.relname = '{c}_by_parent'"
                ).one()
            assert kept[0] and kept[1].endswith("(parent_id)"), kept  # over the integer column again, valid
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {c}, {p}, v_{p}_1, v_{p}_2, v_{p}_3, v_{p}_4 CASCADE")
            for table, column in ((p, "id"), (c, "parent_id")):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS seqid_fill_{table}_{column}_seqid")


def test_two_pods_at_once_with_names_as_long_as_postgresql_allows(pg_engine, tmp_path):
    """Two pods run the same expand migration at once (each its own version table, as two deployments'
    processes): the second waits on the column's lock, then finds the work done; both exit 0 and every row has
    its key once.  Table names of 63 characters, PostgreSQL's longest: every name seqid makes (columns, indexes,
    triggers, foreign keys, the progress table) fits; a composite foreign key (the key beside a tenant's column)
    and a child keyed by its link (multi-table inheritance) among them.  Then the contract, and the tables are
    as the plan says."""
    tag = secrets.token_hex(3)

    def longest(prefix: str, fill: str) -> str:
        return f"{prefix}_{tag}_" + fill * (63 - len(f"{prefix}_{tag}_"))

    p, c, q, k = (
        longest("rk_pods_p", "x"),
        longest("rk_pods_c", "y"),
        longest("rk_pods_q", "z"),
        longest("rk_pods_k", "w"),
    )
    assert {len(t) for t in (p, c, q, k)} == {63}
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY, name text, UNIQUE (name, id))")
        conn.exec_driver_sql(f"CREATE TABLE {c} (id bigserial PRIMARY KEY, parent_id bigint REFERENCES {p} (id))")
        conn.exec_driver_sql(
            f"CREATE TABLE {q} (id bigserial PRIMARY KEY, name text, parent_id bigint, "
            f"FOREIGN KEY (name, parent_id) REFERENCES {p} (name, id))"
        )
        conn.exec_driver_sql(f"CREATE TABLE {k} (parent_ptr_id bigint PRIMARY KEY REFERENCES {p} (id), n int)")
        conn.exec_driver_sql(f"INSERT INTO {p} (name) SELECT 'p' || g FROM generate_series(1, 20000) g")
        conn.exec_driver_sql(f"INSERT INTO {c} (parent_id) SELECT g %% 20000 + 1 FROM generate_series(1, 20000) g")
        conn.exec_driver_sql(f"INSERT INTO {q} (name, parent_id) SELECT name, id FROM {p} WHERE id %% 2 = 0")
        conn.exec_driver_sql(f"INSERT INTO {k} SELECT id, 1 FROM {p} WHERE id %% 3 = 0")
    url = _url(pg_engine)
    body = f'    op.rekey_expand("{p}", batch_size=500)'
    try:
        pods = [upgrade(_migration(tmp_path, f"pod{i}", body, f"v_pod{i}_{tag}"), url) for i in range(2)]
        said = [pod.communicate(timeout=300)[1] for pod in pods]
        assert [pod.returncode for pod in pods] == [0, 0], [s[-2000:] for s in said]
        with pg_engine.connect() as conn:
            rows = conn.exec_driver_sql(f"SELECT count(*), count(DISTINCT id_seqid), count(id_seqid) FROM {p}").one()
            names = {
                n
                for (n,) in conn.exec_driver_sql(
                    f"SELECT relname FROM pg_class WHERE relname LIKE '%%{tag}%%' UNION ALL SELECT tgname FROM "
                    f"pg_trigger WHERE tgname LIKE '%%{tag}%%' UNION ALL SELECT conname FROM pg_constraint "
                    f"WHERE conname LIKE '%%{tag}%%'"
                ).all()
            }
        assert rows == (20000, 20000, 20000)
        assert all(len(n) <= 63 for n in names) and len(names) >= 8, names
        _run(_migration(tmp_path, "contract", f'    op.rekey_contract("{p}")', f"v_c_{tag}"), url)
        with pg_engine.connect() as conn:
            kinds = dict(
                conn.exec_driver_sql(
                    f"SELECT attrelid::regclass::text || '.' || attname, format_type(atttypid, atttypmod) "
                    f"FROM pg_attribute WHERE attrelid IN ('{p}'::regclass, '{c}'::regclass, '{q}'::regclass, "
                    f"'{k}'::regclass) AND attnum > 0 AND NOT attisdropped"
                ).all()
            )
            strays = conn.exec_driver_sql(
                f"SELECT (SELECT count(*) FROM {q} x JOIN {p} y ON y.id = x.parent_id AND y.name <> x.name) + "
                f"(SELECT count(*) FROM {k} x JOIN {p} y ON y.id = x.parent_ptr_id WHERE y.id_int %% 3 <> 0)"
            ).scalar()
        new = [f"{p}.id", f"{c}.parent_id", f"{q}.parent_id", f"{k}.parent_ptr_id"]
        assert {kinds[n] for n in new} == {"uuid"} and kinds[f"{p}.id_int"] == "bigint" and strays == 0
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {k}, {q}, {c}, {p} CASCADE")
            for name in (f"v_pod0_{tag}", f"v_pod1_{tag}", f"v_c_{tag}"):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


def test_a_partitioned_child_is_refused_before_any_change(pg_engine, tmp_path):
    """A child partitioned by a column of its own: no index is built on it concurrently, and a unique one must
    hold its partition key, so the expand step is refused before it changes anything, naming the table."""
    tag = secrets.token_hex(3)
    p, c = f"rk_part_p_{tag}", f"rk_part_c_{tag}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY)")
        conn.exec_driver_sql(
            f"CREATE TABLE {c} (id bigint, at date, parent_id bigint REFERENCES {p} (id), PRIMARY KEY (id, at)) "
            "PARTITION BY RANGE (at)"
        )
        conn.exec_driver_sql(f"CREATE TABLE {c}_2026 PARTITION OF {c} FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')")
        conn.exec_driver_sql(f"INSERT INTO {p} SELECT g FROM generate_series(1, 100) g")
    try:
        run = upgrade(_migration(tmp_path, "expand", f'    op.rekey_expand("{p}")', f"v_{p}"), _url(pg_engine))
        _out, err = run.communicate(timeout=120)
        assert run.returncode != 0
        assert "MigrationRefusedError" in last_error(err) and f"{c} is partitioned (by at)" in err, err[-2000:]
        with pg_engine.connect() as conn:
            made = conn.exec_driver_sql(
                f"SELECT count(*) FROM pg_attribute WHERE attrelid IN ('{p}'::regclass, '{c}'::regclass) "
                "AND attname LIKE '%%seqid%%' AND NOT attisdropped"
            ).scalar()
        assert made == 0
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {c}, {p}, v_{p} CASCADE")
