"""``AddSeqUUIDField`` in a migration with ``atomic = False`` on a table of 100,000 rows while the application
reads and writes it, on the settings module's PostgreSQL or MariaDB: a project of its own, in a database of
its own, ``manage.py migrate`` run as a user runs it, in a process of its own, beside the application's traffic
(tests/traffic.py, the old code: inserts without the new column, reads by key, each statement allowed to wait
1 s for a lock on PostgreSQL and 2 s on MariaDB).  Then a ``migrate`` killed in its batches and run again:
every old row written once.  And the refusal of a big table in an atomic migration."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.django.own_database import OwnDatabase

ROOT = Path(__file__).resolve().parents[2]
ROWS = 100_000

pytestmark = [pytest.mark.server_database, pytest.mark.slow]

MODELS = """
from django.db import models
from seqid_orm.django import SeqUUIDField

class Visit(models.Model):
    created_at = models.DateTimeField(null=True)
    note = models.CharField(max_length=20)
{extra}
"""

FIRST = """
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

SECOND = """
from django.db import migrations
import seqid_orm.django
import seqid_orm.django.operations

class Migration(migrations.Migration):
    atomic = {atomic}
    dependencies = [("shop", "0001_initial")]
    operations = [seqid_orm.django.operations.AddSeqUUIDField(
        "visit", "seq_id", seqid_orm.django.SeqUUIDField(unique=True), from_field="created_at", batch_size=2000
    )]
"""

SETTINGS = """
SECRET_KEY = "online"
USE_TZ = True
INSTALLED_APPS = ["seqid_orm.django", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {{"default": {database!r}}}
"""


class Project(OwnDatabase):
    def __init__(self, tmp: Path, atomic: bool = False) -> None:
        super().__init__(tmp, "seqid_online")
        migrations = tmp / "shop" / "migrations"
        migrations.mkdir(parents=True)
        (tmp / "shop" / "__init__.py").write_text("")
        (migrations / "__init__.py").write_text("")
        (migrations / "0001_initial.py").write_text(FIRST)
        (migrations / "0002_seq_id.py").write_text(SECOND.format(atomic=atomic))
        (tmp / "shop" / "models.py").write_text(MODELS.format(extra="    seq_id = SeqUUIDField(unique=True)"))
        (tmp / "online_settings.py").write_text(SETTINGS.format(database=self.database))
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
            "DJANGO_SETTINGS_MODULE": "online_settings",
        }
        self.create()

    def migrate(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "django", "migrate", *args],
            env=self.env,
            cwd=self.tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def filled(self) -> Project:
        done = self.migrate("shop", "0001")
        _out, err = done.communicate(timeout=300)
        assert done.returncode == 0, err[-2000:]
        if self.vendor == "postgresql":
            self.sql(
                f"INSERT INTO shop_visit (created_at, note) SELECT now() - g * interval '1 second', 'old' "
                f"FROM generate_series(1, {ROWS}) g"
            )
            self.sql("ANALYZE shop_visit")
        else:
            self.sql(
                f"INSERT INTO shop_visit (created_at, note) SELECT now(6) - INTERVAL seq SECOND, 'old' "
                f"FROM seq_1_to_{ROWS}"
            )
            self.sql("ANALYZE TABLE shop_visit")
        return self


@pytest.fixture
def project(tmp_path):
    made = Project(tmp_path)
    try:
        yield made.filled()
    finally:
        made.drop()


def _check(project: Project) -> None:
    [(total, filled, distinct)] = project.sql("SELECT count(*), count(seq_id), count(DISTINCT seq_id) FROM shop_visit")
    assert total == filled == distinct and total >= ROWS
    times = [t for (t,) in project.sql("SELECT created_at FROM shop_visit WHERE note = 'old' ORDER BY seq_id")]
    assert times == sorted(times)
    project.sql("INSERT INTO shop_visit (created_at, note) VALUES (CURRENT_TIMESTAMP, 'after')")  # old code, after
    assert project.sql("SELECT seq_id FROM shop_visit WHERE note = 'after'")[0][0] is not None


