"""Adoption as a Django project does it, where real applications run, on PostgreSQL (the engine that gets
adopted keys): a project of its own in a database of its own, ``manage.py makemigrations`` and ``migrate``
run as a user runs them (seqid's makemigrations writes ``AdoptSeqUUID`` beside the swap's ``AlterField``),
then application processes (tests/django/adopting_worker.py) as a role without SELECT, under row-level
security with tenants served in both orders, after a TRUNCATE under a running process, and with a schema
per tenant switched by ``SET search_path`` or by a tenancy library's ``connection.schema_name``.  Every
process makes keys of the recorded width, after every old key and in creation order."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from tests.line_worker import LineWorker, started

ROOT = Path(__file__).resolve().parents[2]
OLD = 20_000

# adopted keys are PostgreSQL's (the other engines keep plain keys: tests/django/test_adopting.py)
pytestmark = pytest.mark.postgres_settings

MODELS = """
import uuid
from django.db import models
{imports}

class Order(models.Model):
    id = {key}
    n = models.IntegerField()
    note = models.CharField(max_length=20)
"""

SETTINGS = """
import os
SECRET_KEY = "adopt"
USE_TZ = True
INSTALLED_APPS = ["seqid_orm.django", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {{"default": {{
    "ENGINE": "django.db.backends.postgresql", "NAME": {name!r}, "HOST": {host!r}, "PORT": {port!r},
    "USER": os.environ.get("SEQID_ADOPT_USER", {user!r}), "PASSWORD": {password!r},
}}}}
"""


class Project:
    """A Django project in ``tmp`` on a database of its own."""

    def __init__(self, tmp: Path) -> None:
        db = settings.DATABASES["default"]
        self.name = f"seqid_adopt_{secrets.token_hex(4)}"
        self.tmp = tmp
        self.db = db
        (tmp / "shop" / "migrations").mkdir(parents=True)
        (tmp / "shop" / "__init__.py").write_text("")
        (tmp / "shop" / "migrations" / "__init__.py").write_text("")
        (tmp / "adopt_settings.py").write_text(
            SETTINGS.format(
                name=self.name, host=db["HOST"], port=str(db["PORT"]), user=db["USER"], password=db["PASSWORD"]
            )
        )
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
            "DJANGO_SETTINGS_MODULE": "adopt_settings",
        }
        self.sql(f"CREATE DATABASE {self.name}", database="postgres")

    def models(self, key: str, imports: str = "") -> None:
        (self.tmp / "shop" / "models.py").write_text(MODELS.format(key=key, imports=imports))

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "django", *args],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def sql(self, statement: str, database: str | None = None) -> list[tuple[object, ...]]:
        import psycopg

        db = self.db
        with psycopg.connect(
            host=db["HOST"],
            port=db["PORT"],
            user=db["USER"],
            password=db["PASSWORD"] or None,
            dbname=database or self.name,
            autocommit=True,
        ) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def drop(self) -> None:
        self.sql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", database="postgres")


def workers(project: Project, count: int, **env: str):
    """``count`` application processes (tests/django/adopting_worker.py) of ``project``, stopped after the block."""
    command = [sys.executable, "-m", "tests.django.adopting_worker", "shop.Order"]
    return started(count, lambda: LineWorker(command, env={**project.env, **env}, cwd=project.tmp))


@pytest.fixture
def project(tmp_path):
    made = Project(tmp_path)
    try:
        yield made
    finally:
        made.drop()


def _swapped(project: Project) -> int:
    """The legacy project migrated and filled, the key swapped, makemigrations and migrate run: the width
    recorded."""
    project.models("models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)")
    project.manage("makemigrations", "shop")
    project.manage("migrate", "-v0")
    project.sql(f"INSERT INTO shop_order SELECT gen_random_uuid(), -g, 'old' FROM generate_series(1, {OLD}) g")
    project.models("SeqUUIDField(primary_key=True, editable=False)", "from seqid_orm.django import SeqUUIDField")
    project.manage("makemigrations", "shop")
    [written] = sorted((project.tmp / "shop" / "migrations").glob("0002_*.py"))
    text = written.read_text()
    adopt, alter = text.index("seqid_orm.django.operations.AdoptSeqUUID("), text.index("migrations.AlterField(")
    assert adopt < alter, text  # the adoption first: the column stays what it is, the record is there for a default
    out = project.manage("migrate", "-v1")
    assert "seqid: shop_order.id: keys after" in out, out
    [(comment,)] = project.sql("SELECT col_description('shop_order'::regclass, 1)")
    from seqid_orm.ids.adopted import record_of

    width = record_of(comment)
    assert width is not None and 16 <= width <= 28
    assert "No changes detected" in project.manage("makemigrations", "shop", "--check", "--dry-run")
    return width


def _order(project: Project, table: str = "shop_order") -> list[tuple[int, str]]:
    return [(int(n), str(note)) for n, note in project.sql(f"SELECT n, note FROM {table} ORDER BY id")]


def _assert_after_old_in_creation_order(rows: list[tuple[int, str]], old: int) -> None:
    assert all(note == "old" for _, note in rows[:old]), "a new key sorts among the old ones"
    new = [n for n, note in rows[old:]]
    assert all(note == "new" for _, note in rows[old:]) and new == sorted(new)


def test_makemigrations_and_migrate_record_the_adoption_that_every_process_and_role_reads(project):
    width = _swapped(project)
    role = f"seqid_dj_{secrets.token_hex(3)}"
    project.sql(f"CREATE ROLE {role} LOGIN")
    try:
        project.sql(f"GRANT INSERT ON shop_order TO {role}")  # no SELECT
        project.sql(f"GRANT USAGE ON SCHEMA public TO {role}")
        with workers(project, 1, SEQID_ADOPT_USER=role) as (writer,), workers(project, 1) as (owner,):
            assert writer.widths("insert 10 0") == [width]
            assert owner.widths("insert 10 10") == [width]
            project.sql("TRUNCATE shop_order")  # a drained table under the running processes
            with workers(project, 1) as (started_after,):
                assert started_after.widths("insert 10 20") == [width]  # the record, not the empty table
            assert owner.widths("insert 10 30") == [width]
            assert writer.widths("insert 10 40") == [width]
        assert [n for n, _ in _order(project)] == list(range(20, 50))
    finally:
        project.sql(f"DROP OWNED BY {role}")
        project.sql(f"DROP ROLE {role}", database="postgres")


@pytest.mark.parametrize("first", ["a", "b"])
def test_tenants_under_row_level_security_get_the_recorded_keys_in_either_order(project, first):
    width = _swapped(project)
    role = f"seqid_dj_{secrets.token_hex(3)}"
    project.sql("ALTER TABLE shop_order ADD COLUMN tenant text DEFAULT current_setting('seqid.tenant', true)")
    project.sql("UPDATE shop_order SET tenant = 'b'")  # every old row is tenant b's; a has none
    project.sql("ALTER TABLE shop_order ENABLE ROW LEVEL SECURITY")
    project.sql(
        "CREATE POLICY tenants ON shop_order USING (tenant = current_setting('seqid.tenant', true)) "
        "WITH CHECK (tenant = current_setting('seqid.tenant', true))"
    )
    project.sql(f"CREATE ROLE {role} LOGIN")
    try:
        project.sql(f"GRANT SELECT, INSERT ON shop_order TO {role}")
        project.sql(f"GRANT USAGE ON SCHEMA public TO {role}")
        tenants = [first, "b" if first == "a" else "a"]
        n = 0
        with workers(project, 2, SEQID_ADOPT_USER=role) as (one, two):
            for worker, order in ((one, tenants), (two, tenants[::-1])):
                for tenant in order:
                    worker.ask(f"tenant {tenant}")
                    assert worker.widths(f"insert 10 {n}") == [width], tenant
                    n += 10
        _assert_after_old_in_creation_order(_order(project), OLD)
    finally:
        project.sql(f"DROP OWNED BY {role}")
        project.sql(f"DROP ROLE {role}", database="postgres")


def test_a_schema_per_tenant_is_followed_by_search_path_and_by_a_tenancy_librarys_schema_name(project):
    """A second tenant's schema holds an empty table of the same name, adopted by its own migration (the
    same operation, with the search_path on that schema): plain keys.  One process switches between the
    tenants per request, by ``SET search_path`` through Django and as django-tenants does it (the raw
    connection, ``connection.schema_name``); each table gets its own keys."""
    width = _swapped(project)
    schema = f"tenant_{secrets.token_hex(3)}"
    project.sql(f"CREATE SCHEMA {schema}")
    project.sql(f"CREATE TABLE {schema}.shop_order (LIKE public.shop_order INCLUDING ALL)")
    project.sql(f"COMMENT ON COLUMN {schema}.shop_order.id IS NULL")
    project.manage(
        "shell",
        "-c",
        textwrap.dedent(
            f"""
            from django.db import connection
            from django.db.migrations.state import ProjectState
            from seqid_orm.django.operations import AdoptSeqUUID
            with connection.cursor() as cursor:
                cursor.execute("SET search_path TO {schema}")
            state = ProjectState.from_apps(__import__("django.apps", fromlist=["apps"]).apps)
            with connection.schema_editor() as editor:
                AdoptSeqUUID("order", "id").database_forwards("shop", editor, state, state)
            """
        ),
    )
    from seqid_orm.ids.adopted import record_of

    [(comment,)] = project.sql(f"SELECT col_description('{schema}.shop_order'::regclass, 1)")
    assert record_of(comment) == 0  # empty: plain keys, for good
    n = 0
    with workers(project, 1) as (worker,):
        for _step in range(2):
            for switch in ("path", "tenant-schema"):
                for where, expected in ((schema, 0), ("public", width)):
                    worker.ask(f"{switch} {where}")
                    assert worker.widths(f"insert 5 {n}") == [expected], (switch, where)
                    n += 5
    _assert_after_old_in_creation_order(_order(project), OLD)
    _assert_after_old_in_creation_order(_order(project, f"{schema}.shop_order"), 0)
