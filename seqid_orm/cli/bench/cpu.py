"""CPU time an insert run costs: this process (the client) and, when it runs here, the server.

Wall time on a shared two-core machine moves from run to run; CPU seconds move much less, and
splitting them shows *where* a key kind costs: in the client (building the key, the driver
sending it) or in the server (parsing it, the B-tree).  The server is measured only when it runs
on this machine and ``/proc`` lets us read it (Linux, same user or root); otherwise the figure is
simply absent.  PostgreSQL is a process tree (postmaster, one backend per connection, WAL writer,
checkpointer); reaped children's time is in the postmaster's ``cutime``/``cstime``, so nothing
that ends during the run is lost.  MariaDB is one process whose threads ``/proc`` already sums.
The server figure includes every session on that server, as a server's CPU would.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

_PROC = Path("/proc")
_LOCAL_HOSTS = {None, "", "localhost", "::1"}


def _stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name (field 3 onwards), or None."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _comm(pid: int) -> str | None:
    try:
        return (_PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return None


def process_tree_seconds(root: int) -> float | None:
    """CPU seconds used so far by ``root`` and its live descendants, each with its reaped children."""
    stats: dict[int, list[str]] = {}
    # children (higher pids, but for a wrap) before their parents: a child that ends between the two reads is
    # then counted twice (its own, then in the parent's cutime), never not at all, so the sum cannot drop
    # (read parents first, a busy server's ended backends made a delta negative: a CI run on the shared server)
    for pid in sorted((int(e.name) for e in _PROC.iterdir() if e.name.isdigit()), reverse=True):
        fields = _stat(pid)
        if fields is not None:
            stats[pid] = fields
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    # fields[11:15]: utime, stime, cutime, cstime (proc(5) fields 14-17); counting the reaped
    # children's share of every process keeps the sum from dropping when one reaps another
    total = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        total += sum(int(f) for f in stats[pid][11:15])
        stack.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def is_local_host(host: str | None) -> bool:
    """Whether a URL's host is this machine (loopback, or a Unix socket when there is none)."""
    return host in _LOCAL_HOSTS or str(host).startswith("127.")


def server_pid(conn: Connection) -> int | None:
    """The server's main process id when the server runs on this machine, else None."""
    if not is_local_host(conn.engine.url.host):
        return None
    name = conn.dialect.name
    try:
        if name == "postgresql":
            backend = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
            stat = _stat(backend)
            if stat is None or _comm(backend) != "postgres":
                return None
            postmaster = int(stat[1])
            return postmaster if _comm(postmaster) == "postgres" else None
        if name == "mysql":
            pid_file, datadir = conn.execute(sa.text("SELECT @@GLOBAL.pid_file, @@GLOBAL.datadir")).one()
            pid = int((Path(datadir) / pid_file).read_text().split()[0])  # pid_file may be relative
            return pid if _comm(pid) in ("mariadbd", "mysqld") else None
    except (OSError, ValueError, IndexError, sa.exc.DBAPIError):
        return None
    return None
