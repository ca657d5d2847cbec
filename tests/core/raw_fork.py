"""Children of a fork made in C, in a process of their own: ``python -m tests.core.raw_fork KIND
[ARG] CHILDREN PER_CHILD`` sets up a parent of KIND, forks CHILDREN processes with libc's fork()
(no Python at-fork hooks run, as in uWSGI's prefork), each making PER_CHILD ids, and prints
``{"children": [[...], ...], "after": ...}`` (what the parent sees after the forks) as JSON.

Why a process of its own: a child of a C-level fork inherits the GIL as it was at that instant.
Run inside a pytest-xdist worker, other Python threads of earlier tests (a store's deadline
watcher, a lease's renewal) may be waiting for the GIL, and the forking thread, asked to let go,
then waits forever in the child for a thread that is not there: a test hung 300 s on a busy
machine.  Here the parent has no other thread, as a prefork server's master has none.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Callable

import seqid_orm
import seqid_orm.errors
from seqid_orm import Layout, Snowflake, comb_batch
from seqid_orm.ids import randomness
from seqid_orm.ids.comb import CombGenerator


def _fork_children(make_ids: Callable[[int], list[str]], children: int, per_child: int) -> list[list[str]]:
    libc = ctypes.PyDLL(None, use_errno=True)  # the GIL held across fork(), as C code holds it
    libc.fork.restype = ctypes.c_int
    make_ids(1)  # the master drew one id: its state and random buffer are now warm
    pipes, pids = [], []
    for _ in range(children):
        r, w = os.pipe()
        pid = libc.fork()
        if pid == 0:  # the child: no Python fork hooks have run
            try:
                os.close(r)
                payload = "\n".join(map(str, make_ids(per_child))).encode()
                view = memoryview(payload)
                while view:
                    view = view[os.write(w, view) :]
            finally:
                os._exit(0)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    out = []
    for r, pid in zip(pipes, pids, strict=True):
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"a child exited with {os.waitstatus_to_exitcode(status)}")
        out.append(b"".join(chunks).decode().split("\n"))
    return out


def main(kind: str, arg: str, children: int, per_child: int) -> dict[str, object]:
    after: Callable[[], object] = lambda: None  # noqa: E731
    if kind == "comb":
        gen = CombGenerator(Layout(arg))
        make = lambda n: [str(gen()) for _ in range(n)]  # noqa: E731
    elif kind == "batches":
        make = lambda n: [*map(str, comb_batch(n // 2)), *(str(seqid_orm.uuid7()) for _ in range(n // 2))]  # noqa: E731
    elif kind == "bsv":
        make = lambda n: [seqid_orm.bsv() for _ in range(n)]  # noqa: E731
    elif kind == "mark":
        make = lambda n: [str(randomness.MARK[0])] + [str(seqid_orm.uuid7()) for _ in range(n - 1)]  # noqa: E731
        after = lambda: randomness.MARK[0]  # noqa: E731
    elif kind == "pidmark":
        mark = randomness._PidMark()
        make = lambda n: [str(mark[0])] * n  # noqa: E731
        after = lambda: mark[0]  # noqa: E731
    elif kind == "snowflake":
        flake = Snowflake(worker_id=3)

        def make(n: int) -> list[str]:
            try:
                return [str(flake.next_id()) for _ in range(n)]
            except seqid_orm.errors.ForkedGeneratorError:
                return ["refused"]

        after = lambda: flake.next_id() > 0  # noqa: E731  (the parent goes on)
    elif kind == "tickets":  # arg: a SQLite URL (no socket, so no deadline thread beside the fork)
        import secrets

        from seqid_orm import TicketSequence

        seq = TicketSequence(f"raw-fork-{secrets.token_hex(4)}", arg, block_size=100, double_buffer=False)
        drawn: list[int] = []

        def make(n: int) -> list[str]:
            drawn.extend(seq.next_id() for _ in range(n))
            return [str(i) for i in drawn[-n:]]

        after = lambda: drawn + [seq.next_id() for _ in range(300)]  # noqa: E731  (the parent's, before and after)
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    made = _fork_children(make, children, per_child)
    return {"children": made, "after": after()}


if __name__ == "__main__":
    kind, arg, children, per_child = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(main(kind, arg, children, per_child)))
