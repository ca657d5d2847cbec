"""Run the insert benchmark against one database URL."""

from __future__ import annotations

import random
import string
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ..errors import ServerDefaultUnavailableError
from ..sqlalchemy.types import dialect_server_version, dialect_vendor
from . import metrics
from .keys import KINDS, KeyKind

PAYLOAD_LENGTH = 100


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
    """All key kinds on one database."""

    url: str
    dialect: str
    server_version: str
    rows: int
    batch: int
    via: str
    results: list[KindResult]
    notes: list[str]


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
) -> KindResult:
    """Insert ``rows`` rows keyed by ``kind`` into a fresh table and measure."""
    table_name = table_name_for(kind.name, table_prefix)
    metadata = sa.MetaData()
    table = sa.Table(table_name, metadata, kind.column(engine), sa.Column("payload", sa.String(PAYLOAD_LENGTH)))
    metadata.drop_all(engine)
    metadata.create_all(engine)
    make_batch = kind.make_batch(engine)
    payloads = _payloads()
    chunk_rows = max(batch, rows // chunks)
    with engine.begin() as conn:
        before = metrics.counters(conn, table_name)
    done = 0
    timeline: list[tuple[int, float]] = []
    start = chunk_start = time.perf_counter()
    chunk_done = 0
    session = Session(engine) if via == "orm" else None
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
            if session is not None:  # ORM bulk INSERT (executemany)
                session.execute(sa.insert(table), params)
                session.commit()
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
    seconds = time.perf_counter() - start
    with engine.begin() as conn:
        after = metrics.counters(conn, table_name)
        sizes = metrics.sizes(conn, table_name)
    deltas = {k: after[k] - before.get(k, 0.0) for k in after}
    return KindResult(kind.name, kind.description, rows, seconds, timeline, chunk_rows, sizes, deltas, kind.key_bytes)


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
) -> BenchRun:
    """Run every kind in ``kinds`` on ``url`` and drop the tables afterwards."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown key kinds {unknown}; choose from {', '.join(KINDS)}")
    if via not in ("core", "orm"):
        raise ValueError(f"via must be 'core' or 'orm', got {via!r}")
    engine = sa.create_engine(url)
    notes: list[str] = []
    try:
        with engine.begin() as conn:
            notes += metrics.prepare(conn)
        version = ".".join(map(str, dialect_server_version(engine.dialect) or ()))
        results = []
        for name in kinds:
            try:
                results.append(
                    run_kind(engine, KINDS[name], rows, batch, via=via, progress=progress, table_prefix=table_prefix)
                )
            except ServerDefaultUnavailableError as exc:  # comb-db where the database cannot make ids
                notes.append(f"{name} skipped: {exc}")
            if not keep_tables:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {table_name_for(name, table_prefix)}"))
        return BenchRun(
            engine.url.render_as_string(hide_password=True),
            dialect_vendor(engine.dialect),
            version,
            rows,
            batch,
            via,
            results,
            notes,
        )
    finally:
        engine.dispose()


def result_rows(run: BenchRun) -> list[dict[str, Any]]:
    """One flat record per key kind, with ratios against the BIGINT row of the same run."""
    by_kind = {r.kind: r for r in run.results}
    base = by_kind.get("bigint")
    out = []
    for r in run.results:
        rec: dict[str, Any] = {
            "database": f"{run.dialect} {run.server_version}".strip(),
            "key": r.kind,
            "rows": r.rows,
            "s_per_M_first": round(r.per_million(0), 2),
            "s_per_M_last": round(r.per_million(-1), 2),
            "rows_per_s": round(r.rows_per_s),
        }
        if base is not None and base.seconds:
            rec["time_vs_bigint"] = round(r.seconds / base.seconds, 3)
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
        if r.hit_ratio is not None:
            rec["hit_ratio"] = round(r.hit_ratio, 4)
        out.append(rec)
    return out
