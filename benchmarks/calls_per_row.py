"""Python calls per inserted row spent in seqid_orm, counted by cProfile (a count, not a timing).

What a key costs a row, per path, on SQLite in memory (no server, so nothing but the client is counted):

* SQLAlchemy Core, one-row ``INSERT`` statements and one ``executemany``: ``seq_uuid_pk()`` and
  ``prefixed_uuid_pk(counter)``; the ORM, one object added and flushed at a time;
* Django, ``Model(...)`` and ``save()`` with a ``SeqUUIDField`` key, with one database configured and
  with two (the path that may re-issue an id drawn for another database's layout).

Each Django case runs in a child process (Django is configured once per process)::

    python -m benchmarks.calls_per_row [--rows 2000] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import pstats
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

PACKAGE = str(Path(__file__).resolve().parents[1] / "seqid_orm")


def seqid_calls(work: Callable[[], None], rows: int) -> float:
    """Calls per row into functions defined under seqid_orm/ while ``work`` runs (``rows`` rows)."""
    profile = cProfile.Profile()
    profile.enable()
    work()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    calls = sum(nc for (filename, _, _), (_, nc, *_rest) in stats.items() if filename.startswith(PACKAGE))
    return calls / rows


def sqlalchemy_cases(rows: int) -> dict[str, float]:
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, Session

    from seqid_orm.sqlalchemy import prefixed_uuid_pk, seq_uuid_pk

    counter = itertools.count(1).__next__

    class Base(DeclarativeBase):
        pass

    class Seq(Base):
        __tablename__ = "seq"
        id = seq_uuid_pk()
        payload = sa.Column(sa.String(20))

    class Prefixed(Base):
        __tablename__ = "prefixed"
        id = prefixed_uuid_pk(counter)
        payload = sa.Column(sa.String(20))

    engine = sa.create_engine("sqlite://")
    Base.metadata.create_all(engine)
    found: dict[str, float] = {}
    with engine.begin() as conn:
        for name, model in (("seq_uuid_pk", Seq), ("prefixed_uuid_pk", Prefixed)):
            table = model.__table__
            statement = table.insert()
            conn.execute(statement, {"payload": "warm"})  # the first row decides and caches

            def one_row_statements(statement: sa.Insert = statement) -> None:
                for _ in range(rows):
                    conn.execute(statement, {"payload": "x"})

            def executemany(statement: sa.Insert = statement) -> None:
                conn.execute(statement, [{"payload": "x"}] * rows)

            found[f"SQLAlchemy {name}, one-row statements"] = seqid_calls(one_row_statements, rows)
            found[f"SQLAlchemy {name}, executemany"] = seqid_calls(executemany, rows)
    with Session(engine) as session:
        session.add(Seq(payload="warm"))
        session.flush()

        def single_row_flushes() -> None:
            for _ in range(rows):
                session.add(Seq(payload="x"))
                session.flush()

        found["SQLAlchemy seq_uuid_pk, ORM single-row flush"] = seqid_calls(single_row_flushes, rows)
    engine.dispose()
    return found


def django_child(databases: int, rows: int) -> float:
    """In a child process: Django with ``databases`` SQLite databases, ``rows`` objects built and saved."""
    import django
    from django.conf import settings

    folder = tempfile.mkdtemp(prefix="seqid-calls-")
    names = ["default", "other"][:databases]
    settings.configure(
        DATABASES={n: {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(folder, f"{n}.db")} for n in names},
        INSTALLED_APPS=[],
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()
    from django.db import connection, models

    from seqid_orm.django import SeqUUIDField

    class Row(models.Model):
        id = SeqUUIDField(primary_key=True)
        payload = models.CharField(max_length=20)

        class Meta:
            app_label = "seqid_calls"

    with connection.schema_editor() as editor:
        editor.create_model(Row)
    Row(payload="warm").save()

    def build_and_save() -> None:
        for _ in range(rows):
            Row(payload="x").save()

    return seqid_calls(build_and_save, rows)


def django_cases(rows: int) -> dict[str, float]:
    found: dict[str, float] = {}
    for databases in (1, 2):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.calls_per_row", "--django-child", str(databases), "--rows", str(rows)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(Path(PACKAGE).parent)},
        )
        label = "one database" if databases == 1 else "two databases"
        found[f"Django SeqUUIDField save(), {label}"] = float(done.stdout.strip())
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calls_per_row", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--django-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.django_child:
        print(django_child(args.django_child, args.rows))
        return 0
    found = {**sqlalchemy_cases(args.rows), **django_cases(args.rows)}
    if args.json:
        print(json.dumps(found, indent=1))
    else:
        print("| path | seqid_orm calls per row |\n| --- | ---: |")
        for name, calls in found.items():
            print(f"| {name} | {calls:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
