"""A table's integer key changed to a seqid key with every foreign key to it: seqid's two steps (expand with
release N's writers beside it, contract with release N+1's), beside the same conversion written as plain SQL
for a maintenance window (one transaction, the application stopped), on PostgreSQL, in rotated rounds.

The tables: a parent of ``--parents`` rows that references itself, a child of twice as many rows whose foreign
key is nullable (``ON DELETE SET NULL``, every tenth row without a parent), one of three times as many whose
is not (``ON DELETE CASCADE``).  Each form runs through Alembic's command API in a process of its own.
Reported: each step's time and peak memory (its own ``ru_maxrss``), the writers' longest statement and errors
(tests/sqlalchemy_adapter/rekey_traffic.py, each statement allowed to wait 1 s for a lock), whether every
child row points at the same parent as before (a digest of ``(child, parent's integer)`` over the rows that
were there before, compared), orphans and invalid constraints at the end, and seqid's time over plain SQL's.

    python -m benchmarks.rekey [--parents 1000000] [--rounds 2] [--keys integer|text] [--server postgresql|mariadb]
        [--pg URL] [--mariadb URL] [--private-mariadb MB] [--via alembic|django] [--out bench-out/rekey]

``--keys text``: the keys are UUIDs kept as ``char(36)`` (Django's ``UUIDField`` before 5.0 on MariaDB), made
the ``uuid`` type; the plain form is then the ``MODIFY ... UUID`` a DBA types, the foreign keys dropped around it.
``--via django``: seqid's two steps are Django's ``RekeyExpand`` and ``RekeyContract`` migrations, run by
``manage.py migrate`` over the same tables (unmanaged models); the plain form stays the same SQL.

About 20 minutes at 1,000,000 parents (6,000,000 rows in all) and two rounds on the project's two-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import sqlalchemy as sa

from benchmarks.online import migration
from tests.sqlalchemy_adapter.alembic_project import project as alembic_project
from tests.sqlalchemy_adapter.rekey_traffic import Writers

ROOT = Path(__file__).resolve().parents[1]

# What a DBA types for the same change in a maintenance window: one transaction, every row rewritten in place
# (the keys from the same function seqid uses), the constraints made again and checked under the locks.
_PLAIN = """    from seqid_orm.ids.layout import Layout
    from seqid_orm.vendors import Storage, rules_for
    op.execute(rules_for("postgresql").REKEY.integer_function("seqid_integer_key", Layout.TIME_FIRST, Storage.NATIVE))
    p, c1, c2 = "{p}", "{c1}", "{c2}"
    for table, column in ((p, "id"), (p, "boss_id"), (c1, "parent_id"), (c2, "parent_id")):
        op.execute(f"ALTER TABLE {{table}} ADD COLUMN {{column}}_seqid uuid")
    op.execute(f"UPDATE {{p}} SET id_seqid = seqid_integer_key(id), boss_id_seqid = seqid_integer_key(boss_id)")
    for table in (c1, c2):
        op.execute(f"UPDATE {{table}} SET parent_id_seqid = seqid_integer_key(parent_id)")
    for table in (c1, c2):
        op.execute(f"ALTER TABLE {{table}} DROP CONSTRAINT {{table}}_parent_id_fkey")
    op.execute(f"ALTER TABLE {{p}} DROP CONSTRAINT {{p}}_boss_id_fkey, DROP CONSTRAINT {{p}}_pkey")
    for table, column in ((p, "id"), (p, "boss_id"), (c1, "parent_id"), (c2, "parent_id")):
        op.execute(f"ALTER TABLE {{table}} RENAME COLUMN {{column}} TO {{column}}_int")
        op.execute(f"ALTER TABLE {{table}} RENAME COLUMN {{column}}_seqid TO {{column}}")
    op.execute(f"ALTER TABLE {{p}} ADD PRIMARY KEY (id), ADD UNIQUE (id_int), ALTER COLUMN id SET DEFAULT uuidv7_sub()")
    op.execute(f"ALTER TABLE {{p}} ADD FOREIGN KEY (boss_id) REFERENCES {{p}} (id)")
    op.execute(f"ALTER TABLE {{c1}} ADD FOREIGN KEY (parent_id) REFERENCES {{p}} (id) ON DELETE SET NULL")
    op.execute(f"ALTER TABLE {{c2}} ALTER COLUMN parent_id_int DROP NOT NULL, ALTER COLUMN parent_id SET NOT NULL, "
               f"ADD FOREIGN KEY (parent_id) REFERENCES {{p}} (id) ON DELETE CASCADE")
    for table in (c1, c2):
        op.execute(f"CREATE INDEX ON {{table}} (parent_id)")"""


def _plain_mariadb(p: str, c1: str, c2: str) -> str:
    """The maintenance window's SQL for MariaDB's integer keys: the keys made by the same inline expression
    seqid uses, the foreign keys dropped, the columns swapped and the key moved (the old one kept, unique and
    ``AUTO_INCREMENT``), the foreign keys added back and checked."""
    from seqid_orm.vendors import rules_for

    rules = rules_for("mariadb").REKEY
    assert rules is not None

    def key(column: str) -> str:
        made = rules.key_of("integer", "", column)
        assert made is not None
        return made.replace("%", "%%")

    lines = [f'    p, c1, c2 = "{p}", "{c1}", "{c2}"']
    for table, column in ((p, "id"), (p, "boss_id"), (c1, "parent_id"), (c2, "parent_id")):
        lines.append(f'    op.execute("ALTER TABLE {table} ADD COLUMN {column}_seqid UUID")')
    lines.append(f'    op.execute("UPDATE {p} SET id_seqid = {key("id")}, boss_id_seqid = {key("boss_id")}")')
    for table in (c1, c2):
        lines.append(f'    op.execute("UPDATE {table} SET parent_id_seqid = {key("parent_id")}")')
    for table, name in ((c1, f"{c1}_fk"), (c2, f"{c2}_fk"), (p, f"{p}_boss")):
        lines.append(f'    op.execute("ALTER TABLE {table} DROP FOREIGN KEY {name}, DROP INDEX {name}")')
    lines.append(f'    op.execute("ALTER TABLE {p} DROP PRIMARY KEY, ADD PRIMARY KEY (id_seqid), ADD UNIQUE (id)")')
    lines.append(  # in a statement of their own: MariaDB renames before it reads the other clauses' names
        f'    op.execute("ALTER TABLE {p} RENAME COLUMN id TO id_int, RENAME COLUMN id_seqid TO id, '
        'RENAME COLUMN boss_id TO boss_id_int, RENAME COLUMN boss_id_seqid TO boss_id")'
    )
    lines.append(f'    op.execute("ALTER TABLE {p} ALTER COLUMN id SET DEFAULT (uuid())")')
    lines.append(
        f'    op.execute("ALTER TABLE {c1} RENAME COLUMN parent_id TO parent_id_int, '
        f"RENAME COLUMN parent_id_seqid TO parent_id, ADD CONSTRAINT {c1}_fk FOREIGN KEY (parent_id) "
        f'REFERENCES {p} (id) ON DELETE SET NULL")'
    )
    lines.append(
        f'    op.execute("ALTER TABLE {c2} CHANGE parent_id parent_id_int bigint NULL, '
        "CHANGE parent_id_seqid parent_id UUID NOT NULL, "
        f'ADD CONSTRAINT {c2}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE CASCADE")'
    )
    lines.append(f'    op.execute("ALTER TABLE {p} ADD CONSTRAINT {p}_boss FOREIGN KEY (boss_id) REFERENCES {p} (id)")')
    return "\n".join(lines)


def make_tables(engine: sa.Engine, tag: str, parents: int) -> tuple[str, str, str]:
    p, c1, c2 = f"rkb_parent_{tag}", f"rkb_child1_{tag}", f"rkb_child2_{tag}"
    drop(engine, (p, c1, c2))
    if engine.dialect.name != "postgresql":
        return _make_mariadb_tables(engine, (p, c1, c2), parents)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY, name text, boss_id bigint REFERENCES {p})")
        conn.exec_driver_sql(
            f"CREATE TABLE {c1} (id bigserial PRIMARY KEY, parent_id bigint REFERENCES {p} (id) ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c2} (id bigserial PRIMARY KEY, "
            f"parent_id bigint NOT NULL REFERENCES {p} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {p} (name, boss_id) SELECT 'p' || g, NULLIF(g - 1, 0) FROM generate_series(1, {parents}) g"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c1} (parent_id) SELECT CASE WHEN g %% 10 = 0 THEN NULL "
            f"ELSE (g::bigint * 7919) %% {parents} + 1 END FROM generate_series(1, {2 * parents}) g"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c2} (parent_id) SELECT (g::bigint * 104729) %% {parents} + 1 "
            f"FROM generate_series(1, {3 * parents}) g"
        )
        conn.exec_driver_sql(f"ANALYZE {p}; ANALYZE {c1}; ANALYZE {c2}")
    return p, c1, c2


def _make_mariadb_tables(engine: sa.Engine, tables: tuple[str, str, str], parents: int) -> tuple[str, str, str]:
    """:func:`make_tables`' three tables on MariaDB, keyed by ``bigint AUTO_INCREMENT``."""
    p, c1, c2 = tables
    serial = "bigint AUTO_INCREMENT PRIMARY KEY"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {p} (id {serial}, name varchar(20), boss_id bigint, "
            f"CONSTRAINT {p}_boss FOREIGN KEY (boss_id) REFERENCES {p} (id))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c1} (id {serial}, parent_id bigint, "
            f"CONSTRAINT {c1}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {c2} (id {serial}, parent_id bigint NOT NULL, "
            f"CONSTRAINT {c2}_fk FOREIGN KEY (parent_id) REFERENCES {p} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")  # the rows hold by construction: a faster load
        conn.exec_driver_sql(
            f"INSERT INTO {p} (name, boss_id) SELECT CONCAT('p', seq), NULLIF(seq - 1, 0) FROM seq_1_to_{parents}"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c1} (parent_id) SELECT IF(seq %% 10 = 0, NULL, (seq * 7919) %% {parents} + 1) "
            f"FROM seq_1_to_{2 * parents}"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c2} (parent_id) SELECT (seq * 104729) %% {parents} + 1 FROM seq_1_to_{3 * parents}"
        )
        conn.exec_driver_sql(f"ANALYZE TABLE {p}, {c1}, {c2}")
    return p, c1, c2


