"""``manage.py migrate`` where deployments run it (issue 73): several pods at once (directly, through PgBouncer in
transaction pooling, on MariaDB and on a SQLite file), Django 5.2's composite primary keys, MariaDB's own ``uuid``
keys, and the storage conversion the docs prescribe, applied by a plain ``migrate``.  A project of its own per test,
in a database of its own, ``manage.py migrate`` run as a user runs it, in processes of their own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import django
import pytest
from django.conf import settings

from tests.django.own_database import OwnDatabase

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.server_database, pytest.mark.timeout(300)]

SETTINGS = """
SECRET_KEY = "deploy"
USE_TZ = True
INSTALLED_APPS = ["seqid_orm.django", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {{"default": {database!r}}}
"""


class Project(OwnDatabase):
    """A Django project in ``tmp``: app ``shop`` with the migrations given, on a database of its own (the
    settings module's server), or a SQLite file."""

    def __init__(self, tmp: Path, migrations: dict[str, str], *, sqlite: bool = False) -> None:
        super().__init__(tmp, "seqid_deploy", sqlite=sqlite)
        folder = tmp / "shop" / "migrations"
        folder.mkdir(parents=True)
        (tmp / "shop" / "__init__.py").write_text("")
        (folder / "__init__.py").write_text("")
        for name, text in migrations.items():
            (folder / f"{name}.py").write_text(text)
        (tmp / "shop" / "models.py").write_text("")  # the migrations' state is what matters here
        (tmp / "deploy_settings.py").write_text(SETTINGS.format(database=self.database))
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
            "DJANGO_SETTINGS_MODULE": "deploy_settings",
        }
        self.create()

    def route_through(self, port: int) -> None:
        """``manage.py`` reaches the database through a pooler on ``port`` (the tests' own reads do not)."""
        (self.tmp / "deploy_settings.py").write_text(SETTINGS.format(database={**self.database, "PORT": str(port)}))

    def migrate(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "django", "migrate", *args],
            env=self.env,
            cwd=self.tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def migrated(self, *args: str) -> str:
        done = self.migrate(*args)
        _out, err = done.communicate(timeout=240)
        assert done.returncode == 0, err[-3000:]
        return err


@contextlib.contextmanager
def _project(tmp_path, migrations, **kwargs):
    made = Project(tmp_path, migrations, **kwargs)
    try:
        yield made
    finally:
        made.drop()


VISITS = """
from django.db import migrations, models

class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [migrations.CreateModel("Visit", [
        ("id", models.BigAutoField(primary_key=True)),
        ("created_at", models.DateTimeField(null=True)),
        ("note", models.CharField(max_length=20)),
    ])]
"""

ADD_KEY = """
from django.db import migrations, models
import seqid_orm.django
import seqid_orm.django.operations

class Migration(migrations.Migration):
    atomic = False
    dependencies = [("shop", "0001_initial")]
    operations = [
        migrations.CreateModel("Extra", [("id", models.BigAutoField(primary_key=True))]),
        seqid_orm.django.operations.AddSeqUUIDField(
            "visit", "seq_id", seqid_orm.django.SeqUUIDField(unique=True), from_field="created_at", batch_size=300
        ),
    ]
"""


def _fill(project: Project, rows: int, table: str = "shop_visit") -> None:
    if project.vendor == "postgresql":
        project.sql(
            f"INSERT INTO {table} (created_at, note) SELECT now() - g * interval '1 second', 'old' "
            f"FROM generate_series(1, {rows}) g"
        )
    elif project.vendor == "mysql":
        project.sql(
            f"INSERT INTO {table} (created_at, note) SELECT now(6) - INTERVAL seq SECOND, 'old' FROM seq_1_to_{rows}"
        )
    else:
        project.sql(
            f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {rows}) "
            f"INSERT INTO {table} (created_at, note) SELECT datetime('now', '-' || n || ' seconds'), 'old' FROM g"
        )


def _keyed(project: Project, rows: int, table: str = "shop_visit") -> None:
    [(total, keyed, distinct)] = project.sql(f"SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM {table}")
    assert total == keyed == distinct == rows
    times = [t for (t,) in project.sql(f"SELECT created_at FROM {table} WHERE note = 'old' ORDER BY seq_id")]
    assert times == sorted(times)


