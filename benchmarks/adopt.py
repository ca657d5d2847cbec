"""Adopting seqid on a table that holds uuid4 keys: how the primary key grows after the swap.

For each database, four tables start alike or empty and take ``--rows`` more rows through SQLAlchemy Core
``executemany`` (1,000 rows a statement and a transaction, each key made by the column's default):

* ``uuid4``: ``--rows`` uuid4 rows, then ``--rows`` more (the table left as it was);
* ``adopt-v7``: ``--rows`` uuid4 rows, then ``--rows`` plain UUIDv7 keys (what seqid made on such a table
  before it read the column: the keys sort inside the old ones);
* ``adopt``: ``--rows`` uuid4 rows, then ``--rows`` keys of ``seq_uuid_pk()`` (on PostgreSQL adopted keys,
  which sort after the old ones; on MariaDB plain UUIDv7, which InnoDB fills well where they land);
* ``fresh``: ``--rows`` keys of ``seq_uuid_pk()`` in an empty table (a table keyed by seqid from the start).

The primary key's size is read after the first part and at ten points of the second (PostgreSQL's index,
InnoDB's clustered index after ``ANALYZE TABLE``), and the second part is timed.  Printed: the sizes, the
ratio of each table's key to its old part plus the fresh table's key (the target: at most 1.05 for
``adopt``), the second part's time against the fresh table's (at most 1.10), and with ``--out`` a chart of
the growth curves and the JSON of every reading.  Rounds rotate the order of the four tables::

    python -m benchmarks.adopt --rows 1000000 --repeat 2 --out bench-out/adopt

It uses the shared servers' ``test`` databases (tables named ``seqid_adopt_*``, dropped at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from seqid_orm.ids.comb import uuid7
from seqid_orm.sqlalchemy import SeqUUID, seq_uuid_default
from seqid_orm.sqlalchemy.columns import forget_columns

URLS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mariadb": "mysql+pymysql://root@127.0.0.1:3306/test",
}
KINDS = ["uuid4", "adopt-v7", "adopt", "fresh"]
BATCH = 1000
POINTS = 10


def _table(name: str, kind: str, phase: str) -> sa.Table:
    """The table as the rows of ``phase`` ("old" or "new") see it: sa.Uuid + uuid4, or seqid's key."""
    if phase == "old" or kind == "uuid4":
        key = sa.Column("id", sa.Uuid, primary_key=True, default=uuid.uuid4)
    elif kind == "adopt-v7":
        key = sa.Column("id", sa.Uuid, primary_key=True, default=uuid7)
    else:
        key = sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default)
    return sa.Table(name, sa.MetaData(), key, sa.Column("note", sa.String(100), nullable=False))


def _key_bytes(engine: sa.Engine, name: str) -> int:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            return int(conn.execute(sa.text(f"SELECT pg_relation_size('{name}_pkey')")).scalar_one())
        conn.execute(sa.text(f"ANALYZE TABLE {name}")).all()
        sql = "SELECT data_length FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = :t"
        return int(conn.execute(sa.text(sql), {"t": name}).scalar_one())


def _insert(engine: sa.Engine, table: sa.Table, rows: int) -> None:
    note = "x" * 100
    with engine.connect() as conn:
        for start in range(0, rows, BATCH):
            with conn.begin():
                conn.execute(sa.insert(table), [{"note": note}] * min(BATCH, rows - start))


