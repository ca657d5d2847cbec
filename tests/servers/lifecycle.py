"""What the private servers of the tests share: each is started by the code that uses it and
stopped by it, also when its start fails part-way (one member of a cluster up, a replica not yet):
``with Server(...) as s:`` stops whatever came up before the error is raised."""

from __future__ import annotations

import subprocess
from typing import TypeVar

_S = TypeVar("_S", bound="StartedAndStopped")


class StartedAndStopped:
    """``start()`` (returning ``self``) and ``stop()`` (safe on a part-started server), as a context."""

    def start(self: _S) -> _S:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def end(process: subprocess.Popen[bytes] | None, grace: float = 10.0) -> None:
    """Terminate a server process this code started (by its pid), and kill it if it outlives ``grace``."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def read_log(path: str, last: int = 100_000) -> str:
    """The end of a server's log file ("" before it has one)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()[-last:]
    except OSError:
        return ""
