"""``RekeyExpand`` and ``RekeyContract``: a model's integer key changed to a seqid key with every foreign key to
it, in two releases' migrations, as a Django project runs them: a project of its own in a database of its own,
``manage.py migrate`` in processes of their own beside the application's writers (tests/sqlalchemy_adapter/
rekey_traffic.py: release N writes integers during the expand migration, release N+1 seqid keys after the
contract).  A parent of 100,000 rows that references itself, a child whose foreign key is nullable (``SET_NULL``)
and one whose is not (``CASCADE``); the expand migration killed in its batches and run again; the model state
right at each migration (``makemigrations --check`` finds nothing); every child on its parent, checked row by
row; unapplied back to the integer key.  The migrations are the ones ``makemigrations`` writes when the model's key
becomes a ``SeqUUIDField``.  On both servers (MariaDB's new keys of the rows release N inserts come at the
contract: its AUTO_INCREMENT key is made after its triggers)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.django.own_database import OwnDatabase

ROOT = Path(__file__).resolve().parents[2]
PARENTS = 100_000
TABLES = ("shop_parent", "shop_child1", "shop_child2")

pytestmark = [pytest.mark.server_database, pytest.mark.slow]

RELEASE_N = """
from django.db import models

class Parent(models.Model):
    name = models.CharField(max_length=20)
    boss = models.ForeignKey("self", null=True, on_delete=models.SET_NULL)
    friends = models.ManyToManyField("self", symmetrical=False, related_name="fans")

class Child1(models.Model):
    parent = models.ForeignKey(Parent, null=True, on_delete=models.SET_NULL)

class Child2(models.Model):
    parent = models.ForeignKey(Parent, on_delete=models.CASCADE)
"""

# release N+1: the key is a SeqUUIDField; nothing else changes
RELEASE_N1 = RELEASE_N.replace(
    "class Parent(models.Model):\n",
    "class Parent(models.Model):\n    id = SeqUUIDField(primary_key=True)\n",
).replace("from django.db import models\n", "from django.db import models\nfrom seqid_orm.django import SeqUUIDField\n")

INITIAL = """
from django.db import migrations, models
import django.db.models.deletion

class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel("Parent", [
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ("name", models.CharField(max_length=20)),
            ("boss", models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, to="shop.parent")),
            ("friends", models.ManyToManyField(related_name="fans", to="shop.parent")),
        ]),
        migrations.CreateModel("Child1", [
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ("parent", models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, to="shop.parent")),
        ]),
        migrations.CreateModel("Child2", [
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ("parent", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="shop.parent")),
        ]),
    ]
