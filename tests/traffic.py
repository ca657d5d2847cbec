"""An application's traffic on one table while a migration changes it: a process of its own that inserts a row
(as the application's old code does, not knowing the new column) and reads one row by its key, in turn, every
``--every`` seconds, on its own connections, until told to stop; then writes what it saw as JSON.

    python -m tests.traffic URL TABLE OUT.json STOPFILE [--every 0.02] [--wait-ms 1000] [--new-code COLUMN]

With ``--new-code COLUMN`` a third session inserts as the application's new code does once the migration has
made ``COLUMN``: with a key of its own (``seqid_orm.uuid7()``), in the column's storage as the database says.

Each kind of statement runs in a thread of its own on its own connection, so one that waits holds up only
its own kind.  Each session lets a statement wait for a lock at most ``--wait-ms`` (PostgreSQL's
``lock_timeout``; MariaDB's ``lock_wait_timeout`` and ``innodb_lock_wait_timeout``, in whole seconds): a
migration that holds the table
longer than that makes the application's statement fail, and the failure is counted.  So "no wait above the
target" is the database's own judgement, not a timed assertion on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
import traceback


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("table")
    parser.add_argument("out")
    parser.add_argument("stop")
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("--wait-ms", type=int, default=1000)
    parser.add_argument("--new-code", default=None)
    args = parser.parse_args()

    import sqlalchemy as sa

    engine = sa.create_engine(args.url, poolclass=sa.NullPool)
    pg = engine.dialect.name == "postgresql"
    seconds = max(1, round(args.wait_ms / 1000))
    setup = (
        [f"SET lock_timeout = {args.wait_ms}"]
        if pg
        else [f"SET SESSION lock_wait_timeout = {seconds}", f"SET SESSION innodb_lock_wait_timeout = {seconds}"]
    )
    writer, reader, newer = engine.connect(), engine.connect(), engine.connect()
    for conn in (writer, reader, newer):
        for statement in setup:
            conn.exec_driver_sql(statement)
        conn.commit()
    with reader.begin():
        low, high = reader.exec_driver_sql(f"SELECT min(id), max(id) FROM {args.table}").one()
    seen: dict[str, object] = {
        "inserts": 0,
        "reads": 0,
        "new_inserts": 0,
        "errors": [],
        "slowest_insert": 0.0,
        "slowest_read": 0.0,
        "slowest_new_insert": 0.0,
    }
    statements = {
        "insert": f"INSERT INTO {args.table} (created_at, note) VALUES (CURRENT_TIMESTAMP, 'old code')",
        "read": f"SELECT * FROM {args.table} WHERE id = %s",
    }
    new_column: str | None = None  # the column's type, once the migration made it
    timeline: list[tuple[float, str, float]] = []
    began = time.monotonic()
    lock = threading.Lock()

    def one_kind(kind: str, conn: object) -> None:
        """One kind of statement, on its own connection, every ``--every`` seconds: a statement that waits
        holds up only its own kind, so each kind's longest wait is its own."""
        nonlocal new_column
        while not os.path.exists(args.stop):
            if kind == "new_insert" and new_column is None:
                new_column = _column_type(conn, args.table, str(args.new_code))
                if new_column is None:
                    time.sleep(args.every)
                    continue
            start = time.monotonic()
            try:
                with conn.begin():  # type: ignore[attr-defined]
                    if kind == "insert":
                        conn.exec_driver_sql(statements["insert"])  # type: ignore[attr-defined]
                    elif kind == "read":
                        conn.exec_driver_sql(statements["read"] % random.randint(low, high)).all()  # type: ignore[attr-defined]
                    else:
                        conn.execute(  # type: ignore[attr-defined]
                            sa.text(
                                f"INSERT INTO {args.table} (created_at, note, {args.new_code}) "
                                "VALUES (CURRENT_TIMESTAMP, 'new code', :k)"
                            ),
                            {"k": _key_for(str(new_column), pg)},
                        )
                took = time.monotonic() - start
                with lock:
                    seen[f"{kind}s"] = int(seen[f"{kind}s"]) + 1  # type: ignore[call-overload]
                    key = f"slowest_{kind}"
                    seen[key] = max(float(seen[key]), took)  # type: ignore[arg-type]
                    timeline.append((round(start - began, 3), kind, round(took, 4)))
            except Exception as exc:  # every failure is what the test counts
                with lock:
                    seen["errors"].append(f"{kind}: {type(exc).__name__}: {str(exc)[:300]}")  # type: ignore[union-attr]
                    if len(seen["errors"]) == 1:  # type: ignore[arg-type]
                        traceback.print_exc()
            time.sleep(args.every)

    kinds = [("insert", writer), ("read", reader)] + ([("new_insert", newer)] if args.new_code else [])
    threads = [threading.Thread(target=one_kind, args=kind, daemon=True) for kind in kinds]
    for thread in threads:
        thread.start()
    with open(args.out + ".ready", "w") as ready:
        ready.write(str(os.getpid()))
    for thread in threads:
        thread.join()
    timeline.sort()
    seen["timeline"] = timeline
    with open(args.out, "w") as out:
        json.dump(seen, out)


def _column_type(conn: object, table: str, column: str) -> str | None:
    """The column's type once it exists (the migration's first step), else ``None``."""
    import sqlalchemy as sa

    with conn.begin():  # type: ignore[attr-defined]
        found = [c for c in sa.inspect(conn).get_columns(table) if c["name"] == column]
    return str(found[0]["type"]) if found else None


def _key_for(column_type: str, pg: bool) -> object:
    """A key the new code makes, in the form the column takes."""
    import seqid_orm

    key = seqid_orm.uuid7()
    low = column_type.lower()
    if "binary" in low or "bytea" in low or "blob" in low:
        return key.bytes
    return key if pg and low == "uuid" else str(key)


if __name__ == "__main__":
    main()
