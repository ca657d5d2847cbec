"""Ticket sequence benchmark: ids per second, round trips, ``next_id()`` latency, index size.

``seqid ticket bench --url URL ...`` measures, per ticket server:

* ids/s of one thread calling ``next_id()`` for block sizes 1, 100, 1,000 and 10,000, with and
  without double buffering, and the round trips per 1,000 ids;
* the latency of single ``next_id()`` calls (median, p99, p99.9, max) in an application's
  rhythm: each call is followed by a short pause that releases the GIL (``time.sleep``, as a
  request's I/O would), so a prefetch has the time and the interpreter to run, and a stall at a
  segment boundary shows in the tail.  In a tight loop no prefetch can hide a boundary: the loop
  drains a segment faster than any server refills it (the ids/s column is that loop);
* what users would otherwise write: one round trip per id to the server's own counter
  (PostgreSQL ``nextval()``, MariaDB ``NEXTVAL()`` of a ``SEQUENCE``, Redis ``INCR``), through the
  driver directly, its best case;
* the size of a table keyed by ticket ids that 8 processes filled at once, against the same
  rows with a ``BIGINT`` identity key.

Each configuration runs once per round, rounds in rotated order, and the figures quoted are the
median round's (the machines these run on are shared, so one run is not enough).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import secrets
import statistics
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from seqid_orm.allocation.stores import scheme_of
from seqid_orm.allocation.tickets import TicketSequence
from seqid_orm.cli.bench.rounds import rotated

BLOCKS = (1, 100, 1_000, 10_000)
_IDS = {1: 2_000, 100: 100_000, 1_000: 400_000, 10_000: 1_000_000}


@dataclass
class Measurement:
    """One configuration on one server: the median round and the spread over rounds."""

    server: str
    what: str
    block: int | None
    double_buffer: bool | None
    ids: int
    ids_per_s: float
    ids_per_s_range: tuple[float, float]
    round_trips_per_1000: float | None
    latency_ns: dict[str, int] = field(default_factory=dict)


def _cleanup(url: str, name: str) -> None:
    if scheme_of(url) == "etcd":
        import base64

        from etcd3gw.client import Etcd3Client

        from seqid_orm.allocation.stores.etcd import parse_etcd_url

        members, prefix = parse_etcd_url(url)
        client = Etcd3Client(host=members[0][0], port=members[0][1], api_path="/v3/")
        key = base64.b64encode(f"{prefix}/tickets/{name}".encode()).decode()
        client.post(client.get_url("/kv/deleterange"), json={"key": key})
        client.session.close()
        return
    if scheme_of(url) in ("redis", "rediss", "unix"):
        import redis

        from seqid_orm.allocation.stores.base import split_state_loss_option

        client = redis.Redis.from_url(split_state_loss_option(url)[0])
        client.delete(f"seqid:tickets:{name}")
        client.close()
        return
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name = :n"), {"n": name})
    engine.dispose()


def _percentiles(samples: array[int]) -> dict[str, int]:
    ordered = sorted(samples)
    n = len(ordered)

    def at(q: float) -> int:
        return ordered[min(n - 1, int(q * n))]

    return {"p50": at(0.5), "p99": at(0.99), "p99.9": at(0.999), "max": ordered[-1]}


PACE_S = 20e-6  # the pause after each timed call (time.sleep takes about 60-80 µs here)


def latency_calls(block: int, scale: float = 1.0) -> int:
    """Timed calls per configuration: at least 10,000 samples and 10 segment boundaries, at most 60,000."""
    return max(1000, int(min(60_000, max(10_000, 10 * block)) * scale))


def run_sequence(url: str, block: int, double_buffer: bool, n: int, timed: int) -> dict[str, Any]:
    """One round of one configuration: a tight loop of ``n`` calls (ids/s), then ``timed`` calls
    one by one, each followed by a pause (latencies)."""
    name = f"bench-{secrets.token_hex(5)}"
    try:
        # the benchmark's sequences are its own and deleted afterwards: a Redis without persistence is fine
        with TicketSequence(name, url, block_size=block, double_buffer=double_buffer, accept_state_loss=True) as seq:
            seq.next_id()  # connect and create the row outside the measurement
            next_id = seq.next_id
            fetches = seq.fetches
            start = time.perf_counter()
            for _ in range(n):
                next_id()
            seconds = time.perf_counter() - start
            trips = seq.fetches - fetches
            clock = time.perf_counter_ns
            pause = time.sleep
            samples = array("q", bytes(8 * timed))
            for i in range(timed):
                t0 = clock()
                next_id()
                samples[i] = clock() - t0
                pause(PACE_S)
        return {"ids_per_s": n / seconds, "round_trips_per_1000": trips * 1000 / n, "latency": _percentiles(samples)}
    finally:
        _cleanup(url, name)


def _per_id_client(url: str) -> tuple[Callable[[], object], Callable[[], None]] | None:
    """The server's own counter, one round trip per id, through the driver itself (or None)."""
    scheme = scheme_of(url)
    name = f"bench_seq_{secrets.token_hex(4)}"
    if scheme in ("redis", "rediss", "unix"):
        import redis

        from seqid_orm.allocation.stores.base import split_state_loss_option

        client = redis.Redis.from_url(split_state_loss_option(url)[0])
        key = f"seqid:bench:{name}"

        def close_redis() -> None:
            client.delete(key)
            client.close()

        return (lambda: client.incr(key)), close_redis
    if scheme not in ("postgresql", "mysql", "mariadb"):
        return None
    import sqlalchemy as sa

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    raw: Any = engine.raw_connection()
    cursor = raw.cursor()
    cursor.execute(f"CREATE SEQUENCE {name}")
    sql = f"SELECT nextval('{name}')" if scheme == "postgresql" else f"SELECT NEXTVAL({name})"

    def draw() -> object:
        cursor.execute(sql)
        return cursor.fetchone()[0]

    def close_sql() -> None:
        cursor.execute(f"DROP SEQUENCE {name}")
        raw.close()
        engine.dispose()

    return draw, close_sql


