"""A process of its own driven one request a line: the adoption tests' application processes.

The worker reads a line from standard input and answers one JSON line on standard output; the tests ask,
read, and stop it (a ``quit`` line, then a kill if it does not end).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path


class LineWorker:
    """``command`` run as a process of its own (``env``, ``cwd``), asked one line at a time."""

    def __init__(
        self, command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=None if env is None else dict(env),
            cwd=cwd,
        )

    def ask(self, line: str) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise AssertionError(f"the worker ended: {self.process.communicate(timeout=30)[1][-2000:]}")
        return json.loads(answer)

    def widths(self, line: str) -> list[int]:
        """The widths of the keys an ``insert`` request made (``0``: plain UUIDv7)."""
        answer = self.ask(line)
        assert "widths" in answer, answer
        return answer["widths"]

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.ask("quit")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def started(count: int, make: Callable[[], LineWorker]) -> Iterator[list[LineWorker]]:
    """``count`` workers from ``make`` for the block, stopped after it however it ends."""
    workers: list[LineWorker] = []
    try:
        for _ in range(count):
            workers.append(make())
        yield workers
    finally:
        for worker in workers:
            worker.stop()
