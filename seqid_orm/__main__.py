"""The ``seqid`` command line (also ``python -m seqid_orm``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import (
    Layout,
    Snowflake,
    __version__,
    base32,
    bsv,
    comb,
    uuid7,
    uuid_sequence_nextval,
    uuid_time_nextval,
)
from .decode import describe
from .errors import SeqIDError
from .registry import VENDORS

if TYPE_CHECKING:
    from .bench.runner import BenchRun

KINDS = ("uuid7", "comb", "snowflake", "bsv", "base32", "time-prefix")


def _new(args: argparse.Namespace) -> int:
    layout = Layout(args.layout) if args.layout else Layout.TIME_FIRST
    if args.url:
        from sqlalchemy import create_engine

        from .sqlalchemy import SeqUUID, layout_for

        engine = create_engine(args.url)
        with engine.connect():  # the layout may depend on the server version
            pass
        layout = layout_for(engine.dialect, SeqUUID(storage=args.storage))
        engine.dispose()
    elif args.dialect:
        from .registry import choose_layout, default_storage, normalize_vendor

        vendor = normalize_vendor(args.dialect)
        layout = choose_layout(vendor, None, args.storage or default_storage(vendor, None))
    kind = args.kind or ("comb" if args.layout or args.dialect or args.url else "uuid7")
    snowflake = Snowflake(worker_id=args.worker)
    makers: dict[str, Callable[[], object] | None] = {
        "uuid7": uuid7,
        "comb": lambda: comb(layout),
        "snowflake": snowflake.next_id,
        "bsv": bsv,
        "base32": base32,
        "time-prefix": lambda: uuid_time_nextval(layout=layout),
        "seq-prefix": None,
    }
    make = makers[kind]
    for i in range(args.n):
        print(uuid_sequence_nextval(i + 1, layout=layout) if make is None else make())  # a sequence's 1, 2, ...
    return 0


def _describe(text: str, kind: str | None = None) -> dict[str, object]:
    text = text.strip()
    if kind is None and text.isascii() and text.isdigit() and len(text) not in (26, 32, 36):
        kind = "snowflake"  # describe() says which profile it assumed
    return describe(text, kind=kind).as_dict()  # type: ignore[arg-type]


def _decode(args: argparse.Namespace) -> int:
    info = _describe(args.value, args.kind)
    if args.json:
        print(json.dumps(info))
    else:
        for key, val in info.items():
            print(f"{key}: {val}")
    return 0


def _probe(args: argparse.Namespace) -> int:
    from sqlalchemy import create_engine

    from .sqlalchemy import SeqUUID, layout_for, probe_layout, probe_order
    from .sqlalchemy.types import dialect_server_version

    engine = create_engine(args.url)
    results: list[dict[str, object]] = []
    with engine.connect() as conn:
        for storage in ("native", "binary", "text", "hex"):
            type_ = SeqUUID(storage=storage)
            try:
                type_.storage_for(engine.dialect)
            except SeqIDError as exc:
                results.append({"storage": storage, "error": str(exc)})
                continue
            results.append(
                {
                    "storage": storage,
                    "order": list(probe_order(conn, type_)),
                    "probed_layout": probe_layout(conn, type_).value,
                    "registry_layout": layout_for(engine.dialect, type_).value,
                }
            )
    version = ".".join(map(str, dialect_server_version(engine.dialect) or ()))
    if args.json:
        print(json.dumps({"dialect": engine.dialect.name, "server_version": version, "storages": results}))
        return 0
    print(f"{engine.dialect.name} {version}")
    for r in results:
        if "error" in r:
            print(f"  {r['storage']:7} {r['error']}")
        else:
            agree = "agrees" if r["probed_layout"] == r["registry_layout"] else "DISAGREES"
            print(f"  {r['storage']:7} order={r['order']} layout={r['probed_layout']} (registry {agree})")
    return 0


def _bench(args: argparse.Namespace) -> int:
    import os
    import tempfile
    from pathlib import Path

    import sqlalchemy as sa

    from .bench import report, runner
    from .bench.keys import KINDS

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
                    if args.small_memory:
                        url = stack.enter_context(_small_memory(url))
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
                    if args.small_memory:
                        run.notes.append("small-memory mode")
                    runs.append(run)
            except ModuleNotFoundError as exc:
                print(f"seqid: error: {_missing_driver(url, exc)}", file=sys.stderr)
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
    generation = None
    if args.generation:
        from .bench import generation as gen_bench

        print("seqid bench: generation benchmark", file=sys.stderr)
        generation = gen_bench.run(calls=50_000, rounds=5)
        if args.out:
            (Path(args.out) / "generation.md").write_text(gen_bench.markdown(generation) + "\n")
    if args.json:
        print(report.to_json(runs))
    else:
        print(report.table(runs))
        if generation is not None:
            print()
            print(gen_bench.markdown(generation))
        for run in runs:
            for note in run.notes:
                print(f"note ({run.dialect}): {note}")
        _explain(runs)
    return 0


def _positive(what: str) -> Callable[[str], int]:
    """argparse type: a whole number of ``what``, at least 1."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {what}, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"at least 1 of {what}, got {value}")
        return value

    return parse


