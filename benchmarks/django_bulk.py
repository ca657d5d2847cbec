"""Django's path: build objects and ``bulk_create`` them, seqid's field against what users would write.

``python -m benchmarks.django_bulk --url postgresql://postgres@127.0.0.1/test [--rows 100000]
[--rounds 5]`` (or ``mysql://…``, ``sqlite:///bench.db``) configures Django itself (no project
needed) for the database the URL names, creates one table per key kind, and per round times, for
every kind in rotated order, building ``rows`` objects and inserting them with ``bulk_create`` in
batches.  Kinds:

* ``BigAutoField``: the database assigns the key (the floor);
* ``UUIDField(default=uuid.uuid4)``: the one-line alternative;
* ``SeqUUIDField``: seqid, layout chosen for the database;
* ``SeqUUIDField+bulk_insert``: the same objects through ``seqid_orm.django.bulk_insert`` (``COPY``
  on PostgreSQL with psycopg 3, ``bulk_create`` elsewhere).

It also times building one object of each kind, the cost a view pays per ``Model(...)``.
Ratios are medians of the per-round ratios to ``UUIDField(uuid4)`` (machines are shared).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from seqid_orm.cli.bench.rounds import median_ratio, ratios, rotated

KINDS = ("BigAutoField", "UUIDField(uuid4)", "SeqUUIDField", "SeqUUIDField+bulk_insert")


def configure(url: str) -> str:
    """Set Django up for the database at ``url`` (postgresql:// or mysql://); returns its vendor."""
    import django
    from django.conf import settings

    parts = urlsplit(url)
    engines = {
        "postgresql": "django.db.backends.postgresql",
        "mysql": "django.db.backends.mysql",
        "sqlite": "django.db.backends.sqlite3",
    }
    scheme = parts.scheme.split("+")[0]
    if scheme not in engines:
        raise SystemExit(f"--url must start with postgresql://, mysql:// or sqlite:///, got {url!r}")
    engine = engines[scheme]
    if scheme == "sqlite":  # sqlite:///relative.db or sqlite:////absolute.db, as SQLAlchemy writes them
        database: dict[str, str] = {"ENGINE": engine, "NAME": parts.path[1:]}
    else:
        database = {
            "ENGINE": engine,
            "NAME": parts.path.lstrip("/"),
            "USER": parts.username or "",
            "PASSWORD": parts.password or "",
            "HOST": parts.hostname or "127.0.0.1",
            "PORT": str(parts.port or ""),
        }
    settings.configure(
        DATABASES={"default": database},
        INSTALLED_APPS=[],
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()
    from django.db import connection

    return str(connection.vendor)


def models(prefix: str = "seqid_bench_dj_") -> dict[str, Any]:
    from django.db import models as m

    from seqid_orm.django import SeqUUIDField

    def make(name: str, key: Any) -> Any:
        attrs = {
            "__module__": __name__,
            "id": key,
            "payload": m.CharField(max_length=100),
            "Meta": type("Meta", (), {"app_label": "seqid_bench", "db_table": f"{prefix}{name.lower()}"}),
        }
        return type(name, (m.Model,), attrs)

    return {
        "BigAutoField": make("BigAuto", m.BigAutoField(primary_key=True)),
        "UUIDField(uuid4)": make("Uuid4", m.UUIDField(primary_key=True, default=uuid.uuid4)),
        "SeqUUIDField": make("SeqUuid", SeqUUIDField(primary_key=True)),
        "SeqUUIDField+bulk_insert": make("SeqUuidCopy", SeqUUIDField(primary_key=True)),
    }


def run(
    url: str, rows: int = 100_000, rounds: int = 5, batch: int = 5_000, prefix: str = "seqid_bench_dj_"
) -> dict[str, Any]:
    vendor = configure(url)
    from django.db import connection

    from seqid_orm.django import bulk_insert

    classes = models(prefix)
    with connection.schema_editor() as editor:
        for cls in classes.values():
            editor.execute(f"DROP TABLE IF EXISTS {cls._meta.db_table}")
            editor.create_model(cls)
    payload = "x" * 100
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    build: dict[str, list[float]] = {k: [] for k in KINDS}
    stored: dict[str, int] = {}
    ordered = True
    try:
        for r in range(rounds):
            for kind in rotated(KINDS, r):
                cls = classes[kind]
                cls.objects.all().delete()
                start = time.perf_counter()
                objects = [cls(payload=payload) for _ in range(rows)]
                built = time.perf_counter()
                if kind.endswith("+bulk_insert"):
                    for first in range(0, rows, batch):
                        bulk_insert(objects[first : first + batch])
                else:
                    cls.objects.bulk_create(objects, batch_size=batch)
                times[kind].append(time.perf_counter() - start)
                build[kind].append((built - start) / rows)
                stored[kind] = cls.objects.count()  # untimed checks: every row is there,
                if kind.startswith("SeqUUIDField"):  # and the database orders the keys as they were made
                    in_order = list(cls.objects.order_by("pk").values_list("pk", flat=True))
                    ordered = ordered and in_order == [o.pk for o in objects]
    finally:
        with connection.schema_editor() as editor:
            for cls in classes.values():
                editor.delete_model(cls)
    base = "UUIDField(uuid4)"
    out: dict[str, Any] = {"vendor": vendor, "rows": rows, "rounds": rounds, "kinds": {}}
    out["seq_uuid_keys_in_database_order"] = ordered
    for kind in KINDS:
        per_round = ratios(times[kind], times[base])
        out["kinds"][kind] = {
            "seconds_median": round(statistics.median(times[kind]), 3),
            "vs_uuid4_median": median_ratio(times[kind], times[base]),
            "vs_uuid4_range": [round(min(per_round), 3), round(max(per_round), 3)],
            "build_us_per_object": round(statistics.median(build[kind]) * 1e6, 2),
            "rows_stored": stored[kind],
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Django on {result['vendor']}: {result['rows']:,} objects built and bulk_create'd, "
        f"{result['rounds']} rotated rounds",
        "",
        "| key | seconds (median) | time vs UUIDField(uuid4), median | range | µs to build one object |",
        "|---|---|---|---|---|",
    ]
    for kind, r in result["kinds"].items():
        low, high = r["vs_uuid4_range"]
        lines.append(
            f"| {kind} | {r['seconds_median']} | {r['vs_uuid4_median']} | {low} to {high} "
            f"| {r['build_us_per_object']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="postgresql://user@host/db or mysql://user@host/db")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=5_000, help="bulk_create batch_size")
    parser.add_argument("--table-prefix", default="seqid_bench_dj_")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.url, args.rows, args.rounds, args.batch, args.table_prefix)
    print(json.dumps(result) if args.json else markdown(result))


if __name__ == "__main__":
    main()
