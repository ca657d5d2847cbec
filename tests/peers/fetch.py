"""The peers' own test suites, fetched from their source distributions on PyPI (never copied into this
repository): ``pip download --no-binary <project>`` of the installed version, kept in a cache folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

CACHE = Path(os.environ.get("SEQID_PEER_CACHE", Path.home() / ".cache" / "seqid-peers"))


def sdist_tree(project: str, version: str, inside: str) -> Path:
    """The folder ``inside`` (e.g. ``tests``) of ``project==version``'s sdist, unpacked once into the cache."""
    root = CACHE / f"{project.lower()}-{version}"
    target = root / inside
    if target.exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    # The project's sdist, its build backend from wheels: pip prepares an sdist's metadata, and with
    # --no-binary :all: it built the backend and the backend's own from source (hatchling, packaging,
    # flit_core...): pydantic's took 180 s on a new user's first run, 10 s this way.
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", project]
    command += ["--dest", str(root), f"{project}=={version}"]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip download {project}=={version} failed: {done.stderr.strip()[-500:]}")
    [archive] = root.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/")[0]
        members = [m for m in tar.getmembers() if m.name.startswith(f"{top}/{inside}/")]
        for member in members:
            member.name = member.name[len(top) + 1 :]
        if sys.version_info >= (3, 12):
            tar.extractall(root, members=members, filter="data")
        else:
            tar.extractall(root, members=members)
    archive.unlink()
    return target
