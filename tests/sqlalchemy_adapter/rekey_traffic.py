"""An application's writers while a table's integer key changes (tests/sqlalchemy_adapter/test_rekey.py): a process
of its own that, until told to stop, writes as one release's code does, then writes what it saw as JSON.

    python -m tests.sqlalchemy_adapter.rekey_traffic URL PARENT CHILD1 CHILD2 OUT STOPFILE --release old|new

``old``: integers only, as the code before the change (a parent, a child of each kind under it, a child moved to
another parent, a parent deleted: its CASCADE child goes, its SET NULL child stays with no parent; with
``--text-keys`` release N's keys are UUIDs as text it makes itself, as Django's ``UUIDField`` before 5.0 on
MariaDB; with ``--collector`` the code deletes and nulls them itself first, as Django's deletion does, whose
foreign keys have no ``ON DELETE`` in the database).  ``new``: the
code after it, with seqid keys (``seqid_orm.uuid7()``) for the parent and the children's foreign keys.  Each
statement may wait at most ``--wait-ms`` for a lock (PostgreSQL's ``lock_timeout``): a migration that holds a
table longer makes it fail, and the failure is counted.  ``--pause-ms`` between one round of writes and the next:
the tests' writers pause (:data:`TESTS_PAUSE_MS`), so that on CI's two cores, where the suite runs in several
parts at once, they do not take a core each for nothing (a round is a few milliseconds: they still write
hundreds of times a second through every step); the benchmark's write as fast as their one connection goes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The tests' pause between two rounds of writes, in milliseconds.
TESTS_PAUSE_MS = 10


class Writers:
    """This module in a process of its own, writing into ``tables`` (parent, child1, child2) of ``url`` as
    ``release``'s code does (``more``: its other options), until :meth:`stop`; the tests' and the benchmark's."""

    def __init__(
        self,
        url: str,
        tables: tuple[str, str, str],
        folder: Path,
        release: str,
        *more: str,
        pause_ms: int = TESTS_PAUSE_MS,
    ) -> None:
        self.out, self.stop_file = folder / f"{release}.json", folder / f"{release}.stop"
        for stale in (self.out, self.stop_file, Path(str(self.out) + ".ready")):
            stale.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.sqlalchemy_adapter.rekey_traffic", url, *tables),
                *(str(self.out), str(self.stop_file), "--release", release, "--pause-ms", str(pause_ms), *more),
            ],
            cwd=ROOT,
        )
        deadline = time.monotonic() + 30
        while not Path(str(self.out) + ".ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"the {release} release's writers did not start")
            time.sleep(0.05)

    def stop(self) -> dict:
        """What the writers saw: ``writes``, ``errors``, ``longest`` (seconds)."""
        self.stop_file.touch()
        self.proc.wait(60)
        seen: dict = json.loads(self.out.read_text())
        return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("url", "parent", "child1", "child2", "out", "stop"):
        parser.add_argument(name)
    parser.add_argument("--release", choices=("old", "new"), required=True)
    parser.add_argument("--wait-ms", type=int, default=1000)
    parser.add_argument("--pause-ms", type=int, default=0, help="between one round of writes and the next")
    parser.add_argument("--collector", action="store_true", help="delete and null a parent's children first")
    parser.add_argument("--text-keys", action="store_true", help="release N writes UUIDs as text, made here")
    parser.add_argument(
        "--unprepared",
        action="store_true",
        help="no server-prepared statement (Django's client-side binding; psycopg prepares one run five times)",
    )
    args = parser.parse_args()

    import sqlalchemy as sa

    from seqid_orm import uuid7

    unprepared = {"connect_args": {"prepare_threshold": None}} if args.unprepared and "postgres" in args.url else {}
    engine = sa.create_engine(args.url, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT", **unprepared)
    conn = engine.connect()
    pg = engine.dialect.name == "postgresql"
    if pg:
        conn.exec_driver_sql(f"SET lock_timeout = {args.wait_ms}")
    else:  # MariaDB: a metadata lock's wait and a row lock's, in whole seconds
        wait_s = max(1, round(args.wait_ms / 1000))
        conn.exec_driver_sql(f"SET SESSION lock_wait_timeout = {wait_s}, innodb_lock_wait_timeout = {wait_s}")
    last_child = (
        f"WHERE id = (SELECT max(id) FROM {args.child1})" if pg else "ORDER BY id DESC LIMIT 1"
    )  # MariaDB reads no subquery of the table an UPDATE writes (error 1093)
    p, c1, c2 = args.parent, args.child1, args.child2
    seen: dict[str, object] = {"writes": 0, "errors": [], "longest": 0.0}
    made: list[object] = []
    with open(args.out + ".ready", "w"):
        pass

    def timed(sql: str, params: dict[str, object]) -> object:
        began = time.monotonic()
        try:
            result = conn.execute(sa.text(sql), params)
            return result.scalar() if result.returns_rows else None
        finally:
            seen["longest"] = max(float(str(seen["longest"])), time.monotonic() - began)

    starter = os.getppid()
    # until told to stop, or until the test that started it is gone (a worker killed on its time-out runs no finally)
    while not os.path.exists(args.stop) and os.getppid() == starter:
        try:
            if args.release == "old" and args.text_keys:
                parent = str(uuid.uuid4())
                timed(f"INSERT INTO {p} (id, name) VALUES (:k, 'old')", {"k": parent})
            elif args.release == "old":
                parent = timed(f"INSERT INTO {p} (name) VALUES ('old') RETURNING id", {})
            if args.release == "old":
                timed(f"INSERT INTO {c1} (parent_id) VALUES (:p)", {"p": parent})
                timed(f"INSERT INTO {c2} (parent_id) VALUES (:p)", {"p": parent})
                made.append(parent)
                moved = random.choice(made)
                timed(f"UPDATE {c1} SET parent_id = :p {last_child}", {"p": moved})
                if len(made) > 3 and random.random() < 0.3:
                    gone = made.pop(0)
                    if args.collector:  # Django's deletion: the application's own CASCADE and SET_NULL first
                        timed(f"DELETE FROM {c2} WHERE parent_id = :p", {"p": gone})
                        timed(f"UPDATE {c1} SET parent_id = NULL WHERE parent_id = :p", {"p": gone})
                        timed(f"UPDATE {p} SET boss_id = NULL WHERE boss_id = :p", {"p": gone})
                    timed(f"DELETE FROM {p} WHERE id = :p", {"p": gone})
            else:
                key: object = uuid7() if pg else str(uuid7())  # PyMySQL binds no uuid.UUID
                timed(f"INSERT INTO {p} (id, name) VALUES (:k, 'new')", {"k": key})
                timed(f"INSERT INTO {c1} (parent_id) VALUES (:k)", {"k": key})
                timed(f"INSERT INTO {c2} (parent_id) VALUES (:k)", {"k": key})
            seen["writes"] = int(str(seen["writes"])) + 1
            if args.pause_ms:
                time.sleep(args.pause_ms / 1000)
        except Exception:  # counted: the test says which
            errors = seen["errors"]
            assert isinstance(errors, list)
            said = traceback.format_exc(limit=1).strip().splitlines()
            errors.append(next((line for line in said if "Error" in line), said[-1])[:300])
            time.sleep(0.05)
    conn.close()
    with open(args.out, "w") as out:
        json.dump(seen, out)


if __name__ == "__main__":
    main()