# where the pods' database is, per settings module: the server (and, on PostgreSQL, through PgBouncer in
# transaction pooling), and once, beside PostgreSQL's, a SQLite file
_PG = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
WHERE = ["server", "pgbouncer", "sqlite"] if _PG else ["server"]


@pytest.mark.slow
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("pods", [2, 5])
def test_pods_running_migrate_at_once_take_turns_and_each_migration_is_applied_once(tmp_path, where, pods):
    """Several pods run ``manage.py migrate`` together.  Each takes the migration lock first (a lease on a row,
    which holds through PgBouncer; a lock on the file for SQLite): one applies, the others wait and find
    nothing left to apply.  Every pod exits 0, every migration is recorded once, every row keyed once."""
    from tests import system

    migrations = {"0001_initial": VISITS, "0002_seq_id": ADD_KEY}
    with _project(tmp_path, migrations, sqlite=where == "sqlite") as project, contextlib.ExitStack() as stack:
        if where == "pgbouncer":
            from tests.servers.pgbouncer import PrivatePgBouncer

            system.need("pgbouncer")
            bouncer = PrivatePgBouncer("transaction", pool_size=4)
            bouncer.database = project.name
            project.route_through(stack.enter_context(bouncer).port)
        project.migrated("shop", "0001")
        _fill(project, 3000)
        runs = [project.migrate() for _ in range(pods)]
        said = [run.communicate(timeout=240)[1] for run in runs]
        failed = [text[-2500:] for text, run in zip(said, runs, strict=True) if run.returncode]
        assert [r.returncode for r in runs] == [0] * pods, failed
        recorded = project.sql("SELECT name, count(*) FROM django_migrations WHERE app = 'shop' GROUP BY name")
        assert sorted(recorded) == [("0001_initial", 1), ("0002_seq_id", 1)]
        _keyed(project, 3000)


@pytest.mark.skipif(django.VERSION < (5, 2), reason="CompositePrimaryKey arrived in Django 5.2")
def test_a_model_with_a_composite_primary_key_gets_its_column_online(tmp_path):
    """Django 5.2's ``CompositePrimaryKey``: before, ``AttributeError`` after the column and its default were
    added, and every re-run the same.  The batches walk the table by both key columns."""
    first = """
from django.db import migrations, models

class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [migrations.CreateModel("Line", [
        ("pk", models.CompositePrimaryKey("order_id", "line_no")),
        ("order_id", models.BigIntegerField()),
        ("line_no", models.IntegerField()),
        ("created_at", models.DateTimeField(null=True)),
        ("note", models.CharField(max_length=20)),
    ])]
"""
    second = """
from django.db import migrations
import seqid_orm.django
import seqid_orm.django.operations

class Migration(migrations.Migration):
    atomic = False
    dependencies = [("shop", "0001_initial")]
    operations = [seqid_orm.django.operations.AddSeqUUIDField(
        "line", "seq_id", seqid_orm.django.SeqUUIDField(unique=True), from_field="created_at", batch_size=250
    )]
"""
    with _project(tmp_path, {"0001_initial": first, "0002_seq_id": second}) as project:
        project.migrated("shop", "0001")
        series = (
            "generate_series(1, 2000) g" if project.vendor == "postgresql" else "(SELECT seq AS g FROM seq_1_to_2000) s"
        )
        when = "now() - g * interval '1 second'" if project.vendor == "postgresql" else "now(6) - INTERVAL g SECOND"
        project.sql(
            f"INSERT INTO shop_line (order_id, line_no, created_at, note) SELECT g / 3, mod(g, 3), {when}, 'old' "
            f"FROM {series}"
        )
        project.migrated()
        _keyed(project, 2000, "shop_line")