def run_per_id(url: str, n: int) -> dict[str, Any] | None:
    client = _per_id_client(url)
    if client is None:
        return None
    draw, close = client
    try:
        draw()
        start = time.perf_counter()
        for _ in range(n):
            draw()
        return {"ids_per_s": n / (time.perf_counter() - start), "round_trips_per_1000": 1000.0, "latency": {}}
    finally:
        close()


def _fill(args: tuple[str, str, str | None, int, int]) -> float:
    """A worker process: insert ``rows`` rows, keyed by tickets (``name``) or by the identity."""
    import sqlalchemy as sa

    url, table_name, name, rows, batch = args
    engine = sa.create_engine(url)
    table = sa.Table(table_name, sa.MetaData(), autoload_with=engine)
    seq = TicketSequence(name, url, block_size=1000, accept_state_loss=True) if name else None
    payload = "x" * 100
    start = time.perf_counter()
    for done in range(0, rows, batch):
        size = min(batch, rows - done)
        values: list[dict[str, object]]
        if seq is None:
            values = [{"payload": payload} for _ in range(size)]
        else:
            values = [{"id": i, "payload": payload} for i in seq.next_ids(size)]
        with engine.begin() as conn:
            conn.execute(sa.insert(table), values)
    elapsed = time.perf_counter() - start
    if seq is not None:
        seq.close()
    engine.dispose()
    return elapsed


