"""A private Redis cell watched by Sentinel, for the failover tests: a durable primary, one
replica and Sentinels (``redis-server --sentinel``, the binary Debian's ``redis-sentinel`` runs),
each on its own free port and directory, all stopped by the code that started them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from seqid_orm.errors import BackendUnavailableError
from tests.servers.lifecycle import StartedAndStopped
from tests.servers.private import PrivateRedis, free_port
from tests.servers.stack_files import sentinel_conf
from tests.tickets.test_failover import REDIS_DURABLE, wait_online

SERVICE = "seqid"


class PrivateSentinelCell(StartedAndStopped):
    """A primary, a replica and ``sentinels`` Sentinels (quorum 1) watching them as ``service``;
    a node is down for them after ``down_after_ms``."""

    def __init__(self, sentinels: int = 1, service: str = SERVICE, down_after_ms: int = 1000) -> None:
        self.service = service
        self.down_after_ms = down_after_ms
        self.primary = PrivateRedis("redis-server", *REDIS_DURABLE)
        self.replica: PrivateRedis | None = None
        self.tmp = tempfile.mkdtemp(prefix="seqid-sentinel-")
        self.ports = [free_port() for _ in range(sentinels)]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        return f"redis+sentinel://{hosts}/{self.service}"

    def start(self) -> PrivateSentinelCell:
        self.primary.start()
        self.replica = PrivateRedis("redis-server", *REDIS_DURABLE, "--replicaof", "127.0.0.1", str(self.primary.port))
        self.replica.start()
        wait_online(self.primary.url, 1)
        for port in self.ports:
            config = os.path.join(self.tmp, f"sentinel-{port}.conf")  # Sentinel rewrites its own file
            with open(config, "w") as f:
                f.write(f"port {port}\nbind 127.0.0.1\ndir {self.tmp}\n")
                # docs/stacks/sentinel.conf, with this cell's address, one Sentinel's quorum, shorter timings
                f.write(sentinel_conf(self.service, "127.0.0.1", self.primary.port, 1, self.down_after_ms, 10000))
            self.processes.append(
                subprocess.Popen(
                    [shutil.which("redis-server") or "redis-server", config, "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        for port in self.ports:
            self._wait_listening(port)
        self._wait_for_primary(self.primary.port)
        return self

    def _wait_listening(self, port: int) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise BackendUnavailableError(f"redis-server --sentinel did not listen on port {port} within 10 s")

    def primary_port(self) -> int:
        """The primary's port as the first Sentinel names it now."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.ports[0], socket_timeout=2)
        try:
            return int(client.sentinel_get_master_addr_by_name(self.service)[1])
        finally:
            client.close()

    def _wait_for_primary(self, port: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.primary_port() != port:
            assert time.monotonic() < deadline, f"the Sentinels do not name port {port} the primary"
            time.sleep(0.05)

    def fail_over(self) -> None:
        """``SENTINEL FAILOVER``: the replica promoted, the old primary made its replica; returns once
        the Sentinels name the new primary and it serves its replica again."""
        import redis

        assert self.replica is not None
        client = redis.Redis(host="127.0.0.1", port=self.ports[0], socket_timeout=5)
        try:
            client.sentinel_failover(self.service)
        finally:
            client.close()
        self._wait_for_primary(self.replica.port)
        wait_online(self.replica.url, 1)

    def kill_primary(self) -> PrivateRedis:
        """kill -9 of the primary; returns once the Sentinels name the replica the primary (after
        ``down_after_ms`` and their election).  The old primary, stopped: ``start()`` it again to have
        it come back from its AOF."""
        assert self.replica is not None
        old, self.primary, self.replica = self.primary, self.replica, self.primary
        old.stop()
        self._wait_for_primary(self.primary.port)
        return old

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        if self.replica is not None:
            self.replica.__exit__()
        self.primary.__exit__()
        shutil.rmtree(self.tmp, ignore_errors=True)
