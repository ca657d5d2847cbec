"""An application's traffic on one table while a migration changes it: a process of its own that inserts a row
(as the application's old code does, not knowing the new column) and reads one row by its key, in turn, every
``--every`` seconds, on its own connections, until told to stop; then writes what it saw as JSON.

    python -m tests.traffic URL TABLE OUT.json STOPFILE [--every 0.02] [--wait-ms 1000]

Each session lets a statement wait for a lock at most ``--wait-ms`` (PostgreSQL's ``lock_timeout``; MariaDB's
``lock_wait_timeout`` and ``innodb_lock_wait_timeout``, in whole seconds): a migration that holds the table
longer than that makes the application's statement fail, and the failure is counted.  So "no wait above the
target" is the database's own judgement, not a timed assertion on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
    writer, reader = engine.connect(), engine.connect()
    for conn in (writer, reader):
        for statement in setup:
            conn.exec_driver_sql(statement)
        conn.commit()
    with reader.begin():
        low, high = reader.exec_driver_sql(f"SELECT min(id), max(id) FROM {args.table}").one()
    seen: dict[str, object] = {"inserts": 0, "reads": 0, "errors": [], "slowest_insert": 0.0, "slowest_read": 0.0}
    timeline: list[tuple[float, str, float]] = []
    began = time.monotonic()
    with open(args.out + ".ready", "w") as ready:
        ready.write(str(os.getpid()))
    while not os.path.exists(args.stop):
        for kind, conn in (("insert", writer), ("read", reader)):
            start = time.monotonic()
            try:
                with conn.begin():
                    if kind == "insert":
                        conn.exec_driver_sql(
                            f"INSERT INTO {args.table} (created_at, note) VALUES (CURRENT_TIMESTAMP, 'old code')"
                        )
                    else:
                        conn.exec_driver_sql(
                            f"SELECT * FROM {args.table} WHERE id = {random.randint(low, high)}"
                        ).all()
                took = time.monotonic() - start
                seen[f"{kind}s"] = int(seen[f"{kind}s"]) + 1  # type: ignore[call-overload]
                key = f"slowest_{kind}"
                seen[key] = max(float(seen[key]), took)  # type: ignore[arg-type]
                timeline.append((round(start - began, 3), kind, round(took, 4)))
            except Exception as exc:  # every failure is what the test counts
                seen["errors"].append(f"{kind}: {type(exc).__name__}: {str(exc)[:300]}")  # type: ignore[union-attr]
                if len(seen["errors"]) == 1:  # type: ignore[arg-type]
                    traceback.print_exc()
            time.sleep(args.every)
    seen["timeline"] = timeline
    with open(args.out, "w") as out:
        json.dump(seen, out)


if __name__ == "__main__":
    main()
