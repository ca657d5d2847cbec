"""A private pg_auto_failover formation for the failover tests: Debian's ``pg-auto-failover-cli``
(``pg_autoctl`` 2.0) and ``postgresql-15-auto-failover``, a monitor and two PostgreSQL nodes, each
with its ``pg_autoctl`` service, ports and data directory of its own, stopped and deleted by the
code that started it, also when a test fails.

pg_auto_failover is synchronous by default: with one secondary the primary's
``synchronous_standby_names`` is ``ANY 1 (…)``, so every commit waits for it.  Clients connect as
its ``pg_autoctl show uri`` says: a libpq multi-host URL with ``target_session_attrs=read-write``.
The monitor's health checks are scaled down (a check a second, a node unhealthy after 5 s rather
than 20 s, a lost primary given 5 s rather than 30 s to demote itself) so a failover ends within
seconds, as Patroni's timings are in :mod:`.patroni`.

``switchover()`` is ``pg_autoctl perform switchover``, ``kill_postmaster()`` a kill -9 of the
primary's postmaster (its ``pg_autoctl`` restarts it), ``fail_over()`` a kill -9 of the primary's
``pg_autoctl`` and postmaster together (the monitor promotes the secondary; the lost node is then
started again and re-joins as the secondary).
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
from dataclasses import dataclass, field

from seqid_orm.errors import BackendUnavailableError
from tests.servers.lifecycle import StartedAndStopped, read_log
from tests.servers.private import free_port, pg_bindir

# the monitor's health checks and its wait for a lost primary to demote itself, scaled down
# (pg_auto_failover's defaults: 5 s, 5 s, 2 s, 20 s, 30 s)
_MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "5000",
    "pgautofailover.primary_demote_timeout": "5000",
}


@dataclass
class Node:
    name: str
    port: int
    data: str
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)


class PgAutoFailover(StartedAndStopped):
    """A monitor and ``nodes`` PostgreSQL nodes of one formation (see the module docstring)."""

    def __init__(self, nodes: int = 2, major: int = 15) -> None:
        self.binary = shutil.which("pg_autoctl") or "/usr/bin/pg_autoctl"
        self.pg_ctl = os.path.join(pg_bindir(major), "pg_ctl")
        self.tmp = tempfile.mkdtemp(prefix="seqid-pgaf-")
        if os.geteuid() == 0:
            shutil.chown(self.tmp, "postgres")
        ports: set[int] = set()
        while len(ports) < nodes + 1:
            ports.add(free_port())
        first, *rest = sorted(ports)
        self.monitor = Node("monitor", first, os.path.join(self.tmp, "monitor"))
        self.nodes = [Node(f"node{i + 1}", p, os.path.join(self.tmp, f"node{i + 1}")) for i, p in enumerate(rest)]

    @property
    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor.port}/pg_auto_failover?sslmode=disable"

    @property
    def url(self) -> str:
        """SQLAlchemy URL naming every node (libpq finds the one that takes writes), as ``show uri`` does."""
        hosts = "&".join(f"host=127.0.0.1:{n.port}" for n in self.nodes)
        return f"postgresql+psycopg://postgres@/postgres?{hosts}&target_session_attrs=read-write"

    def _env(self) -> dict[str, str]:
        """Every directory pg_autoctl keeps state in is this formation's own, made before it runs: where one
        is missing it falls back to a directory all users share (``/tmp/pg_autoctl``), which the next user's
        run then cannot write.  As an ordinary user the nodes' sockets are this formation's directory too
        (Debian's PostgreSQL puts them in ``/var/run/postgresql``, the postgres user's), and libpq is told so."""
        dirs = {"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "share", "XDG_RUNTIME_DIR": "run"}
        env = {**os.environ, "HOME": self.tmp, **{k: os.path.join(self.tmp, v) for k, v in dirs.items()}}
        if os.geteuid() != 0:
            env.update(PGHOST=self.tmp, PGUSER="postgres")
        return env

    def _own_dirs(self) -> None:
        for name in ("config", "share", "run"):
            path = os.path.join(self.tmp, name)
            os.makedirs(path, mode=0o700, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(path, "postgres")

    def _initdb(self, node: Node) -> None:
        """As an ordinary user: the node's data directory made beforehand (pg_autoctl takes an existing one),
        its sockets in this formation's directory and its superuser ``postgres``, as the root path's are."""
        if os.geteuid() == 0:
            return  # pg_autoctl runs as postgres, whose socket directory the system's is
        initdb = os.path.join(os.path.dirname(self.pg_ctl), "initdb")
        done = subprocess.run(
            [initdb, "-D", node.data, "--auth=trust", "-U", "postgres"], capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise BackendUnavailableError(f"initdb {node.data}: {done.stderr[-2000:]}")
        with open(os.path.join(node.data, "postgresql.conf"), "a") as conf:
            conf.write(f"\nunix_socket_directories = '{self.tmp}'\n")

    def _as_postgres(self) -> dict[str, object]:
        # pg_autoctl refuses root; as postgres without runuser in between, so the pid is its own
        return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}

    def _spawn(self, node: Node, args: list[str]) -> None:
        log = open(os.path.join(self.tmp, f"{node.name}.log"), "ab")  # noqa: SIM115 - the child keeps it
        node.process = subprocess.Popen(
            [self.binary, *args],
            stdout=log,
            stderr=log,
            start_new_session=True,  # a session of its own holds it and the PostgreSQL it starts
            env=self._env(),
            **self._as_postgres(),  # type: ignore[arg-type]
        )
        log.close()

    def _ctl(self, *args: str, timeout: float = 90.0) -> str:
        done = subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._env(),
            **self._as_postgres(),  # type: ignore[arg-type]
        )
        if done.returncode != 0:
            raise BackendUnavailableError(f"pg_autoctl {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout

    def _create_node(self, node: Node) -> None:
        self._spawn(
            node,
            [
                *("create", "postgres", "--pgctl", self.pg_ctl, "--pgdata", node.data),
                *("--pgport", str(node.port), "--hostname", "127.0.0.1", "--name", node.name),
                *("--auth", "trust", "--no-ssl", "--monitor", self.monitor_uri, "--run"),
            ],
        )

    def start(self, timeout: float = 120.0) -> PgAutoFailover:
        m = self.monitor
        self._own_dirs()
        self._initdb(m)
        self._initdb(self.nodes[0])  # the others are copies of the primary (pg_basebackup), sockets included
        self._spawn(
            m,
            [
                *("create", "monitor", "--pgctl", self.pg_ctl, "--pgdata", m.data, "--pgport", str(m.port)),
                *("--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"),
            ],
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.state()
                break
            except BackendUnavailableError:
                if time.monotonic() > deadline or (m.process is not None and m.process.poll() is not None):
                    raise BackendUnavailableError(
                        f"the pg_auto_failover monitor did not start: {self.logs()}"
                    ) from None
                time.sleep(0.5)
        # ALTER SYSTEM runs outside a transaction block: a connection that autocommits from its start
        # (switching a SQLAlchemy connection to AUTOCOMMIT once failed in CI: psycopg found it INTRANS)
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={m.port} user=postgres dbname=pg_auto_failover", autocommit=True
        ) as conn:  # over TCP: the socket directory differs between the root and the ordinary path
            for name, value in _MONITOR_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # type: ignore[arg-type]
            conn.execute("SELECT pg_reload_conf()")
        for node in self.nodes:  # one at a time: the first becomes the primary
            self._create_node(node)
            self.wait_settled(timeout, len(self.nodes[: self.nodes.index(node) + 1]))
        return self

    def state(self) -> list[dict]:
        """``pg_autoctl show state --json``: each node's reported and assigned state."""
        return list(json.loads(self._ctl("show", "state", "--monitor", self.monitor_uri, "--json", timeout=20)))

    def _rows(self) -> list[dict]:
        try:
            return self.state()
        except (BackendUnavailableError, ValueError, subprocess.TimeoutExpired):
            return []

    def primary(self) -> Node | None:
        """The node that takes writes now (``wait_primary``: while its secondary is away or catching up)."""
        for row in self._rows():
            state = row.get("current_group_state")
            if state in ("primary", "wait_primary") and row.get("assigned_group_state") == state:
                return next(n for n in self.nodes if n.name == row.get("nodename"))
        return None

    def wait_settled(self, timeout: float = 90.0, count: int | None = None) -> None:
        """Until ``count`` nodes (all) report their assigned state: one primary, the rest secondaries
        (a node alone is "single")."""
        count = len(self.nodes) if count is None else count
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self._rows()
            settled = [r for r in rows if r.get("current_group_state") == r.get("assigned_group_state")]
            states = sorted(r.get("current_group_state") for r in settled)
            want = ["single"] if count == 1 else ["primary", *["secondary"] * (count - 1)]
            if len(rows) == count and states == want:
                return
            time.sleep(0.5)
        raise BackendUnavailableError(f"the pg_auto_failover nodes did not settle: {self._rows()} {self.logs()}")

    def wait_primary(self, timeout: float = 90.0, other_than: str | None = None) -> Node:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.primary()
            if found is not None and found.name != other_than:
                return found
            time.sleep(0.3)
        raise BackendUnavailableError(f"no pg_auto_failover primary (other than {other_than}): {self.logs()}")

    def switchover(self) -> Node:
        old = self.wait_primary()
        self._ctl("perform", "switchover", "--monitor", self.monitor_uri, "--formation", "default", "--group", "0")
        return self.wait_primary(90, other_than=old.name)

    def postmaster_pid(self, node: Node) -> int:
        with open(os.path.join(node.data, "postmaster.pid")) as f:
            return int(f.readline())

    def kill_postmaster(self) -> Node:
        node = self.wait_primary()
        os.kill(self.postmaster_pid(node), signal.SIGKILL)
        return node

    def fail_over(self) -> Node:
        old = self.wait_primary()
        assert old.process is not None
        pid = self.postmaster_pid(old)
        os.killpg(old.process.pid, signal.SIGKILL)
        old.process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        new = self.wait_primary(120, other_than=old.name)
        self._spawn(old, ["run", "--pgdata", old.data])
        return new

    def logs(self) -> str:
        paths = {n.name: os.path.join(self.tmp, f"{n.name}.log") for n in (self.monitor, *self.nodes)}
        return "\n".join(f"{name}: {read_log(path, 4000)}" for name, path in paths.items() if os.path.exists(path))

    def stop(self) -> None:
        """Stop every node's pg_autoctl (each stops its PostgreSQL), then the monitor; kill what does not stop."""
        for n in (*self.nodes, self.monitor):
            if n.process is not None and n.process.poll() is None:
                n.process.terminate()
            if n.process is not None:
                try:
                    n.process.wait(30)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(n.process.pid, signal.SIGKILL)
                    n.process.wait()
            # a postmaster left behind: ours, by its pid file
            with contextlib.suppress(OSError, ValueError):
                os.kill(self.postmaster_pid(n), signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)
