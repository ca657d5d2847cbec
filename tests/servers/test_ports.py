"""The test servers' ports: ``free_port`` hands a port out once, across processes and users.

Every test here works on claims and ports it made itself: claims in a registry of its own (a random
name, so no other run's claims meet it) and ports it drew with ``free_port`` or bound itself. None
needs a range of the machine's ports to be free: other users' servers and other tests run beside it.
"""

from __future__ import annotations

import multiprocessing
import secrets
import socket

import pytest

from seqid_orm.errors import BackendUnavailableError
from tests.servers.private import claim_port, free_port

# port numbers to claim; a claim is a name, not a bind, so nothing needs these ports to be free
_NUMBERS = range(20000, 20040)


def _claim_all(registry: str, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    start.wait()
    out.put([p for p in _NUMBERS if claim_port(p, registry)])
    start.wait()  # each lives until all have claimed: a claim ends with its taker


def _draw(n: int, out: multiprocessing.Queue, done: multiprocessing.synchronize.Event) -> None:
    out.put([free_port() for _ in range(n)])
    done.wait(60)  # holds its ports until the parent has tried them


def test_processes_claiming_at_once_never_get_the_same_port() -> None:
    registry = f"seqid-test-claims-{secrets.token_hex(6)}"
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(registry, start, out)) for _ in range(2)]
    for p in procs:
        p.start()
    claimed = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert not set(claimed[0]) & set(claimed[1])
    assert sorted(claimed[0] + claimed[1]) == list(_NUMBERS)  # every number went to one of them
    # both have exited: their claims went with them
    assert all(claim_port(p, registry) for p in _NUMBERS)


def test_a_port_stays_its_takers_while_it_lives_and_is_free_again_when_it_exits() -> None:
    ctx = multiprocessing.get_context("spawn")
    out, done = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=_draw, args=(20, out, done))
    child.start()
    try:
        taken = out.get(timeout=60)
        assert len(set(taken)) == 20
        assert not any(claim_port(p) for p in taken)  # the child lives: every one is its own
    finally:
        done.set()
        child.join(60)
    assert child.exitcode == 0
    assert all(claim_port(p) for p in taken)  # its claims ended with it (now this process's)


def test_a_port_bound_by_a_process_that_never_claimed_it_is_passed_over() -> None:
    """What the claims cannot see (a server of another program) the bind check does."""
    registry = f"seqid-test-bound-{secrets.token_hex(6)}"
    port = free_port()  # this process's now, in the suite's registry
    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", port))
        foreign.listen()
        with pytest.raises(BackendUnavailableError, match="no free port found"):
            free_port(port, port, registry)
    assert free_port(port, port, f"{registry}-later") == port  # and taken once it is closed