def run_index_size(url: str, processes: int = 8, rows: int = 25_000, batch: int = 1000) -> dict[str, Any] | None:
    """``processes`` processes fill one table each way at once; sizes and insert rates compared."""
    import sqlalchemy as sa

    from seqid_orm.cli.bench.metrics import sizes

    if scheme_of(url) not in ("postgresql", "mysql", "mariadb"):
        return None
    engine = sa.create_engine(url)
    suffix = secrets.token_hex(3)
    name = f"bench-index-{suffix}"
    md = sa.MetaData()
    tables = {
        "ticket": sa.Table(
            f"seqid_bench_ticket_{suffix}",
            md,
            sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
            sa.Column("payload", sa.String(100), nullable=False),
        ),
        "bigint": sa.Table(
            f"seqid_bench_identity_{suffix}",
            md,
            sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
            sa.Column("payload", sa.String(100), nullable=False),
        ),
    }
    md.create_all(engine)
    out: dict[str, Any] = {}
    ctx = multiprocessing.get_context("spawn")
    try:
        for kind, table in tables.items():
            jobs = [(url, table.name, name if kind == "ticket" else None, rows, batch)] * processes
            start = time.perf_counter()
            with ctx.Pool(processes) as pool:
                pool.map(_fill, jobs)
            wall = time.perf_counter() - start
            with engine.begin() as conn:
                measured = sizes(conn, table.name)
            out[kind] = {"rows": rows * processes, "rows_per_s": rows * processes / wall, **measured}
        ratio = (out["ticket"]["table_bytes"] + out["ticket"]["index_bytes"]) / (
            out["bigint"]["table_bytes"] + out["bigint"]["index_bytes"]
        )
        out["size_ticket_vs_bigint"] = round(ratio, 3)
        return out
    finally:
        md.drop_all(engine)
        _cleanup(url, name)
        engine.dispose()


