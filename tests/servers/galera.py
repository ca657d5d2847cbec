"""A three-node MariaDB Galera cluster on loopback, for ``make galera-up`` / ``galera-down``.

``python -m tests.servers.galera up|down|status|urls``.  Everything is private: data directories
under ``$SEQID_GALERA_DIR`` (default ``/tmp/seqid-galera``), client ports from
``$SEQID_GALERA_PORT`` (default 23061, 23062, 23063) and Galera's own ports beside them, all below
the kernel's ephemeral range and checked free before a start (tests/servers/ports.py); the shared
MariaDB server is never touched.  The server binary is the machine's ``mariadbd``; the provider is
Debian's ``galera-4`` (``/usr/lib/galera/libgalera_smm.so``) and state transfers use ``rsync``,
both installed with apt when missing and run as root (otherwise the error names them).

Lessons built in (each cost an afternoon once): every server and ``mariadb-install-db`` gets its own
``--defaults-file`` (the system ``my.cnf`` points at the shared server's data); ``mariadbd`` runs as
the ``mysql`` user (rsync state transfer drops to ``nobody`` and fails under root); each node has its
own gcomm, IST and SST addresses (the default IST port, gcomm + 1, is the next node's gcomm port);
joiners start one after another; nodes stop in reverse order so node 1 may bootstrap again; a stop
that hangs is ended by pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BASE = Path(os.environ.get("SEQID_GALERA_DIR", "/tmp/seqid-galera"))
PORT = int(os.environ.get("SEQID_GALERA_PORT", "23061"))
NODES = 3
PROVIDER = "/usr/lib/galera/libgalera_smm.so"


def ports(i: int) -> dict[str, int]:
    """Node ``i`` (1-based): client, gcomm, IST and SST ports."""
    return {"client": PORT + i - 1, "gcomm": PORT + 1000 + i, "ist": PORT + 1100 + i, "sst": PORT + 1200 + i}


def urls(driver: str = "mysql+pymysql") -> list[str]:
    return [f"{driver}://root@127.0.0.1:{ports(i)['client']}/test" for i in range(1, NODES + 1)]


def _node_dir(i: int) -> Path:
    return BASE / f"node{i}"


def _config(i: int) -> str:
    p = ports(i)
    d = _node_dir(i)
    cluster = ",".join(f"127.0.0.1:{ports(n)['gcomm']}" for n in range(1, NODES + 1))
    return f"""[mysqld]
