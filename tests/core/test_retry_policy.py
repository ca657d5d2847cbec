"""The retry policy (``allocation/stores/retry.py``): decided in pure code, so tested with a scripted clock."""

from __future__ import annotations

import math

import pytest

from seqid_orm.allocation.stores import retry
from seqid_orm.allocation.stores.retry import Deadline, Retry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_try_starts_past_the_deadline() -> None:
    clock = Clock()
    deadline = Deadline.after(1.0, clock)
    seen = []
    for attempt, left in Retry(10).tries(deadline):
        seen.append((attempt, left))
        clock.now += 0.4  # each try takes 0.4 s
    assert seen == [(1, 1.0), (2, pytest.approx(0.6)), (3, pytest.approx(0.2))]


def test_without_a_deadline_every_attempt_runs() -> None:
    tries = list(Retry(3).tries())
    assert tries == [(1, math.inf), (2, math.inf), (3, math.inf)]


def test_a_passed_deadline_gives_no_try() -> None:
    clock = Clock()
    deadline = Deadline.after(0.0, clock)
    assert list(Retry(4).tries(deadline)) == []


def test_pauses_grow_linearly() -> None:
    policy = Retry(4, delay=0.05, growth=0.05)
    assert [policy.pause(n) for n in (1, 2, 3)] == pytest.approx([0.05, 0.10, 0.15])


def test_partial_set_waits_long_enough_for_a_creation_under_way() -> None:
    # The sum of its pauses bounds how long a creation on the other servers may take before the
    # set is called partial: about 2 s, longer than one CREATE + INSERT on a slow server.
    policy = retry.PARTIAL_SET
    total = sum(policy.pause(n) for n in range(1, policy.attempts))
    assert 1.5 <= total <= 3.0


@pytest.mark.parametrize("timeout", [0.2, 1.0, 5.0, 30.0])
def test_shares_of_a_deadline_fit_inside_it(timeout: float) -> None:
    # Two socket waits (a call and its one retry) end within the call's deadline, and WAIT's own
    # limit ends within one socket wait.
    assert 2 * retry.socket_share(timeout) <= timeout
    assert retry.redis_wait_ms(timeout) / 1000 < retry.socket_share(timeout)
    assert retry.per_server(timeout, 3) * 3 == pytest.approx(timeout)
    assert retry.follower_wait(timeout) > timeout


def test_a_grant_outlasts_its_round_trips_and_quarantine() -> None:
    seconds = retry.grant_seconds(timeout=2.0, ttl=30.0, clock_tolerance=1.0)
    assert seconds > 4 * 2.0 + 30.0 + 2 * 1.0
