"""Run the insert benchmark against one database URL."""

from __future__ import annotations

import asyncio
import functools
import random
import statistics
import string
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, registry

from ...errors import InvalidArgumentError, ServerDefaultUnavailableError
from ...sqlalchemy.bulk import bulk_insert
from ...sqlalchemy.types import SeqUUID, dialect_server_version, dialect_vendor
from . import cpu, metrics
from .keys import KINDS, KeyKind, check_kinds
from .rounds import rotated

PAYLOAD_LENGTH = 100
VIAS = ("core", "orm", "session", "bulk")  # how rows reach the database; see run_kind


@dataclass
class KindResult:
    """What one key kind did on one database."""

    kind: str
    description: str
    rows: int
    seconds: float
    chunks: list[tuple[int, float]]  # (rows inserted so far, seconds for this chunk)
    chunk_rows: int
    sizes: dict[str, int] = field(default_factory=dict)
    deltas: dict[str, float] = field(default_factory=dict)
    key_bytes: int = 16
    client_cpu_s: float = 0.0  # this process: key generation, SQLAlchemy, the driver (and SQLite itself)
    server_cpu_s: float | None = None  # the server's processes, when it runs on this machine

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def per_million(self, index: int) -> float:
        """Seconds per million rows for one chunk (0: first, -1: last)."""
        return self.chunks[index][1] / self.chunk_rows * 1_000_000

    @property
    def total_bytes(self) -> int | None:
        if not self.sizes:
            return None
        return self.sizes.get("table_bytes", 0) + self.sizes.get("index_bytes", 0)

    @property
    def hit_ratio(self) -> float | None:
        hit, read = self.deltas.get("hit"), self.deltas.get("read")
        if hit is None or read is None or hit + read <= 0:
            return None
        return hit / (hit + read)


