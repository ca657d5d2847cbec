"""A private Patroni cluster: Debian's ``patroni`` (3.0.2) managing two
PostgreSQL members of the packaged major version, with a private three-member etcd as its DCS
(:class:`~tests.servers.etcd.EtcdCluster`), each member on ports and a data directory of its own,
stopped and deleted by the code that started it, also when a test fails.

Clients connect as production's do with Patroni and no proxy: a libpq multi-host URL with
``target_session_attrs=read-write``, which finds the member that leads now.  The timings are
Patroni's defaults scaled down (``ttl`` 10 s, ``loop_wait`` 1 s, ``retry_timeout`` 4 s) so a
failover ends within seconds; ``synchronous_mode`` and ``synchronous_mode_strict`` are the production
guide's (``docs/stacks/patroni.yml``) unless a test asks for another mode; everything else is
Patroni's default.

``switchover()`` is ``patronictl switchover`` (a clean hand-over), ``kill_postmaster()`` a kill -9
of the leader's postmaster (Patroni restarts it), ``fail_over()`` a kill -9 of the leader's Patroni
and postmaster (the other member takes over after the ttl), ``leader()`` asks the members' REST API.

With ``stallable=True`` each member's ``connect_address`` (what the others replicate from, and
pg_rewind reads) is a proxy in front of it (:class:`~tests.servers.proxy.StallableProxy`), and
``stall_replication()`` stalls the leader's: its commits stop reaching the replicas while every
socket stays open, as when the link between two data centres drops packets.  Clients connect to
the members themselves, so they still reach the leader.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field

from seqid_orm.errors import BackendUnavailableError
from tests.servers.etcd import EtcdCluster
from tests.servers.lifecycle import StartedAndStopped, read_log
from tests.servers.private import _as_postgres, free_port, pg_bindir
from tests.servers.proxy import StallableProxy
from tests.servers.stack_files import patroni_dcs


@dataclass
class PatroniMember:
    name: str
    pg_port: int
    rest_port: int
    home: str
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def data(self) -> str:
        return os.path.join(self.home, "data")

    @property
    def config(self) -> str:
        return os.path.join(self.home, "patroni.yml")


class PatroniCluster(StartedAndStopped):
    """Two Patroni members over a private etcd (see the module docstring)."""

    def __init__(
        self,
        *,
        synchronous: bool | None = None,
        strict: bool | None = None,
        members: int = 2,
        major: int = 15,
        stallable: bool = False,
    ) -> None:
        dcs = patroni_dcs()  # docs/stacks/patroni.yml: the guide's settings, unless a test asks for others
        self.synchronous: bool = dcs["synchronous_mode"] if synchronous is None else synchronous
        self.strict: bool = dcs.get("synchronous_mode_strict", False) if strict is None else strict
        self.bindir = pg_bindir(major)
        self.patroni = shutil.which("patroni") or "/usr/bin/patroni"
        self.patronictl = shutil.which("patronictl") or "/usr/bin/patronictl"
        self.tmp = tempfile.mkdtemp(prefix="seqid-patroni-")
        if os.geteuid() == 0:
            shutil.chown(self.tmp, "postgres")
        self.scope = f"seqid{os.getpid()}"
        ports: set[int] = set()
        while len(ports) < 2 * members:
            ports.add(free_port())
        pairs = sorted(ports)
        self.members = [
            PatroniMember(f"pg{i}", pairs[2 * i], pairs[2 * i + 1], os.path.join(self.tmp, f"pg{i}"))
            for i in range(members)
        ]
        self.etcd = EtcdCluster(3)
        self.proxies = {m.name: StallableProxy(m.pg_port) for m in self.members} if stallable else {}

    def _connect_address(self, m: PatroniMember) -> str:
        """Where the other members (and pg_rewind) reach ``m``'s PostgreSQL: its proxy, if it has one."""
        return f"127.0.0.1:{self.proxies[m.name].port if self.proxies else m.pg_port}"

    @property
    def url(self) -> str:
        """SQLAlchemy URL naming every member (libpq finds the one that takes writes)."""
        hosts = "&".join(f"host=127.0.0.1:{m.pg_port}" for m in self.members)
        return f"postgresql+psycopg://postgres@/postgres?{hosts}&target_session_attrs=read-write"

    def _yaml(self, m: PatroniMember) -> str:
        # JSON is YAML: no YAML writer needed here
        hosts = ",".join(e.endpoint for e in self.etcd.members)
        config = {
            "scope": self.scope,
            "namespace": "/seqid-tests/",
            "name": m.name,
            "restapi": {"listen": f"127.0.0.1:{m.rest_port}", "connect_address": f"127.0.0.1:{m.rest_port}"},
            "etcd3": {"hosts": hosts},
            "bootstrap": {
                "dcs": {
                    # docs/stacks/patroni.yml, then this cluster's mode where a test asks for another one
                    **patroni_dcs(),
                    "synchronous_mode": self.synchronous,
                    "synchronous_mode_strict": self.strict,
                    # shorter than Patroni's defaults, so that a failover ends within seconds
                    "ttl": 10,
                    "loop_wait": 1,
                    "retry_timeout": 4,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "parameters": {"wal_log_hints": "on", "max_wal_senders": 5, "max_replication_slots": 5},
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{m.pg_port}",
                "connect_address": self._connect_address(m),
                "data_dir": m.data,
                "bin_dir": self.bindir,
                "pgpass": os.path.join(m.home, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {"unix_socket_directories": m.home, "fsync": "off"},
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "log": {"level": "WARNING"},
        }
        return json.dumps(config, indent=1)

    def _spawn(self, m: PatroniMember) -> None:
        os.makedirs(m.home, exist_ok=True)
        with open(m.config, "w") as f:
            f.write(self._yaml(m))
        if os.geteuid() == 0:
            shutil.chown(m.home, "postgres")
            shutil.chown(m.config, "postgres")
        log = open(os.path.join(self.tmp, f"{m.name}.log"), "ab")  # noqa: SIM115 - the child keeps it
        # as postgres (it refuses root) without runuser in between, so the pid is Patroni's own and a
        # kill reaches it; a session of its own holds it and the PostgreSQL it starts
        as_postgres: dict[str, object] = (
            {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}
        )
        m.process = subprocess.Popen(
            [self.patroni, m.config],
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "HOME": m.home},
            **as_postgres,  # type: ignore[arg-type]
        )
        log.close()

    def start(self, timeout: float = 90.0) -> PatroniCluster:
        self.etcd.start()
        self._spawn(self.members[0])
        self.wait_leader(timeout)
        for m in self.members[1:]:
            self._spawn(m)
        self.wait_streaming(timeout)
        return self

    def cluster(self) -> dict:
        """``GET /cluster`` of the first member that answers (Patroni's view of every member)."""
        for m in self.members:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{m.rest_port}/cluster", timeout=2) as r:
                    return json.loads(r.read())
            except OSError:
                continue
        return {"members": []}

    def leader(self) -> PatroniMember | None:
        for row in self.cluster().get("members", []):
            if row.get("role") == "leader" and row.get("state") == "running":
                return next(m for m in self.members if m.name == row["name"])
        return None

    def wait_leader(self, timeout: float = 60.0, other_than: str | None = None) -> PatroniMember:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.leader()
            if found is not None and found.name != other_than:
                return found
            time.sleep(0.2)
        raise BackendUnavailableError(f"no Patroni leader (other than {other_than}): {self.logs()}")

    def wait_streaming(self, timeout: float = 60.0) -> None:
        """Until every member runs and each replica streams on the leader's timeline, caught up
        (in synchronous mode: one is listed as the synchronous standby).  Right after an event a
        replica can show a stale lag of megabytes on the old timeline; a stall begun then left it
        further behind than Patroni's ``maximum_lag_on_failover`` (1 MB), and Patroni, rightly,
        promoted nothing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.cluster().get("members", [])
            replicas = [r for r in rows if r.get("role") != "leader"]
            leading = [r.get("timeline") for r in rows if r.get("role") == "leader"]
            running = len(rows) == len(self.members) and all(r.get("state") in ("running", "streaming") for r in rows)
            streaming = all(
                isinstance(r.get("lag"), int) and r["lag"] < 256 * 1024 and [r.get("timeline")] == leading
                for r in replicas
            )
            synced = not self.synchronous or any(r.get("role") == "sync_standby" for r in rows)
            if running and streaming and synced and self.leader() is not None:
                return
            time.sleep(0.2)
        raise BackendUnavailableError(f"the Patroni members did not settle: {self.cluster()} {self.logs()}")

    def switchover(self) -> PatroniMember:
        """A clean ``patronictl switchover`` to the other member; the new leader."""
        old = self.wait_leader()
        other = next(m for m in self.members if m.name != old.name)
        subprocess.run(
            _as_postgres(
                [
                    *(self.patronictl, "-c", old.config, "switchover"),
                    *("--leader", old.name, "--candidate", other.name, "--force"),
                ]
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )
        return self.wait_leader(60, other_than=old.name)

    def postmaster_pid(self, m: PatroniMember) -> int:
        with open(os.path.join(m.data, "postmaster.pid")) as f:
            return int(f.readline())

    def kill_postmaster(self) -> PatroniMember:
        """kill -9 of the leader's postmaster (Patroni notices and restarts or fails over); the
        member that killed."""
        m = self.wait_leader()
        os.kill(self.postmaster_pid(m), signal.SIGKILL)
        return m

    def fail_over(self) -> PatroniMember:
        """kill -9 of the leader's Patroni and postmaster together (a lost machine): the other
        member takes the leader key when its ttl runs out and promotes itself; the lost member is
        then started again and re-joins as a replica.  The new leader.

        A link stalled in front of the lost leader (``stall_replication``) is cut once it is dead: the
        WAL it held is never delivered, as with a machine that is gone."""
        old = self.wait_leader()
        assert old.process is not None
        pid = self.postmaster_pid(old)
        os.killpg(old.process.pid, signal.SIGKILL)  # Patroni and what it started, at once
        old.process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if self.proxies:
            self.proxies[old.name].cut()
        new = self.wait_leader(90, other_than=old.name)
        self._spawn(old)
        return new

    def stall_replication(self) -> PatroniMember:
        """Stall the link the replicas stream from the leader through (``stallable`` only); the leader.
        Its commits go on (asynchronous mode) or wait for the synchronous standby (synchronous mode)."""
        m = self.wait_leader()
        self.proxies[m.name].stall()
        return m

    def resume_replication(self) -> None:
        for proxy in self.proxies.values():
            proxy.resume()

    def logs(self) -> str:
        paths = {m.name: os.path.join(self.tmp, f"{m.name}.log") for m in self.members}
        return "\n".join(f"{name}: {read_log(path, 6000)}" for name, path in paths.items() if os.path.exists(path))

    def stop(self) -> None:
        """Stop every Patroni (each stops its PostgreSQL), then etcd; kill what does not stop."""
        for m in self.members:
            if m.process is not None and m.process.poll() is None:
                m.process.terminate()
        for m in self.members:
            if m.process is None:
                continue
            try:
                m.process.wait(30)
            except subprocess.TimeoutExpired:
                m.process.kill()
                m.process.wait()
            # a postmaster left behind (Patroni killed before it stopped it): ours, by its pid file
            with contextlib.suppress(OSError, ValueError):
                os.kill(self.postmaster_pid(m), signal.SIGKILL)
        self.etcd.stop()
        for proxy in self.proxies.values():
            proxy.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
