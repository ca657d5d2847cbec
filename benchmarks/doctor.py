"""How long ``seqid doctor`` takes on large tables: it samples, so the time should not grow with the rows.

Fills a private PostgreSQL schema with ``--rows`` rows in each of three tables (random UUIDv4 keys from
``gen_random_uuid()``, UUIDv7 keys from seqid's own database expression, a BIGINT identity), then times
``seqid doctor`` on it ``--repeat`` times and prints the median, the report, and the tables' sizes::

    python -m benchmarks.doctor [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--rows 10000000]

The schema is dropped at the end.  Uses ``psql`` to fill (``INSERT ... SELECT generate_series``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from seqid_orm.vendors.postgresql import V7_HEX


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doctor", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    libpq = args.url.replace("+psycopg", "")
    schema = f"seqid_doctor_bench_{os.getpid()}"

    def psql(sql: str) -> str:
        done = subprocess.run(["psql", libpq, "-qAtX", "-c", sql], check=True, capture_output=True, text=True)
        return done.stdout.strip()

    tables = {
        "random_v4": "id uuid PRIMARY KEY DEFAULT gen_random_uuid()",
        "seqid_v7": f"id uuid PRIMARY KEY DEFAULT ({V7_HEX})::uuid",
        "identity": "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    }
    psql(f"CREATE SCHEMA {schema}")
    try:
        for name, column in tables.items():
            start = time.perf_counter()
            psql(f"CREATE TABLE {schema}.{name} ({column}, n bigint)")
            psql(f"INSERT INTO {schema}.{name} (n) SELECT g FROM generate_series(1, {args.rows}) g")
            psql(f"VACUUM ANALYZE {schema}.{name}")
            print(f"filled {name}: {args.rows:,} rows in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        url = f"{args.url}?options=-csearch_path%3D{schema}"
        times = []
        report = ""
        for _ in range(args.repeat):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "seqid_orm", "doctor", url, "--schema", schema],  # its tables alone
                check=True,
                capture_output=True,
                text=True,
            )
            times.append(time.perf_counter() - start)
            report = done.stdout
        print(report)
        print(
            f"seqid doctor on 3 tables of {args.rows:,} rows: median {statistics.median(times):.2f} s "
            f"(min {min(times):.2f}, max {max(times):.2f}, {args.repeat} runs, the interpreter's start included)"
        )
    finally:
        psql(f"DROP SCHEMA {schema} CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
