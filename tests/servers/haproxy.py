"""A private HAProxy (Debian's ``haproxy``) in front of a Patroni cluster, as Patroni's own
documentation sets it up (``haproxy.cfg`` in Patroni's repository): one TCP listener whose backend
is every member, each health-checked on its Patroni REST API (``/primary`` answers 200 on the
leader only), sessions to a member that goes down shut at once (``on-marked-down
shutdown-sessions``).  The check interval is scaled down with Patroni's own timings
(:mod:`tests.servers.patroni`).  Stopped, by its pid, by the code that started it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from seqid_orm.errors import BackendUnavailableError
from tests.servers.lifecycle import StartedAndStopped, end, read_log
from tests.servers.private import free_port


class HAProxy(StartedAndStopped):
    """HAProxy on a free port, routing to whichever of ``backends`` (pg port, REST port) leads."""

    def __init__(self, backends: list[tuple[int, int]]) -> None:
        self.binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.backends = backends
        self.port = free_port()
        self.tmp = tempfile.mkdtemp(prefix="seqid-haproxy-")
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _config(self) -> str:
        servers = "\n".join(
            f"    server pg{i} 127.0.0.1:{pg} maxconn 100 check port {rest}"
            for i, (pg, rest) in enumerate(self.backends)
        )
        return f"""global
    maxconn 200

defaults
    mode tcp
    retries 2
    timeout client 30m
    timeout connect 4s
    timeout server 30m
    timeout check 5s

listen primary
    bind 127.0.0.1:{self.port}
    option httpchk OPTIONS /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
{servers}
"""

    def start(self, timeout: float = 30.0) -> HAProxy:
        config = os.path.join(self.tmp, "haproxy.cfg")
        with open(config, "w") as f:
            f.write(self._config())
        subprocess.run([self.binary, "-c", "-q", "-f", config], check=True, capture_output=True, timeout=30)
        log = open(os.path.join(self.tmp, "haproxy.log"), "ab")  # noqa: SIM115 - the child keeps it
        # -db: in the foreground, so the pid is HAProxy's own and stop() ends it
        self.process = subprocess.Popen([self.binary, "-db", "-f", config], stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise BackendUnavailableError(f"HAProxy did not listen on {self.port}: {self.log()}") from None
                time.sleep(0.1)

    def log(self) -> str:
        return read_log(os.path.join(self.tmp, "haproxy.log"), 3000)

    def stop(self) -> None:
        end(self.process)
        shutil.rmtree(self.tmp, ignore_errors=True)