def test_migrate_adds_the_column_online_while_the_application_reads_and_writes(project):
    out, stop = project.tmp / "traffic.json", project.tmp / "traffic.stop"
    wait_ms = 1000 if project.vendor == "postgresql" else 2000
    traffic = subprocess.Popen(
        [sys.executable, "-m", "tests.traffic", project.url, "shop_visit", str(out), str(stop), f"--wait-ms={wait_ms}"],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(str(out) + ".ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        migration = project.migrate()
        _stdout, err = migration.communicate(timeout=600)
        stop.write_text("")
        traffic.wait(60)
    finally:
        if traffic.poll() is None:
            traffic.kill()
            traffic.wait()
    assert migration.returncode == 0, err[-3000:]
    assert "(done)" in err
    seen = json.loads(out.read_text())
    assert seen["errors"] == [], seen["errors"][:3]
    assert seen["inserts"] > 10 and seen["reads"] > 10
    _check(project)


def test_a_migrate_killed_in_its_batches_and_run_again_writes_every_row_once(project):
    pg = project.vendor == "postgresql"
    column = "uuid" if pg else "uuid NULL"
    project.sql(f"ALTER TABLE shop_visit ADD COLUMN seq_id {column}")  # a first run got that far
    project.sql("CREATE TABLE visit_audit (id bigint NOT NULL)")
    if pg:
        project.sql(
            "CREATE FUNCTION visit_audit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO visit_audit VALUES (NEW.id); RETURN NEW; END $$"
        )
        project.sql(
            "CREATE TRIGGER visit_audit AFTER UPDATE OF seq_id ON shop_visit FOR EACH ROW "
            "WHEN (OLD.seq_id IS DISTINCT FROM NEW.seq_id) EXECUTE FUNCTION visit_audit()"
        )
    else:
        project.sql(
            "CREATE TRIGGER visit_audit AFTER UPDATE ON shop_visit FOR EACH ROW "
            "BEGIN IF NOT (OLD.seq_id <=> NEW.seq_id) THEN INSERT INTO visit_audit VALUES (NEW.id); END IF; END"
        )
    first = project.migrate()
    deadline = time.monotonic() + 300
    while project.sql("SELECT count(*) FROM visit_audit")[0][0] < ROWS // 4:
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1][-2000:]
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = project.migrate()
    _stdout, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
    assert "resuming after" in err
    [(twice,)] = project.sql("SELECT count(*) FROM (SELECT id FROM visit_audit GROUP BY id HAVING count(*) > 1) d")
    [(written,)] = project.sql("SELECT count(DISTINCT id) FROM visit_audit")
    [(left,)] = project.sql("SELECT count(*) FROM shop_visit WHERE seq_id IS NULL")
    assert (twice, written, left) == (0, ROWS, 0)
    _check(project)


def test_a_big_table_in_an_atomic_migration_is_refused_naming_the_fix(tmp_path):
    """PostgreSQL runs an atomic migration in one transaction, where no batch could commit: refused, naming
    atomic = False.  MariaDB's DDL commits by itself, so Django runs no migration in a transaction there:
    the operation runs online as it is."""
    made = Project(tmp_path, atomic=True)
    try:
        made.filled()
        done = made.migrate()
        _out, err = done.communicate(timeout=300)
        if made.vendor == "mysql":
            assert done.returncode == 0, err[-2000:]
            _check(made)
            return
        assert done.returncode != 0
        assert "atomic = False" in err and "MigrationRefusedError" in err  # an InvalidArgumentError
        [(columns,)] = made.sql(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'shop_visit' AND column_name = 'seq_id'"
        )
        assert columns == 0  # refused before anything was changed
    finally:
        made.drop()


def test_makemigrations_writes_the_online_form_for_a_key_column_added_to_a_table(tmp_path):
    """The user adds the field and runs makemigrations, as for any field: seqid's command writes
    AddSeqUUIDField in a migration with atomic = False, which migrate then runs."""
    made = Project(tmp_path)
    try:
        (tmp_path / "shop" / "migrations" / "0002_seq_id.py").unlink()
        done = subprocess.run(
            [sys.executable, "-m", "django", "makemigrations", "shop", "-n", "seq_id"],
            env=made.env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        written = (tmp_path / "shop" / "migrations" / "0002_seq_id.py").read_text()
        assert "seqid_orm.django.operations.AddSeqUUIDField(" in written and "    atomic = False" in written
        made.filled()
        migration = made.migrate()
        _out, err = migration.communicate(timeout=600)
        assert migration.returncode == 0, err[-2000:]
        [(total, filled)] = made.sql("SELECT count(*), count(seq_id) FROM shop_visit")
        assert total == filled == ROWS
    finally:
        made.drop()
