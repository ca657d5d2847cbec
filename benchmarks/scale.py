"""The articles' headline at the scale where it matters: keys loaded while the index outgrows memory.

Starts a private PostgreSQL (16 MB ``shared_buffers``, a checkpoint every 30 s, as in the sequential-uuids
article) and a private MariaDB (32 MB buffer pool), loads ``--rows`` rows per key kind through seqid's bulk
path (``bulk_insert``: PostgreSQL's binary COPY) and through Core ``executemany``, in rotated rounds, and
reports seconds per million rows as the index grows, the time against BIGINT identity, WAL bytes and
full-page images (PostgreSQL), page splits (InnoDB) and index blocks read, with a chart per database::

    python -m benchmarks.scale --rows 3000000 --repeat 2 --out bench-out/scale

The shared servers only lend their version (the private PostgreSQL runs the same major) and are not
touched.  Kinds: BIGINT identity, random UUIDv4, ``sa.Uuid`` + uuid-utils' UUIDv7, seqid made in Python,
seqid made by the database (``DatabaseSeqUUID``), a ticket sequence.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from seqid_orm.cli.bench import report, runner
from tests.servers.private import small_mariadb, small_postgres

SERVERS = {
    "postgresql": ("postgresql+psycopg://postgres@127.0.0.1:5432/test", small_postgres),
    "mariadb": ("mysql+pymysql://root@127.0.0.1:3306/test", small_mariadb),
}
KINDS = ["bigint", "uuid4", "sa-uuid7", "comb", "comb-db", "ticket"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows per key kind (default 3,000,000)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per database and path, kinds rotated")
    parser.add_argument("--databases", default="postgresql,mariadb")
    parser.add_argument("--vias", default="bulk,core", help="bulk (seqid's bulk_insert) and/or core (executemany)")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--batch", type=int, default=10_000, help="rows per statement or COPY")
    parser.add_argument("--out", help="directory for scale.md, scale.json and scale.png")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    runs: list[tuple[str, runner.BenchRun]] = []
    for database in args.databases.split(","):
        shared, private = SERVERS[database]
        with private(shared) as url:
            for via in args.vias.split(","):
                print(f"benchmarks.scale: {database} via {via}, {args.rows:,} rows per key", file=sys.stderr)
                run = runner.run(url, args.rows, kinds, batch=args.batch, via=via, repeat=args.repeat, chunks=30)
                run.notes.append(f"private {database} with small buffers, via {via}")
                runs.append((f"{database} via {via}", run))
    text = "\n\n".join(f"### {label}\n\n{report.markdown([run])}" for label, run in runs)
    print(report.table([run for _, run in runs]))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.md").write_text(text + "\n")
        data: list[dict[str, Any]] = [{"label": label, **json.loads(report.to_json([run]))[0]} for label, run in runs]
        (out / "scale.json").write_text(json.dumps(data, indent=1))
        if not report.chart([run for _, run in runs], out / "scale.png", [label for label, _ in runs]):
            print("benchmarks.scale: matplotlib is not installed; no chart", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