def make_text_tables(engine: sa.Engine, tag: str, parents: int) -> tuple[str, str, str]:
    """The same three tables keyed by UUIDs kept as ``char(36)`` (MariaDB's ``UUID()``, PostgreSQL's
    ``gen_random_uuid()``), each child row's parent the same rule's as the integer tables'."""
    p, c1, c2 = f"rkb_parent_{tag}", f"rkb_child1_{tag}", f"rkb_child2_{tag}"
    drop(engine, (p, c1, c2))
    pg = engine.dialect.name == "postgresql"
    serial = "bigserial" if pg else "bigint AUTO_INCREMENT"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {p} (id char(36) PRIMARY KEY, name varchar(20), n bigint, boss_id char(36), "
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
        conn.exec_driver_sql(f"CREATE INDEX {p}_n ON {p} (n)")
        if pg:
            rows = "generate_series(1, {count}) g"
            conn.exec_driver_sql(
                f"INSERT INTO {p} (id, name, n) SELECT gen_random_uuid()::text, 'p' || g, g "
                f"FROM {rows.format(count=parents)}"
            )
            modulo = "(g::bigint * {m}) %% {parents} + 1"
            null_every_tenth = "CASE WHEN g %% 10 = 0 THEN NULL ELSE x.id END"
        else:
            rows = "seq_1_to_{count} g"
            conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")  # the rows hold by construction
            conn.exec_driver_sql(
                f"INSERT INTO {p} (id, name, n) SELECT UUID(), CONCAT('p', g.seq), g.seq "
                f"FROM {rows.format(count=parents)}"
            )
            modulo = "(g.seq * {m}) %% {parents} + 1"
            null_every_tenth = "IF(g.seq %% 10 = 0, NULL, x.id)"
        conn.exec_driver_sql(
            f"INSERT INTO {c1} (parent_id) SELECT {null_every_tenth} FROM {rows.format(count=2 * parents)} "
            f"JOIN {p} x ON x.n = {modulo.format(m=7919, parents=parents)}"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c2} (parent_id) SELECT x.id FROM {rows.format(count=3 * parents)} "
            f"JOIN {p} x ON x.n = {modulo.format(m=104729, parents=parents)}"
        )
        conn.exec_driver_sql(
            f"UPDATE {p} c JOIN {p} b ON b.n = c.n - 1 SET c.boss_id = b.id"
            if not pg
            else f"UPDATE {p} c SET boss_id = b.id FROM {p} b WHERE b.n = c.n - 1"
        )
        conn.exec_driver_sql(f"ANALYZE {p}; ANALYZE {c1}; ANALYZE {c2}" if pg else f"ANALYZE TABLE {p}, {c1}, {c2}")
    return p, c1, c2


