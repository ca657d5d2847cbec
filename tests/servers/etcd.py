"""A private etcd cluster on loopback for the tests: three members (Debian's ``etcd-server`` 3.4), each
with its own data directory and client and peer ports outside the ephemeral range, stopped and
deleted by the code that started them, also when a test fails.

``EtcdCluster(3).start()`` waits until every member answers ``/health``; ``url`` names every client
port (``etcd://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3``); ``leader()`` asks the members which of them
leads; ``kill(i)``, ``freeze(i)``/``thaw(i)``, ``restart(i)``, ``lose_disk(i)`` and ``replace(i, id)``
act on one member; ``restart_all()`` restarts the whole cluster.
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
from collections.abc import Callable
from dataclasses import dataclass, field

from seqid_orm.errors import BackendUnavailableError
from tests.servers.private import free_port
from tests.servers.proxy import StallableProxy


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

    def __init__(self, size: int = 3, binary: str = "etcd", *, tls: bool = False, partitionable: bool = False) -> None:
        self.binary = shutil.which(binary) or f"/usr/bin/{binary}"
        self.tmp = tempfile.mkdtemp(prefix="seqid-etcd-")
        # tls: clients speak HTTPS to members whose certificate a private CA signed, and must show a
        # client certificate of the same CA (etcd's --client-cert-auth); peers stay on HTTP
        self.certs = make_certs(self.tmp) if tls else None
        self.scheme = "https" if tls else "http"
        ports = set()
        while len(ports) < 2 * size:
            ports.add(free_port())
        pairs = sorted(ports)
        self.members = [
            Member(f"m{i}", pairs[2 * i], pairs[2 * i + 1], os.path.join(self.tmp, f"m{i}")) for i in range(size)
        ]
        self.token = f"seqid-{os.getpid()}-{int(time.time())}"
        # partitionable: each member's peer port is advertised behind a proxy the test can stall, so
        # nothing reaches the member from its peers (its messages to them stop: etcd's peer streams
        # are dialed by their readers) while it stays up and its clients' sockets stay open
        self.proxies = [StallableProxy(m.peer) for m in self.members] if partitionable else []

    def peer_url(self, i: int) -> str:
        """Member ``i``'s advertised peer URL (its proxy's, when the cluster is partitionable)."""
        return f"http://127.0.0.1:{self.proxies[i].port if self.proxies else self.members[i].peer}"

    def partition(self, i: int) -> None:
        self.proxies[i].stall()

    def heal(self, i: int) -> None:
        self.proxies[i].resume()

    @property
    def url(self) -> str:
        url = "etcd://" + ",".join(m.endpoint for m in self.members)
        if self.certs is not None:
            url += f"?ca={self.certs['ca']}&cert={self.certs['client.crt']}&key={self.certs['client.key']}"
        return url

    def _open(self, m: Member, path: str, body: dict | None = None, timeout: float = 1.0) -> dict:
        """A GET (``body`` None) or POST to one member, as a client of this cluster (TLS if it has it)."""
        import ssl

        context = None
        if self.certs is not None:
            context = ssl.create_default_context(cafile=self.certs["ca"])
            context.load_cert_chain(self.certs["client.crt"], self.certs["client.key"])
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.scheme}://{m.endpoint}{path}", data=data, method="GET" if body is None else "POST"
        )
        with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
            return json.loads(reply.read())

    def _command(self, m: Member, state: str) -> list[str]:
        cluster = ",".join(f"{o.name}={self.peer_url(j)}" for j, o in enumerate(self.members))
        return [
            self.binary,
            *("--name", m.name, "--data-dir", m.data),
            *("--listen-client-urls", f"{self.scheme}://127.0.0.1:{m.client}"),
            *("--advertise-client-urls", f"{self.scheme}://127.0.0.1:{m.client}"),
            *self._tls_options(),
            *("--listen-peer-urls", f"http://127.0.0.1:{m.peer}"),
            *("--initial-advertise-peer-urls", self.peer_url(self.members.index(m))),
            *("--initial-cluster", cluster, "--initial-cluster-state", state),
            *("--initial-cluster-token", self.token),
            # elections in a fraction of a second, as on a LAN (defaults: 100 ms heartbeat, 1 s election)
            *("--heartbeat-interval", "50", "--election-timeout", "500"),
            *("--log-level", "error", "--logger", "zap"),
        ]

    def _tls_options(self) -> list[str]:
        if self.certs is None:
            return []
        return [
            *("--cert-file", self.certs["server.crt"], "--key-file", self.certs["server.key"]),
            *("--trusted-ca-file", self.certs["ca"], "--client-cert-auth"),
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
            return bool(self._open(m, "/health").get("health") == "true")
        except (OSError, ValueError):
            return False

    def wait_healthy(self, timeout: float = 30.0, members: list[Member] | None = None) -> None:
        deadline = time.monotonic() + timeout
        for m in members or self.members:
            while not self.healthy(m):
                if time.monotonic() > deadline or (m.process is not None and m.process.poll() is not None):
                    raise BackendUnavailableError(f"etcd member {m.name} is not healthy: {self._log(m)}")
                time.sleep(0.1)

    def _log(self, m: Member) -> str:
        with open(os.path.join(self.tmp, f"{m.name}.log"), errors="replace") as f:
            return f.read()[-1500:]

    def status(self, m: Member) -> dict:
        return self._open(m, "/v3/maintenance/status", {})

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

    def restart_all(self, timeout: float = 30.0) -> None:
        """Kill every member, then start them all again on their data (a whole-cluster restart)."""
        for i in range(len(self.members)):
            self.thaw(i)
            self.kill(i)
        for m in self.members:
            self._spawn(m, "existing")
        self.wait_healthy(timeout)

    def _post(self, m: Member, path: str, body: dict) -> dict:
        return self._open(m, path, body, timeout=5)

    def enable_auth(self, password: str) -> None:
        """Create the root user with ``password`` and turn etcd's authentication on (clients must log in)."""
        m = self.members[0]
        self._post(m, "/v3/auth/user/add", {"name": "root", "password": password})
        self._post(m, "/v3/auth/role/add", {"name": "root"})
        self._post(m, "/v3/auth/user/grant", {"user": "root", "role": "root"})
        self._post(m, "/v3/auth/enable", {})

    def snapshot(self, path: str) -> None:
        """``etcdctl snapshot save`` from the first live member (a backup)."""
        m = next(o for o in self.members if o.process is not None and o.process.poll() is None)
        subprocess.run(
            ["etcdctl", "--endpoints", f"{self.scheme}://{m.endpoint}", "snapshot", "save", path],
            check=True,
            capture_output=True,
            env={**os.environ, "ETCDCTL_API": "3"},
        )

    def restore(self, path: str, timeout: float = 30.0) -> None:
        """Restore every member from a snapshot, as etcd's disaster-recovery guide does: all members
        stopped, each data directory rebuilt by ``etcdctl snapshot restore`` (a new cluster, so a new
        cluster id), all started again."""
        for i in range(len(self.members)):
            self.thaw(i)
            self.kill(i)
        self.token += "-restored"
        cluster = ",".join(f"{o.name}={self.peer_url(j)}" for j, o in enumerate(self.members))
        for j, m in enumerate(self.members):
            shutil.rmtree(m.data, ignore_errors=True)
            subprocess.run(
                [
                    "etcdctl",
                    "snapshot",
                    "restore",
                    path,
                    "--name",
                    m.name,
                    "--data-dir",
                    m.data,
                    "--initial-cluster",
                    cluster,
                    "--initial-cluster-token",
                    self.token,
                    "--initial-advertise-peer-urls",
                    self.peer_url(j),
                ],
                check=True,
                capture_output=True,
                env={**os.environ, "ETCDCTL_API": "3"},
            )
        for m in self.members:
            self._spawn(m, "new")
        self.wait_healthy(timeout)

    def lose_disk(self, i: int) -> str:
        """Member ``i`` dies with its disk: killed, its data deleted; its member id (for :meth:`replace`)."""
        m = self.members[i]
        member_id = str(self.status(m)["header"]["member_id"])
        self.kill(i)
        shutil.rmtree(m.data, ignore_errors=True)
        return member_id

    def replace(self, i: int, member_id: str, timeout: float = 30.0) -> None:
        """Bring a member that lost its disk back empty, as an operator replaces one (etcd's runtime
        reconfiguration, in the order its documentation gives): removed, added, started to catch up."""
        m = self.members[i]
        live = next(o for o in self.members if o is not m and o.process is not None and o.process.poll() is None)
        self._reconfigure(live, "/v3/cluster/member/remove", {"ID": member_id}, done_if="member not found")
        self._reconfigure(live, "/v3/cluster/member/add", {"peerURLs": [self.peer_url(i)]}, done_if="already exists")
        # the newcomer checks its --initial-cluster against the member list of a peer it asks; a peer
        # that has not applied the add yet answers the old list and the newcomer exits ("error
        # validating peerURLs ... member count is unequal", seen on a loaded machine): wait until every
        # live member lists it, and start it again if it still lost that race
        deadline = time.monotonic() + timeout
        self._wait_listed(self.peer_url(i), deadline)
        while True:
            self._spawn(m, "existing")
            try:
                self.wait_healthy(max(1.0, deadline - time.monotonic()), [m])
                return
            except BackendUnavailableError:
                assert m.process is not None
                if m.process.poll() is None or "peerURLs" not in self._log(m) or time.monotonic() > deadline:
                    raise
                shutil.rmtree(m.data, ignore_errors=True)
                time.sleep(0.5)

    def _wait_listed(self, peer_url: str, deadline: float) -> None:
        """Wait until every live member's member list holds ``peer_url``."""
        for o in self.members:
            if o.process is None or o.process.poll() is not None:
                continue
            while True:
                try:
                    listed = self._post(o, "/v3/cluster/member/list", {}).get("members", [])
                    if any(peer_url in member.get("peerURLs", []) for member in listed):
                        break
                except (OSError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise BackendUnavailableError(f"etcd member {o.name} never listed {peer_url}")
                time.sleep(0.1)

    def _reconfigure(self, m: Member, path: str, body: dict, done_if: str, timeout: float = 30.0) -> None:
        """A membership change, tried again while etcd answers 503 ("unhealthy cluster": it refuses a
        change until the members it has are connected, for a while after one went away)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._post(m, path, body)
                return
            except urllib.error.HTTPError as exc:
                text = exc.read().decode(errors="replace")
                if done_if in text:
                    return  # an earlier try was applied, its reply lost
                if exc.code != 503 or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def stop(self) -> None:
        for i in range(len(self.members)):
            self.thaw(i)
            self.kill(i)
        for proxy in self.proxies:
            proxy.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: The faults the fault tests put a cluster through, each while worker processes draw ids.
FAULTS = (
    "leader killed",
    "leader frozen past the election timeout",
    "follower frozen (clients time out on it)",
    "the member clients ask first partitioned from its peers behind a proxy (a minority of one)",
    "whole cluster restarted",
    "follower's disk lost and the member replaced",
)


def inflict(cluster: EtcdCluster, fault: str) -> Callable[[], None]:
    """Start ``fault`` (one of :data:`FAULTS`) on ``cluster``; returns what ends it.  A majority stays
    up during every fault but the whole restart, whose outage is what it tests."""
    leader = cluster.leader()
    follower = next(i for i in range(len(cluster.members)) if i != leader)
    if fault == "leader killed":
        cluster.kill(leader)
        return lambda: cluster.restart(leader)  # it re-joins with its data and catches up
    if fault == "leader frozen past the election timeout":
        cluster.freeze(leader)
        return lambda: cluster.thaw(leader)  # it finds a newer term and follows
    if fault.startswith("the member clients ask first partitioned"):
        cluster.partition(0)  # the first in the URL: a leader steps down (CheckQuorum), a follower falls behind
        return lambda: cluster.heal(0)
    if fault.startswith("follower frozen"):
        cluster.freeze(follower)
        return lambda: cluster.thaw(follower)
    if fault == "whole cluster restarted":
        for i in range(len(cluster.members)):
            cluster.kill(i)
        return cluster.restart_all
    if fault.startswith("follower's disk lost"):
        member_id = cluster.lose_disk(follower)
        return lambda: cluster.replace(follower, member_id)
    raise ValueError(fault)


def make_certs(directory: str) -> dict[str, str]:
    """A private CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl.
    The server's certificate also serves as a client's: etcd's own JSON gateway dials the member's
    gRPC port with it (without clientAuth, every gateway request fails "connection closed").  The
    client's has no common name: etcd's gateway refuses a client certificate with one (400, "CommonName
    of client sending a request against gateway will be ignored"), since it cannot carry it to auth."""
    out = os.path.join(directory, "certs")
    os.makedirs(out)
    paths = {n: os.path.join(out, n) for n in ("ca", "ca.key", "server.crt", "server.key", "client.crt", "client.key")}

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=seqid test CA",
            "-keyout", paths["ca.key"], "-out", paths["ca"])  # fmt: skip
    ext = os.path.join(out, "ext.cnf")
    for who, extra in (
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth"),
        ("client", "extendedKeyUsage=clientAuth"),
    ):
        with open(ext, "w") as f:
            f.write(extra + "\n")
        csr = os.path.join(out, f"{who}.csr")
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1" if who == "server" else "/O=seqid client",
            "-keyout",
            paths[f"{who}.key"],
            "-out",
            csr,
        )
        openssl("x509", "-req", "-in", csr, "-CA", paths["ca"], "-CAkey", paths["ca.key"], "-CAcreateserial",
                "-days", "2", "-extfile", ext, "-out", paths[f"{who}.crt"])  # fmt: skip
    return paths