def test_a_table_keyed_by_the_uuid_type_djangos_uuidfield_makes_gets_its_column_online(tmp_path):
    """``UUIDField`` keys (MariaDB's own ``uuid`` type from Django 5.0, PostgreSQL's ``uuid``): before, MariaDB's
    first batch declared the key ``UUID PATH`` in ``JSON_TABLE`` (error 1064) and every re-run failed alike."""
    first = VISITS.replace(
        '("id", models.BigAutoField(primary_key=True))', '("id", models.UUIDField(primary_key=True))'
    )
    second = ADD_KEY.replace('migrations.CreateModel("Extra", [("id", models.BigAutoField(primary_key=True))]),', "")
    with _project(tmp_path, {"0001_initial": first, "0002_seq_id": second}) as project:
        project.migrated("shop", "0001")
        make = "gen_random_uuid()" if project.vendor == "postgresql" else "uuid()"
        if project.vendor == "postgresql":
            project.sql(
                f"INSERT INTO shop_visit (id, created_at, note) SELECT {make}, now() - g * interval '1 second', 'old' "
                "FROM generate_series(1, 3000) g"
            )
        else:
            kind = project.sql(
                "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                "AND TABLE_NAME = 'shop_visit' AND COLUMN_NAME = 'id'"
            )
            if django.VERSION >= (5, 0):
                assert kind == [("uuid",)]  # the type the case is about
            make = make if kind == [("uuid",)] else "replace(uuid(), '-', '')"
            project.sql(
                f"INSERT INTO shop_visit (id, created_at, note) SELECT {make}, now(6) - INTERVAL seq SECOND, 'old' "
                "FROM seq_1_to_3000"
            )
        project.migrated()
        _keyed(project, 3000)


OLD_COLUMN = """
from django.db import migrations, models
import seqid_orm.django

class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [migrations.SeparateDatabaseAndState(
        # the column an older Django, or another application, made; the model as it is now
        database_operations=[migrations.RunSQL("CREATE TABLE shop_item (id {column} PRIMARY KEY, name varchar(20))")],
        state_operations=[migrations.CreateModel("Item", [
            ("id", seqid_orm.django.SeqUUIDField(primary_key=True)),
            ("name", models.CharField(max_length=20)),
        ])],
    )]
"""

CONVERT = """
from django.db import migrations
import seqid_orm.django.operations

class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]
    operations = [
        seqid_orm.django.operations.ConvertUUIDStorage("item", "id", from_storage="{old}", to_storage="{new}")
    ]
"""

ITEM_MODEL = """
from django.db import models
from seqid_orm.django import SeqUUIDField

class Item(models.Model):
    id = SeqUUIDField(primary_key=True)
    name = models.CharField(max_length=20)
"""


def test_the_storage_conversion_seqid_e005_prescribes_is_applied_by_a_plain_migrate(tmp_path):
    """A key column in another form than the field's (``char(32)`` under Django 5's ``uuid`` field: the column
    Django 4.2 made on MariaDB; a ``uuid`` column under 4.2's ``char(32)``): ``manage.py check`` reports
    ``seqid.E005`` and names ``ConvertUUIDStorage``.  Before, the same check stopped the ``migrate`` that applies
    that conversion (only ``--skip-checks`` got past it); now ``migrate`` applies it, and the check is quiet after."""
    import uuid

    from django.db import connection

    from seqid_orm.django.connection import uuid_field_storage
    from seqid_orm.vendors import Storage

    wanted = uuid_field_storage(connection)
    old, column = ("hex", "char(32)") if wanted is Storage.NATIVE else ("native", "uuid")
    migrations = {
        "0001_initial": OLD_COLUMN.format(column=column),
        "0002_convert": CONVERT.format(old=old, new=wanted.value),
    }
    with _project(tmp_path, migrations) as project:
        (tmp_path / "shop" / "models.py").write_text(ITEM_MODEL)
        project.migrated("shop", "0001")
        keys = [uuid.uuid4() for _ in range(20)]
        written = [k.hex if old == "hex" else str(k) for k in keys]
        project.sql("INSERT INTO shop_item (id, name) VALUES " + ", ".join(f"('{k}', 'old')" for k in written))

        def check() -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "django", "check", "--database", "default"],
                env=project.env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
            )

        before = check()
        assert before.returncode != 0 and "seqid.E005" in before.stderr, before.stderr[-2000:]
        project.migrated()  # the check does not stop the migrate that converts the column
        here = "current_schema()" if project.vendor == "postgresql" else "DATABASE()"
        kind = project.sql(  # this project's database: another test's shop_item may be on the server beside it
            f"SELECT data_type FROM information_schema.columns WHERE table_schema = {here} "
            "AND table_name = 'shop_item' AND column_name = 'id'"
        )
        assert kind == [("uuid",)] if wanted is Storage.NATIVE else kind == [("char",)], kind
        found = sorted(uuid.UUID(str(k)) for (k,) in project.sql("SELECT id FROM shop_item"))
        assert found == sorted(keys)
        after = check()
        assert after.returncode == 0, after.stderr[-2000:]