def run(
    urls: list[str],
    *,
    blocks: tuple[int, ...] = BLOCKS,
    rounds: int = 3,
    scale: float = 1.0,
    progress: Callable[[str], None] | None = None,
) -> list[Measurement]:
    """Every configuration on every server of ``urls``, ``rounds`` times, the servers and
    configurations of each round in rotated order (so the servers are measured side by side, under
    the same load of a shared machine); the median round of each."""
    kinds: list[tuple[str, int | None, bool | None]] = [
        (f"block {b}{'' if db else ', no prefetch'}", b, db) for b in blocks for db in (True, False)
    ]
    kinds.append(("one round trip per id (server's own counter)", None, None))
    configs = [(url, *kind) for url in urls for kind in kinds]
    results: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(configs))}
    for r in range(rounds):
        for i in rotated(range(len(configs)), r):
            url, label, block, double_buffer = configs[i]
            if progress:
                progress(f"round {r + 1}/{rounds}: {_label(url)}: {label}")
            if block is None:
                found = run_per_id(url, max(200, int(_IDS[1] * scale)))
            else:
                assert double_buffer is not None
                n = max(block * 3, int(_IDS[block] * scale))
                found = run_sequence(url, block, double_buffer, n, latency_calls(block, scale))
            if found is not None:
                results[i].append(found)
    out = []
    for i, (url, label, block, double_buffer) in enumerate(configs):
        runs = results[i]
        if not runs:
            continue
        rates = [r["ids_per_s"] for r in runs]
        median_run = sorted(runs, key=lambda r: r["ids_per_s"])[len(runs) // 2]
        n = max(200, int(_IDS[1] * scale)) if block is None else max(block * 3, int(_IDS[block] * scale))
        out.append(
            Measurement(
                server=_label(url),
                what=label,
                block=block,
                double_buffer=double_buffer,
                ids=n,
                ids_per_s=statistics.median(rates),
                ids_per_s_range=(min(rates), max(rates)),
                round_trips_per_1000=median_run["round_trips_per_1000"],
                latency_ns=median_run["latency"],
            )
        )
    return out


def _label(url: str) -> str:
    from seqid_orm.allocation.stores import hide_password

    return hide_password(url).split("?")[0]


def markdown(measurements: list[Measurement], index: dict[str, dict[str, Any]]) -> str:
    """The results as Markdown tables (one for ids/s and latency, one for index size)."""
    lines = [
        "| server | configuration | ids/s (median) | range | round trips / 1,000 ids "
        "| next_id() p50 / p99 / p99.9 / max, paced (µs) |",
        "|---|---|---|---|---|---|",
    ]
    for m in measurements:
        lat = m.latency_ns
        latency = " / ".join(f"{lat[k] / 1000:.2f}" for k in ("p50", "p99", "p99.9", "max")) if lat else ""
        trips = "" if m.round_trips_per_1000 is None else f"{m.round_trips_per_1000:g}"
        low, high = m.ids_per_s_range
        rate = f"{m.ids_per_s:,.0f} | {low:,.0f} to {high:,.0f}"
        lines.append(f"| {m.server} | {m.what} | {rate} | {trips} | {latency} |")
    if index:
        lines += [
            "",
            "| server | key | rows | rows/s (8 processes) | table bytes | index bytes | size vs BIGINT identity |",
            "|---|---|---|---|---|---|---|",
        ]
        for server, found in index.items():
            for kind in ("bigint", "ticket"):
                row = found[kind]
                ratio = "1.0" if kind == "bigint" else f"{found['size_ticket_vs_bigint']}"
                lines.append(
                    f"| {server} | {kind} | {row['rows']:,} | {row['rows_per_s']:,.0f} | {row['table_bytes']:,} "
                    f"| {row['index_bytes']:,} | {ratio} |"
                )
    return "\n".join(lines)


def to_json(measurements: list[Measurement], index: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"sequences": [asdict(m) for m in measurements], "index_size": index}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.tickets``: ids/s, round trips, ``next_id()`` latency and index size per ticket server."""
    import argparse

    from seqid_orm.cli.common import positive

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tickets",
        description="ids/s, round trips, next_id() latency and index size per ticket server",
    )
    parser.add_argument("--url", action="append", default=[], help="SQLAlchemy, Redis or etcd URL; repeat for several")
    parser.add_argument(
        "--etcd-cluster",
        type=int,
        default=0,
        metavar="N",
        help="also start a private N-member etcd cluster on loopback (Debian's etcd-server) and measure it",
    )
    parser.add_argument("--blocks", help="comma-separated block sizes (default 1,100,1000,10000)")
    parser.add_argument("--repeat", type=positive("rounds"), default=3, help="rounds, in rotated order (default 3)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the ids drawn per configuration")
    parser.add_argument(
        "--index-rows",
        type=int,
        default=25_000,
        help="rows per process for the 8-process index-size run (0: skip; PostgreSQL and MariaDB only)",
    )
    parser.add_argument("--out", help="directory for tickets.md and tickets.json")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if not args.url and not args.etcd_cluster:
        parser.error("give at least one --url or --etcd-cluster N")
    blocks = tuple(int(b) for b in args.blocks.split(",")) if args.blocks else BLOCKS
    with contextlib.ExitStack() as stack:
        urls = list(args.url)
        if args.etcd_cluster:
            from tests.servers.etcd import EtcdCluster  # the tests' server starter: stopped on the way out

            urls.append(stack.enter_context(EtcdCluster(args.etcd_cluster)).url)
        return _measure(args, urls, blocks)


def _measure(args: Any, urls: list[str], blocks: tuple[int, ...]) -> int:
    import json
    import sys
    from pathlib import Path

    progress = None if args.quiet else (lambda text: print(f"  {text}", file=sys.stderr))
    print(f"benchmarks.tickets: {', '.join(_label(u) for u in urls)}", file=sys.stderr)
    measurements = run(urls, blocks=blocks, rounds=args.repeat, scale=args.scale, progress=progress)
    index: dict[str, dict[str, object]] = {}
    for url in urls:
        if args.index_rows:
            found = run_index_size(url, rows=args.index_rows)
            if found is not None:
                index[_label(url)] = found
    text = markdown(measurements, index)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tickets.md").write_text(text + "\n")
        (out / "tickets.json").write_text(json.dumps(to_json(measurements, index), indent=1))
    print(json.dumps(to_json(measurements, index)) if args.json else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