#: The maintenance window's SQL for text keys: the foreign keys dropped, each column's type changed (a copy of
#: each table on MariaDB, a rewrite on PostgreSQL), the foreign keys made again and checked.
_PLAIN_TEXT = {
    "mariadb": """    p, c1, c2 = "{p}", "{c1}", "{c2}"
    for table, name in ((c1, f"{{c1}}_fk"), (c2, f"{{c2}}_fk"), (p, f"{{p}}_boss")):
        op.execute(f"ALTER TABLE {{table}} DROP FOREIGN KEY {{name}}")
    op.execute(f"ALTER TABLE {{p}} MODIFY id UUID NOT NULL, MODIFY boss_id UUID")
    op.execute(f"ALTER TABLE {{c1}} MODIFY parent_id UUID")
    op.execute(f"ALTER TABLE {{c2}} MODIFY parent_id UUID NOT NULL")
{add}""",
    "postgresql": """    p, c1, c2 = "{p}", "{c1}", "{c2}"
    for table, name in ((c1, f"{{c1}}_fk"), (c2, f"{{c2}}_fk"), (p, f"{{p}}_boss")):
        op.execute(f"ALTER TABLE {{table}} DROP CONSTRAINT {{name}}")
    for table, column in ((p, "id"), (p, "boss_id"), (c1, "parent_id"), (c2, "parent_id")):
        op.execute(f"ALTER TABLE {{table}} ALTER COLUMN {{column}} TYPE uuid USING {{column}}::uuid")
{add}""",
}
_ADD_FOREIGN_KEYS = """    for table, name, column, action in (
        (p, f"{{p}}_boss", "boss_id", ""),
        (c1, f"{{c1}}_fk", "parent_id", " ON DELETE SET NULL"),
        (c2, f"{{c2}}_fk", "parent_id", " ON DELETE CASCADE"),
    ):
        op.execute(
            f"ALTER TABLE {{table}} ADD CONSTRAINT {{name}} FOREIGN KEY ({{column}}) REFERENCES {{p}} (id){{action}}"
        )"""


