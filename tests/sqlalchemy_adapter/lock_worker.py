"""A process that holds seqid's migration lock, as a pod running migrations does: ``python -m
tests.sqlalchemy_adapter.lock_worker URL NAME TTL`` takes the lock (a SQLite URL: the file's lock), prints
``held``, then checks it every 0.1 s until killed; where a check fails it prints the error's name and exits 3."""

from __future__ import annotations

import sys
import time

import sqlalchemy as sa

from seqid_orm.errors import MigrationLockError
from seqid_orm.sqlalchemy.alembic import migration_lock


def main() -> int:
    url, name, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    with migration_lock(engine, name, ttl=ttl) as lock:
        print("held", flush=True)
        while True:
            try:
                lock.check()
            except MigrationLockError as exc:
                print(type(exc).__name__, exc, flush=True)
                return 3
            time.sleep(0.1)


if __name__ == "__main__":
    raise SystemExit(main())
