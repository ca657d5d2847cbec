"""Benchmark output: a Markdown table, CSV, JSON and (with matplotlib) a PNG chart."""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .runner import BenchRun, result_rows

COLUMNS = [
    "database",
    "key",
    "rows",
    "s_per_M_first",
    "s_per_M_last",
    "rows_per_s",
    "time_vs_bigint",
    "time_vs_bigint_range",
    "client_cpu_us_per_row",
    "server_cpu_us_per_row",
    "table_MB",
    "index_MB",
    "bytes_per_row",
    "size_vs_ideal",
    "wal_B_per_row",
    "fpi_per_1k_rows",
    "page_splits_per_1k_rows",
    "index_reads_per_1k_rows",
    "hit_ratio",
]


def records(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    return [rec for run in runs for rec in result_rows(run)]


def _columns(recs: list[dict[str, Any]]) -> list[str]:
    return [c for c in COLUMNS if any(c in r for r in recs)]


def markdown(runs: Sequence[BenchRun]) -> str:
    recs = records(runs)
    cols = _columns(recs)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in recs:
        lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


# The terminal table: (record key, heading with its one unit, decimals). A column that is empty or
# zero for every key of a database is left out (SQLite has no separate key index: the key IS the table);
# the legend under the table says what each column and each key kind means.
_HUMAN = [
    ("key", "key", None),
    ("s_per_M_first", "s/M rows, start", 1),
    ("s_per_M_last", "s/M rows, end", 1),
    ("rows_per_s", "rows/s", 0),
    ("time_vs_bigint", "time x BIGINT", 2),
    ("time_vs_bigint_range", "rounds x BIGINT", None),
    ("client_cpu_us_per_row", "client us/row", 1),
    ("server_cpu_us_per_row", "server us/row", 1),
    ("table_MB", "table MB", 1),
    ("index_MB", "index MB", 1),
    ("bytes_per_row", "bytes/row", 1),
    ("size_vs_ideal", "size x ideal", 2),
    ("wal_B_per_row", "WAL bytes/row", 1),
    ("fpi_per_1k_rows", "full pages/1k rows", 2),
    ("page_splits_per_1k_rows", "splits/1k rows", 2),
    ("index_reads_per_1k_rows", "index reads/1k rows", 2),
    ("hit_ratio", "cache hit ratio", 3),
]
_LEGEND = {
    "s_per_M_first": "s/M rows: seconds per million rows at the start and at the end of the run (the last tenth)",
    "time_vs_bigint": "time x BIGINT: run time over BIGINT's (median of the rounds; rounds: lowest-highest)",
    "client_cpu_us_per_row": "client/server us/row: CPU microseconds per row in this process (key, SQLAlchemy, "
    "driver) and in the server",
    "table_MB": "table, index MB: the rows (clustered by the key on InnoDB and SQLite) and separate index B-trees",
    "size_vs_ideal": "size x ideal: total size over BIGINT's plus the extra key bytes per row",
    "wal_B_per_row": "WAL bytes/row, full pages/1k rows: PostgreSQL write-ahead log and its full-page images "
    "(WAL on InnoDB: its redo log)",
    "page_splits_per_1k_rows": "splits/1k rows, cache hit ratio: InnoDB index page splits and buffer-pool hits",
    "index_reads_per_1k_rows": "index reads/1k rows: PostgreSQL index blocks read from outside its buffers",
}


def _shown(column: str, recs: list[dict[str, Any]]) -> bool:
    return any(r.get(column) not in (None, "", 0, 0.0) for r in recs) or column == "key"


def table(runs: Sequence[BenchRun]) -> str:
    """An aligned table for the terminal, one block per database, with a legend for columns and keys."""
    from .keys import KINDS

    blocks = []
    shown: set[str] = set()
    kinds: list[str] = []
    for run in runs:
        recs = result_rows(run)
        cols = [c for c in _HUMAN if _shown(c[0], recs)]
        shown.update(key for key, _, _ in cols)
        kinds += [str(r["key"]) for r in recs if r["key"] not in kinds]
        rounds = f", {len(run.rounds)} rounds" if len(run.rounds) > 1 else ""
        database = recs[0]["database"] if recs else run.dialect
        head = f"{database} ({run.driver}): {run.rows:,} rows per key via {run.via}{rounds}"
        cells = [[h for _, h, _ in cols]]
        for r in recs:
            cells.append([_human(r.get(key, ""), dec) for key, _, dec in cols])
        widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
        lines = [head]
        for n, row in enumerate(cells):
            lines.append(
                "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
                )
            )
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        blocks.append("\n".join(lines))
    legend = [text for key, text in _LEGEND.items() if key in shown]
    legend += [f"{k}: {KINDS[k].description}" for k in kinds if k in KINDS]
    wrapped = [textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="    ") for text in legend]
    return "\n\n".join(blocks) + "\n\n" + "\n".join(wrapped)


def _human(value: Any, decimals: int | None) -> str:
    if value == "" or value is None:
        return "-"
    if decimals is None or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,.{decimals}f}"


def _fmt(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def to_csv(runs: Sequence[BenchRun]) -> str:
    recs = records(runs)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_columns(recs), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(recs)
    return buf.getvalue()


def to_json(runs: Sequence[BenchRun]) -> str:
    return json.dumps(
        [
            {
                "url": run.url,
                "dialect": run.dialect,
                "server_version": run.server_version,
                "rows": run.rows,
                "batch": run.batch,
                "via": run.via,
                "rounds": len(run.rounds),
                "orders": run.orders,
                "notes": run.notes,
                "results": result_rows(run),
                "round_seconds": {kind: [rnd[kind].seconds for rnd in run.rounds] for kind in run.kinds},
                "timelines": {r.kind: r.chunks for r in run.results},
            }
            for run in runs
        ],
        indent=2,
    )


def chart(runs: Sequence[BenchRun], path: Path, titles: Sequence[str] | None = None) -> bool:
    """Seconds per million rows against rows inserted, one panel per run (``titles``: the panels' titles,
    by default each run's database and version).

    Returns False (and writes nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    names = titles if titles is not None else [f"{run.dialect} {run.server_version}" for run in runs]
    for ax, run, name in zip(axes[0], runs, names, strict=True):
        for r in run.results:
            xs = [done / 1e6 for done, _ in r.chunks]
            ys = [sec / r.chunk_rows * 1e6 for _, sec in r.chunks]
            ax.plot(xs, ys, marker="o", markersize=3, label=r.kind)
        ax.set_title(name)
        ax.set_xlabel("rows inserted (millions)")
        ax.set_ylabel("seconds per million rows")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