def text_digest(engine: sa.Engine, tables: tuple[str, str, str], upto: dict[str, int]) -> dict[str, str]:
    """Each child's parent, by the parent's UUID as text, over the rows there before (children up to their
    largest id then, parents up to their largest ``n``): a count and two checksums a table, order-free."""
    p, c1, c2 = tables
    pg = engine.dialect.name == "postgresql"
    found = {}
    with engine.connect() as conn:
        for child, column in ((c1, "parent_id"), (c2, "parent_id"), (p, "boss_id")):
            own, upper = ("c.n", upto[p]) if child == p else ("c.id", upto[child])
            if pg:
                value = f"{own}::text || ':' || coalesce(lower(x.id::text), '-')"
                sums = f"count(*) || '/' || sum(hashtext({value})::bigint) || '/' || bit_xor(hashtext({value}))"
            else:
                value = f"CONCAT({own}, ':', COALESCE(LOWER(CAST(x.id AS CHAR)), '-'))"
                sums = f"CONCAT(COUNT(*), '/', SUM(CRC32({value})), '/', BIT_XOR(CRC32({value})))"
            found[child] = str(
                conn.exec_driver_sql(
                    f"SELECT {sums} FROM {child} c LEFT JOIN {p} x ON x.id = c.{column} WHERE {own} <= {upper}"
                ).scalar_one()
            )
    return found


def drop(engine: sa.Engine, tables: tuple[str, str, str]) -> None:
    p, c1, c2 = tables
    cascade = " CASCADE" if engine.dialect.name == "postgresql" else ""
    with engine.begin() as conn:
        for table in (c2, c1, p):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}{cascade}")
        for table, column in ((p, "id"), (p, "boss_id"), (c1, "parent_id"), (c2, "parent_id")):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS seqid_fill_{table}_{column}_seqid")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS v_{p}, v2_{p}")


