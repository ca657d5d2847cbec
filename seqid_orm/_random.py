"""A buffered, fork-safe view of the OS CSPRNG.

``os.urandom`` costs a system call; a UUID needs only a few random bytes.  Reading 4 KiB at
once and handing out 64-bit words keeps the generators cheaper than ``uuid.uuid4()`` while
every bit still comes from the operating system.  The buffer is dropped in a forked child,
so parent and child never hand out the same words.
"""

from __future__ import annotations

import os

_WORDS_PER_REFILL = 512  # 4 KiB per os.urandom call


class RandomPool:
    """Hands out 64-bit words read from ``os.urandom`` in blocks."""

    __slots__ = ("_words",)

    def __init__(self) -> None:
        self._words: list[int] = []

    def word(self) -> int:
        """Return one fresh 64-bit random word."""
        try:
            return self._words.pop()
        except IndexError:
            self._words = _read_words(_WORDS_PER_REFILL)
            return self._words.pop()

    def words(self, n: int) -> list[int]:
        """Return ``n`` fresh 64-bit random words (one system call for large ``n``)."""
        if n > len(self._words):
            return _read_words(n)
        out = self._words[-n:] if n else []
        del self._words[len(self._words) - n :]
        return out

    def drop(self) -> None:
        """Forget buffered words (called in a forked child)."""
        self._words = []


def _read_words(n: int) -> list[int]:
    return memoryview(os.urandom(8 * n)).cast("Q").tolist()


POOL = RandomPool()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=POOL.drop)