"""

SETTINGS = """
SECRET_KEY = "rekey"
USE_TZ = True
INSTALLED_APPS = ["seqid_orm.django", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {{"default": {database!r}}}
"""


class Project(OwnDatabase):
    """A Django project at ``tmp`` with the app ``shop`` (release N's models and migrations), in a new database."""

    def __init__(self, tmp: Path, *, sqlite: bool = False) -> None:
        super().__init__(tmp, "seqid_rekey", sqlite=sqlite)
        self.migrations = tmp / "shop" / "migrations"
        self.migrations.mkdir(parents=True)
        (tmp / "shop" / "__init__.py").write_text("")
        (self.migrations / "__init__.py").write_text("")
        (self.migrations / "0001_initial.py").write_text(INITIAL)
        (tmp / "shop" / "models.py").write_text(RELEASE_N)
        (tmp / "rekey_settings.py").write_text(SETTINGS.format(database=self.database))
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
            "DJANGO_SETTINGS_MODULE": "rekey_settings",
        }
        self.create()

    def manage(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            env=self.env,
            cwd=self.tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def done(self, *args: str) -> tuple[str, str]:
        run = self.manage(*args)
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, (args, out[-1000:], err[-3000:])
        return out, err

    def refused(self, *args: str) -> str:
        run = self.manage(*args)
        _out, err = run.communicate(timeout=600)
        assert run.returncode != 0, args
        return err


@pytest.fixture
def project(tmp_path):
    made = Project(tmp_path)
    try:
        made.done("migrate", "shop", "0001")
        yield made
    finally:
        made.drop()


def _fill(project: Project) -> None:
    """100,000 parents each but the first led by the one before, their children, 5,000 friends' pairs."""
    if project.vendor == "postgresql":
        rows, n, nth = "generate_series(1, {}) g", "g", "(g::bigint * {}) %% {} + 1"
        every_tenth = "CASE WHEN g %% 10 = 0 THEN NULL ELSE {} END"
    else:
        rows, n, nth = "seq_1_to_{}", "seq", "(seq * {}) %% {} + 1"
        every_tenth = "IF(seq %% 10 = 0, NULL, {})"
    made = "'p' || g" if project.vendor == "postgresql" else "CONCAT('p', seq)"
    project.sql(f"INSERT INTO shop_parent (name) SELECT {made} FROM {rows.format(PARENTS)}")
    project.sql("UPDATE shop_parent SET boss_id = id - 1 WHERE id > 1")
    project.sql(
        f"INSERT INTO shop_child1 (parent_id) SELECT {every_tenth.format(nth.format(7919, PARENTS))} "
        f"FROM {rows.format(PARENTS)}"
    )
    project.sql(f"INSERT INTO shop_child2 (parent_id) SELECT {nth.format(104729, PARENTS)} FROM {rows.format(PARENTS)}")
    project.sql(
        f"INSERT INTO shop_parent_friends (from_parent_id, to_parent_id) SELECT {n}, {n} + 1 FROM {rows.format(5000)}"
    )
    project.sql(
        "ANALYZE shop_parent; ANALYZE shop_child1; ANALYZE shop_child2"
        if project.vendor == "postgresql"
        else "ANALYZE TABLE shop_parent, shop_child1, shop_child2"
    )


#: Release N+1's code through the ORM on Django's many-to-many table of ``Parent.friends``: a pair it holds is
#: refused (its unique pair over the seqid columns), a new one taken
PAIRS = (
    "from django.db import IntegrityError, transaction; from shop.models import Parent; "
    "F = Parent.friends.through; f = F.objects.order_by('id').first(); n = F.objects.count()\n"
    "try:\n with transaction.atomic():\n"
    "  F.objects.create(from_parent_id=f.from_parent_id, to_parent_id=f.to_parent_id)\n"
    "except IntegrityError: print('refused', end=' ')\n"
    "f.from_parent.friends.add(Parent.objects.exclude(pk__in=[f.from_parent_id, f.to_parent_id]).first()); "
    "print(F.objects.count() - n)"
)


def _pairs_held(project: Project) -> None:
    out, _err = project.done("shell", "-c", PAIRS)
    assert out.splitlines()[-1] == "refused 1", out


def _unapply_filling(project: Project) -> None:
    """Both migrations unapplied: refused while rows release N+1 wrote have no old key, each refusal's UPDATE
    run as it names it (the parent's text, each child's, the many-to-many table's two columns), then done."""
    err = project.refused("migrate", "shop", "0002")  # 0002_expand_parent_key
    for _ in range(8):
        assert "MigrationRefusedError" in err and "fill them first: " in err, err[-2000:]
        fill = next(line for line in err.splitlines() if "fill them first: " in line)
        project.sql(fill.split("fill them first: ", 1)[1])
        run = project.manage("migrate", "shop", "0001")
        _out, err = run.communicate(timeout=600)
        if run.returncode == 0:
            return
    raise AssertionError(err[-2000:])


def _dependencies(text: str) -> list[tuple[str, str]]:
    namespace: dict[str, object] = {}
    exec(text, namespace)  # the file as Django imports it
    return list(namespace["Migration"].dependencies)  # type: ignore[attr-defined]


def _parents(project: Project, child: str, column: str, parent_int: str) -> dict[int, int | None]:
    rows = project.sql(f"SELECT c.id, p.{parent_int} FROM {child} c LEFT JOIN shop_parent p ON p.id = c.{column}")
    return {int(i): (None if n is None else int(n)) for i, n in rows}


def _writers(project: Project, release: str, *more: str) -> Any:
    """rekey_traffic's writers on the project's tables, deleting as Django does (no ON DELETE in the database)."""
    from tests.sqlalchemy_adapter.rekey_traffic import Writers as Started

    return Started(project.url, TABLES, project.tmp, release, "--collector", *more)


def _progress(project: Project) -> int:
    try:
        return int(project.sql("SELECT coalesce(max(done), 0) FROM seqid_fill_shop_parent_id_seqid")[0][0])
    except Exception:  # not made yet: the run has not begun its batches
        return 0


def _expand_killed_and_run_again(project: Project, *writes: str) -> None:
    """Release N's ``migrate`` with its writers beside it (``writes``: their options), SIGKILLed at a random
    point of its batches, then run again to the end: the writers saw no error."""
    # batches of 1,000 rows, so the kill lands in them: grown to a quarter second's worth on a fast server, the
    # batches of 100,000 parents are done between two reads of the progress (MariaDB in CI)
    expand = project.migrations / "0002_expand_parent_key.py"
    written = expand.read_text()
    assert written.count("RekeyExpand(") == 1, written
    expand.write_text(written.replace("RekeyExpand(", "RekeyExpand(batch_size=1000, "))
    old = _writers(project, "old", *writes)
    try:
        first = project.manage("migrate", "shop")
        kill_at = random.randint(PARENTS // 10, PARENTS * 9 // 10)
        while first.poll() is None and _progress(project) < kill_at:
            time.sleep(0.01)
        assert first.poll() is None, first.communicate()[1][-2000:]  # killed in its batches, not after them
        first.send_signal(signal.SIGKILL)
        first.wait()
        project.done("migrate", "shop")
        time.sleep(0.5)
    finally:
        seen = old.stop()
    assert seen["errors"] == [] and seen["writes"] > 0, seen


def test_an_integer_key_changes_over_two_releases_while_each_writes(project):
    # the developer changes the key and runs makemigrations: two migrations, one a release
    (project.tmp / "shop" / "models.py").write_text(RELEASE_N1)
    out, _err = project.done("makemigrations", "shop")
    expand_file, contract_file = (
        project.migrations / "0002_expand_parent_key.py",
        project.migrations / "0003_contract_parent_key.py",
    )
    assert expand_file.exists() and contract_file.exists(), out
    written = expand_file.read_text(), contract_file.read_text()
    assert all("    atomic = False" in text for text in written)
    assert "RekeyExpand(" in written[0] and "release N:" in written[0] and "RekeyContract" not in written[0]
    assert "RekeyContract(" in written[1] and "AlterField" not in written[1]
    assert ("shop", "0002_expand_parent_key") in _dependencies(written[1])
    # release N ships the expand migration with its own models: its state is right
    contract_file.rename(project.tmp / "0003_contract_parent_key.py")
    (project.tmp / "shop" / "models.py").write_text(RELEASE_N)
    project.done("makemigrations", "shop", "--check", "--dry-run")
    pg = project.vendor == "postgresql"
    _fill(project)
    before = {t: _parents(project, t, "parent_id", "id") for t in ("shop_child1", "shop_child2")}
    bosses = _parents(project, "shop_parent", "boss_id", "id")

    _expand_killed_and_run_again(project)

    # release N+1: the model's key is a SeqUUIDField, and its migration the contract: the state is right
    (project.tmp / "shop" / "models.py").write_text(RELEASE_N1)
    (project.tmp / "0003_contract_parent_key.py").rename(contract_file)
    project.done("makemigrations", "shop", "--check", "--dry-run")
    _out, said = project.done("migrate", "shop")
    if not pg:  # the parents release N inserted after the expand step got their keys here, then the foreign keys
        assert "rows inserted since the expand step, keyed" in said, said[-2000:]
    new = _writers(project, "new")
    time.sleep(0.5)
    seen = new.stop()
    assert seen["errors"] == [] and seen["writes"] > 0, seen

    for table in ("shop_child1", "shop_child2"):  # row by row, every old child on its parent
        after = _parents(project, table, "parent_id", "id_int")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    after_bosses = dict(
        project.sql("SELECT c.id_int, b.id_int FROM shop_parent c LEFT JOIN shop_parent b ON b.id = c.boss_id")
    )
    assert {k: v for k, v in after_bosses.items() if k in bosses} == bosses
    for table in ("shop_child1", "shop_child2"):  # every row, release N's since the expand too (MariaDB: keyed late)
        moved = project.sql(
            f"SELECT count(*) FROM {table} c LEFT JOIN shop_parent p ON p.id = c.parent_id "
            "WHERE c.parent_id_int IS NOT NULL AND (p.id_int IS NULL OR p.id_int <> c.parent_id_int)"
        )
        assert moved == [(0,)], table
    # ORDER BY the new key reads the old rows in their integer order, then the new release's (their kept integer
    # made by the old key's own sequence or AUTO_INCREMENT, in the order they were written)
    ints = [i for (i,) in project.sql("SELECT id_int FROM shop_parent ORDER BY id")]
    assert ints == sorted(ints) and len(ints) > PARENTS
    if pg:  # MariaDB's foreign keys have no such state: the rekey counted their rows for orphans
        invalid = project.sql(
            "SELECT conname FROM pg_constraint WHERE conrelid::regclass::text LIKE 'shop_%%' AND NOT convalidated"
        )
        assert invalid == []
    # release N+1's code through the ORM: a new parent's key sorts after every old one; an old child finds its parent
    out, _err = project.done(
        "shell",
        "-c",
        "from shop.models import Parent, Child1; p = Parent.objects.create(name='orm'); "
        "c = Child1.objects.create(parent=p); "
        "old = Child1.objects.filter(parent__isnull=False).order_by('id').first(); "
        "print(Parent.objects.order_by('-id').first().name, Child1.objects.get(pk=c.pk).parent.name, "
        "old.id, old.parent.name)",
    )
    assert len(out.splitlines()[-1].split()) == 4, out
    newest, orm_parent, old_child, old_parent = out.splitlines()[-1].split()
    assert (newest, orm_parent) == ("orm", "orm")
    assert old_parent == f"p{before['shop_child1'][int(old_child)]}"
    _pairs_held(project)

    # unapplied: refused while the new release's children have no integer, then, filled, the integer key again
    _unapply_filling(project)
    tables = "('shop_parent', 'shop_child1', 'shop_child2', 'shop_parent_friends')"
    kinds = dict(
        project.sql(
            "SELECT attrelid::regclass::text || '.' || attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            f"WHERE attrelid::regclass::text IN {tables} AND attnum > 0 AND NOT attisdropped"
        )
        if pg
        else project.sql(
            "SELECT CONCAT(table_name, '.', column_name), column_type FROM information_schema.columns "
            f"WHERE table_schema = DATABASE() AND table_name IN {tables}"
        )
    )
    integer, text = ("bigint", "character varying(20)") if pg else ("bigint(20)", "varchar(20)")
    assert kinds == {
        "shop_parent.id": integer,
        "shop_parent.name": text,
        "shop_parent.boss_id": integer,
        "shop_child1.id": integer,
        "shop_child1.parent_id": integer,
        "shop_child2.id": integer,
        "shop_child2.parent_id": integer,
        "shop_parent_friends.id": integer,
        "shop_parent_friends.from_parent_id": integer,
        "shop_parent_friends.to_parent_id": integer,
    }
    for table in ("shop_child1", "shop_child2"):
        after = _parents(project, table, "parent_id", "id")
        assert {k: v for k, v in after.items() if k in before[table]} == before[table], table


TEXT_RELEASE_N = RELEASE_N.replace(
    "class Parent(models.Model):\n",
    "class Parent(models.Model):\n    id = models.CharField(max_length=36, primary_key=True)\n",
)
TEXT_INITIAL = INITIAL.replace(
    '("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),\n'
    '            ("name", models.CharField(max_length=20)),',
    '("id", models.CharField(max_length=36, primary_key=True, serialize=False)),\n'
    '            ("name", models.CharField(max_length=20)),',
)


def _fill_text(project: Project) -> None:
    """100,000 parents keyed by UUIDs as text, each but the first led by another, and their children."""
    pg = project.vendor == "postgresql"
    made = "gen_random_uuid()::text, 'p' || g FROM generate_series" if pg else "UUID(), CONCAT('p', seq) FROM seq"
    project.sql(
        f"INSERT INTO shop_parent (id, name) SELECT {made}" + (f"(1, {PARENTS}) g" if pg else f"_1_to_{PARENTS}")
    )
    first = project.sql("SELECT min(id) FROM shop_parent")[0][0]
    project.sql(f"UPDATE shop_parent SET boss_id = '{first}' WHERE id <> '{first}'")
    numbered = "id, row_number() OVER (ORDER BY id) AS n FROM shop_parent"
    for table, nulls in (("shop_child1", True), ("shop_child2", False)):
        value = (
            ("CASE WHEN x.n %% 10 = 0 THEN NULL ELSE x.id END" if pg else "IF(x.n %% 10 = 0, NULL, x.id)")
            if nulls
            else "x.id"
        )
        project.sql(f"INSERT INTO {table} (parent_id) SELECT {value} FROM (SELECT {numbered}) x")
    project.sql(
        "INSERT INTO shop_parent_friends (from_parent_id, to_parent_id) SELECT a.id, b.id "
        f"FROM (SELECT {numbered}) a JOIN (SELECT {numbered}) b ON b.n = a.n + 1 WHERE a.n <= 5000"
    )
    project.sql(
        "ANALYZE shop_parent; ANALYZE shop_child1; ANALYZE shop_child2"
        if pg
        else "ANALYZE TABLE shop_parent, shop_child1, shop_child2"
    )


def _text_parents(project: Project, child: str, parent_text: str) -> dict[int, str | None]:
    cast = "lower(p.{}::text)" if project.vendor == "postgresql" else "LOWER(CAST(p.{} AS CHAR))"
    rows = project.sql(
        f"SELECT c.id, {cast.format(parent_text)} FROM {child} c LEFT JOIN shop_parent p ON p.id = c.parent_id"
    )
    return {int(i): t for i, t in rows}


def test_a_key_of_uuids_kept_as_text_changes_over_two_releases_while_each_writes(tmp_path):
    """A CharField key of UUIDs as text (Django's UUIDField before 5.0 on MariaDB kept them as char(32)):
    makemigrations writes the two releases' migrations for the SeqUUIDField that replaces it, release N's writers
    (text keys, Django's own deletions) go on through the expand migration (killed in its batches, run again),
    release N+1's through the ORM after the contract; every child on its parent; unapplied back to the text key,
    each refusal's UPDATE run first."""
    project = Project(tmp_path)
    try:
        (project.migrations / "0001_initial.py").write_text(TEXT_INITIAL)
        (project.tmp / "shop" / "models.py").write_text(TEXT_RELEASE_N)
        project.done("migrate", "shop", "0001")
        project.done("makemigrations", "shop", "--check", "--dry-run")  # the hand-written initial is the models'
        release_n1 = RELEASE_N1
        (project.tmp / "shop" / "models.py").write_text(release_n1)
        out, _err = project.done("makemigrations", "shop")
        expand_file = project.migrations / "0002_expand_parent_key.py"
        contract_file = project.migrations / "0003_contract_parent_key.py"
        assert expand_file.exists() and contract_file.exists(), out
        contract_file.rename(project.tmp / contract_file.name)
        (project.tmp / "shop" / "models.py").write_text(TEXT_RELEASE_N)
        _fill_text(project)
        before = {t: _text_parents(project, t, "id") for t in ("shop_child1", "shop_child2")}

        _expand_killed_and_run_again(project, "--text-keys")

        (project.tmp / "shop" / "models.py").write_text(release_n1)
        (project.tmp / contract_file.name).rename(contract_file)
        project.done("makemigrations", "shop", "--check", "--dry-run")
        project.done("migrate", "shop")
        new = _writers(project, "new")
        time.sleep(0.5)
        seen = new.stop()
        assert seen["errors"] == [] and seen["writes"] > 0, seen
        for table in ("shop_child1", "shop_child2"):  # the text each child's parent had is its parent's kept text
            after = _text_parents(project, table, "id_text")
            assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
        out, _err = project.done(
            "shell",
            "-c",
            "from shop.models import Parent, Child1; p = Parent.objects.create(name='orm'); "
            "c = Child1.objects.create(parent=p); old = Child1.objects.filter(parent__isnull=False).order_by('id')"
            ".first(); print(Child1.objects.get(pk=c.pk).parent.name, old.id, old.parent.name)",
        )
        orm_parent, old_child, old_parent = out.splitlines()[-1].split()
        assert orm_parent == "orm" and old_parent.startswith("p")
        assert before["shop_child1"][int(old_child)] is not None
        _pairs_held(project)

        _unapply_filling(project)
        for table in ("shop_child1", "shop_child2"):
            after = _text_parents(project, table, "id")
            assert {k: v for k, v in after.items() if k in before[table]} == before[table], table
    finally:
        project.drop()


def test_a_tenant_schemas_foreign_key_follows_the_key(project):
    """A table the project does not model, in another schema (a tenant's, as django-tenants keeps them: on MariaDB
    another database) and named as one of the project's, whose foreign key references the model's table: it
    follows the key through ``makemigrations``' two migrations, each order on the parent it had, and back when
    they are unapplied."""
    pg = project.vendor == "postgresql"
    tenant = f"{project.name}_tenant"
    child = f"{tenant}.shop_child1"
    project.sql("INSERT INTO shop_parent (name) VALUES " + ", ".join(f"('p{i}')" for i in range(50)))
    if pg:
        project.sql(f"CREATE SCHEMA {tenant}")
    else:
        project.admin(f"CREATE DATABASE {tenant}")
    here = "public" if pg else project.name

    def column_type() -> list[tuple]:
        schema = "table_schema" if pg else "TABLE_SCHEMA"
        return project.sql(
            f"SELECT data_type FROM information_schema.columns WHERE {schema} = '{tenant}' "
            "AND table_name = 'shop_child1' AND column_name = 'parent_id'"
        )

    try:
        project.sql(
            f"CREATE TABLE {child} (id bigint PRIMARY KEY, parent_id bigint NOT NULL, "
            f"FOREIGN KEY (parent_id) REFERENCES {here}.shop_parent (id))"
        )
        project.sql(f"INSERT INTO {child} (id, parent_id) SELECT id * 10, id FROM shop_parent")
        before = _parents(project, child, "parent_id", "id")
        (project.tmp / "shop" / "models.py").write_text(RELEASE_N1)
        project.done("makemigrations", "shop")
        project.done("migrate", "shop")
        assert column_type() == [("uuid",)]
        assert _parents(project, child, "parent_id", "id_int") == before
        if pg:
            invalid = f"SELECT count(*) FROM pg_constraint WHERE conrelid = '{child}'::regclass AND NOT convalidated"
            assert project.sql(invalid) == [(0,)]
        else:  # the foreign key names the shared table's database: a key of no parent is refused
            with pytest.raises(Exception, match="foreign key constraint fails"):
                project.sql(f"INSERT INTO {child} (id, parent_id) VALUES (1, UUID())")
        project.done("migrate", "shop", "0001")
        assert _parents(project, child, "parent_id", "id") == before
        assert column_type() == [("bigint",)]
    finally:
        if pg:
            project.sql(f"DROP SCHEMA IF EXISTS {tenant} CASCADE")
        else:
            project.admin(f"DROP DATABASE IF EXISTS {tenant}")


MTI_MODELS = """
from django.db import models

class Place(models.Model):
    name = models.CharField(max_length=20)

class Restaurant(Place):
    seats = models.IntegerField()

class Review(models.Model):
    restaurant = models.ForeignKey(Restaurant, on_delete=models.CASCADE)
"""


#: release N+1: ``Place``'s key a SeqUUIDField
MTI_RELEASE_N1 = MTI_MODELS.replace(
    "class Place(models.Model):\n", "class Place(models.Model):\n    id = SeqUUIDField(primary_key=True)\n"
).replace("from django.db import models\n", "from django.db import models\nfrom seqid_orm.django import SeqUUIDField\n")

#: each review, its place's name and its restaurant's seats: what must read the same at every step
MTI_READ = (
    "SELECT v.id, p.name, r.seats FROM shop_review v JOIN shop_restaurant r ON r.place_ptr_id = v.restaurant_id "
    "JOIN shop_place p ON p.id = r.place_ptr_id ORDER BY v.id"
)


def mti_project(project: Project) -> list[tuple]:
    """``project``'s app made the MTI models' (their initial migration written and applied), 60 places, a
    restaurant for two in three, a review each; then release N+1's models and its two migrations written.
    :data:`MTI_READ` as it reads before them."""
    (project.migrations / "0001_initial.py").unlink()
    (project.tmp / "shop" / "models.py").write_text(MTI_MODELS)
    project.done("makemigrations", "shop")
    project.done("migrate", "shop")
    modulo = "%" if project.vendor == "sqlite" else "%%"  # (the drivers' parameter style)
    project.sql("INSERT INTO shop_place (name) VALUES " + ", ".join(f"('p{i}')" for i in range(60)))
    project.sql(
        f"INSERT INTO shop_restaurant (place_ptr_id, seats) SELECT id, id FROM shop_place WHERE id {modulo} 3 <> 0"
    )
    project.sql("INSERT INTO shop_review (restaurant_id) SELECT place_ptr_id FROM shop_restaurant")
    before = project.sql(MTI_READ)
    assert len(before) == 40
    (project.tmp / "shop" / "models.py").write_text(MTI_RELEASE_N1)
    project.done("makemigrations", "shop")
    written = sorted(p.name for p in project.migrations.glob("000[23]_*.py"))
    assert written == ["0002_expand_place_key.py", "0003_contract_place_key.py"], written
    return before


def test_a_parent_of_multi_table_inheritance_changes_with_its_children(tmp_path):
    """``Restaurant(Place)``: the child's key is its link to its parent's row, and a review's foreign key points at
    it.  Changing ``Place``'s key: ``makemigrations`` writes the two migrations for ``Place`` alone, and they change
    the child's key and the review's link with it: each restaurant's key its place's new key, each review on its
    restaurant, the model state right, the new release's rows written through the ORM; unapplied, the integers
    again.  On both servers (MariaDB's contract runs the child's steps, then the parent's)."""
    project = Project(tmp_path)
    try:
        before = mti_project(project)
        pg = project.vendor == "postgresql"
        here = "current_schema()" if pg else "DATABASE()"

        def types(table: str) -> list[tuple]:
            return project.sql(
                f"SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = {here} "
                f"AND table_name = '{table}' ORDER BY ordinal_position"
            )

        project.done("migrate", "shop")
        project.done("makemigrations", "shop", "--check", "--dry-run")  # the model state is right
        assert project.sql(MTI_READ) == before
        assert project.sql(
            "SELECT count(*) FROM shop_restaurant r JOIN shop_place p ON p.id = r.place_ptr_id "
            "WHERE p.id_int = r.place_ptr_id_int"
        ) == [(40,)]
        assert ("restaurant_id", "uuid") in types("shop_review") and ("place_ptr_id", "uuid") in types(
            "shop_restaurant"
        )
        out, _err = project.done(  # the new release, through the ORM: a restaurant and its review
            "shell",
            "-c",
            "from shop.models import Restaurant, Review; r = Restaurant.objects.create(name='new', seats=5); "
            "Review.objects.create(restaurant=r); print(Restaurant.objects.get(pk=r.pk).place_ptr_id == r.pk)",
        )
        assert out.split()[-1] == "True", out
        project.sql("DELETE FROM shop_review WHERE restaurant_id IN (SELECT id FROM shop_place WHERE name = 'new')")
        project.sql("DELETE FROM shop_restaurant WHERE place_ptr_id IN (SELECT id FROM shop_place WHERE name = 'new')")
        project.sql("DELETE FROM shop_place WHERE name = 'new'")
        project.done("migrate", "shop", "0001")
        assert project.sql(MTI_READ) == before
        assert types("shop_restaurant") == [("place_ptr_id", "bigint"), ("seats", "integer" if pg else "int")]
    finally:
        project.drop()