def digest(engine: sa.Engine, tables: tuple[str, str, str], parent_int: str, upto: dict[str, int]) -> dict[str, str]:
    """Each child's parent, by the parent's integer, over the rows there before: one md5 a table."""
    p, c1, c2 = tables
    found = {}
    pg = engine.dialect.name == "postgresql"
    with engine.connect() as conn:
        for child, column in ((c1, "parent_id"), (c2, "parent_id"), (p, "boss_id")):
            own = parent_int if child == p else "id"
            if pg:
                sums = (
                    f"md5(string_agg(c.{own}::text || ':' || coalesce(x.{parent_int}::text, '-'), ',' "
                    f"ORDER BY c.{own}))"
                )
            else:  # a GROUP_CONCAT stops at group_concat_max_len: a count and two checksums, order-free
                value = f"CONCAT(c.{own}, ':', COALESCE(x.{parent_int}, '-'))"
                sums = f"CONCAT(COUNT(*), '/', SUM(CRC32({value})), '/', BIT_XOR(CRC32({value})))"
            found[child] = str(
                conn.exec_driver_sql(
                    f"SELECT {sums} FROM {child} c LEFT JOIN {p} x ON x.id = c.{column} WHERE c.{own} <= {upto[child]}"
                ).scalar_one()
            )
    return found


def project(tmp: Path, name: str, version: str, body: str) -> Path:
    """An Alembic project in ``tmp / name`` whose one migration runs ``body`` (the tests' throw-away project)."""
    return alembic_project(tmp / name, version, body)


def step(where: Path, url: str) -> dict:
    began = time.monotonic()
    run = migration(where, url)
    _out, err = run.communicate()
    took = time.monotonic() - began
    if run.returncode != 0:
        raise SystemExit(f"{where.name} failed: {err[-3000:]}")
    rss = next((int(line.split()[1]) for line in err.splitlines() if line.startswith("peak_rss_kb")), 0)
    return {"seconds": round(took, 1), "peak_rss_mb": round(rss / 1024, 1)}


#: The benchmark's tables as a Django app's models (unmanaged: the benchmark made them) and its three
#: migrations: the models, then RekeyExpand (release N) and RekeyContract (release N+1), as makemigrations
#: writes them
_DJANGO_INITIAL = """
from django.db import migrations, models
import django.db.models.deletion

class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel("Parent", [
            ("id", {key}),
            ("name", models.CharField(max_length=20, null=True)),
            ("boss", models.ForeignKey(null=True, on_delete=django.db.models.deletion.DO_NOTHING, to="{app}.parent")),
        ], options={{"db_table": "{p}", "managed": False}}),
        migrations.CreateModel("Child1", [
            ("id", models.BigAutoField(primary_key=True, serialize=False)),
            ("parent", models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, to="{app}.parent")),
        ], options={{"db_table": "{c1}", "managed": False}}),
        migrations.CreateModel("Child2", [
            ("id", models.BigAutoField(primary_key=True, serialize=False)),
            ("parent", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="{app}.parent")),
        ], options={{"db_table": "{c2}", "managed": False}}),
    ]
"""
_DJANGO_STEP = """
from django.db import migrations
from seqid_orm.django.operations import {op}

class Migration(migrations.Migration):
    atomic = False
    dependencies = [("{app}", "{before}")]
    operations = [{op}("parent")]
"""
_DJANGO_RUN = """
import resource, sys
from django.core.management import execute_from_command_line
try:
    execute_from_command_line(["manage.py", "migrate", *sys.argv[1:]])
finally:
    print("peak_rss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def django_project(tmp: Path, app: str, url: str, tables: tuple[str, str, str], text: bool) -> dict[str, str]:
    """A Django project in ``tmp / app`` over the benchmark's tables: the environment ``manage.py`` runs in."""
    p, c1, c2 = tables
    where = tmp / app
    migrations = where / app / "migrations"
    migrations.mkdir(parents=True, exist_ok=True)
    (where / app / "__init__.py").write_text("")
    (migrations / "__init__.py").write_text("")
    key = (
        "models.CharField(max_length=36, primary_key=True, serialize=False)"
        if text
        else "models.BigAutoField(primary_key=True, serialize=False)"
    )
    (migrations / "0001_initial.py").write_text(_DJANGO_INITIAL.format(app=app, p=p, c1=c1, c2=c2, key=key))
    for name, op, before in (
        ("0002_expand", "RekeyExpand", "0001_initial"),
        ("0003_contract", "RekeyContract", "0002_expand"),
    ):
        (migrations / f"{name}.py").write_text(_DJANGO_STEP.format(app=app, op=op, before=before))
    made = sa.make_url(url)
    engine = "postgresql" if made.get_backend_name() == "postgresql" else "mysql"
    database = {
        "ENGINE": f"django.db.backends.{engine}",
        "NAME": made.database,
        "USER": made.username,
        "PASSWORD": made.password or "",
        "HOST": made.host,
        "PORT": str(made.port),
    }
    (where / f"{app}_settings.py").write_text(
        f"SECRET_KEY = 'bench'\nUSE_TZ = True\nINSTALLED_APPS = ['seqid_orm.django', '{app}']\n"
        f"DATABASES = {{'default': {database!r}}}\n"
    )
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": f"{app}_settings",
    }


