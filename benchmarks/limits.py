"""seqid at the physical limit, as ratios, in one command: generation against the compiled peers,
bulk loads against BIGINT identity, PostgreSQL's database-made keys against identity and ``uuidv7()``.

    python -m benchmarks.limits [--rounds 5] [--rows 300000] [--save limits.json]
    python -m benchmarks.limits --compare limits.json        # exit 1 if a ratio got >10 % worse

Every figure is a ratio measured side by side in this run, each candidate once per round in an
order rotated by one place per round; the table gives each ratio's median over the rounds and their
spread, its target, and whether the median meets it.  ``--save`` writes the medians as JSON and
``--compare`` reads such a file: any ratio more than 10 % above its saved value is a regression,
named, and the exit status is 1.

- **generation**: nanoseconds per call of each seqid generator (every layout and family) over the
  fastest compiled peer installed (hyperuuid, fastuuid7, uuid-utils: the ``bench`` extra), and a
  batch of 1,000 over the fastest peer's batch call.  Beside them, a *floor*: a UUIDv7 made in
  Python with no lock, no counter and no fork check (the clock, 62 random bits, one ``uuid.UUID``),
  which no correct pure-Python generator can undercut.
- **bulk**: ``bulk_insert`` of ``--rows`` rows keyed by seqid's UUID (made in Python), a ticket
  sequence, and seqid's UUID made by the database, over BIGINT identity, on PostgreSQL (binary
  ``COPY``) and MariaDB (mysqlclient's multi-row ``INSERT``), with the runner of ``seqid bench``.
- **database-made on PostgreSQL**: an ``INSERT ... SELECT`` keyed by seqid's 13-17 expression over
  identity, and, given ``--pg18``, PostgreSQL 18's C ``uuidv7()`` over identity on that server.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import seqid_orm
from seqid_orm import Layout, Snowflake
from seqid_orm.cli.bench.rounds import rotated
from seqid_orm.ids.comb import generator_for
from seqid_orm.ids.randomness import POOL

#: A regression: a ratio this much above its saved value.
REGRESSION = 1.10

_NEW, _UUID, _UNKNOWN = object.__new__, uuid.UUID, uuid.SafeUUID.unknown
_SET_INT, _SET_SAFE = uuid.UUID.__dict__["int"].__set__, uuid.UUID.__dict__["is_safe"].__set__
_V7 = (0x7 << 76) | (0b10 << 62)


def _floor_v7() -> Callable[[], uuid.UUID]:
    """What a UUIDv7 costs in Python with nothing but its bits: no lock, no counter, no fork check
    (its names bound as a closure's, as seqid's generators bind theirs)."""
    clock, pop, refill = time.time_ns, POOL.pop, POOL.refill
    new, set_int, set_safe, uuid_type, unknown = _NEW, _SET_INT, _SET_SAFE, _UUID, _UNKNOWN
    flags, mask = _V7, (1 << 62) - 1

    def floor_v7() -> uuid.UUID:
        t = clock()
        try:
            r = pop()
        except IndexError:
            r = refill()
        u = new(uuid_type)
        set_int(u, ((t // 1_000_000) << 80) | flags | (r & mask))
        set_safe(u, unknown)
        return u

    return floor_v7


def _peers() -> tuple[dict[str, Callable[[], object]], dict[str, Callable[[int], object]]]:
    """The compiled peers installed here: per call, and per batch of n."""
    calls: dict[str, Callable[[], object]] = {}
    batches: dict[str, Callable[[int], object]] = {}
    try:
        import hyperuuid

        calls["hyperuuid.new_v7"] = hyperuuid.new_v7
        batches["hyperuuid.new_v7_batch"] = hyperuuid.new_v7_batch
    except ImportError:
        pass
    try:
        import fastuuid7

        calls["fastuuid7.uuid7"] = fastuuid7.uuid7
        batches["fastuuid7.uuid7_many"] = fastuuid7.uuid7_many
    except ImportError:
        pass
    try:
        import uuid_utils.compat

        calls["uuid_utils.compat.uuid7"] = uuid_utils.compat.uuid7
    except ImportError:
        pass
    return calls, batches


def _per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call: the fastest of three runs of a third of ``calls`` (a run slowed by the
    machine's other work says nothing of the code)."""
    number = max(1, calls // 3)
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def _median_spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def generation(
    rounds: int,
    calls: int = 200_000,
    batch: int = 1_000,
    peers: tuple[dict[str, Callable[[], object]], dict[str, Callable[[int], object]]] | None = None,
) -> list[dict[str, Any]]:
    """Per call and per batch, over the fastest compiled peer of the same round (``peers``: per call
    and per batch, by name; the ones installed here when not given)."""
    peer_calls, peer_batches = peers if peers is not None else _peers()
    if not peer_calls:
        raise SystemExit("benchmarks.limits: no compiled peer installed (pip install hyperuuid fastuuid7 uuid-utils)")
    ours: dict[str, Callable[[], object]] = {"seqid uuid7": seqid_orm.uuid7}
    for layout in Layout:  # the function a column default calls per row (comb(layout) adds a Python call)
        ours[f"seqid {layout.value}"] = generator_for(layout).id_function
    ours["seqid Snowflake.next_id"] = Snowflake(worker_id=1).next_id
    ours["seqid bsv"] = seqid_orm.bsv
    ours["seqid base32"] = seqid_orm.base32
    ours["floor: a bare v7 in Python"] = _floor_v7()
    everyone = {**peer_calls, **ours}
    per_call: dict[str, list[float]] = {name: [] for name in everyone}
    for number in range(rounds):
        for name in rotated(list(everyone), number):
            per_call[name].append(_per_call(everyone[name], calls))
    fastest = [min(per_call[p][r] for p in peer_calls) for r in range(rounds)]
    rows = []
    for name in ours:
        ratios = [mine / peer for mine, peer in zip(per_call[name], fastest, strict=True)]
        median, low, high = _median_spread(ratios)
        ns = statistics.median(per_call[name]) * 1e9
        target = None if name.startswith("floor") else 2.0
        rows.append(_row("generation", f"{name} ({ns:,.0f} ns)", "fastest peer per call", median, low, high, target))
    if peer_batches:
        ours_batch = {"seqid comb_batch time_first": seqid_orm.comb_batch}
        times: dict[str, list[float]] = {name: [] for name in {**peer_batches, **ours_batch}}
        both = {**peer_batches, **ours_batch}
        for number in range(rounds):
            for name in rotated(list(both), number):
                times[name].append(timeit.timeit(functools.partial(both[name], batch), number=calls // batch))
        fastest_batch = [min(times[p][r] for p in peer_batches) for r in range(rounds)]
        for name in ours_batch:
            ratios = [mine / peer for mine, peer in zip(times[name], fastest_batch, strict=True)]
            rows.append(_row("generation", f"{name} ({batch:,})", "fastest peer batch", *_median_spread(ratios), 1.0))
    return rows


def bulk(urls: dict[str, str], rows: int, rounds: int) -> list[dict[str, Any]]:
    """``bulk_insert`` per key kind over BIGINT identity, per database."""
    from seqid_orm.cli.bench import runner

    out = []
    targets = {"comb": 1.10, "ticket": 1.05, "comb-db": None}
    for label, url in urls.items():
        run = runner.run(url, rows, ["bigint", *targets], batch=10_000, via="bulk", repeat=rounds, progress=None)
        for kind, target in targets.items():
            ratios = run.time_ratios(kind)
            what = {
                "comb": "seqid UUID made in Python",
                "ticket": "ticket sequence",
                "comb-db": "seqid UUID by the database",
            }
            out.append(_row("bulk", f"{label}: {what[kind]}", "BIGINT identity", *_median_spread(ratios), target))
    return out


def database_made(pg_url: str, pg18_url: str | None, rows: int, rounds: int) -> list[dict[str, Any]]:
    """PostgreSQL's database-made keys in an ``INSERT ... SELECT``, over identity on the same server."""
    from benchmarks.pg_expression import insert_times, psql_runner
    from seqid_orm.vendors.postgresql import V7_HEX

    identity = "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    ours = f"id uuid PRIMARY KEY DEFAULT ({V7_HEX})::uuid"
    out = []
    servers = [(pg_url, {"BIGINT identity": identity, "seqid expression": ours})]
    if pg18_url:
        servers.append(
            (
                pg18_url,
                {
                    "BIGINT identity": identity,
                    "seqid expression": ours,
                    "uuidv7()": "id uuid PRIMARY KEY DEFAULT uuidv7()",
                },
            )
        )
    for url, kinds in servers:
        psql = psql_runner(url)
        version = psql("SHOW server_version").split()[0]
        times, _ = insert_times(psql, kinds, rows, rounds)
        for name in kinds:
            if name == "BIGINT identity":
                continue
            ratios = [v / b for v, b in zip(times[name], times["BIGINT identity"], strict=True)]
            target = 1.62 if name == "seqid expression" else None
            out.append(
                _row(
                    "database-made", f"PostgreSQL {version}: {name}", "BIGINT identity", *_median_spread(ratios), target
                )
            )
    return out


def _row(
    part: str, what: str, over: str, median: float, low: float, high: float, target: float | None
) -> dict[str, Any]:
    return {
        "part": part,
        "what": what,
        "over": over,
        "ratio": round(median, 3),
        "spread": [round(low, 3), round(high, 3)],
        "target": target,
        "met": None if target is None else median <= target,
    }


def _key(row: dict[str, Any]) -> str:
    """A row's name across runs: without the nanoseconds its label carries."""
    return f"{row['part']}: {row['what'].split(' (')[0]}"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| part | what | over | ratio (median) | rounds | target | met |", "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        target = "-" if r["target"] is None else f"≤ {r['target']:.2f}"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "**no**")
        low, high = r["spread"]
        lines.append(
            f"| {r['part']} | {r['what']} | {r['over']} | {r['ratio']:.2f} | {low:.2f}-{high:.2f} | {target} | {met} |"
        )
    return "\n".join(lines)


def regressions(rows: list[dict[str, Any]], saved: dict[str, float]) -> list[str]:
    """Each ratio more than :data:`REGRESSION` times its saved value, as a line naming both."""
    found = []
    for row in rows:
        before = saved.get(_key(row))
        if before is not None and row["ratio"] > before * REGRESSION:
            found.append(
                f"{_key(row)}: {row['ratio']:.2f} against {before:.2f} saved (+{row['ratio'] / before - 1:.0%})"
            )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.limits", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=300_000, help="rows per bulk load and per INSERT ... SELECT")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--mariadb", default="mysql+mysqldb://root@127.0.0.1:3306/test")
    parser.add_argument("--pg18", help="a PostgreSQL 18 (make pg18-up): uuidv7() beside seqid's expression")
    parser.add_argument("--parts", default="generation,bulk,database-made")
    parser.add_argument("--save", help="write the ratios as JSON here")
    parser.add_argument("--compare", help="a file --save wrote: name every ratio >10 %% worse, exit 1")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    rows: list[dict[str, Any]] = []
    if "generation" in parts:
        rows += generation(args.rounds)
    if "bulk" in parts:
        rows += bulk({"PostgreSQL COPY": args.pg, "MariaDB": args.mariadb}, args.rows, args.rounds)
    if "database-made" in parts:
        libpq = args.pg.replace("+psycopg", "")
        rows += database_made(libpq, args.pg18 and args.pg18.replace("+psycopg", ""), args.rows, args.rounds)
    print(markdown(rows))
    if args.save:
        Path(args.save).write_text(json.dumps({_key(r): r["ratio"] for r in rows}, indent=1) + "\n")
    if args.compare:
        worse = regressions(rows, json.loads(Path(args.compare).read_text()))
        for line in worse:
            print(f"regression: {line}", file=sys.stderr)
        return 1 if worse else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