@dataclass
class BenchRun:
    """All key kinds on one database, in one or more rounds.

    Each round runs every kind once, in an order rotated by one place per round, so that each
    kind runs early and late as often as the others: on a shared machine the load drifts over
    minutes, and a kind that always ran first (or last) would carry that drift in its ratios.
    """

    url: str
    dialect: str
    server_version: str
    rows: int
    batch: int
    via: str
    rounds: list[dict[str, KindResult]]  # per round: kind -> result (every kind that ran)
    orders: list[list[str]]  # the order the kinds ran in, per round
    notes: list[str]

    @property
    def driver(self) -> str:
        """The DBAPI the rows went through (``psycopg``, ``asyncpg``, ``pymysql``...): one database, two tables."""
        return sa.make_url(self.url).get_driver_name()

    @property
    def kinds(self) -> list[str]:
        return list(self.rounds[0]) if self.rounds else []

    @property
    def results(self) -> list[KindResult]:
        """One result per kind: the round with its median time (the lower one for an even count)."""
        out = []
        for kind in self.kinds:
            ranked = sorted((rnd[kind] for rnd in self.rounds), key=lambda r: r.seconds)
            out.append(ranked[(len(ranked) - 1) // 2])
        return out

    def time_ratios(self, kind: str, base: str = "bigint") -> list[float]:
        """``kind``'s time over ``base``'s, one ratio per round (both measured in that round)."""
        return [rnd[kind].seconds / rnd[base].seconds for rnd in self.rounds if rnd[base].seconds]

    def time_vs(self, kind: str, base: str = "bigint") -> float:
        """The median of :meth:`time_ratios`: the figure the report quotes."""
        return statistics.median(self.time_ratios(kind, base))


def _check_via(via: str) -> None:
    if via not in VIAS:
        raise InvalidArgumentError(f"via must be one of {', '.join(VIAS)}, got {via!r}")


def _payloads(n: int = 1000) -> list[str]:
    rnd = random.Random(12345)  # payload text only; keys use the CSPRNG
    alphabet = string.ascii_letters + string.digits
    return ["".join(rnd.choices(alphabet, k=PAYLOAD_LENGTH)) for _ in range(n)]


def _progress(label: str, done: int, total: int) -> None:
    """A progress bar on a terminal; one line per finished key kind otherwise (logs, CI)."""
    if not sys.stderr.isatty():
        if done >= total:
            sys.stderr.write(f"  {label:<12} {total:,} rows done\n")
        return
    width = 30
    filled = int(width * done / total) if total else width
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\r  {label:<12} [{'#' * filled}{'.' * (width - filled)}] {done:>10,}/{total:,}{end}")
    sys.stderr.flush()


def run_kind(
    engine: Engine,
    kind: KeyKind,
    rows: int,
    batch: int = 5000,
    chunks: int = 10,
    via: str = "core",
    progress: Callable[[str, int, int], None] | None = _progress,
    table_prefix: str = "seqid_bench_",
    server_pid: int | None = None,
) -> KindResult:
    """Insert ``rows`` rows keyed by ``kind`` into a fresh table and measure.

    ``via``: ``"core"`` (``conn.execute(insert(t), rows)``), ``"orm"`` (ORM bulk INSERT,
    ``session.execute(insert(Model), rows)``), ``"session"`` (the unit of work:
    ``session.add_all(objects)`` and commit, which reads database-made keys back) or ``"bulk"``
    (:func:`~seqid_orm.sqlalchemy.bulk_insert`: keys in one batch, PostgreSQL's binary ``COPY``).
    ``server_pid``: the database server's main process on this machine (see :mod:`.cpu`), to
    measure its CPU time too.
    """
    _check_via(via)
    table_name = table_name_for(kind.name, table_prefix)
    metadata = sa.MetaData()
    key = kind.column(engine)
    integer_key = key.type.python_type is int
    extra = []
    if via == "session" and key.server_default is not None and not integer_key:
        # as the README advises: without it SQLAlchemy inserts database-made UUIDs one row at a time
        extra.append(sa.insert_sentinel("_sentinel"))
    table = sa.Table(
        table_name,
        metadata,
        key,
        sa.Column("payload", sa.String(PAYLOAD_LENGTH)),
        *extra,
        # SQLite's advice for a key that is not its integer rowid: a WITHOUT ROWID table keeps the
        # rows in the key's own B-tree instead of a rowid table plus a second index on the key
        sqlite_with_rowid=integer_key,
    )
    metadata.drop_all(engine)
    metadata.create_all(engine)
    make_batch = None if via == "bulk" and kind.bulk_made else kind.make_batch(engine)
    payloads = _payloads()
    chunk_rows = max(batch, rows // chunks)
    with engine.begin() as conn:
        before = metrics.counters(conn, table_name)
    done = 0
    timeline: list[tuple[int, float]] = []
    mapper_registry = registry() if via in ("orm", "session") else None
    target: Any = table
    if mapper_registry is not None:  # a mapped class: ORM bulk INSERT, or objects for the unit of work
        target = type(f"Bench_{table_name}", (), {})
        mapper_registry.map_imperatively(target, table)
    session = Session(engine, expire_on_commit=False) if via in ("orm", "session") else None
    server_before = cpu.process_tree_seconds(server_pid) if server_pid else None
    client_before = time.process_time()
    start = chunk_start = time.perf_counter()
    chunk_done = 0
    try:
        while done < rows:
            n = min(batch, rows - done)
            keys = make_batch(n) if make_batch else None
            params = [
                {"id": keys[i], "payload": payloads[(done + i) % len(payloads)]}
                if keys is not None
                else {"payload": payloads[(done + i) % len(payloads)]}
                for i in range(n)
            ]
            if via == "session" and session is not None:  # the unit of work: objects, flushed at commit
                objects = [target(**p) for p in params]
                session.add_all(objects)
                session.commit()
            elif session is not None:  # ORM bulk INSERT: session.execute(insert(Model), dicts)
                session.execute(sa.insert(target), params)
                session.commit()
            elif via == "bulk":  # seqid's bulk path: keys in one batch, COPY on PostgreSQL
                with engine.begin() as conn:
                    bulk_insert(conn, table, params, make_keys=key.server_default is None)
            else:  # Core executemany: what `conn.execute(insert(t), rows)` does for users
                with engine.begin() as conn:
                    conn.execute(sa.insert(table), params)
            done += n
            chunk_done += n
            if chunk_done >= chunk_rows or done >= rows:
                now = time.perf_counter()
                timeline.append((done, (now - chunk_start) * chunk_rows / chunk_done))
                chunk_start, chunk_done = now, 0
                if progress:
                    progress(kind.name, done, rows)
    finally:
        if session is not None:
            session.close()
        if mapper_registry is not None:
            mapper_registry.dispose()
    seconds = time.perf_counter() - start
    client_cpu = time.process_time() - client_before
    server_after = cpu.process_tree_seconds(server_pid) if server_pid else None
    server_cpu = server_after - server_before if server_after is not None and server_before is not None else None
    with engine.begin() as conn:
        after = metrics.counters(conn, table_name)
        sizes = metrics.sizes(conn, table_name)
    deltas = {k: after[k] - before.get(k, 0.0) for k in after}
    return KindResult(
        kind.name,
        kind.description,
        rows,
        seconds,
        timeline,
        chunk_rows,
        sizes,
        deltas,
        kind.key_bytes,
        client_cpu,
        server_cpu,
    )


def table_name_for(kind: str, table_prefix: str = "seqid_bench_") -> str:
    return f"{table_prefix}{kind.replace('-', '_')}"


def run(
    url: str,
    rows: int,
    kinds: Sequence[str],
    batch: int = 5000,
    via: str = "core",
    keep_tables: bool = False,
    progress: Callable[[str, int, int], None] | None = _progress,
    table_prefix: str = "seqid_bench_",
    repeat: int = 1,
    chunks: int = 10,
) -> BenchRun:
    """Run every kind in ``kinds`` on ``url``, ``repeat`` rounds in rotated order (``chunks``: how many
    points of the seconds-per-million timeline each kind gets).

    Tables are dropped after each kind (``keep_tables`` keeps the last round's).  An asyncio driver's
    URL (``postgresql+asyncpg://``, ``mysql+aiomysql://``, ``sqlite+aiosqlite://``) runs through that
    driver as an ``AsyncEngine`` does: the same statements, its awaits bridged by SQLAlchemy's greenlet
    (:meth:`~sqlalchemy.ext.asyncio.AsyncConnection.run_sync`), the path a FastAPI application's
    ``AsyncSession`` takes.
    """
    check_kinds(kinds)
    _check_via(via)
    if not isinstance(repeat, int) or repeat < 1:
        raise InvalidArgumentError(f"repeat must be a whole number of rounds, at least 1, got {repeat!r}")
    work = functools.partial(
        _run_on,
        rows=rows,
        kinds=kinds,
        batch=batch,
        via=via,
        keep_tables=keep_tables,
        progress=progress,
        table_prefix=table_prefix,
        repeat=repeat,
        chunks=chunks,
    )
    if sa.make_url(url).get_dialect().is_async:
        return asyncio.run(_run_async(url, work))
    engine = sa.create_engine(url)
    try:
        return work(engine)
    finally:
        engine.dispose()


async def _run_async(url: str, work: Callable[[Engine], BenchRun]) -> BenchRun:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:  # inside run_sync the sync engine's calls may await the driver
            return await conn.run_sync(lambda sync: work(sync.engine))
    finally:
        await engine.dispose()


def _run_on(
    engine: Engine,
    rows: int,
    kinds: Sequence[str],
    batch: int,
    via: str,
    keep_tables: bool,
    progress: Callable[[str, int, int], None] | None,
    table_prefix: str,
    repeat: int,
    chunks: int,
) -> BenchRun:
    notes: list[str] = []
    with engine.begin() as conn:
        notes += metrics.prepare(conn)
        server = cpu.server_pid(conn)
    version = ".".join(map(str, dialect_server_version(engine.dialect) or ()))
    active = list(kinds)
    for name in kinds:  # left out before the first round, not announced and then skipped
        if KINDS[name].database_made:
            try:
                SeqUUID().target(engine.dialect).server_default  # noqa: B018 - raises where it cannot
            except ServerDefaultUnavailableError as exc:
                notes.append(f"{name} skipped: {exc}")
                active.remove(name)
    rounds: list[dict[str, KindResult]] = []
    orders: list[list[str]] = []
    for number in range(repeat):
        order = rotated(active, number)
        done: dict[str, KindResult] = {}
        if repeat > 1 and progress:
            sys.stderr.write(f"  round {number + 1}/{repeat}: {', '.join(order)}\n")
        for name in order:
            try:
                done[name] = run_kind(
                    engine,
                    KINDS[name],
                    rows,
                    batch,
                    via=via,
                    progress=progress,
                    table_prefix=table_prefix,
                    server_pid=server,
                    chunks=chunks,
                )
            except ServerDefaultUnavailableError as exc:  # comb-db where the database cannot make ids
                notes.append(f"{name} skipped: {exc}")
                active.remove(name)
            if not keep_tables or number < repeat - 1:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {table_name_for(name, table_prefix)}"))
        rounds.append({name: done[name] for name in kinds if name in done})
        orders.append([name for name in order if name in done])
    return BenchRun(
        engine.url.render_as_string(hide_password=True),
        dialect_vendor(engine.dialect),
        version,
        rows,
        batch,
        via,
        rounds,
        orders,
        notes,
    )


def result_rows(run: BenchRun) -> list[dict[str, Any]]:
    """One flat record per key kind, with ratios against the BIGINT row of the same run.

    With several rounds, ``time_vs_bigint`` is the median of the per-round ratios (each kind
    against the BIGINT run of its own round) and ``time_vs_bigint_range`` their spread; CPU
    figures are medians over the rounds; everything else comes from the kind's median round.
    """
    by_kind = {r.kind: r for r in run.results}
    base = by_kind.get("bigint")
    out = []
    for r in run.results:
        per_round = [rnd[r.kind] for rnd in run.rounds]
        rec: dict[str, Any] = {
            "database": f"{run.dialect} {run.server_version}".strip(),
            "key": r.kind,
            "rows": r.rows,
            "s_per_M_first": round(r.per_million(0), 2),
            "s_per_M_last": round(r.per_million(-1), 2),
            "rows_per_s": round(r.rows_per_s),
        }
        ratios = run.time_ratios(r.kind) if base is not None else []
        if ratios:
            rec["time_vs_bigint"] = round(statistics.median(ratios), 3)
            if len(ratios) > 1:
                rec["time_vs_bigint_range"] = f"{min(ratios):.2f}-{max(ratios):.2f}"
        rec["client_cpu_us_per_row"] = round(statistics.median(k.client_cpu_s for k in per_round) / r.rows * 1e6, 2)
        server = [k.server_cpu_s for k in per_round if k.server_cpu_s is not None]
        if server:
            rec["server_cpu_us_per_row"] = round(statistics.median(server) / r.rows * 1e6, 2)
        if r.total_bytes is not None:
            rec["table_MB"] = round(r.sizes.get("table_bytes", 0) / 2**20, 1)
            rec["index_MB"] = round(r.sizes.get("index_bytes", 0) / 2**20, 1)
            rec["bytes_per_row"] = round(r.total_bytes / r.rows, 1)
            if base is not None and base.total_bytes:
                ideal = base.total_bytes + (r.key_bytes - base.key_bytes) * r.rows
                rec["size_vs_ideal"] = round(r.total_bytes / ideal, 3)
        if "wal_bytes" in r.deltas:
            rec["wal_B_per_row"] = round(r.deltas["wal_bytes"] / r.rows, 1)
            rec["fpi_per_1k_rows"] = round(r.deltas.get("wal_fpi", 0.0) / r.rows * 1000, 2)
        if "page_splits" in r.deltas:
            rec["page_splits_per_1k_rows"] = round(r.deltas["page_splits"] / r.rows * 1000, 2)
        if "idx_read" in r.deltas:
            rec["index_reads_per_1k_rows"] = round(r.deltas["idx_read"] / r.rows * 1000, 2)
        if r.hit_ratio is not None:
            rec["hit_ratio"] = round(r.hit_ratio, 4)
        out.append(rec)
    return out
