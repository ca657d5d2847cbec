"""Client instructions per inserted row, counted by valgrind: a comparison load cannot move.

On a shared machine the wall time of an insert run moves from round to round by more than a key's
share of it: through psycopg a row costs about 20 µs of client CPU, the key under 1 µs of that.
The number of instructions this process executes does not move with the machine's load.  So for
each key kind this runs the Core ``executemany`` of ``seqid bench`` (:func:`.runner.run_kind`,
the same table, payloads and batches) in a child process under ``valgrind --tool=callgrind``,
twice: with ``small`` and with ``large`` rows.  The difference of the two totals over the
difference of the rows is what one more row costs the client — making the key, the type's bind
processing, SQLAlchemy and the driver — while start-up, imports, the table's creation and the
first statement's compilation, the same in both runs, cancel out.  (rustc-perf, the Rust
compiler's benchmark suite, compares instruction counts rather than time for the same reason.)

What it does not count: the server, which is another process (see ``seqid bench``'s server CPU
for that), and time spent waiting.  A ratio of instructions is therefore the client's side of a
wall-time ratio, not a forecast of it.  What is left of the machine's timing in a count is a
driver polling for results that have not arrived yet (psycopg's pipeline): repeated runs agreed
within 0.4 % here.

Run: ``python -m benchmarks.instructions --url postgresql+psycopg://postgres@127.0.0.1/test
--keys bigint,comb-default,sa-uuid7``.  Needs ``valgrind`` on the ``PATH`` and the ``bench`` extra
for ``sa-uuid7``; each child run takes 20 to 60 s (valgrind runs Python about 50 times slower).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from seqid_orm.errors import InvalidArgumentError

#: The total valgrind prints at the end of a run (``==123==  I   refs:      2,524,277,113``).
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")

SMALL, LARGE, BATCH = 5_000, 15_000, 5_000


@dataclass(frozen=True)
class Count:
    """One key kind's client instructions per row, from runs of ``small`` and ``large`` rows."""

    key: str
    small: int  # instructions in the run of `small_rows`
    large: int
    small_rows: int
    large_rows: int

    @property
    def per_row(self) -> float:
        return (self.large - self.small) / (self.large_rows - self.small_rows)


def instructions_of(valgrind_stderr: str) -> int:
    """The instruction total in valgrind's report, or :class:`InvalidArgumentError` naming what it got."""
    found = _REFS.findall(valgrind_stderr)
    if not found:
        tail = valgrind_stderr.strip().splitlines()[-5:]
        raise InvalidArgumentError(f"no 'I refs' total in valgrind's output; it ended: {tail}")
    return int(found[-1].replace(",", ""))


def _child_command(url: str, key: str, rows: int, batch: int, prefix: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "benchmarks.instructions",
        "--child",
        "--url",
        url,
        "--keys",
        key,
        "--rows",
        str(rows),
        "--batch",
        str(batch),
        "--table-prefix",
        prefix,
    ]


def counts(
    url: str,
    keys: list[str],
    small: int = SMALL,
    large: int = LARGE,
    batch: int = BATCH,
    prefix: str = "seqid_instr_",
    jobs: int | None = None,
) -> list[Count]:
    """Run each key's inserts under callgrind with ``small`` and ``large`` rows, and count.

    The runs may go side by side (``jobs``, default one per CPU): how many instructions a process
    executes does not depend on what else the machine is doing, which is the point of counting
    them.  Not on SQLite, though: runs sharing its file would wait for its lock, and SQLite's
    retries would be counted.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise InvalidArgumentError("valgrind is not installed (Debian/Ubuntu: apt-get install valgrind)")
    if not 0 < small < large:
        raise InvalidArgumentError(f"need 0 < small < large rows, got {small} and {large}")
    from seqid_orm.cli.bench.keys import KINDS, check_kinds

    if not keys:
        raise InvalidArgumentError(f"no key kinds to count; choose from {', '.join(KINDS)}")
    check_kinds(keys)
    if url.startswith("sqlite"):
        jobs = 1
    runs = [(key, rows) for key in keys for rows in (small, large)]
    # One hash seed for every run: randomised string hashes change dictionaries' layouts, which
    # moved a run's count per row by about 1 % (0.2-0.4 % with the seed fixed).
    env = {**os.environ, "PYTHONHASHSEED": "0"}

    def one(run: tuple[str, int]) -> int:
        key, rows = run
        command = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        command += _child_command(url, key, rows, batch, f"{prefix}{rows}_")  # a table per run
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            raise InvalidArgumentError(f"{key}: the run of {rows} rows failed: {done.stderr.strip()[-2000:]}")
        return instructions_of(done.stderr)

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        totals = dict(zip(runs, pool.map(one, runs), strict=True))
    return [Count(key, totals[key, small], totals[key, large], small, large) for key in keys]


def _child(url: str, key: str, rows: int, batch: int, prefix: str) -> None:
    """The measured work: ``rows`` rows of ``key`` through Core ``executemany``, as ``seqid bench``."""
    import sqlalchemy as sa

    from seqid_orm.cli.bench.keys import KINDS, check_kinds
    from seqid_orm.cli.bench.runner import run_kind, table_name_for

    check_kinds([key])
    engine = sa.create_engine(url)
    try:
        run_kind(engine, KINDS[key], rows, batch=batch, progress=None, table_prefix=prefix)
        table = table_name_for(key, prefix)
        with engine.begin() as conn:
            found = conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar()
            conn.execute(sa.text(f"DROP TABLE {table}"))
        if found != rows:  # a count of work that was not done would be no count at all
            raise InvalidArgumentError(f"{key}: the table held {found} rows after inserting {rows}")
    finally:
        engine.dispose()


def markdown(counts: list[Count], base: str) -> str:
    by_key = {c.key: c for c in counts}
    lines = [f"| key | client instructions per row | vs {base} |", "|---|---|---|"]
    lines += [f"| {c.key} | {c.per_row:,.0f} | {c.per_row / by_key[base].per_row:.3f} |" for c in counts]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="SQLAlchemy URL")
    parser.add_argument("--keys", default="bigint,comb-default,sa-uuid7", help="comma-separated key kinds")
    parser.add_argument("--base", help="the kind the others are divided by (default: the last of --keys)")
    parser.add_argument("--rows", help=f"the two run lengths, SMALL,LARGE (default {SMALL},{LARGE})")
    parser.add_argument("--batch", type=int, default=BATCH, help="rows per INSERT batch and transaction")
    parser.add_argument("--table-prefix", default="seqid_instr_")
    parser.add_argument("--jobs", type=int, help="runs side by side (default: one per CPU; 1 on SQLite)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # the measured process
    args = parser.parse_args(argv)
    keys = [k for k in args.keys.split(",") if k]
    if args.child:
        _child(args.url, keys[0], int(args.rows), args.batch, args.table_prefix)
        return
    try:
        small, large = (int(r) for r in args.rows.split(",")) if args.rows else (SMALL, LARGE)
    except ValueError:
        parser.error(f"--rows takes two whole numbers, SMALL,LARGE; got {args.rows!r}")
    base = args.base or (keys[-1] if keys else "")
    if base not in keys:
        parser.error(f"--base {base!r} is not among --keys")
    try:
        found = counts(args.url, keys, small, large, args.batch, args.table_prefix, args.jobs)
    except InvalidArgumentError as exc:
        parser.error(str(exc))
    if args.json:
        print(json.dumps([{**asdict(c), "per_row": c.per_row} for c in found], indent=1))
    else:
        print(markdown(found, base))


if __name__ == "__main__":
    main()