datadir={d}/data
tmpdir={d}/tmp
socket={d}/mysqld.sock
pid-file={d}/mysqld.pid
log-error={d}/error.log
port={p["client"]}
bind-address=127.0.0.1
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=128M
innodb_log_file_size=64M
innodb_flush_log_at_trx_commit=2
skip-name-resolve=0
wsrep_on=ON
wsrep_provider={PROVIDER}
wsrep_cluster_name=seqid-test
wsrep_cluster_address=gcomm://{cluster}
wsrep_node_name=node{i}
wsrep_node_address=127.0.0.1:{p["gcomm"]}
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:{p["gcomm"]};ist.recv_addr=127.0.0.1:{p["ist"]}"
wsrep_sst_receive_address=127.0.0.1:{p["sst"]}
wsrep_sst_method=rsync
wsrep_slave_threads=2
"""


def _as_mysql(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "mysql", "--", *cmd] if os.geteuid() == 0 else cmd


_MARIADB = ["mariadb", "--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-uroot"]


def _client(i: int, sql: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_MARIADB, "-P", str(ports(i)["client"]), "--connect-timeout=3", "-N", "-B", "-e", sql],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _status(i: int, name: str) -> str | None:
    try:
        out = _client(i, f"SHOW GLOBAL STATUS LIKE '{name}'")
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.split("\t", 1)[1].strip()


def _wait_ready(i: int, size: int, process: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _status(i, "wsrep_ready") == "ON" and _status(i, "wsrep_cluster_size") == str(size):
            return
        if process.poll() is not None:  # the server exited (its log says why)
            break
        time.sleep(0.5)
    log = (
        (_node_dir(i) / "error.log").read_text(errors="replace")[-3000:]
        if (_node_dir(i) / "error.log").exists()
        else ""
    )
    raise SystemExit(f"galera: node{i} did not join a cluster of {size} within {timeout} s\n{log}")


def _pid(i: int) -> int | None:
    path = _node_dir(i) / "mysqld.pid"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _running(i: int) -> bool:
    pid = _pid(i)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def ensure_packages() -> None:
    missing = [
        pkg
        for pkg, path in (("galera-4", PROVIDER), ("rsync", shutil.which("rsync")))
        if not path or not os.path.exists(path)
    ]
    if shutil.which("mariadbd") is None and not os.path.exists("/usr/sbin/mariadbd"):
        raise SystemExit("galera: the MariaDB server (mariadbd) is not installed")
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", *missing],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        return
    raise SystemExit(f"galera: missing packages {', '.join(missing)}; as root: apt-get install {' '.join(missing)}")


def up() -> None:
    ensure_packages()
    if all(_running(i) for i in range(1, NODES + 1)):
        print("galera: already up:", " ".join(urls()))
        return
    down(quiet=True)
    from tests.servers.ports import check_ports

    check_ports({f"node{i} {k}": v for i in range(1, NODES + 1) for k, v in ports(i).items()}, "galera")
    shutil.rmtree(BASE, ignore_errors=True)
    for i in range(1, NODES + 1):
        d = _node_dir(i)
        (d / "data").mkdir(parents=True)
        (
            d / "tmp"
        ).mkdir()  # its own: mariadbd deletes every #sql* file in its tmpdir at start (/tmp: the shared server's)
        (d / "my.cnf").write_text(_config(i))
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "mysql:mysql", str(BASE)], check=True)
    mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    for i in range(1, NODES + 1):
        cnf = str(_node_dir(i) / "my.cnf")
        subprocess.run(
            _as_mysql(
                [
                    "mariadb-install-db",
                    f"--defaults-file={cnf}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                ]
            ),
            check=True,
            capture_output=True,
        )
    for i in range(1, NODES + 1):  # node 1 bootstraps, the others join one after another
        cnf = str(_node_dir(i) / "my.cnf")
        extra = ["--wsrep-new-cluster"] if i == 1 else []
        process = subprocess.Popen(
            _as_mysql([mariadbd, f"--defaults-file={cnf}", *extra]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_ready(i, i, process)
    out = _client(1, "CREATE DATABASE IF NOT EXISTS test")
    if out.returncode != 0:
        raise SystemExit(f"galera: cannot create database test: {out.stderr}")
    print("galera: up:", " ".join(urls()))


def _stop(i: int, timeout: float = 60) -> None:
    pid = _pid(i)
    if pid is None or not _running(i):
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        _client(i, "SHUTDOWN", timeout=timeout)
    deadline = time.monotonic() + timeout
    while _running(i) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _running(i):  # a donor stopped mid-transfer may hang its shutdown
        os.kill(pid, 9)


def down(quiet: bool = False) -> None:
    for i in range(NODES, 0, -1):  # reverse order: node 1 stops last and may bootstrap again
        _stop(i)
    shutil.rmtree(BASE, ignore_errors=True)
    if not quiet:
        print("galera: down")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "status"
    if command == "up":
        up()
    elif command == "down":
        down()
    elif command == "urls":
        print(" ".join(urls()))
    elif command == "status":
        for i in range(1, NODES + 1):
            state = "up" if _running(i) else "down"
            print(f"node{i} port {ports(i)['client']}: {state}, size {_status(i, 'wsrep_cluster_size')}")
    else:
        print("usage: python -m tests.servers.galera up|down|status|urls", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