@pytest.mark.slow
def test_a_big_tables_storage_conversion_runs_online_in_a_migration_that_is_not_atomic(tmp_path):
    """``ConvertUUIDStorage`` of a key of UUIDs kept as text (``char(32)``) past REWRITE_UP_TO_ROWS rows, to the
    server's ``uuid`` type: refused in an atomic migration on PostgreSQL, naming ``atomic = False``, with nothing
    changed; with it, converted online (seqid_orm.schema.rekey.convert: its batches commit), a child's foreign
    key with it, every key and reference kept, no column of seqid's left."""
    import uuid

    from seqid_orm.schema.conversions import REWRITE_UP_TO_ROWS

    rows = REWRITE_UP_TO_ROWS + 20_000
    initial = OLD_COLUMN.format(column="char(32)").replace(
        'name varchar(20))")]',
        'name varchar(20))"), migrations.RunSQL("CREATE TABLE shop_note (id bigint PRIMARY KEY, '
        'item_id char(32) NOT NULL REFERENCES shop_item (id))")]',
    )
    migrations = {"0001_initial": initial, "0002_convert": CONVERT.format(old="hex", new="native")}
    with _project(tmp_path, migrations) as project:
        if project.vendor != "postgresql" and project.vendor != "mysql":
            pytest.skip("a server of the settings module's")
        (tmp_path / "shop" / "models.py").write_text(ITEM_MODEL)
        project.migrated("shop", "0001")
        pg = project.vendor == "postgresql"
        made = (
            f"SELECT replace(gen_random_uuid()::text, '-', ''), 'old' FROM generate_series(1, {rows})"
            if pg
            else f"SELECT lower(replace(uuid(), '-', '')), 'old' FROM seq_1_to_{rows}"
        )
        project.sql(f"INSERT INTO shop_item (id, name) {made}")
        project.sql("INSERT INTO shop_note (id, item_id) SELECT 1, min(id) FROM shop_item")
        project.sql("ANALYZE shop_item" if pg else "ANALYZE TABLE shop_item")
        keys = {str(k) for (k,) in project.sql("SELECT id FROM shop_item")}

        here = "table_schema = " + ("current_schema()" if pg else "DATABASE()")
        kind = f"SELECT data_type FROM information_schema.columns WHERE {here} AND table_name = 'shop_item' "
        kind += "AND column_name = 'id'"
        if pg:  # where Django runs an atomic migration in a transaction (MariaDB's DDL commits anyway)
            refused = project.migrate()
            _out, err = refused.communicate(timeout=240)
            assert refused.returncode != 0 and "atomic = False" in err, err[-2000:]
            assert project.sql(kind) == [("character",)]  # nothing changed

        convert = tmp_path / "shop" / "migrations" / "0002_convert.py"
        convert.write_text(
            convert.read_text().replace(
                "class Migration(migrations.Migration):\n",
                "class Migration(migrations.Migration):\n    atomic = False\n",
            )
        )
        project.migrated()
        assert project.sql(kind) == [("uuid",)]
        assert {uuid.UUID(str(k)).hex for (k,) in project.sql("SELECT id FROM shop_item")} == keys
        [(note_item,)] = project.sql("SELECT i.id FROM shop_note n JOIN shop_item i ON i.id = n.item_id")
        assert uuid.UUID(str(note_item)).hex == min(keys)
        left = project.sql(
            f"SELECT column_name FROM information_schema.columns WHERE {here} "
            "AND table_name IN ('shop_item', 'shop_note') "
            "AND (column_name LIKE '%%seqid%%' OR column_name LIKE '%%text%%')"
        )
        assert left == []
