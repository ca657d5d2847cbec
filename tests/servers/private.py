"""Small-memory database servers for the benchmark, so index growth outruns the cache quickly.

* PostgreSQL: ``shared_buffers`` needs a restart, so a private cluster is created with
  ``initdb`` in a temporary directory and started with ``pg_ctl`` on its own port, with small
  shared buffers and frequent checkpoints (the setting of Tomas Vondra's "Sequential UUID
  generators" benchmark, 2018, where random keys make full-page images explode).  It is
  stopped and deleted afterwards.
* MariaDB: a private server too (``mariadb-install-db`` and ``mariadbd`` with a data directory, a
  socket and a port of its own) with a 32 MB buffer pool: the shared server is never reconfigured.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import sqlalchemy as sa

from seqid_orm.errors import BackendUnavailableError, InvalidArgumentError


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
    # $SEQID_PG_BINDIR (e.g. the PostgreSQL 18 of `make test-pg18`), then initdb on PATH
    for found in (os.path.join(os.environ.get("SEQID_PG_BINDIR", ""), "initdb"), shutil.which("initdb")):
        if not found or not os.path.exists(found):
            continue
        out = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
        digits = out.rsplit(" ", 1)[-1].split(".")[0].strip()
        if digits.isdigit() and int(digits) == major:
            return os.path.dirname(found)
    raise InvalidArgumentError(
        f"the PostgreSQL {major} server binaries (initdb, pg_ctl) of the server the URL names were not "
        f"found under /usr/lib/postgresql/{major}/bin, in $SEQID_PG_BINDIR or on PATH"
    )


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux; the IANA range elsewhere)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 49152, 65535


# Ports handed out by free_port stay their taker's for its life, across every test process of every
# user on this machine. A claim is a Unix socket bound to a name in Linux's abstract namespace
# (unix(7): a name with a leading NUL byte, no file) and held open by the claiming process: the
# kernel refuses the same name to any other process, whoever runs it, and frees it when the last
# process holding it exits, a crash or SIGKILL included. So there is no directory to share between
# users, no owner's pid to judge alive, and nothing left behind. (The claims were files under a
# per-user directory: two users' suites could be handed the same port, each blind to the other's.)
_REGISTRY = "seqid-test-port"
_held: dict[tuple[str, int], socket.socket | None] = {}


def claim_port(port: int, registry: str = _REGISTRY) -> bool:
    """Take ``port`` for this process's life unless this or another live process took it.

    ``registry`` names the set of claims: the suite's by default; a test of the claims themselves
    uses a name of its own, so that it needs no port number anybody else could be using.
    """
    if (registry, port) in _held:
        return False
    if not sys.platform.startswith("linux"):  # no abstract namespace: this process's claims only
        _held[(registry, port)] = None
        return True
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        holder.bind(f"\0{registry}-{port}")
    except OSError:  # EADDRINUSE: a live process holds it
        holder.close()
        return False
    _held[(registry, port)] = holder
    return True


def free_port(low: int = 26000, high: int = 32767, registry: str = _REGISTRY) -> int:
    """A TCP port on loopback that nothing uses right now, outside the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be taken at any moment by an
    outgoing connection's local end, and a server restarted on it later then fails to bind: a
    Galera node's SST daemon died that way in CI.  Ports are drawn at random from ``[low, high]``
    less that range (the fixed ports of tests/servers/ports.py lie below ``low``), and each is
    checked by binding it.

    A port free now is not free for good: between this call and the server's bind, or while a server
    is stopped to be restarted on its port, another caller could be handed it too (an etcd member
    failed to bind its peer port that way in CI, the suite's xdist workers and the Django settings
    modules all drawing ports at once). So a port is handed out once: it stays this process's until
    it exits, for every process of every user (:func:`claim_port`).
    """
    eph_low, eph_high = _ephemeral_range()
    candidates = [p for p in range(low, high + 1) if not eph_low <= p <= eph_high]
    if not candidates:
        raise BackendUnavailableError(f"no port in {low}-{high} lies outside the ephemeral range {eph_low}-{eph_high}")
    for _ in range(200):
        port = candidates[secrets.randbelow(len(candidates))]
        if not claim_port(port, registry):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BackendUnavailableError(f"no free port found in {low}-{high} outside {eph_low}-{eph_high}")


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb refuses to run as root; the packaged servers run as 'postgres'
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


class PrivatePostgres:
    """A throw-away PostgreSQL cluster on its own port and data directory (never the shared server).

    ``bindir`` holds ``initdb``/``pg_ctl``; ``settings`` are extra ``-c name=value`` options.
    Used by ``--small-memory`` and by tests that stop a server mid-run (``stop("immediate")``).
    """

    def __init__(self, bindir: str, driver: str = "postgresql+psycopg", **settings: str) -> None:
        self.bindir = bindir
        self.driver = driver
        self.settings = settings
        self.tmp = tempfile.mkdtemp(prefix="seqid-pg-")
        self.data = os.path.join(self.tmp, "data")
        if os.geteuid() == 0:
            shutil.chown(self.tmp, "postgres")
        self.port = free_port()
        self._initialised = False

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the cluster's ``postgres`` database."""
        return f"{self.driver}://postgres@127.0.0.1:{self.port}/postgres"

    def _initialise(self) -> None:
        """Create the data directory (a standby copies its primary's instead)."""
        subprocess.run(
            _as_postgres([f"{self.bindir}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
            check=True,
            capture_output=True,
        )

    def start(self) -> PrivatePostgres:
        if not self._initialised:
            self._initialise()
            self._initialised = True
        options = f"-p {self.port} -k {self.tmp} -c listen_addresses=127.0.0.1 -c fsync=off" + "".join(
            f" -c {k}={v}" for k, v in self.settings.items()
        )
        subprocess.run(
            _as_postgres(
                [f"{self.bindir}/pg_ctl", "-D", self.data, "-o", options, "-l", f"{self.tmp}/log", "-w", "start"]
            ),
            check=True,
            capture_output=True,
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``"immediate"`` is a crash: no shutdown checkpoint, clients cut off)."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            subprocess.run(
                _as_postgres([f"{self.bindir}/pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"]), capture_output=True
            )

    def remove(self) -> None:
        """Stop the server and delete its data directory."""
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.remove()


@contextlib.contextmanager
def small_postgres(url: str, shared_buffers: str = "16MB", checkpoint_timeout: str = "30s") -> Iterator[str]:
    """A private PostgreSQL of the same major version as the server at ``url``, with small
    shared buffers; yields its SQLAlchemy URL (same driver as ``url``)."""
    server = PrivatePostgres(
        pg_bindir(server_major(url)),
        sa.make_url(url).drivername,
        shared_buffers=shared_buffers,
        checkpoint_timeout=checkpoint_timeout,
        max_wal_size="256MB",
    )
    with server:
        yield server.url


class PrivateRedis:
    """A throw-away Redis on its own port that keeps nothing on disk (never the shared server)."""

    def __init__(self, binary: str = "redis-server", *options: str) -> None:
        self.binary = shutil.which(binary) or binary
        self.options = options  # more server options (``--appendonly``, ``--replicaof``...): the last one wins
        self.tmp = tempfile.mkdtemp(prefix="seqid-redis-")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        self.process = subprocess.Popen(
            [
                self.binary,
                *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.tmp),
                *("--save", "", "--appendonly", "no", *self.options),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise BackendUnavailableError(f"redis-server did not listen on port {self.port} within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class PrivateMariaDB:
    """A throw-away MariaDB server on its own port, socket and data directory (never the shared server).

    Runs the machine's ``mariadbd`` (as the ``mysql`` user under root) with ``settings`` as extra
    ``[mysqld]`` options; stopped and deleted by :meth:`stop`, also when the caller fails.
    """

    def __init__(self, driver: str = "mysql+pymysql", **settings: str) -> None:
        self.driver = driver
        self.settings = settings
        self.tmp = tempfile.mkdtemp(prefix="seqid-mariadb-")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.driver}://root@127.0.0.1:{self.port}/test"

    def _as_mysql(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "mysql", "--", *cmd] if os.geteuid() == 0 else cmd

    def start(self) -> PrivateMariaDB:
        options = "\n".join(f"{k.replace('_', '-')}={v}" for k, v in self.settings.items())
        cnf = os.path.join(self.tmp, "my.cnf")
        with open(cnf, "w") as f:
            f.write(
                # tmpdir of its own: mariadbd deletes every #sql* file in its tmpdir when it starts, and
                # /tmp holds the shared server's live temporary tables (it crashed on one deleted so)
                f"[mysqld]\ndatadir={self.tmp}/data\ntmpdir={self.tmp}/tmp\nsocket={self.tmp}/mysqld.sock\n"
                f"pid-file={self.tmp}/mysqld.pid\n"
                f"log-error={self.tmp}/error.log\nport={self.port}\nbind-address=127.0.0.1\n{options}\n"
            )
        os.makedirs(os.path.join(self.tmp, "data"))
        os.makedirs(os.path.join(self.tmp, "tmp"))
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "mysql:mysql", self.tmp], check=True)
        install = ["mariadb-install-db", f"--defaults-file={cnf}", "--auth-root-authentication-method=normal"]
        subprocess.run(self._as_mysql([*install, "--skip-test-db"]), check=True, capture_output=True)
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        self.process = subprocess.Popen(
            self._as_mysql([mariadbd, f"--defaults-file={cnf}"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = ["mariadb", "--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-uroot", "-P", str(self.port)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = subprocess.run([*client, "-e", "CREATE DATABASE IF NOT EXISTS test"], capture_output=True)
            if done.returncode == 0:
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.3)
        with open(os.path.join(self.tmp, "error.log"), errors="replace") as f:
            log = f.read()[-2000:]
        self.stop()
        raise BackendUnavailableError(f"a private mariadbd did not start on port {self.port}:\n{log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            client = ["mariadb", "--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-uroot", "-P", str(self.port)]
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run([*client, "-e", "SHUTDOWN"], capture_output=True, timeout=30)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> PrivateMariaDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def small_mariadb(url: str, buffer_pool: int = 32 * 2**20) -> Iterator[str]:
    """A private MariaDB with a ``buffer_pool``-byte InnoDB buffer pool, same driver as ``url``; yields its URL."""
    server = PrivateMariaDB(
        sa.make_url(url).drivername, innodb_buffer_pool_size=str(buffer_pool), innodb_log_file_size="64M"
    )
    with server:
        yield server.url
