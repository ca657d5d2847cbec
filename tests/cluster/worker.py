"""One writer of the Galera test: ``python -m tests.cluster.worker JSON``.

Builds its key source for ``kind`` (``uuid``: seqid's SeqUUID layout for this node, ``snowflake``: a
leased Snowflake whose lease table is in the cluster, ``ticket``: a ticket sequence on this node with
the node's offset, ``autoinc``: none, the cluster's AUTO_INCREMENT), draws a first key (so leases
and segments are taken before the clock starts), prints ``ready``, waits for "go", inserts ``rows``
rows in ``batch``-row transactions through its own node, and prints ``retries N``, ``seconds S``, ``done``.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    o = json.loads(sys.argv[1])
    import sqlalchemy as sa

    from seqid_orm import comb_batch
    from seqid_orm.sqlalchemy import SeqUUID, layout_for
    from seqid_orm.vendors import is_conflict
    from tests.cluster.schema import table as make_table

    engine = sa.create_engine(o["url"])
    with engine.connect():
        pass
    kind = o["kind"]
    table = make_table(kind, sa.MetaData(), o["prefix"])
    if kind == "uuid":
        layout = layout_for(engine.dialect, SeqUUID())

        def keys(n: int) -> list[object]:
            return list(comb_batch(n, layout))
    elif kind == "snowflake":
        from tests.leases.stores import leased

        gen = leased(o["url"], o["namespace"], ttl=15)
        gen.next_id()

        def keys(n: int) -> list[object]:
            return [gen.next_id() for _ in range(n)]
    elif kind == "ticket":
        from seqid_orm.allocation.tickets import TicketSequence

        seq = TicketSequence(o["sequence"], o["url"], step=3, offsets=[o["node"]], block_size=1000)
        seq.next_id()

        def keys(n: int) -> list[object]:
            return list(seq.next_ids(n))
    else:

        def keys(n: int) -> list[object]:
            return [None] * n

    filler = "x" * 100
    tag = o["tag"]
    print("ready", flush=True)
    sys.stdin.readline()
    retries = 0
    start = time.perf_counter()
    for first in range(0, o["rows"], o["batch"]):
        size = min(o["batch"], o["rows"] - first)
        ids = keys(size)
        rows = [{"tag": f"{tag}-{first + i}", "filler": filler} for i in range(size)]
        if kind != "autoinc":
            for row, key in zip(rows, ids, strict=True):
                row["id"] = key
        while True:
            try:
                with engine.begin() as conn:
                    conn.execute(sa.insert(table), rows)
                break
            except sa.exc.DBAPIError as exc:
                if not is_conflict(exc):
                    raise
                retries += 1  # a certification conflict: the whole batch was rolled back
    seconds = time.perf_counter() - start
    print(f"retries {retries}", flush=True)
    print(f"seconds {seconds:.3f}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
