"""Run event loops where a test can watch them: each loop in a thread of its own with a heartbeat
task, its thread watched from the test's, so a frozen loop fails the test (with the loop thread's
stack) instead of hanging the run.  Loops run in asyncio's debug mode, which raises on a call made
on a loop from another thread."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

#: A loop whose heartbeat stops this long is frozen (a busy two-core machine stalls a loop for at
#: most a few hundred ms; a loop blocked on a lock or a socket never comes back).
FROZEN = 5.0


class WatchedLoop:
    """``asyncio.run(main())`` in a daemon thread, beside a task that beats every 10 ms."""

    def __init__(self, main: Callable[[], Awaitable[Any]], name: str = "watched-loop") -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.beat = time.monotonic()
        self.longest = 0.0
        self._main = main
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        async def beating() -> Any:
            async def heart() -> None:
                while True:
                    now = time.monotonic()
                    self.longest = max(self.longest, now - self.beat)
                    self.beat = now
                    await asyncio.sleep(0.01)

            beat = asyncio.create_task(heart())
            try:
                return await self._main()
            finally:
                beat.cancel()

        try:
            self.result = asyncio.run(beating(), debug=True)
        except BaseException as exc:  # reported by join()
            self.error = exc

    def start(self) -> WatchedLoop:
        self.beat = time.monotonic()
        self.thread.start()
        return self

    def frozen_for(self) -> float:
        return time.monotonic() - self.beat if self.thread.is_alive() else 0.0

    def join(self, limit: float) -> Any:
        """Wait for the loop's end (at most ``limit`` seconds), failing the test if it froze."""
        watch_all([self], limit)
        if self.error is not None:
            raise self.error
        return self.result


def _stack(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"


def watch_all(loops: list[WatchedLoop], limit: float, threads: tuple[threading.Thread, ...] = ()) -> None:
    """Wait until every loop and thread ended, at most ``limit`` seconds; fail on a frozen loop."""
    end = time.monotonic() + limit
    while any(x.thread.is_alive() for x in loops) or any(t.is_alive() for t in threads):
        for x in loops:
            if x.frozen_for() > FROZEN:
                pytest.fail(
                    f"the event loop in {x.thread.name} froze ({FROZEN:g} s without a beat):\n{_stack(x.thread)}"
                )
        if time.monotonic() > end:
            stuck = [x.thread for x in loops if x.thread.is_alive()] + [t for t in threads if t.is_alive()]
            pytest.fail(f"still running after {limit:g} s:\n" + "\n".join(f"{t.name}:\n{_stack(t)}" for t in stuck))
        time.sleep(0.05)
