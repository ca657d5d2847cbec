"""What a database-made UUIDv7 costs PostgreSQL, per expression: server-side, no client in the way.

For each candidate expression: the nanoseconds a row of the expression alone (``SELECT count(expr) FROM
generate_series(1, 1e6)``, less an empty expression), and a ``--rows`` ``INSERT ... SELECT generate_series``
into a table keyed by it, against BIGINT identity, in rotated rounds, with the primary key's size and the
rows ``ORDER BY id`` puts out of insertion order::

    python -m benchmarks.pg_expression [--url postgresql://postgres@127.0.0.1:5432/test] [--rounds 5]

The candidates: seqid's current expression (``seqid_orm.vendors.postgresql.V7_HEX``, one clock reading
written as bits), the same reading written as hex text (what it replaced), the bytes of two clock readings
(what that replaced), milliseconds with a random fraction, ``gen_random_uuid()``, and ``uuidv7()`` where
the server has it (PostgreSQL 18).  Uses ``psql``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from seqid_orm.cli.bench.rounds import median_ratio, ratios, rotated
from seqid_orm.vendors.postgresql import V7_HEX

CANDIDATES = {
    "seqid one reading (now)": f"({V7_HEX})::uuid",
    "seqid one reading as hex text (before)": (
        "(overlay(lpad(to_hex(floor(date_part('epoch', clock_timestamp()) * 4096000)::bigint), 15, '0') "
        "placing '7' from 13 for 0) || right(encode(uuid_send(gen_random_uuid()), 'hex'), 16))::uuid"
    ),
    "seqid two readings (before)": (
        "encode(int8send((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint << 16) | 28672 "
        "| (floor(date_part('epoch', clock_timestamp()) * 4096000)::bigint & 4095)) "
        "|| substring(uuid_send(gen_random_uuid()) from 9), 'hex')::uuid"
    ),
    "ms only, random fraction": (
        "encode(set_bit(set_bit(substring(int8send(floor(date_part('epoch', clock_timestamp()) * 1000)::bigint) "
        "from 3) || substring(uuid_send(gen_random_uuid()) from 7), 52, 1), 53, 1), 'hex')::uuid"
    ),
    "gen_random_uuid()": "gen_random_uuid()",
}


def insert_times(
    psql: Callable[[str], str], kinds: dict[str, str], rows: int, rounds: int
) -> tuple[dict[str, list[float]], dict[str, tuple[int, int]]]:
    """Seconds per round of an ``INSERT ... SELECT generate_series`` of ``rows`` rows into a table
    keyed by each kind's column (``kinds``: name -> the key column's SQL), kinds rotated each round;
    and per kind, from its first round, the rows ``ORDER BY id`` puts out of insertion order and the
    primary key's size in bytes."""
    times: dict[str, list[float]] = {k: [] for k in kinds}
    shape: dict[str, tuple[int, int]] = {}
    names = list(kinds)
    for number in range(rounds):
        for name in rotated(names, number):
            table = f"seqid_expr_{os.getpid()}_{names.index(name)}"
            psql(f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} ({kinds[name]}, n bigint, payload text)")
            start = time.perf_counter()
            psql(f"INSERT INTO {table} (n, payload) SELECT g, repeat('x', 100) FROM generate_series(1, {rows}) g")
            times[name].append(time.perf_counter() - start)
            if number == 0:
                out_of_order = psql(
                    f"SELECT count(*) FROM (SELECT n, lag(n) OVER (ORDER BY id) p FROM {table}) s WHERE n < p"
                )
                shape[name] = (int(out_of_order), int(psql(f"SELECT pg_relation_size('{table}_pkey')")))
            psql(f"DROP TABLE {table}")
    return times, shape


def psql_runner(url: str) -> Callable[[str], str]:
    """A function running one SQL string through ``psql`` on ``url`` and returning its output."""

    def psql(sql: str) -> str:
        done = subprocess.run(["psql", url, "-qAtX", "-c", sql], check=True, capture_output=True, text=True)
        return done.stdout.strip()

    return psql


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pg_expression", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test", help="a libpq URL for psql")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    psql = psql_runner(args.url)
    candidates = dict(CANDIDATES)
    if int(psql("SHOW server_version_num")) >= 180000:
        candidates["uuidv7() (C)"] = "uuidv7()"
    costs: dict[str, list[float]] = {"(empty)": [], **{k: [] for k in candidates}}
    for number in range(args.rounds):
        for name, expr in rotated([("(empty)", "1"), *candidates.items()], number):
            start = time.perf_counter()
            psql(f"SELECT count({expr}) FROM generate_series(1, 1000000)")
            costs[name].append(time.perf_counter() - start)
    empty = statistics.median(costs.pop("(empty)"))
    kinds = {"BIGINT identity": "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"}
    kinds.update({name: f"id uuid PRIMARY KEY DEFAULT {expr}" for name, expr in candidates.items()})
    times, shape = insert_times(psql, kinds, args.rows, args.rounds)
    names = list(kinds)
    print(
        f"| expression | ns a row (expression) | x BIGINT identity (insert, {args.rounds} rounds)"
        " | index MB | rows out of order |"
    )
    print("|---|---:|---:|---:|---:|")
    base = times["BIGINT identity"]
    for name in names:
        per_round = ratios(times[name], base)
        ns = "-" if name not in costs else f"{(statistics.median(costs[name]) - empty) / 1e6 * 1e9:,.0f}"
        ratio = f"{median_ratio(times[name], base):.2f} ({min(per_round):.2f}-{max(per_round):.2f})"
        print(f"| {name} | {ns} | {ratio} | {shape[name][1] / 2**20:.1f} | {shape[name][0]:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
