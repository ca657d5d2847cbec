"""System parts the tests need that pip cannot install: the one place that decides whether each is here.

A *part* is a system package or a server binary (unixODBC under pyodbc, the MariaDB client headers
mysqlclient compiles against, valgrind, Galera, the PostgreSQL and Redis server binaries the fault
tests start privately, etcd, ZooKeeper).  Root can install it with apt; an ordinary user cannot.
A test that needs one calls :func:`need` (or carries ``@pytest.mark.system("name")``): where the part
is missing it is skipped with the reason and the apt line, except under ``SEQID_REQUIRE_DBS=1``
(CI), where a missing part is a broken set-up and fails the test.

Standard library only, so the Makefile can ask it before any virtualenv exists:
``python3 -m tests.system apt`` prints the Debian packages of the parts ``make test`` needs that
are missing (``system-deps`` installs them as root, or names them).
"""

from __future__ import annotations

import ctypes.util
import glob
import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

REQUIRE_DBS = os.environ.get("SEQID_REQUIRE_DBS") == "1"


def _binary(*names: str, dirs: tuple[str, ...] = ()) -> Callable[[], str | None]:
    """A probe: present when one of ``names`` is on PATH or in one of ``dirs``."""

    def probe() -> str | None:
        for name in names:
            if shutil.which(name) or any(os.access(os.path.join(d, name), os.X_OK) for d in dirs):
                return None
        return f"{' or '.join(names)} not found on PATH" + (f" or in {', '.join(dirs)}" if dirs else "")

    return probe


def _module(name: str, because: str) -> Callable[[], str | None]:
    """A probe: present when ``name`` imports (a Python package built or loaded against a system library)."""

    def probe() -> str | None:
        try:
            importlib.import_module(name)
        except Exception as exc:  # ImportError, or a wrapper's ImproperlyConfigured
            return f"{name} does not import ({type(exc).__name__}: {exc}); {because}"
        return None

    return probe


