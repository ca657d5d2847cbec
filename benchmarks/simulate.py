"""A model of a range-splitting store, to compare keys for distributed SQL (``python -m benchmarks.simulate``).

No CockroachDB, TiDB or YugabyteDB runs on the machines this project is tested on, so their write
pattern is modelled: the key space is cut into ranges; every insert goes to the range that holds its
key; a range that reaches ``split_at`` rows splits at its median into two (as CockroachDB splits at
a size, and TiDB's regions do).  Keys arrive at ``rate`` per second of simulated time, made by
seqid's own generators on a simulated clock, and per one-second window the model counts:

* **hottest range's share** of the writes (1.0: one range, one node, takes everything), measured
  over stretches of ``split_at / 10`` writes, shorter than a range takes to split (else a hot tail
  that splits four times a second would look like four ranges of 25 %);
* **ranges written** per second (how many nodes share the load);
* **sequential writes**: the share of inserts whose neighbour below in their range is one of the last
  16 keys inserted there, i.e. that land at an insertion point in use (an append, or the growing end of
  a shard), the index locality a B-tree keeps only when keys arrive in order.

Figures are averaged over the second half of the run, when the table already spans many ranges.
"""

from __future__ import annotations

import bisect
import secrets
import statistics
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seqid_orm.ids.comb import CombGenerator
from seqid_orm.ids.layout import Layout


@dataclass
class Outcome:
    """One key scheme in the model."""

    scheme: str
    hottest_share: float
    ranges_written_per_s: float
    sequential: float
    ranges_at_end: int
    timeline: list[float] = field(default_factory=list)  # hottest share per window


def _schemes(shards: tuple[int, ...]) -> dict[str, Callable[[Callable[[], int]], Callable[[], int]]]:
    def v4(_clock: Callable[[], int]) -> Callable[[], int]:
        return lambda: (secrets.randbits(128) & ~(0xF << 76)) | (0x4 << 76)

    def v7(clock: Callable[[], int]) -> Callable[[], int]:
        gen = CombGenerator(Layout.TIME_FIRST, clock=clock)
        return lambda: gen().int

    def sharded(k: int) -> Callable[[Callable[[], int]], Callable[[], int]]:
        def make(clock: Callable[[], int]) -> Callable[[], int]:
            gen = CombGenerator(Layout.SHARDED, clock=clock, shards=k)
            return lambda: gen().int

        return make

    out = {"UUIDv4 (random)": v4, "UUIDv7 (time first)": v7}
    for k in shards:
        out[f"seqid sharded, k={k}"] = sharded(k)
    return out


