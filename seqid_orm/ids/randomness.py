"""The OS CSPRNG, buffered, and the one place that notices a fork.

``os.urandom`` costs a system call; a UUID needs only a few random bytes.  Reading 4 KiB at
once and handing out 64-bit words keeps the generators cheap while every bit still comes
from the operating system.

Forks: a child that inherits the buffer and the generators' state would hand out its
parent's (and its siblings') ids.  Python's ``os.register_at_fork`` hooks cover ``os.fork()``
and ``multiprocessing``, but not a ``fork()`` made in C — uWSGI's default prefork, or any
extension calling libc directly.  So every generator looks at :data:`MARK` on its hot path
(``if not MARK[0]``) and, in a new process, runs the reset hooks once before anything is
handed out.

On Linux :data:`MARK` is one page of private anonymous memory advised ``MADV_WIPEONFORK``
(Linux 4.14+, ``madvise(2)``): the kernel hands every child, however it was forked, a zeroed
copy, so the check is a memory read (about 20 ns) instead of a ``getpid`` system call (about
200 ns on virtual machines, where system calls are dear).  Elsewhere, or where the kernel
refuses the advice, :data:`MARK` compares the process id, as before.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from collections.abc import Callable

__all__ = ["MARK", "POOL", "RandomPool", "after_fork", "check_fork", "on_fork"]

_WORDS_PER_REFILL = 512  # 4 KiB per os.urandom call
_DIRECT_READ = 64  # words(n) for n >= this reads the OS directly: one system call, nothing shared

_getpid = os.getpid


class _ForkState:
    """The process the generators' state belongs to, and what to reset when it changes."""

    __slots__ = ("hooks", "locks", "pid")

    def __init__(self) -> None:
        self.pid = _getpid()
        self.hooks: list[Callable[[], None]] = []
        # One lock per process, made *in* that process: a lock inherited from the parent may
        # have been held by a thread that does not exist in the child.
        self.locks: dict[int, threading.Lock] = {}


_STATE = _ForkState()

_MADV_WIPEONFORK = 18  # <linux/mman.h>; Python's mmap module does not name it


class _PidMark:
    """:data:`MARK` where the kernel cannot wipe a page on fork: ``[0]`` compares the pid."""

    __slots__ = ()

    def __getitem__(self, index: int) -> int:
        return 1 if _getpid() == _STATE.pid else 0

    def __setitem__(self, index: int, value: int) -> None:
        pass  # the pid, set by after_fork, is the mark


def _make_mark() -> mmap.mmap | _PidMark:
    if sys.platform != "linux":
        return _PidMark()
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        page.madvise(_MADV_WIPEONFORK)  # EINVAL before Linux 4.14 and in some sandboxes
    except (OSError, ValueError, AttributeError):
        return _PidMark()
    page[0] = 1
    return page


#: ``MARK[0]`` is true in the process the generators' state belongs to and false in a child
#: that has not reset yet: ``if not MARK[0]: after_fork()`` is check_fork() inlined.
MARK = _make_mark()


def on_fork(hook: Callable[[], None]) -> None:
    """Run ``hook`` in a child process before its first id (however the fork was made)."""
    _STATE.hooks.append(hook)


def check_fork() -> None:
    """Reset inherited state if this is not the process it was made in (cheap otherwise)."""
    if not MARK[0]:
        after_fork()


def after_fork() -> None:
    """Run the reset hooks once in this process (a generator that saw :data:`MARK` cleared on
    its hot path calls this; so does ``os.register_at_fork``)."""
    pid = _getpid()
    lock = _STATE.locks.setdefault(pid, threading.Lock())  # atomic: every thread gets the same lock
    with lock:
        if _STATE.pid == pid:  # another thread of this child got here first
            return
        for hook in _STATE.hooks:
            hook()
        _STATE.pid = pid  # last: no thread proceeds before every hook has run
        MARK[0] = 1


class RandomPool:
    """Hands out 64-bit words read from ``os.urandom`` in blocks; safe across threads and forks.

    ``list.pop`` is atomic (under the GIL, and per object on free-threaded builds), so a word
    is handed out once however threads interleave; a batch is popped word by word, or read
    straight from the OS when large.  Callers that have not just called :func:`check_fork`
    must use :meth:`word`/:meth:`words`; the ``*_unchecked`` variants are for generators that
    did.
    """

    __slots__ = ("_words",)

    def __init__(self) -> None:
        self._words: list[int] = []

    def word(self) -> int:
        """Return one fresh 64-bit random word."""
        check_fork()
        return self.word_unchecked()

    def words(self, n: int) -> list[int]:
        """Return ``n`` fresh 64-bit random words."""
        check_fork()
        return self.words_unchecked(n)

    def word_unchecked(self) -> int:
        """:meth:`word` for a caller that has just called :func:`check_fork`."""
        try:
            return self._words.pop()
        except IndexError:
            return self.refill()

    def refill(self) -> int:
        """Top the buffer up (in place: generators keep its ``pop``) and hand out one word.

        Two threads may refill at once: both extend the one list and pop from it, so no word is
        handed out twice."""
        self._words.extend(_read_words(_WORDS_PER_REFILL))
        return self.word_unchecked()

    @property
    def pop(self) -> Callable[[], int]:
        """The buffer's own ``pop`` (raises ``IndexError`` when empty: then call :meth:`refill`)."""
        return self._words.pop

    def words_unchecked(self, n: int) -> list[int]:
        """:meth:`words` for a caller that has just called :func:`check_fork`."""
        if n >= _DIRECT_READ:
            return _read_words(n)
        pop = self.word_unchecked
        return [pop() for _ in range(n)]

    def drop(self) -> None:
        """Forget buffered words (in a forked child), in place."""
        self._words.clear()


def _read_words(n: int) -> list[int]:
    return memoryview(os.urandom(8 * n)).cast("Q").tolist()


POOL = RandomPool()
on_fork(POOL.drop)

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=after_fork)