def _old_part(engine: sa.Engine, name: str, rows: int) -> None:
    """``rows`` uuid4 rows (PostgreSQL makes them itself: the part before the swap is not what is timed)."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(
                sa.text(f"INSERT INTO {name} SELECT gen_random_uuid(), repeat('x', 100) FROM generate_series(1, :n)"),
                {"n": rows},
            )
    else:
        _insert(engine, _table(name, "uuid4", "old"), rows)


def one(engine: sa.Engine, kind: str, rows: int) -> dict[str, Any]:
    """One table of ``kind``: its key's size after the first part and along the second, and the second's time."""
    name = f"seqid_adopt_{kind.replace('-', '_')}"
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
    _table(name, kind, "old").metadata.create_all(engine)
    forget_columns(engine.dialect)  # the swap: a process starting on the table as it is now
    try:
        if kind != "fresh":
            _old_part(engine, name, rows)
        old = _key_bytes(engine, name)
        table = _table(name, kind, "new")
        curve, seconds = [], 0.0
        for point in range(POINTS):
            part = rows // POINTS if point < POINTS - 1 else rows - (POINTS - 1) * (rows // POINTS)
            began = time.perf_counter()
            _insert(engine, table, part)
            seconds += time.perf_counter() - began
            curve.append(_key_bytes(engine, name))
        return {"kind": kind, "old_bytes": old, "curve": curve, "seconds": seconds}
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))


def run(database: str, rows: int, repeat: int) -> list[dict[str, Any]]:
    engine = sa.create_engine(URLS[database])
    rounds: list[dict[str, Any]] = []
    try:
        for r in range(repeat):
            order = KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]  # rotated: no kind always first
            for kind in order:
                print(f"benchmarks.adopt: {database} round {r + 1}: {kind}", file=sys.stderr)
                rounds.append({"database": database, "round": r + 1, **one(engine, kind, rows)})
    finally:
        engine.dispose()
    return rounds


def summary(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per database and kind: the medians over rounds, the key against its old part plus the fresh table's,
    and the second part's time against the fresh table's."""
    out = []
    for database in dict.fromkeys(r["database"] for r in rounds):
        mine = [r for r in rounds if r["database"] == database]
        by_kind = {k: [r for r in mine if r["kind"] == k] for k in KINDS}
        fresh_bytes = statistics.median(r["curve"][-1] for r in by_kind["fresh"])
        fresh_seconds = statistics.median(r["seconds"] for r in by_kind["fresh"])
        for kind, these in by_kind.items():
            old = statistics.median(r["old_bytes"] for r in these)
            final = statistics.median(r["curve"][-1] for r in these)
            seconds = [r["seconds"] / fresh_seconds for r in these]
            out.append(
                {
                    "database": database,
                    "key": kind,
                    "old_MB": round(old / 2**20, 2),
                    "final_MB": round(final / 2**20, 2),
                    "vs_old_plus_fresh": round(final / (old + fresh_bytes), 3) if kind != "fresh" else 1.0,
                    "second_part_s": round(statistics.median(r["seconds"] for r in these), 1),
                    "time_vs_fresh": round(statistics.median(seconds), 3),
                    "time_vs_fresh_range": f"{min(seconds):.2f}-{max(seconds):.2f}",
                }
            )
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def chart(rounds: list[dict[str, Any]], rows: int, path: Path) -> bool:
    """The growth curves, one panel per database: the key's size as the second part goes in."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    databases = list(dict.fromkeys(r["database"] for r in rounds))
    fig, axes = plt.subplots(1, len(databases), figsize=(6 * len(databases), 4.2), squeeze=False)
    labels = {
        "uuid4": "stay on uuid4",
        "adopt-v7": "adopt, UUIDv7 in place (before)",
        "adopt": "adopt with seqid",
        "fresh": "seqid from the start (+ old part)",
    }
    for ax, database in zip(axes[0], databases, strict=True):
        for kind in KINDS:
            these = [r for r in rounds if r["database"] == database and r["kind"] == kind]
            old = statistics.median(r["old_bytes"] for r in these)
            curve = [statistics.median(r["curve"][i] for r in these) for i in range(POINTS)]
            if kind == "fresh":  # drawn on top of the old part it would have beside it
                base = statistics.median(
                    r["old_bytes"] for r in rounds if r["database"] == database and r["kind"] == "adopt"
                )
                curve, old = [c + base for c in curve], old + base
            xs = [0] + [rows * (i + 1) / POINTS / 1e6 for i in range(POINTS)]
            ax.plot(xs, [b / 2**20 for b in [old, *curve]], marker="o", markersize=3, label=labels[kind])
        ax.set_title(f"{database}: primary key after {rows / 1e6:g} M uuid4 rows")
        ax.set_xlabel("rows after the swap (millions)")
        ax.set_ylabel("primary key (MB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adopt", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows before the swap, and after it")
    parser.add_argument("--repeat", type=int, default=1, help="rounds, the order of the tables rotated")
    parser.add_argument("--databases", default="postgresql,mariadb")
    parser.add_argument("--out", help="directory for adopt.md, adopt.json and adopt.png")
    args = parser.parse_args(argv)
    rounds = [r for database in args.databases.split(",") for r in run(database, args.rows, args.repeat)]
    table = markdown(summary(rounds))
    print(table)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores", file=sys.stderr)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "adopt.md").write_text(table + "\n")
        (out / "adopt.json").write_text(json.dumps(rounds, indent=1))
        if not chart(rounds, args.rows, out / "adopt.png"):
            print("benchmarks.adopt: matplotlib is not installed; no chart", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