def django_step(env: dict[str, str], *args: str) -> dict:
    """``manage.py migrate *args`` in a process of its own: its time and peak memory."""
    import subprocess
    import sys

    began = time.monotonic()
    run = subprocess.run([sys.executable, "-c", _DJANGO_RUN, *args], env=env, capture_output=True, text=True)
    took = time.monotonic() - began
    if run.returncode != 0:
        raise SystemExit(f"migrate {' '.join(args)} failed: {run.stderr[-3000:]}")
    rss = next((int(line.split()[1]) for line in run.stderr.splitlines() if line.startswith("peak_rss_kb")), 0)
    return {"seconds": round(took, 1), "peak_rss_mb": round(rss / 1024, 1)}


def end_state(engine: sa.Engine, tables: tuple[str, str, str]) -> dict:
    p, c1, c2 = tables
    pg = engine.dialect.name == "postgresql"
    with engine.connect() as conn:
        if pg:
            invalid = conn.exec_driver_sql(
                f"SELECT count(*) FROM pg_constraint WHERE conrelid IN ('{p}'::regclass, '{c1}'::regclass, "
                f"'{c2}'::regclass) AND NOT convalidated"
            ).scalar_one()
            kind = conn.exec_driver_sql(
                f"SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = '{p}'::regclass "
                "AND attname = 'id'"
            ).scalar_one()
        else:  # InnoDB has no unchecked foreign key to count: the orphans say it
            invalid = 0
            kind = conn.exec_driver_sql(
                "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                f"AND TABLE_NAME = '{p}' AND COLUMN_NAME = 'id'"
            ).scalar_one()
        foreign_keys = conn.exec_driver_sql(
            "SELECT count(*) FROM information_schema.table_constraints WHERE constraint_type = 'FOREIGN KEY' "
            + ("AND table_schema = current_schema()" if pg else "AND table_schema = DATABASE()")
            + f" AND table_name IN ('{p}', '{c1}', '{c2}')"
        ).scalar_one()
        orphans = sum(
            conn.exec_driver_sql(
                f"SELECT count(*) FROM {c} c LEFT JOIN {p} x ON x.id = c.parent_id "
                "WHERE c.parent_id IS NOT NULL AND x.id IS NULL"
            ).scalar_one()
            for c in (c1, c2)
        )
    return {"invalid_constraints": invalid, "foreign_keys": foreign_keys, "orphans": orphans, "key_type": kind}


