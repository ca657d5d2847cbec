"""Start worker processes (``tests.tickets.worker``, ``tests.leases.worker``) and read what they
print, with time-outs."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One worker process; its stdout lines are collected by a thread as they arrive."""

    def __init__(self, module: str = "tests.tickets.worker", **opts: object) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(opts)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        # stderr is read as it comes too: a worker that logs a warning at every refusal (a store
        # down for a minute) filled the pipe's 64 KB and blocked in its next write, which looked
        # like a worker that never went on
        self._errors: list[str] = []
        self._error_reader = threading.Thread(target=self._read_errors, daemon=True)
        self._error_reader.start()

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self._errors.append(line)
                del self._errors[:-400]  # the tail is what a failure message shows

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.strip())
                self._cond.notify_all()
        with self._cond:
            self.lines.append("<eof>")
            self._cond.notify_all()

    def expect(self, word: str, timeout: float = 60.0) -> None:
        """Wait until the worker printed ``word`` on a line of its own."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while word not in self.lines:
                if "<eof>" in self.lines:
                    raise AssertionError(f"worker ended before {word!r}: {self.lines[-4:-1]} {self.stderr()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"worker did not print {word!r} within {timeout} s")
                self._cond.wait(left)

    def wait_for_ids(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.ids()) < n:
            if time.monotonic() > deadline:
                with self._cond:
                    last = [line for line in self.lines if not line.isdigit()][-12:]
                raise AssertionError(
                    f"worker printed {len(self.ids())} ids, not {n}, within {timeout} s; its last words: {last}; "
                    f"stderr: {self.stderr()}"
                )
            time.sleep(0.01)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)

    def finish(self, timeout: float = 120.0) -> None:
        self.expect("done", timeout)
        self.proc.wait(timeout)
        assert self.proc.returncode == 0, self.stderr()

    def finish_refused(self, timeout: float = 60.0) -> None:
        """Wait until the worker was refused and ended (a worker without ``persist`` ends at its first refusal)."""
        self.proc.wait(timeout)
        self._reader.join(5)
        assert self.values("refused-after"), f"the worker ended without a refusal: {self.stderr()}"

    def ids(self) -> list[int]:
        with self._cond:
            return [int(line) for line in self.lines if line.isdigit()]

    def value(self, key: str) -> str:
        """The rest of the first line that starts with ``key`` and a space."""
        with self._cond:
            return next(line.split(" ", 1)[1] for line in self.lines if line.startswith(key + " "))

    def values(self, key: str) -> list[str]:
        """The rest of every line that starts with ``key`` and a space."""
        with self._cond:
            return [line.split(" ", 1)[1] for line in self.lines if line.startswith(key + " ")]

    def refusals(self) -> dict[str, int]:
        """How many times each error type refused this worker so far (what a failover cost it)."""
        return dict(collections.Counter(error.split(" ", 1)[0] for error in self.values("error")))

    def fetches(self) -> int:
        with self._cond:
            return next(int(line.split()[1]) for line in self.lines if line.startswith("fetches "))

    def stderr(self) -> str:
        """The tail of what the worker wrote to stderr (all of it once it has ended)."""
        if self.proc.poll() is not None:
            self._error_reader.join(5)
        with self._cond:
            return "".join(self._errors)[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def start_together(workers: list[Worker], timeout: float = 120.0) -> None:
    """Wait until every worker is ready, then let them all draw at once."""
    for w in workers:
        w.expect("ready", timeout)
    for w in workers:
        w.go()
