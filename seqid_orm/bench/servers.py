"""Small-memory database servers for the benchmark, so index growth outruns the cache quickly.

* PostgreSQL: ``shared_buffers`` needs a restart, so a private cluster is created with
  ``initdb`` in a temporary directory and started with ``pg_ctl`` on its own port, with small
  shared buffers and frequent checkpoints (the setting of Tomas Vondra's "Sequential UUID
  generators" benchmark, 2018, where random keys make full-page images explode).  It is
  stopped and deleted afterwards.
* MariaDB: ``innodb_buffer_pool_size`` is dynamic; it is set to 32 MB for the run and restored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import sqlalchemy as sa

from ..errors import InvalidArgumentError


def server_major(url: str) -> int:
    """The major version of the PostgreSQL server at ``url`` (15 for 15.4)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SHOW server_version_num")).scalar_one()) // 10000
    finally:
        engine.dispose()


def pg_bindir(major: int) -> str:
    """The directory of ``initdb``/``pg_ctl`` for PostgreSQL ``major``; a typed error if none is here.

    The private cluster must run the same major version as the server the user named: a
    benchmark of another version would measure something else.
    """
    candidate = f"/usr/lib/postgresql/{major}/bin"
    if os.path.exists(os.path.join(candidate, "initdb")):
        return candidate
    found = shutil.which("initdb")
    if found:
        out = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
        digits = out.rsplit(" ", 1)[-1].split(".")[0].strip()
        if digits.isdigit() and int(digits) == major:
            return os.path.dirname(found)
    raise InvalidArgumentError(
        f"--small-memory needs the PostgreSQL {major} server binaries (initdb, pg_ctl) of the server "
        f"the URL names; none were found under /usr/lib/postgresql/{major}/bin or on PATH"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb refuses to run as root; the packaged servers run as 'postgres'
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@contextlib.contextmanager
def small_postgres(url: str, shared_buffers: str = "16MB", checkpoint_timeout: str = "30s") -> Iterator[str]:
    """A private PostgreSQL of the same major version as the server at ``url``, with small
    shared buffers; yields its SQLAlchemy URL (same driver as ``url``)."""
    bindir = pg_bindir(server_major(url))
    driver = sa.make_url(url).drivername
    tmp = tempfile.mkdtemp(prefix="seqid-pg-")
    data = os.path.join(tmp, "data")
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres")
    port = _free_port()
    try:
        subprocess.run(
            _as_postgres([f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
            check=True,
            capture_output=True,
        )
        options = (
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c shared_buffers={shared_buffers} "
            f"-c checkpoint_timeout={checkpoint_timeout} -c max_wal_size=256MB -c fsync=off"
        )
        subprocess.run(
            _as_postgres([f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l", f"{tmp}/log", "-w", "start"]),
            check=True,
            capture_output=True,
        )
        yield f"{driver}://postgres@127.0.0.1:{port}/postgres"
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                _as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"]), capture_output=True
            )
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def small_mariadb(url: str, buffer_pool: int = 32 * 2**20) -> Iterator[str]:
    """Shrink InnoDB's buffer pool on the server at ``url`` for the run, then restore it."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            before = int(conn.execute(sa.text("SELECT @@GLOBAL.innodb_buffer_pool_size")).scalar_one())
            conn.execute(sa.text(f"SET GLOBAL innodb_buffer_pool_size = {int(buffer_pool)}"))
            _wait_for_resize(conn)
        try:
            yield url
        finally:
            with engine.connect() as conn:
                conn.execute(sa.text(f"SET GLOBAL innodb_buffer_pool_size = {before}"))
                _wait_for_resize(conn)
    finally:
        engine.dispose()


def _wait_for_resize(conn: sa.engine.Connection, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = conn.execute(sa.text("SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status'")).all()
        text = status[0][1] if status else ""
        if not text or "complete" in text.lower() or "completed" in text.lower():
            return
        time.sleep(0.2)
