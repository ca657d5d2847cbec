"""A private etcd cluster on loopback for the tests: three members (Debian's ``etcd-server`` 3.4), each
with its own data directory and client and peer ports outside the ephemeral range, stopped and
deleted by the code that started them, also when a test fails.

``EtcdCluster(3).start()`` waits until every member answers ``/health``; ``url`` names every client
port (``etcd://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3``); ``leader()`` asks the members which of them
leads; ``kill(i)``, ``freeze(i)``/``thaw(i)`` and ``restart(i)`` act on one member's process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from seqid_orm.errors import BackendUnavailableError
from tests.servers.private import free_port


@dataclass
class Member:
    name: str
    client: int
    peer: int
    data: str
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client}"


class EtcdCluster:
    """``size`` etcd members forming one cluster (see the module docstring)."""

    def __init__(self, size: int = 3, binary: str = "etcd") -> None:
        self.binary = shutil.which(binary) or f"/usr/bin/{binary}"
        self.tmp = tempfile.mkdtemp(prefix="seqid-etcd-")
        ports = set()
        while len(ports) < 2 * size:
            ports.add(free_port())
        pairs = sorted(ports)
        self.members = [
            Member(f"m{i}", pairs[2 * i], pairs[2 * i + 1], os.path.join(self.tmp, f"m{i}")) for i in range(size)
        ]
        self.token = f"seqid-{os.getpid()}-{int(time.time())}"

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(m.endpoint for m in self.members)

    def _command(self, m: Member, state: str) -> list[str]:
        cluster = ",".join(f"{o.name}=http://127.0.0.1:{o.peer}" for o in self.members)
        return [
            self.binary,
            *("--name", m.name, "--data-dir", m.data),
            *("--listen-client-urls", f"http://127.0.0.1:{m.client}"),
            *("--advertise-client-urls", f"http://127.0.0.1:{m.client}"),
            *("--listen-peer-urls", f"http://127.0.0.1:{m.peer}"),
            *("--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer}"),
            *("--initial-cluster", cluster, "--initial-cluster-state", state),
            *("--initial-cluster-token", self.token),
            # elections in a fraction of a second, as on a LAN (defaults: 100 ms heartbeat, 1 s election)
            *("--heartbeat-interval", "50", "--election-timeout", "500"),
            *("--log-level", "error", "--logger", "zap"),
        ]

    def _spawn(self, m: Member, state: str = "new") -> None:
        log = open(os.path.join(self.tmp, f"{m.name}.log"), "ab")  # noqa: SIM115 - the child keeps it
        m.process = subprocess.Popen(self._command(m, state), stdout=log, stderr=log, start_new_session=True)
        log.close()

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        for m in self.members:
            self._spawn(m)
        self.wait_healthy(timeout)
        return self

    def healthy(self, m: Member) -> bool:
        try:
            with urllib.request.urlopen(f"http://{m.endpoint}/health", timeout=1) as reply:
                return bool(json.loads(reply.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def wait_healthy(self, timeout: float = 30.0, members: list[Member] | None = None) -> None:
        deadline = time.monotonic() + timeout
        for m in members or self.members:
            while not self.healthy(m):
                if time.monotonic() > deadline:
                    raise BackendUnavailableError(f"etcd member {m.name} is not healthy: {self._log(m)}")
                time.sleep(0.1)

    def _log(self, m: Member) -> str:
        with open(os.path.join(self.tmp, f"{m.name}.log"), errors="replace") as f:
            return f.read()[-1500:]

    def status(self, m: Member) -> dict:
        request = urllib.request.Request(f"http://{m.endpoint}/v3/maintenance/status", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=1) as reply:
            return json.loads(reply.read())

    def leader(self, timeout: float = 10.0) -> int:
        """The index of the member that leads now (waits for an election to end)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, m in enumerate(self.members):
                if m.process is None or m.process.poll() is not None:
                    continue
                try:
                    found = self.status(m)
                except (OSError, ValueError):
                    continue
                if found.get("leader") and found["leader"] == found["header"]["member_id"]:
                    return i
            time.sleep(0.05)
        raise BackendUnavailableError("no etcd member leads")

    def kill(self, i: int) -> None:
        p = self.members[i].process
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def freeze(self, i: int) -> None:
        p = self.members[i].process
        assert p is not None
        p.send_signal(signal.SIGSTOP)

    def thaw(self, i: int) -> None:
        p = self.members[i].process
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start a killed member again on its data directory (it re-joins with what it had)."""
        self.kill(i)
        self._spawn(self.members[i], "existing")
        self.wait_healthy(timeout, [self.members[i]])

    def stop(self) -> None:
        for i in range(len(self.members)):
            self.thaw(i)
            self.kill(i)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
