"""What the example-app tests share: a PostgreSQL database of their own, and an ASGI app served by
``uvicorn --workers N`` in a process group of its own, stopped (and its stderr read) however the test
ends."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A new database on the test PostgreSQL server, its URL; dropped afterwards."""
    import sqlalchemy as sa

    from tests.conftest import POSTGRES_URL

    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        yield sa.make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


class Served:
    """An app under ``uvicorn``: its base URL, and its stderr once stopped."""

    def __init__(self, app: str, cwd: Path, env: dict[str, str], workers: int) -> None:
        from tests.servers.private import free_port

        self.base = f"http://127.0.0.1:{free_port()}"
        listening = ["--host", "127.0.0.1", "--port", self.base.rsplit(":", 1)[1], "--log-level", "warning"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", app, "--workers", str(workers), *listening],
            cwd=cwd,
            env=env,
            start_new_session=True,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr = ""

    def first(self, call, within: float = 90.0):
        """``call()`` once the server accepts connections (its workers start in their own time)."""
        import httpx

        deadline = time.monotonic() + within
        while True:
            try:
                return call()
            except httpx.TransportError:
                assert self.process.poll() is None and time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.2)

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)  # its workers release their worker ids
        try:
            _, self.stderr = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            _, self.stderr = self.process.communicate()


@contextlib.contextmanager
def served(app: str, cwd: Path, env: dict[str, str], workers: int = 3) -> Iterator[Served]:
    server = Served(app, cwd, env, workers)
    try:
        yield server
    finally:
        server.stop()