#: Drivers SQLAlchemy picks for a bare ``dialect://`` URL, and the one our extras install instead.
_DRIVER_HINTS = {
    "psycopg2": ("postgresql://", "postgresql+psycopg://", "postgres"),
    "MySQLdb": ("mysql://", "mysql+pymysql://", "mysql"),
}


def _missing_driver(url: str, exc: ModuleNotFoundError) -> str:
    hint = _DRIVER_HINTS.get(exc.name or "")
    if hint and url.startswith(hint[0]):
        return (
            f"the driver for {url!r} is not installed ({exc.name}, SQLAlchemy's default for {hint[0]}); "
            f"the '{hint[2]}' extra installs another one: use {hint[1]}..."
        )
    return f"the driver for {url!r} is not installed ({exc.name})"


def _small_memory(url: str) -> contextlib.AbstractContextManager[str]:
    from .bench import servers

    dialect = url.split(":", 1)[0].split("+", 1)[0]
    if dialect == "postgresql":
        return servers.small_postgres(url)
    if dialect in ("mysql", "mariadb"):
        return servers.small_mariadb(url)
    return contextlib.nullcontext(url)


def _explain(runs: list[BenchRun]) -> None:
    """One plain sentence per database: the point of the project, in this run's numbers."""
    for run in runs:
        by = {r.kind: r for r in run.results}
        if not {"uuid4", "comb", "bigint"} <= by.keys():
            continue
        v4 = by["uuid4"]
        rounds = f" (median of {len(run.rounds)} rounds)" if len(run.rounds) > 1 else ""
        print(
            f"{run.dialect}: random UUIDv4 took {run.time_vs('uuid4'):.2f}x the BIGINT time{rounds} "
            f"({v4.per_million(0):.1f} -> {v4.per_million(-1):.1f} s per million as the index grew); "
            f"seqid comb took {run.time_vs('comb'):.2f}x"
            + (f", and made by the database (comb-db) {run.time_vs('comb-db'):.2f}x." if "comb-db" in by else ".")
        )


def _ticket_status(args: argparse.Namespace) -> int:
    from .backends import open_ticket_store

    rows: list[dict[str, object]] = []
    for url in args.url:
        store = open_ticket_store(url, create_table=False)
        try:
            for row in store.rows():
                rows.append(
                    {
                        "server": store.label,
                        "name": row.name,
                        "next_value": row.next_value,
                        "step": row.step,
                        "offset": row.offset,
                    }
                )
        finally:
            store.close()
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no ticket sequences on " + ", ".join(args.url))
        return 0
    headings = ("server", "name", "next_value", "step", "offset")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in headings]
    print("  ".join(h.ljust(w) for h, w in zip(headings, widths, strict=True)).rstrip())
    for r in rows:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(headings, widths, strict=True)).rstrip())
    return 0