def _pkg_config(*modules: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        if shutil.which("pkg-config") is None:
            return "pkg-config is not installed"
        for module in modules:
            if subprocess.run(["pkg-config", "--exists", module], capture_output=True).returncode == 0:
                return None
        return f"pkg-config finds none of {', '.join(modules)}"

    return probe


def _library(name: str, soname: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        return None if ctypes.util.find_library(name) else f"the shared library {soname} is not installed"

    return probe


def _pg_server() -> str | None:
    if glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb"):
        return None
    return "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on PATH"


def _galera() -> str | None:
    if not os.path.exists("/usr/lib/galera/libgalera_smm.so"):
        return "the Galera library /usr/lib/galera/libgalera_smm.so is not installed"
    return _binary("rsync")()


@dataclass(frozen=True)
class Part:
    """One system part: its Debian packages, what needs it, and how to tell it is here."""

    name: str
    apt: tuple[str, ...]
    needed_by: str
    probe: Callable[[], str | None]
    """``None`` when present; else what is missing, in words."""
    for_make_test: bool = False
    """``make test`` installs it (as root) before the suite: a system dependency of the main suite."""
    system_probe: Callable[[], str | None] | None = None
    """For ``apt``: the check at the system level, where ``probe`` needs the virtualenv (a Python
    package built against the part)."""

    def missing(self) -> str | None:
        return self.probe()

    def reason(self, problem: str) -> str:
        return f"{self.needed_by} needs {self.name}: {problem}; as root: apt-get install {' '.join(self.apt)}"


PARTS: dict[str, Part] = {
    part.name: part
    for part in (
        Part(
            "mysqlclient",
            ("libmariadb-dev", "pkg-config"),
            "Django's MariaDB driver",
            _module("MySQLdb", "mysqlclient compiles against the MariaDB client headers, then make test installs it"),
            for_make_test=True,
            system_probe=_pkg_config("libmariadb", "mysqlclient"),
        ),
        Part(
            "unixodbc",
            ("unixodbc",),
            "pyodbc (under mssql-django)",
            _module("pyodbc", "pyodbc loads unixODBC's libodbc.so.2"),
            for_make_test=True,
            system_probe=_library("odbc", "libodbc.so.2"),
        ),
        Part("valgrind", ("valgrind",), "the instruction-count benchmark", _binary("valgrind")),
        Part("galera", ("galera-4", "rsync"), "the multi-master cluster tests", _galera),
        Part("postgresql-server", ("postgresql",), "a private PostgreSQL cluster", _pg_server),
        Part("redis-server", ("redis-server",), "a private Redis server", _binary("redis-server")),
        Part(
            "mariadb-server",
            ("mariadb-server",),
            "a private MariaDB server",
            _binary("mariadb-install-db", "mariadbd", dirs=("/usr/sbin",)),
        ),
        Part(
            "etcd",
            ("etcd-server", "etcd-client"),
            "a private etcd cluster",
            _binary("etcd", dirs=("/usr/bin",)),
            for_make_test=True,  # the etcd ticket store's tests are part of make test
        ),
        Part(
            "pgbouncer",
            ("pgbouncer",),
            "the PgBouncer tests (a private pooler in front of PostgreSQL)",
            _binary("pgbouncer", dirs=("/usr/sbin",)),
            for_make_test=True,
        ),
        Part(
            "patroni",
            ("patroni",),
            "the Patroni tests (a private two-member cluster over a private etcd)",
            _binary("patroni", dirs=("/usr/bin",)),
            for_make_test=True,
        ),
        Part(
            "haproxy",
            ("haproxy",),
            "the HAProxy test (a private proxy in front of a Patroni cluster)",
            _binary("haproxy", dirs=("/usr/sbin",)),
            for_make_test=True,
        ),
        Part(
            "pg_auto_failover",
            ("pg-auto-failover-cli", "postgresql-15-auto-failover"),
            "the pg_auto_failover test (a private monitor and two nodes)",
            _binary("pg_autoctl", dirs=("/usr/bin",)),
            for_make_test=True,
        ),
        Part(
            "openssl",
            ("openssl",),
            "the private CA of the etcd TLS test",
            _binary("openssl"),
            for_make_test=True,
        ),
        Part(
            "zookeeper",
            ("zookeeper",),
            "a private ZooKeeper ensemble",
            _binary("zkServer.sh", dirs=("/usr/share/zookeeper/bin",)),
        ),
    )
}


def missing(name: str) -> str | None:
    """What is missing of part ``name`` (``None`` when it is here)."""
    return PARTS[name].missing()


def need(name: str) -> None:
    """Skip the calling test where part ``name`` is missing, saying why and the apt line; under
    ``SEQID_REQUIRE_DBS=1`` fail it instead (CI installs every part)."""
    import pytest

    part = PARTS[name]
    problem = part.missing()
    if problem is None:
        return
    message = part.reason(problem)
    if REQUIRE_DBS:
        pytest.fail(f"SEQID_REQUIRE_DBS=1 but {message}")
    pytest.skip(message)


def apt_missing() -> list[str]:
    """The Debian packages of the parts ``make test`` needs that this machine lacks."""
    out: list[str] = []
    for part in PARTS.values():
        if part.for_make_test and (part.system_probe or part.probe)() is not None:
            out.extend(p for p in part.apt if p not in out)
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["apt"]:
        print(" ".join(apt_missing()))
    elif len(sys.argv) == 3 and sys.argv[1] == "missing":
        if sys.argv[2] not in PARTS:
            sys.exit(f"unknown system part {sys.argv[2]!r}; the parts: {', '.join(PARTS)}")
        problem = missing(sys.argv[2])
        print(problem or "present")
        sys.exit(1 if problem else 0)
    else:
        sys.exit("usage: python -m tests.system apt | missing PART")
