"""``seqid bench``: the insert benchmark against a database you name (SQLite in a temporary file by default).

The same rows (a key and a 100-character payload) go into one table per key kind through SQLAlchemy,
and the report says seconds per million rows as the index grows, table and index sizes, and where
the time went (this process, and the server when it runs here).  What needs more than the wheel
(private servers with small buffers, the generation and instruction-count benchmarks) lives in the
repository's ``benchmarks/`` directory.  Needs the ``sqlalchemy`` extra and the database's driver;
the chart needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..common import missing_driver, positive

if TYPE_CHECKING:
    from .runner import BenchRun

__all__ = ["add_arguments", "add_parser", "command", "explain"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``seqid bench`` (shared with ``python -m benchmarks.insert``)."""
    parser.add_argument("--url", action="append", help="SQLAlchemy URL; repeat for several databases")
    parser.add_argument(
        "--rows", type=positive("rows"), help="rows per key kind (default 100,000 on SQLite, 2,000,000 elsewhere)"
    )
    parser.add_argument("--keys", help="comma-separated key kinds (default: all)")
    parser.add_argument(
        "--batch", type=positive("rows per batch"), default=5000, help="rows per INSERT batch and transaction"
    )
    parser.add_argument(
        "--via",
        choices=("core", "orm", "session", "bulk"),
        default="core",
        help="Core executemany, ORM bulk INSERT, the ORM unit of work (add_all + commit), or seqid's "
        "bulk_insert (keys in one batch, PostgreSQL's binary COPY)",
    )
    parser.add_argument(
        "--repeat",
        type=positive("rounds"),
        help=(
            "rounds per database, each running every key kind in a rotated order; ratios are per-round "
            "medians (default: 3 on SQLite, whose single runs vary most on a shared machine; 1 elsewhere)"
        ),
    )
    parser.add_argument("--out", help="directory for results.md, results.csv, results.json and chart.png")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_parser(sub: Any) -> None:
    """``bench`` on the ``seqid`` parser's subcommands."""
    p = sub.add_parser("bench", help="insert benchmark: BIGINT vs random UUID vs seqid keys (SQLite by default)")
    add_arguments(p)
    p.set_defaults(func=command)


def command(
    args: argparse.Namespace,
    prepare_url: Callable[[str], contextlib.AbstractContextManager[str]] | None = None,
    note: str | None = None,
) -> int:
    """``seqid bench``: every URL in turn, then the table (or JSON, or files under ``--out``).

    ``prepare_url`` turns a URL into the one to run against (the harness in ``benchmarks/``
    starts a private server with small buffers there), and ``note`` is said of every run."""
    import os
    import tempfile
    from pathlib import Path

    import sqlalchemy as sa

    from . import report, runner
    from .keys import KINDS

    kinds = args.keys.split(",") if args.keys else [k for k, kind in KINDS.items() if kind.available()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        print(f"seqid: error: unknown --keys {','.join(unknown)}; choose from {','.join(KINDS)}", file=sys.stderr)
        return 2
    missing = [f"{k} needs {KINDS[k].requires}" for k in kinds if not KINDS[k].available()]
    if missing:
        print(f"seqid: error: {'; '.join(missing)} (pip install 'seqid-orm[bench]')", file=sys.stderr)
        return 2
    runs = []
    with tempfile.TemporaryDirectory(prefix="seqid-bench-") as tmp:
        urls = args.url or [f"sqlite:///{os.path.join(tmp, 'bench.sqlite3')}"]
        for url in urls:
            rows = args.rows or (100_000 if url.startswith("sqlite") else 2_000_000)
            try:
                with contextlib.ExitStack() as stack:
                    if prepare_url is not None:
                        url = stack.enter_context(prepare_url(url))
                    print(
                        f"seqid bench: {rows:,} rows per key on {sa.make_url(url).render_as_string()}", file=sys.stderr
                    )
                    run = runner.run(
                        url,
                        rows,
                        kinds,
                        batch=args.batch,
                        via=args.via,
                        progress=None if args.quiet else runner._progress,
                        repeat=args.repeat or (3 if url.startswith("sqlite") else 1),
                    )
                    if note is not None:
                        run.notes.append(note)
                    runs.append(run)
            except ModuleNotFoundError as exc:
                print(f"seqid: error: {missing_driver(url, exc)}", file=sys.stderr)
                return 2
            except sa.exc.OperationalError as exc:
                print(f"seqid: error: cannot reach {url!r}: {exc.orig}", file=sys.stderr)
                return 2
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text(report.markdown(runs) + "\n")
        (out / "results.csv").write_text(report.to_csv(runs))
        (out / "results.json").write_text(report.to_json(runs))
        if not report.chart(runs, out / "chart.png"):
            print(
                "seqid bench: matplotlib is not installed; no chart (pip install 'seqid-orm[bench]')", file=sys.stderr
            )
    if args.json:
        print(report.to_json(runs))
    else:
        print(report.table(runs))
        for run in runs:
            for note in run.notes:
                print(f"note ({run.dialect}): {note}")
        explain(runs)
    return 0


def explain(runs: list[BenchRun]) -> None:
    """One plain sentence per database: the point of the project, in this run's numbers."""
    from .runner import result_rows

    for run in runs:
        by = {r.kind: r for r in run.results}
        if not {"uuid4", "comb", "bigint"} <= by.keys():
            continue
        ratio = {str(rec["key"]): float(rec["time_vs_bigint"]) for rec in result_rows(run)}  # the table's figures
        v4 = by["uuid4"]
        rounds = f" (median of {len(run.rounds)} rounds)" if len(run.rounds) > 1 else ""
        print(
            f"{run.dialect} ({run.driver}): random UUIDv4 took {ratio['uuid4']:.2f}x the BIGINT time{rounds} "
            f"({v4.per_million(0):.1f} -> {v4.per_million(-1):.1f} s per million as the index grew); "
            f"seqid comb took {ratio['comb']:.2f}x"
            + (f", and made by the database (comb-db) {ratio['comb-db']:.2f}x." if "comb-db" in ratio else ".")
        )
