"""A private PgBouncer (Debian's package) in front of the shared PostgreSQL: its own port and
directory, stopped by the code that started it.

Its settings are the production guide's (``docs/stacks/pgbouncer.ini``: no
``ignore_startup_parameters``, so a client that sends libpq's ``options`` is refused, as PgBouncer's
default is), with only what a private instance needs changed: the database, the port, the files,
``auth_type = trust`` (the shared server trusts loopback), and the pool mode and size a test asks for.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse

from seqid_orm.errors import BackendUnavailableError
from tests.servers.lifecycle import end, read_log
from tests.servers.private import free_port
from tests.servers.stack_files import pgbouncer_settings


class PrivatePgBouncer:
    """``pgbouncer`` on a free port, pooling the suite's database on 127.0.0.1:5432 (``test``, or the one
    ``SEQID_TEST_POSTGRES_URL`` names, so a test's direct connection sees the same rows) in ``pool_mode``
    (the guide's by default)."""

    def __init__(
        self, pool_mode: str | None = None, pool_size: int = 4, binary: str = "pgbouncer", users: tuple[str, ...] = ()
    ) -> None:
        self.binary = shutil.which(binary, path="/usr/sbin:/usr/bin:" + os.environ.get("PATH", "")) or binary
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.users = ("postgres", *users)  # trust still needs each user in auth_file
        self.tmp = tempfile.mkdtemp(prefix="seqid-pgbouncer-")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.database = urllib.parse.urlsplit(os.environ.get("SEQID_TEST_POSTGRES_URL", "")).path.strip("/") or "test"

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, user: str) -> str:
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.port}/{self.database}"

    def _config(self) -> str:
        settings = {**pgbouncer_settings(), "pool_mode": self.pool_mode or pgbouncer_settings()["pool_mode"]}
        return (
            "[databases]\n"
            f"{self.database} = host=127.0.0.1 port=5432 dbname={self.database} pool_size={self.pool_size}\n"
            "[pgbouncer]\n"
            + "".join(f"{key} = {value}\n" for key, value in settings.items())
            + f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"logfile = {self.tmp}/pgbouncer.log\npidfile = {self.tmp}/pgbouncer.pid\n"
            "auth_type = trust\n"
            f"auth_file = {self.tmp}/userlist.txt\n"
        )

    def start(self) -> PrivatePgBouncer:
        with open(os.path.join(self.tmp, "userlist.txt"), "w") as f:
            f.write("".join(f'"{user}" ""\n' for user in self.users))
        ini = os.path.join(self.tmp, "pgbouncer.ini")
        with open(ini, "w") as f:
            f.write(self._config())
        user = ["-u", "postgres"] if os.geteuid() == 0 else []  # it refuses to run as root
        if user:
            shutil.chown(self.tmp, "postgres")
            for name in os.listdir(self.tmp):
                shutil.chown(os.path.join(self.tmp, name), "postgres")
        self.process = subprocess.Popen(
            [self.binary, *user, ini], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise BackendUnavailableError(f"pgbouncer did not listen on port {self.port}: {self.log()[-1500:]}")

    def log(self) -> str:
        return read_log(os.path.join(self.tmp, "pgbouncer.log"))

    def stop(self) -> None:
        end(self.process)

    def __enter__(self) -> PrivatePgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
