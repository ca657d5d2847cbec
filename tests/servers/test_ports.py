"""The test servers' ports: ``free_port`` hands a port out once, across the suite's processes."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from tests.servers.private import _ephemeral_range, free_port

# 40 ports below the ephemeral range: few enough that processes drawing at random from it would
# collide almost surely if nothing kept them apart (two draws of 20 from 40)
_LOW = 20000
_HIGH = _LOW + 39


def _draw(n: int, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    start.wait()
    out.put([free_port(_LOW, _HIGH) for _ in range(n)])
    start.wait()  # each lives until all have drawn: a port is free again once its taker exits


@pytest.fixture(autouse=True)
def _range_below_ephemeral() -> None:
    if _ephemeral_range()[0] <= _HIGH:
        pytest.skip(f"the kernel's ephemeral range starts at {_ephemeral_range()[0]}, inside {_LOW}-{_HIGH}")


def test_processes_drawing_at_once_never_get_the_same_port() -> None:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_draw, args=(20, start, out)) for _ in range(2)]
    for p in procs:
        p.start()
    drawn = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert all(len(set(d)) == 20 for d in drawn)
    assert not set(drawn[0]) & set(drawn[1])


def test_a_port_stays_its_takers_while_it_lives_and_is_free_again_when_it_exits() -> None:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(1), ctx.Queue()
    # the child takes 39 of the 40 and exits; while it lived, this process could have only the last
    child = ctx.Process(target=_draw, args=(39, start, out))
    child.start()
    taken = out.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and len(set(taken)) == 39
    mine = [free_port(_LOW, _HIGH) for _ in range(40)]  # its claims ended with it
    assert sorted(mine) == list(range(_LOW, _HIGH + 1)), os.getpid()
