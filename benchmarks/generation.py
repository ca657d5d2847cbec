"""Ids per second for seqid_orm's generators beside uuid.uuid4() and popular libraries.

Run: ``python benchmarks/generation.py [--calls N] [--rounds R] [--json]`` or
``seqid bench --generation``.  Needs nothing beyond the standard library; the other
libraries are compared when installed (the ``bench`` extra).

The machine is shared and noisy, so every candidate runs once per round, in an order rotated by
one place each round, and the report uses each candidate's median over the rounds; ratios are
against ``uuid.uuid4()`` measured in the same run.  Batch candidates are timed per id.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
import uuid
from collections.abc import Callable

import seqid_orm
from seqid_orm import Layout, Snowflake
from seqid_orm.cli.bench.rounds import rotated

#: ``per_call`` of a column-default candidate: called as SQLAlchemy calls it
#: (``default.arg(context)``), not through a wrapper that would add its own cost; it takes the
#: number of calls and returns the seconds per call it measured.
_WITH_CONTEXT = 0


def _candidates(batch: int) -> dict[str, tuple[Callable[..., object], int]]:
    """name -> (callable, ids produced per call; ``_WITH_CONTEXT`` for a column default)."""
    snowflake = Snowflake(worker_id=1)
    out: dict[str, tuple[Callable[..., object], int]] = {
        "uuid.uuid4 (baseline)": (uuid.uuid4, 1),
        "seqid uuid7": (seqid_orm.uuid7, 1),
    }
    for layout in Layout:
        out[f"seqid comb {layout.value}"] = (functools.partial(seqid_orm.comb, layout), 1)
    out[f"seqid comb_batch({batch}) time_first"] = ((lambda: seqid_orm.comb_batch(batch)), batch)
    out[f"seqid comb_batch({batch}) time_last"] = ((lambda: seqid_orm.comb_batch(batch, Layout.TIME_LAST)), batch)
    out["seqid Snowflake.next_id"] = (snowflake.next_id, 1)
    out["seqid bsv"] = (seqid_orm.bsv, 1)
    out["seqid base32"] = (seqid_orm.base32, 1)
    out.update(_sqlalchemy_row_defaults(batch))
    try:
        import uuid6

        out["uuid6.uuid7"] = (uuid6.uuid7, 1)
    except ImportError:
        pass
    try:
        import uuid_utils.compat

        out["uuid_utils.compat.uuid7"] = (uuid_utils.compat.uuid7, 1)
    except ImportError:
        pass
    try:
        import ulid

        out["ulid.ULID"] = (ulid.ULID, 1)
    except ImportError:
        pass
    return out


def _sqlalchemy_row_defaults(batch: int) -> dict[str, tuple[Callable[..., object], int]]:
    """What SQLAlchemy calls for each row of a ``seq_uuid_pk()`` column, with the context it
    passes: in a statement of ``batch`` rows (``executemany``, a batched flush), and in one-row
    statements (a new context each time, so the first-call path is paid every time)."""
    try:
        import sqlalchemy as sa
        from sqlalchemy.dialects import postgresql

        from seqid_orm.sqlalchemy import SeqUUID, seq_uuid_default
    except ImportError:
        return {}
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    dialect.server_version_info = (15, 4)  # as after the first connection
    column: sa.Column[object] = sa.Column("id", SeqUUID())

    class Context:  # the attributes the default reads from SQLAlchemy's execution context
        def __init__(self, rows: int) -> None:
            self.current_column = column
            self.dialect = dialect
            self.compiled_parameters: list[dict[str, object]] = [{}] * rows

    def many_rows(calls: int) -> float:
        default, n = seq_uuid_default, max(1, calls // batch)
        start = time.perf_counter()
        for _ in range(n):  # a context per statement, gone after it as in SQLAlchemy (with its ids)
            context = Context(batch)
            for _ in range(batch):
                default(context)  # type: ignore[arg-type]
        return (time.perf_counter() - start) / (n * batch)

    def one_row_statements(calls: int) -> float:
        default = seq_uuid_default
        contexts = [Context(1) for _ in range(calls)]
        start = time.perf_counter()
        for context in contexts:
            default(context)  # type: ignore[arg-type]
        return (time.perf_counter() - start) / calls

    return {
        f"seqid SQLAlchemy row default, {batch}-row statement": (many_rows, _WITH_CONTEXT),
        "seqid SQLAlchemy row default, one-row statements": (one_row_statements, _WITH_CONTEXT),
    }


def _time_per_id(fn: Callable[..., object], per_call: int, calls: int) -> float:
    if per_call == _WITH_CONTEXT:  # fn calls the default with its contexts and times itself
        return float(fn(calls))  # type: ignore[arg-type]
    n = max(1, calls // per_call)
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / (n * per_call)


def run(calls: int = 100_000, rounds: int = 7, batch: int = 1000) -> list[dict[str, object]]:
    cands = _candidates(batch)
    samples: dict[str, list[float]] = {name: [] for name in cands}
    for fn, per_call in cands.values():  # warm-up
        _time_per_id(fn, per_call, min(calls, 5000))
    names = list(cands)
    for r in range(rounds):
        for name in rotated(names, r):
            fn, per_call = cands[name]
            samples[name].append(_time_per_id(fn, per_call, calls))
    base = statistics.median(samples["uuid.uuid4 (baseline)"])
    rows = []
    for name, times in samples.items():
        med = statistics.median(times)
        rows.append(
            {
                "generator": name,
                "ns_per_id": round(med * 1e9, 1),
                "ids_per_s": round(1 / med),
                "cost_vs_uuid4": round(med / base, 3),
            }
        )
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    lines = ["| generator | ns/id | ids/s | cost vs uuid4 |", "|---|---|---|---|"]
    lines += [f"| {r['generator']} | {r['ns_per_id']} | {r['ids_per_s']:,} | {r['cost_vs_uuid4']} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="ids per candidate per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(args.calls, args.rounds, args.batch)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(markdown(rows))


if __name__ == "__main__":
    main()
