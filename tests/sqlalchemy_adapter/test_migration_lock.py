"""The migration lock as pods meet it, with real processes on the real servers: a holder killed (its lease
ends within its ttl and the next run takes it), a holder frozen past its ttl (the next run takes it, and the
frozen one, woken, stops at its next check), a wait that runs out (the error names the holder's process), and
SQLite's lock on the database file, which ends with its process."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm.errors import MigrationLockTimeoutError  # noqa: E402
from seqid_orm.sqlalchemy.alembic import migration_lock  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


class Holder:
    """``lock_worker`` in a process of its own, holding the lock ``name``."""

    def __init__(self, url: str, name: str, ttl: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.sqlalchemy_adapter.lock_worker", url, name, str(ttl)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        assert line.strip() == "held", (
            line,
            self.process.stderr.read()[-2000:] if self.process.poll() is not None else "",
        )

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait(30)


def _url(request, server: str, tmp_path: Path) -> str:
    if server == "sqlite":
        return f"sqlite:///{tmp_path / 'app.sqlite3'}"
    engine = request.getfixturevalue("pg_engine" if server == "postgresql" else "mysql_engine")
    return engine.url.render_as_string(hide_password=False)


@pytest.mark.parametrize("server", ["postgresql", "mysql", "sqlite"])
def test_a_killed_holder_lets_the_next_run_take_the_lock(request, server, tmp_path):
    """SIGKILL, as Kubernetes ends a pod: its lease ends within its ttl (SQLite: its file lock with its
    process), and the next run takes the lock without a word from anyone."""
    url, name = _url(request, server, tmp_path), f"kill-{secrets.token_hex(3)}"
    holder = Holder(url, name, ttl=2.0)
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        refused = pytest.raises(MigrationLockTimeoutError, match=rf"pid {holder.process.pid}\b")
        with refused, migration_lock(engine, name, wait=0.5):
            pass
        holder.process.kill()
        holder.process.wait(30)
        with migration_lock(engine, name, wait=20) as lock:  # the dead holder's lease expires meanwhile
            assert lock.held
    finally:
        holder.end()
        engine.dispose()


@pytest.mark.parametrize("server", ["postgresql", "mysql"])
def test_a_holder_frozen_past_its_ttl_loses_the_lock_and_stops_at_its_next_check(request, server, tmp_path):
    """SIGSTOP past the ttl (a paused VM, a debugger): the next run takes the lock by the database's clock;
    the frozen holder, woken, cannot renew and stops at its next check with MigrationLockLostError, before
    any further step."""
    url, name = _url(request, server, tmp_path), f"frozen-{secrets.token_hex(3)}"
    holder = Holder(url, name, ttl=2.0)
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        holder.process.send_signal(signal.SIGSTOP)
        with migration_lock(engine, name, wait=20) as lock:
            assert lock.held
            holder.process.send_signal(signal.SIGCONT)
            out, err = holder.process.communicate(timeout=30)
            assert holder.process.returncode == 3, err[-2000:]
            assert out.splitlines()[-1].startswith("MigrationLockLostError"), out
            lock.check()  # this run still holds it
    finally:
        holder.end()
        engine.dispose()