def _ticket_init(args: argparse.Namespace) -> int:
    from .backends import open_ticket_store, scheme_of

    for url in args.url:
        if scheme_of(url) in ("redis", "rediss", "unix"):
            print(f"{url}: Redis needs no table; sequences are created on first use")
            continue
        from .backends.sqlalchemy import SQLAlchemyTicketStore

        store = open_ticket_store(url)
        assert isinstance(store, SQLAlchemyTicketStore)
        try:
            with store.engine.connect() as conn:
                store.prepare(conn)
        finally:
            store.close()
        print(f"{store.label}: table {store.table.name} is ready")
    return 0


def _ticket_repair(args: argparse.Namespace) -> int:
    """Move a sequence's counters above the largest id in use, on every server of its list."""
    from .tickets import TicketSequence

    floors = []
    for url, where in args.key or ():
        from .backends.sqlalchemy import ColumnFloor, create_engine_for, sa_column_of

        floors.append(ColumnFloor(create_engine_for(url), sa_column_of(where)))
    offsets = None if args.offsets is None else [int(o) for o in args.offsets.split(",")]
    with TicketSequence(
        args.name,
        args.url,
        step=args.step,
        offsets=offsets,
        start=args.start,
        floor=floors,
        accept_state_loss=args.accept_state_loss,
    ) as sequence:
        rows = sequence.repair(above=args.above)
    for floor in floors:
        floor.engine.dispose()
    for label, row in rows:
        print(f"{label}: sequence {row.name!r} next_value {row.next_value} (step {row.step}, offset {row.offset})")
    return 0


def _ticket_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .bench import tickets as bench

    blocks = tuple(int(b) for b in args.blocks.split(",")) if args.blocks else bench.BLOCKS
    measurements: list[bench.Measurement] = []
    index: dict[str, dict[str, object]] = {}
    for url in args.url:
        print(f"seqid ticket bench: {bench._label(url)}", file=sys.stderr)
        progress = None if args.quiet else (lambda text: print(f"  {text}", file=sys.stderr))
        measurements += bench.run(url, blocks=blocks, rounds=args.repeat, scale=args.scale, progress=progress)
        if args.index_rows:
            found = bench.run_index_size(url, rows=args.index_rows)
            if found is not None:
                index[bench._label(url)] = found
    text = bench.markdown(measurements, index)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tickets.md").write_text(text + "\n")
        (out / "tickets.json").write_text(json.dumps(bench.to_json(measurements, index), indent=1))
    print(json.dumps(bench.to_json(measurements, index)) if args.json else text)
    return 0


