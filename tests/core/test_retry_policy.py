"""The retry policy (``allocation/stores/retry.py``): decided in pure code, so tested with a scripted clock."""

from __future__ import annotations

import math

import pytest

from seqid_orm.calls import retry
from seqid_orm.calls.retry import Deadline, Retry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(steps, clock=None):
    """Drive a policy's steps with scripted time: each ``Sleep`` moves ``clock``; the pauses are returned."""
    from seqid_orm.calls.steps import Sleep

    slept, result, error = [], None, None
    while True:
        try:
            request = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value, slept
        assert isinstance(request, Sleep)
        slept.append(request.seconds)
        if clock is not None:
            clock.now += request.seconds
        result, error = None, None


class Flaky(Exception):
    pass


def _attempts(outcomes, clock=None, took=0.0):
    """An attempt that raises or returns the next of ``outcomes``, each try taking ``took`` seconds."""
    seen = []

    def attempt(left):
        seen.append(left)
        if clock is not None:
            clock.now += took
        outcome = outcomes[len(seen) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
        yield  # a step function

    return attempt, seen


def test_the_policy_owns_the_loop_and_tries_a_retryable_error_again() -> None:
    attempt, seen = _attempts([Flaky(), Flaky(), "done"])
    assert _run(Retry(4).steps(attempt, lambda exc: isinstance(exc, Flaky))) == ("done", [])
    assert seen == [math.inf] * 3


def test_an_error_that_may_not_be_retried_is_raised_at_once() -> None:
    attempt, seen = _attempts([KeyError("bug"), "done"])
    with pytest.raises(KeyError):
        _run(Retry(4).steps(attempt, lambda exc: isinstance(exc, Flaky)))
    assert len(seen) == 1


def test_the_last_try_raises_its_own_error_and_again_raises_what_it_carries() -> None:
    attempt, seen = _attempts([Flaky("1"), Flaky("2")])
    with pytest.raises(Flaky, match="2"):
        _run(Retry(2).steps(attempt, lambda exc: True))
    attempt, seen = _attempts([retry.Again(ValueError("lost")), retry.Again(ValueError("lost"))])
    with pytest.raises(ValueError, match="lost"):
        _run(Retry(2).steps(attempt))
    assert len(seen) == 2


def test_no_try_starts_past_the_deadline() -> None:
    clock = Clock()
    deadline = Deadline.after(1.0, clock)
    attempt, seen = _attempts([Flaky()] * 10, clock, took=0.4)
    with pytest.raises(TimeoutError):
        _run(Retry(10).steps(attempt, lambda exc: True, deadline), clock)
    assert seen == [1.0, pytest.approx(0.6), pytest.approx(0.2)]


def test_a_passed_deadline_gives_no_try() -> None:
    clock = Clock()
    attempt, seen = _attempts(["done"])
    with pytest.raises(RuntimeError, match="late"):
        _run(Retry(4).steps(attempt, deadline=Deadline.after(0.0, clock), out_of_time=lambda: RuntimeError("late")))
    assert seen == []


def test_pauses_are_the_policys_and_never_pass_the_deadline() -> None:
    clock = Clock()
    attempt, _ = _attempts([Flaky(), Flaky(), "done"], clock)
    policy = Retry(4, delay=0.05, growth=0.05)
    assert _run(policy.steps(attempt, lambda exc: True), clock) == ("done", pytest.approx([0.05, 0.10]))
    attempt, seen = _attempts([Flaky(), "done"], clock)
    slow = Retry(4, delay=5.0).steps(attempt, lambda exc: True, Deadline.after(1.0, clock))
    assert next(slow).seconds == 1.0  # the pause stops at the deadline, and no try starts after it
    clock.now += 1.0
    with pytest.raises(TimeoutError):
        slow.send(None)
    assert len(seen) == 1


def test_jitter_comes_from_the_os_and_stays_in_its_band() -> None:
    policy = Retry(3, delay=0.02, jitter=0.03)
    pauses = [policy.pause(1) for _ in range(200)]
    assert all(0.02 <= p <= 0.05 for p in pauses) and len(set(pauses)) > 20


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


def test_a_policy_grows_its_pause_by_a_factor_up_to_its_cap_as_kazoos_does():
    """kazoo's KazooRetry: delay * backoff ** n, capped at max_delay (the online DDL's wait for a held table:
    0.2 s, doubling, 5 s at most); the linear growth of the older policies is unchanged."""
    ddl = retry.Retry(8, delay=0.2, backoff=2.0, max_delay=5.0)
    assert [round(ddl.pause(n), 3) for n in range(1, 8)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    linear = retry.Retry(4, delay=0.05, growth=0.05)
    assert [round(linear.pause(n), 3) for n in range(1, 4)] == [0.05, 0.1, 0.15]