def run_scheme(
    name: str,
    make: Callable[[Callable[[], int]], Callable[[], int]],
    *,
    rows: int,
    rate: int,
    split_at: int,
) -> Outcome:
    now_ns = [1_800_000_000_000_000_000]
    step = 1_000_000_000 // rate
    next_key = make(lambda: now_ns[0])
    starts: list[int] = [0]  # the first key of each range, sorted
    ranges: list[list[int]] = [[]]  # each range's keys, sorted
    recent: list[deque[int]] = [deque(maxlen=16)]  # each range's last inserted keys
    tags: list[int] = [0]  # a name per range that survives the splits of others
    new_tag = 1
    stretch = max(1, split_at // 10)
    seconds: list[tuple[int, float]] = []  # per second: ranges written, sequential share
    stretches: list[float] = []  # per stretch: hottest range's share
    per_second: set[int] = set()
    per_stretch: Counter[int] = Counter()
    sequential = 0
    for i in range(1, rows + 1):
        now_ns[0] += step
        key = next_key()
        idx = bisect.bisect_right(starts, key) - 1
        keys = ranges[idx]
        pos = bisect.bisect_left(keys, key)
        if pos and keys[pos - 1] in recent[idx]:
            sequential += 1
        keys.insert(pos, key)
        recent[idx].append(key)
        per_second.add(tags[idx])
        per_stretch[tags[idx]] += 1
        if len(keys) >= split_at:  # split at the median: the right half is a new range
            mid = len(keys) // 2
            ranges.insert(idx + 1, keys[mid:])
            del keys[mid:]
            starts.insert(idx + 1, ranges[idx + 1][0])
            recent.insert(idx + 1, deque((k for k in recent[idx] if k >= starts[idx + 1]), maxlen=16))
            recent[idx] = deque((k for k in recent[idx] if k < starts[idx + 1]), maxlen=16)
            tags.insert(idx + 1, new_tag)
            new_tag += 1
        if i % stretch == 0:
            stretches.append(max(per_stretch.values()) / stretch)
            per_stretch.clear()
        if i % rate == 0:  # one second of simulated time
            seconds.append((len(per_second), sequential / rate))
            per_second.clear()
            sequential = 0
    half = len(seconds) // 2
    steady_seconds = seconds[half:] or seconds
    steady_stretches = stretches[len(stretches) // 2 :] or stretches
    per_window = max(1, len(stretches) // max(1, len(seconds)))
    return Outcome(
        scheme=name,
        hottest_share=round(statistics.mean(steady_stretches), 3),
        ranges_written_per_s=round(statistics.mean(w[0] for w in steady_seconds), 1),
        sequential=round(statistics.mean(w[1] for w in steady_seconds), 3),
        ranges_at_end=len(ranges),
        timeline=[
            round(statistics.mean(stretches[j : j + per_window]), 3) for j in range(0, len(stretches), per_window)
        ],
    )


def run(
    *, rows: int = 300_000, rate: int = 10_000, split_at: int = 5_000, shards: tuple[int, ...] = (4, 8, 16)
) -> list[Outcome]:
    """Every scheme through the model with the same parameters."""
    return [run_scheme(name, make, rows=rows, rate=rate, split_at=split_at) for name, make in _schemes(shards).items()]


def markdown(outcomes: list[Outcome], rows: int, rate: int, split_at: int) -> str:
    lines = [
        f"{rows:,} inserts at {rate:,}/s of simulated time; a range splits at {split_at:,} rows "
        "(figures: mean over the second half of the run)",
        "",
        "| keys | hottest range's share of writes | ranges written per second | sequential writes "
        "| ranges at the end |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.scheme} | {o.hottest_share:.3f} | {o.ranges_written_per_s:g} | {o.sequential:.3f} "
            f"| {o.ranges_at_end} |"
        )
    return "\n".join(lines)


def to_json(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    return [asdict(o) for o in outcomes]


def chart(outcomes: list[Outcome], path: Path) -> bool:
    """Hottest range's share per second, per scheme (False when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for o in outcomes:
        left.plot(range(1, len(o.timeline) + 1), o.timeline, label=o.scheme)
    left.set_xlabel("second of simulated time")
    left.set_ylabel("hottest range's share of writes")
    left.set_ylim(0, 1.05)
    left.legend(fontsize=8)
    names = [o.scheme.replace(" (", "\n(").replace(", ", "\n") for o in outcomes]
    right.bar(names, [o.ranges_written_per_s for o in outcomes], color="tab:blue", label="ranges written per s")
    right.set_ylabel("ranges written per second")
    twin = right.twinx()
    twin.plot(names, [o.sequential for o in outcomes], "o", color="tab:red", markersize=9, label="sequential writes")
    twin.set_ylabel("share of sequential writes", color="tab:red")
    twin.set_ylim(0, 1.05)
    right.tick_params(axis="x", labelsize=7)
    fig.suptitle("Range-splitting store: write spread and locality per key scheme")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.simulate``: the model's table (and ``--out``: Markdown, JSON, a chart)."""
    import argparse
    import json
    import sys

    from seqid_orm.cli.common import positive

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.simulate",
        description="model a range-splitting store (CockroachDB, TiDB): UUIDv4 vs UUIDv7 vs sharded keys",
    )
    parser.add_argument("--rows", type=positive("rows"), default=300_000)
    parser.add_argument(
        "--rate", type=positive("inserts per second"), default=10_000, help="inserts per simulated second"
    )
    parser.add_argument("--split-at", type=positive("rows"), default=5_000, help="rows at which a range splits")
    parser.add_argument("--shards", default="4,8,16", help="comma-separated shard counts for the sharded layout")
    parser.add_argument("--out", help="directory for simulation.md, .json and .png")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shards = tuple(int(k) for k in args.shards.split(","))
    outcomes = run(rows=args.rows, rate=args.rate, split_at=args.split_at, shards=shards)
    text = markdown(outcomes, args.rows, args.rate, args.split_at)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "simulation.md").write_text(text + "\n")
        (out / "simulation.json").write_text(json.dumps(to_json(outcomes)))
        if not chart(outcomes, out / "simulation.png"):
            print("benchmarks.simulate: matplotlib is not installed; no chart", file=sys.stderr)
    print(json.dumps(to_json(outcomes)) if args.json else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