def run_form(
    engine: sa.Engine, url: str, form: str, parents: int, tmp: Path, round_: int, keys: str, via: str = "alembic"
) -> dict:
    tag = f"{os.getpid()}_{round_}"
    text = keys == "text"
    tables = (make_text_tables if text else make_tables)(engine, tag, parents)
    p, c1, c2 = tables
    with engine.connect() as conn:
        upto = {
            t: conn.exec_driver_sql(f"SELECT max({'n' if text and t == p else 'id'}) FROM {t}").scalar_one()
            for t in tables
        }
    before = text_digest(engine, tables, upto) if text else digest(engine, tables, "id", upto)
    seen: dict = {
        "form": form,
        "keys": keys,
        "server": engine.dialect.name,
        "via": via if form == "seqid" else "alembic",
    }
    try:
        if form == "plain":  # the application stopped: a maintenance window
            if text:
                body = _PLAIN_TEXT["postgresql" if engine.dialect.name == "postgresql" else "mariadb"]
                body = body.replace("{add}", _ADD_FOREIGN_KEYS).format(p=p, c1=c1, c2=c2)
            elif engine.dialect.name == "postgresql":
                body = _PLAIN.format(p=p, c1=c1, c2=c2).replace("uuidv7_sub()", _default(engine))
            else:
                body = _plain_mariadb(p, c1, c2)
            seen["window"] = step(project(tmp, f"plain_{tag}", f"v_{p}", body), url)
            seen["seconds"] = seen["window"]["seconds"]
        else:
            env = None
            if via == "django":  # the models' migrations applied (nothing to make: the tables are there)
                env = django_project(tmp, f"rk_{tag}", url, tables, text)
                django_step(env, f"rk_{tag}", "0001_initial")
            # as fast as their connection goes, as every figure on the benchmarks page was measured
            old = Writers(url, tables, tmp, "old", *(["--text-keys"] if text else []), pause_ms=0)
            try:
                if env is not None:
                    seen["expand"] = django_step(env, f"rk_{tag}", "0002_expand")
                else:
                    body = f'    op.rekey_expand("{p}")'
                    seen["expand"] = step(project(tmp, f"expand_{tag}", f"v_{p}", body), url)
            finally:
                seen["old_writers"] = _writers(old.stop())
            if env is not None:
                seen["contract"] = django_step(env, f"rk_{tag}", "0003_contract")
                with engine.begin() as conn:
                    conn.exec_driver_sql(f"DELETE FROM django_migrations WHERE app = 'rk_{tag}'")
            else:
                body = f'    op.rekey_contract("{p}")'
                seen["contract"] = step(project(tmp, f"contract_{tag}", f"v2_{p}", body), url)
            new = Writers(url, tables, tmp, "new", pause_ms=0)
            time.sleep(1)
            seen["new_writers"] = _writers(new.stop())
            seen["seconds"] = round(seen["expand"]["seconds"] + seen["contract"]["seconds"], 1)
        after = text_digest(engine, tables, upto) if text else digest(engine, tables, "id_int", upto)
        seen["same_parents"] = after == before
        seen.update(end_state(engine, tables))
    finally:
        drop(engine, tables)
    return seen


def _default(engine: sa.Engine) -> str:
    from seqid_orm.vendors import server_default

    return server_default("postgresql", engine.dialect.server_version_info, "native").sql


def _writers(seen: dict) -> dict:
    return {"writes": seen["writes"], "errors": len(seen["errors"]), "longest_s": round(seen["longest"], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parents", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keys", choices=("integer", "text"), default="integer")
    parser.add_argument("--server", choices=("postgresql", "mariadb"), default="postgresql")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--mariadb", default="mysql+pymysql://root@127.0.0.1:3306/test")
    parser.add_argument("--out", default="bench-out/rekey")
    parser.add_argument(
        "--via", choices=("alembic", "django"), default="alembic", help="whose migrations run seqid's two steps"
    )
    parser.add_argument(
        "--private-mariadb",
        type=int,
        metavar="MB",
        help="run on a private MariaDB with this many MB of buffer pool (the shared server's 128 MB holds no "
        "million parents and their children: every form would read from disk)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.private_mariadb:
        from tests.servers.private import PrivateMariaDB

        pool = f"{args.private_mariadb}M"
        with PrivateMariaDB("mysql+pymysql", innodb_buffer_pool_size=pool, innodb_log_file_size="1G") as server:
            return _rounds(args, server.url, out)
    return _rounds(args, args.pg if args.server == "postgresql" else args.mariadb, out)


def _rounds(args: argparse.Namespace, url: str, out: Path) -> int:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    with engine.connect() as conn:  # the server's version, for the plain form's default
        conn.exec_driver_sql("SELECT 1")
    results: list[dict] = []
    forms = ["plain", "seqid"]
    try:
        for round_ in range(args.rounds):
            for form in forms if round_ % 2 == 0 else list(reversed(forms)):  # rotated: neither always first
                seen = run_form(engine, url, form, args.parents, out, round_, args.keys, args.via)
                seen["round"] = round_ + 1
                results.append(seen)
                print(json.dumps(seen), flush=True)
    finally:
        engine.dispose()
    ratios = [
        round(s["seconds"] / p["seconds"], 2)
        for s, p in zip(
            [r for r in results if r["form"] == "seqid"], [r for r in results if r["form"] == "plain"], strict=True
        )
    ]
    print(f"seqid (expand + contract) / plain SQL in a window, round by round: {ratios}")
    (out / "rekey.json").write_text(json.dumps({"runs": results, "seqid_over_plain": ratios}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
