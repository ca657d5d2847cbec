"""A ticket-drawing process for the tests: ``python -m tests.tickets.worker JSON``.

It builds its own :class:`TicketSequence` from the JSON options, prints ``ready``, waits for a
line on stdin (so many processes can start drawing at the same instant), then draws ``count``
ids, printing each on its own line as it goes (a test may kill it mid-run), and finally
``fetches N`` and ``done``.  With ``"hold"`` it first opens a business transaction on
``hold_url``, draws ids inside it and writes them to ``hold_table``, then prints ``holding``
and keeps the transaction open until stdin closes.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    opts = json.loads(sys.argv[1])
    from seqid_orm.allocation.tickets import TicketSequence
    from seqid_orm.errors import SeqIDError

    servers = opts["servers"]
    seq = TicketSequence(opts["name"], servers, **opts.get("options", {}))
    out = sys.stdout
    if opts.get("hold"):
        return hold(seq, opts)
    insert = bind_table(seq, opts) if opts.get("table") else None
    print("ready", flush=True)
    sys.stdin.readline()
    pace = opts.get("pace", 0.0)
    batch = opts.get("batch", 0)
    persist = opts.get("persist", 0.0)  # seconds to keep asking after a refusal (a failover under way)
    began = time.monotonic()
    drawn = 0
    while drawn < opts["count"]:
        asked = time.monotonic()
        try:
            ids = seq.next_ids(min(batch, opts["count"] - drawn)) if batch else [seq.next_id()]
        except SeqIDError as exc:
            print(f"refused-after {time.monotonic() - asked:.3f}", flush=True)
            print(f"error {type(exc).__name__} {exc}", flush=True)
            if time.monotonic() - began < persist:
                time.sleep(0.05)
                continue
            seq.close()
            return 0
        if insert is not None:
            insert(ids)
        out.write("".join(f"{i}\n" for i in ids))
        drawn += len(ids)
        if pace:
            out.flush()
            time.sleep(pace)
    seq.close()  # waits for a prefetch in flight, so the count below is final
    print(f"fetches {seq.fetches}", flush=True)
    print("done", flush=True)
    return 0


def bind_table(seq, opts):
    """Bind ``seq`` to ``opts["table"]``'s key column; a function inserting ids there."""
    import sqlalchemy as sa

    from seqid_orm.allocation.stores.sqlalchemy import ColumnFloor

    engine = sa.create_engine(opts["table_url"])
    table = sa.Table(opts["table"], sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True))
    seq.bind_floor(ColumnFloor(engine, table.c.id))

    def insert(ids):
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"id": i} for i in ids])

    return insert


def hold(seq, opts) -> int:
    import sqlalchemy as sa

    engine = sa.create_engine(opts["hold_url"])
    with engine.connect() as conn:
        conn.begin()
        ids = [seq.next_id() for _ in range(opts["count"])]
        conn.execute(sa.text(f"INSERT INTO {opts['hold_table']} (id) VALUES (:id)"), [{"id": i} for i in ids])
        if opts.get("naive"):  # the anti-pattern: allocate inside the business transaction
            conn.execute(
                sa.text("UPDATE seqid_tickets SET next_value = next_value + 1 WHERE name = :n"), {"n": opts["name"]}
            )
        print("holding", flush=True)
        sys.stdin.read()  # until the test closes our stdin
        conn.rollback()
    print("released", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