def _lease_status(args: argparse.Namespace) -> int:
    from .leases import open_lease_store

    store = open_lease_store(args.url, create_table=False)
    try:
        rows = store.leases(args.namespace)
    finally:
        store.close()
    found = [
        {"worker_id": r.worker_id, "held": r.held, "expires_in_ms": r.expires_in_ms, "mark_ms": r.mark_ms} for r in rows
    ]
    if args.json:
        print(json.dumps(found))
        return 0
    if not found:
        print(f"no worker ids leased in namespace {args.namespace!r} on {store.label}")
        return 0
    print(f"{'worker_id':>9}  {'held':5}  {'expires_in_ms':>13}  mark")
    for r in rows:
        print(f"{r.worker_id:>9}  {'yes' if r.held else 'no':5}  {r.expires_in_ms:>13}  {r.mark_ms}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .bench import simulate

    shards = tuple(int(k) for k in args.shards.split(","))
    outcomes = simulate.run(rows=args.rows, rate=args.rate, split_at=args.split_at, shards=shards)
    text = simulate.markdown(outcomes, args.rows, args.rate, args.split_at)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "simulation.md").write_text(text + "\n")
        (out / "simulation.json").write_text(json.dumps(simulate.to_json(outcomes)))
        if not simulate.chart(outcomes, out / "simulation.png"):
            print("seqid simulate: matplotlib is not installed; no chart", file=sys.stderr)
    print(json.dumps(simulate.to_json(outcomes)) if args.json else text)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args.url, args.rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seqid", description="Index-friendly unique ids for SQL databases.")
    parser.add_argument("--version", action="version", version=f"seqid_orm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("new", help="print new ids")
    p.add_argument(
        "--kind",
        choices=(*KINDS, "seq-prefix"),
        help="default: comb when --layout, --dialect or --url chooses a layout, else uuid7",
    )
    p.add_argument("--layout", choices=[m.value for m in Layout])
    p.add_argument("--dialect", choices=VENDORS, help="choose the layout for this database")
    p.add_argument("--url", help="choose the layout for this live database (SQLAlchemy URL)")
    p.add_argument("--storage", choices=("native", "binary", "text", "hex"))
    p.add_argument("--worker", type=int, default=0, help="Snowflake worker id")
    p.add_argument("-n", type=_positive("ids"), default=1, help="how many ids")
    p.set_defaults(func=_new)

    p = sub.add_parser("decode", help="tell what an id is and when it was made")
    p.add_argument("value")
    p.add_argument(
        "--kind", choices=("uuid", "snowflake", "bsv", "base32"), help="say what the value is where the text cannot"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_decode)

    p = sub.add_parser("probe", help="measure how a live database orders UUIDs (needs the sqlalchemy extra)")
    p.add_argument("url", help="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_probe)

    p = sub.add_parser("bench", help="insert benchmark: BIGINT vs random UUID vs seqid keys (SQLite by default)")
    p.add_argument("--url", action="append", help="SQLAlchemy URL; repeat for several databases")
    p.add_argument(
        "--rows", type=_positive("rows"), help="rows per key kind (default 100,000 on SQLite, 2,000,000 elsewhere)"
    )
    p.add_argument("--keys", help="comma-separated key kinds (default: all)")
    p.add_argument(
        "--batch", type=_positive("rows per batch"), default=5000, help="rows per INSERT batch and transaction"
    )
    p.add_argument(
        "--via",
        choices=("core", "orm", "session"),
        default="core",
        help="Core executemany, ORM bulk INSERT, or the ORM unit of work (add_all + commit)",
    )
    p.add_argument(
        "--repeat",
        type=_positive("rounds"),
        help=(
            "rounds per database, each running every key kind in a rotated order; ratios are per-round "
            "medians (default: 3 on SQLite, whose single runs vary most on a shared machine; 1 elsewhere)"
        ),
    )
    p.add_argument("--out", help="directory for results.md, results.csv, results.json and chart.png")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--small-memory",
        action="store_true",
        help="PostgreSQL: a private cluster with 16 MB shared_buffers; MariaDB: a 32 MB buffer pool for the run",
    )
    p.add_argument("--generation", action="store_true", help="also time id generation against uuid.uuid4()")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_bench)

    p = sub.add_parser("ticket", help="ticket sequences: show servers' counters, create the table, benchmark")
    tsub = p.add_subparsers(dest="ticket_command", required=True)
    t = tsub.add_parser("status", help="every sequence on the servers: next value, step, offset")
    t.add_argument("url", nargs="+", help="SQLAlchemy or Redis URL of a ticket server")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_ticket_status)
    t = tsub.add_parser("init", help="create the ticket table on SQL servers (what op.create_ticket_table() does)")
    t.add_argument("url", nargs="+", help="SQLAlchemy URL of a ticket server")
    t.set_defaults(func=_ticket_init)
    t = tsub.add_parser(
        "repair",
        help="move a sequence's counters above the largest id in use (after a restore, a lost Redis, a new server)",
        description=(
            "Sets the sequence's next value on every server of the list (in the order its clients list them) "
            "to the first value above --above and above the largest key of each --key column; creates it where "
            "it is missing; never lowers a counter. Running clients that refused a block go on once restarted."
        ),
    )
    t.add_argument("name", help="the sequence name")
    t.add_argument("url", nargs="+", help="SQLAlchemy or Redis URL of each ticket server, in the clients' order")
    t.add_argument("--above", type=int, help="the largest id in use, if no --key column says it")
    t.add_argument(
        "--key",
        nargs=2,
        action="append",
        metavar=("DATABASE_URL", "TABLE.COLUMN"),
        help="a key column the sequence fills (repeat for several tables); its largest value counts",
    )
    t.add_argument("--step", type=int, help="the clients' step (default: the number of servers)")
    t.add_argument("--offsets", help="the clients' offsets, comma-separated (default 1..number of servers)")
    t.add_argument("--start", type=int, default=1, help="the clients' start (default 1)")
    t.add_argument(
        "--accept-state-loss", action="store_true", help="allow a Redis server without persistence (see the README)"
    )
    t.set_defaults(func=_ticket_repair)
    t = tsub.add_parser("bench", help="ids/s, round trips, next_id() latency and index size per ticket server")
    t.add_argument("--url", action="append", required=True, help="SQLAlchemy or Redis URL; repeat for several")
    t.add_argument("--blocks", help="comma-separated block sizes (default 1,100,1000,10000)")
    t.add_argument("--repeat", type=_positive("rounds"), default=3, help="rounds, in rotated order (default 3)")
    t.add_argument("--scale", type=float, default=1.0, help="multiply the ids drawn per configuration")
    t.add_argument(
        "--index-rows",
        type=int,
        default=25_000,
        help="rows per process for the 8-process index-size run (0: skip; PostgreSQL and MariaDB only)",
    )
    t.add_argument("--out", help="directory for tickets.md and tickets.json")
    t.add_argument("--json", action="store_true")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=_ticket_bench)

    p = sub.add_parser("lease", help="worker-id leases: who holds which worker id")
    lsub = p.add_subparsers(dest="lease_command", required=True)
    t = lsub.add_parser("status", help="every worker id of a namespace: held, expiry, high-water mark")
    t.add_argument("url", help="SQLAlchemy or Redis URL of the lease store")
    t.add_argument("--namespace", required=True)
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_lease_status)

    p = sub.add_parser(
        "simulate", help="model a range-splitting store (CockroachDB, TiDB): UUIDv4 vs UUIDv7 vs sharded keys"
    )
    p.add_argument("--rows", type=_positive("rows"), default=300_000)
    p.add_argument("--rate", type=_positive("inserts per second"), default=10_000, help="inserts per simulated second")
    p.add_argument("--split-at", type=_positive("rows"), default=5_000, help="rows at which a range splits")
    p.add_argument("--shards", default="4,8,16", help="comma-separated shard counts for the sharded layout")
    p.add_argument("--out", help="directory for simulation.md, .json and .png")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_simulate)

    p = sub.add_parser("demo", help="insert rows with seqid keys through SQLAlchemy and read them back")
    p.add_argument("--url", default="sqlite://")
    p.add_argument("--rows", type=int, default=5)
    p.set_defaults(func=_demo)
    return parser


# The extra (pyproject.toml) that brings each optional module, for the one-line fix in an error.
_EXTRA_OF = {
    "sqlalchemy": "sqlalchemy",
    "alembic": "alembic",
    "psycopg": "postgres",
    "pymysql": "mysql",
    "MySQLdb": "django-mysql",
    "asyncpg": "async",
    "aiosqlite": "async",
    "aiomysql": "async",
    "redis": "redis",
    "django": "django",
    "pydantic": "pydantic",
    "matplotlib": "bench",
    "uuid6": "bench",
    "uuid_utils": "bench",
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (SeqIDError, ValueError, TypeError) as exc:
        print(f"seqid: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        extra = _EXTRA_OF.get(top)
        fix = f"pip install 'seqid-orm[{extra}]'" if extra else f"pip install {top}"
        print(f"seqid: error: {top} is not installed; {fix}", file=sys.stderr)
        return 2
    except ImportError as exc:  # an adapter's own message, which names the pip line already
        print(f"seqid: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a database that cannot be reached, mostly
        if type(exc).__module__.startswith("sqlalchemy"):
            print(f"seqid: error: {getattr(exc, 'orig', None) or exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
