"""Where a Python-made key costs on the way to the database: four insert paths, BIGINT against seqid.

``python -m benchmarks.insert_paths --url postgresql+psycopg://postgres@127.0.0.1/test
[--rows 200000] [--rounds 5]`` times, per round and in rotated order, ``rows`` rows of a key and a
100-character payload inserted in transactions of ``--batch`` rows along each path:

* ``executemany``: ``conn.execute(insert(t), rows)``, SQLAlchemy's default (the driver's executemany;
  psycopg pipelines one Bind/Execute per row);
* ``insertmanyvalues``: the same call on an engine whose dialect has ``use_insertmanyvalues_wo_returning``:
  SQLAlchemy renders multi-row ``INSERT … VALUES (…), (…)`` pages itself;
* ``orm-bulk``: ``session.execute(insert(Model), rows)``, the ORM's bulk INSERT;
* ``copy`` (PostgreSQL with psycopg 3): ``COPY … FROM STDIN`` through the driver connection.

For each path, ``bigint`` lets the database number the rows (no key sent) and ``seqid`` sends a
:class:`~seqid_orm.sqlalchemy.SeqUUID` key: made per row by ``seq_uuid_default`` on the SQLAlchemy
paths, by :func:`~seqid_orm.comb_batch` for ``COPY`` (which bypasses column defaults).  The figure
is the median over rounds of seqid's time over BIGINT's *on the same path*; each path's BIGINT is
also compared with plain executemany, so a path's own gain is visible apart from the key's cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from seqid_orm.cli.bench.rounds import median_ratio, ratios, rotated

PATHS = ("executemany", "insertmanyvalues", "orm-bulk", "copy")
KEYS = ("bigint", "seqid")


def _tables(metadata: Any, prefix: str) -> dict[str, Any]:
    import sqlalchemy as sa

    from seqid_orm.sqlalchemy import SeqUUID, seq_uuid_default

    return {
        "bigint": sa.Table(
            f"{prefix}bigint",
            metadata,
            # SQLite numbers only an INTEGER PRIMARY KEY (its rowid) by itself
            sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), sa.Identity(), primary_key=True),
            sa.Column("payload", sa.String(100), nullable=False),
        ),
        "seqid": sa.Table(
            f"{prefix}seqid",
            metadata,
            sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default),
            sa.Column("payload", sa.String(100), nullable=False),
        ),
    }


def _insert(path: str, key: str, engines: dict[str, Any], tables: dict[str, Any], rows: int, batch: int) -> float:
    import sqlalchemy as sa
    from sqlalchemy import orm

    from seqid_orm.ids.comb import comb_batch

    table = tables[key]
    payload = "x" * 100
    chunk = [{"payload": payload} for _ in range(batch)]
    start = time.perf_counter()
    if path == "copy":
        raw = engines["executemany"].raw_connection()
        try:
            cur = raw.cursor()
            for done in range(0, rows, batch):
                n = min(batch, rows - done)
                if key == "bigint":
                    with cur.copy(f"COPY {table.name} (payload) FROM STDIN") as copy:
                        for _ in range(n):
                            copy.write_row((payload,))
                else:
                    layout = sa.inspect(engines["executemany"]).dialect.seqid_layout
                    with cur.copy(f"COPY {table.name} (id, payload) FROM STDIN (FORMAT BINARY)") as copy:
                        copy.set_types(["uuid", "varchar"])  # binary: the 16 bytes, not 36 characters
                        for u in comb_batch(n, layout):
                            copy.write_row((u, payload))
                raw.commit()
        finally:
            raw.close()
    elif path == "orm-bulk":
        with orm.Session(engines["executemany"]) as session:
            for done in range(0, rows, batch):
                session.execute(sa.insert(table), chunk[: min(batch, rows - done)])
                session.commit()
    else:
        engine = engines[path]
        for done in range(0, rows, batch):
            with engine.begin() as conn:
                conn.execute(sa.insert(table), chunk[: min(batch, rows - done)])
    return time.perf_counter() - start


def run(
    url: str, rows: int = 200_000, rounds: int = 5, batch: int = 5_000, prefix: str = "seqid_paths_"
) -> dict[str, Any]:
    import sqlalchemy as sa

    from seqid_orm.sqlalchemy import layout_for

    engines = {
        "executemany": sa.create_engine(url),
        "insertmanyvalues": sa.create_engine(url),
    }
    # a dialect attribute (psycopg2's executemany_mode="values_only" sets it), not an engine argument
    engines["insertmanyvalues"].dialect.use_insertmanyvalues_wo_returning = True
    dialect = engines["executemany"].dialect
    paths = [p for p in PATHS if p != "copy" or (dialect.name == "postgresql" and dialect.driver == "psycopg")]
    metadata = sa.MetaData()
    tables = _tables(metadata, prefix)
    with engines["executemany"].connect() as conn:  # the first connection tells the layout
        dialect.seqid_layout = layout_for(dialect, tables["seqid"].c.id.type)  # type: ignore[attr-defined]
        server = ".".join(map(str, dialect.server_version_info or ()))
    metadata.drop_all(engines["executemany"])
    metadata.create_all(engines["executemany"])
    combos = [(p, k) for p in paths for k in KEYS]
    seconds: dict[tuple[str, str], list[float]] = {c: [] for c in combos}
    try:
        for r in range(rounds):
            for path, key in rotated(combos, r):
                with engines["executemany"].begin() as conn:  # SQLite has no TRUNCATE
                    empty = "DELETE FROM" if dialect.name == "sqlite" else "TRUNCATE TABLE"
                    conn.execute(sa.text(f"{empty} {tables[key].name}"))
                seconds[(path, key)].append(_insert(path, key, engines, tables, rows, batch))
    finally:
        metadata.drop_all(engines["executemany"])
        for engine in engines.values():
            engine.dispose()
    out: dict[str, Any] = {"database": f"{dialect.name} {server}", "driver": dialect.driver, "rows": rows}
    out["rounds"] = rounds
    out["paths"] = {}
    base = seconds[("executemany", "bigint")]
    for path in paths:
        big, seq = seconds[(path, "bigint")], seconds[(path, "seqid")]
        per_round = ratios(seq, big)
        out["paths"][path] = {
            "bigint_rows_per_s": round(rows / statistics.median(big)),
            "seqid_rows_per_s": round(rows / statistics.median(seq)),
            "seqid_vs_bigint_median": median_ratio(seq, big),
            "seqid_vs_bigint_range": [round(min(per_round), 3), round(max(per_round), 3)],
            "bigint_vs_executemany_bigint": median_ratio(big, base),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"{result['database']} ({result['driver']}): {result['rows']:,} rows per path and key, "
        f"{result['rounds']} rotated rounds",
        "",
        "| path | BIGINT rows/s | seqid rows/s | seqid / BIGINT time (median) | range "
        "| path's BIGINT / executemany's |",
        "|---|---|---|---|---|---|",
    ]
    for path, r in result["paths"].items():
        low, high = r["seqid_vs_bigint_range"]
        lines.append(
            f"| {path} | {r['bigint_rows_per_s']:,} | {r['seqid_rows_per_s']:,} | {r['seqid_vs_bigint_median']} "
            f"| {low} to {high} | {r['bigint_vs_executemany_bigint']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", required=True, help="a SQLAlchemy URL")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=5_000, help="rows per transaction")
    parser.add_argument("--table-prefix", default="seqid_paths_")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.url, args.rows, args.rounds, args.batch, args.table_prefix)
    print(json.dumps(result) if args.json else markdown(result))


if __name__ == "__main__":
    main()
