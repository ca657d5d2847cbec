"""Benchmark output: a Markdown table, CSV, JSON and (with matplotlib) a PNG chart."""

from __future__ import annotations

import csv
import io
import json
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


def chart(runs: Sequence[BenchRun], path: Path) -> bool:
    """Seconds per million rows against rows inserted, one panel per database.

    Returns False (and writes nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        for r in run.results:
            xs = [done / 1e6 for done, _ in r.chunks]
            ys = [sec / r.chunk_rows * 1e6 for _, sec in r.chunks]
            ax.plot(xs, ys, marker="o", markersize=3, label=r.kind)
        ax.set_title(f"{run.dialect} {run.server_version}")
        ax.set_xlabel("rows inserted (millions)")
        ax.set_ylabel("seconds per million rows")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
