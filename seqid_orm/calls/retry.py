"""How a store call tries again: decided here, read by every site (its deadline is :class:`.steps.Deadline`).

One policy object per reason to try again (as kazoo's ``KazooRetry`` is one policy its recipes read),
each with its count and its pause between tries; a try never starts past the call's deadline.  Before,
each retry site carried a constant of its own (4 connection tries, 2 in the Django store, 4 rows
changed under a reservation, 32 lost etcd transactions, 8 re-reads of a partial set, 3 of a history
row) and the deadline was re-derived in five places; the derivations are named functions here.

May import: the standard library and :mod:`.steps` (a try's pause is a step).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .steps import Deadline as Deadline
from .steps import Sleep, Steps

_T = TypeVar("_T")

__all__ = [
    "CHANGED_ROW",
    "CONNECTION",
    "GRACE",
    "HISTORY_ROW",
    "LOST_TRANSACTION",
    "MEMBERS",
    "NEW_REPLICA",
    "OVERFLOW",
    "PARTIAL_SET",
    "Again",
    "Deadline",
    "Retry",
    "follower_wait",
    "grant_seconds",
    "per_server",
    "redis_wait_ms",
    "socket_share",
]


class Again(Exception):
    """Raised by an attempt to be tried again, whatever its policy's errors (kazoo's ``ForceRetryError``):
    an etcd transaction another client won, a write a new replica did not see.  ``error`` is what is
    raised when no try is left."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class Retry:
    """Try at most ``attempts`` times, pausing ``delay`` seconds before the second try, then ``growth`` more
    before each next one (linear backoff) or ``backoff`` times the last (exponential, kazoo's ``backoff``),
    at most ``max_delay`` (kazoo's), plus up to ``jitter`` seconds drawn from the OS's CSPRNG (so clients
    that failed together do not all come back together), none past a deadline where the call has one.
    :meth:`steps` owns the loop: a site says what one try is and which errors may be tried again."""

    attempts: int
    delay: float = 0.0
    growth: float = 0.0
    jitter: float = 0.0
    why: str = ""
    backoff: float = 1.0
    max_delay: float = math.inf

    def pause(self, attempt: int) -> float:
        """The pause after try ``attempt`` (1 for the first), before the next."""
        grown = self.delay * self.backoff ** (attempt - 1) + self.growth * (attempt - 1)
        return min(grown, self.max_delay) + self.jitter * secrets.randbelow(1001) / 1000

    def steps(
        self,
        attempt: Callable[[float], Steps[_T]],
        retryable: Callable[[Exception], bool] = lambda exc: False,
        deadline: Deadline | None = None,
        out_of_time: Callable[[], Exception] | None = None,
    ) -> Steps[_T]:
        """Run ``attempt(left)`` (its steps; ``left``: the seconds left of ``deadline``) until it returns.
        An error ``retryable`` accepts, or :class:`Again`, is tried again after :meth:`pause` while tries
        and the deadline last; any other error is raised as it is, and so is the last try's (an
        :class:`Again`'s own ``error``).  Once the deadline has passed no try starts: ``out_of_time()``
        is raised.  Steps (:mod:`.steps`): a thread drives them with blocking calls and ``time.sleep``,
        a loop awaits them."""
        for number in range(1, self.attempts + 1):
            left = math.inf if deadline is None else deadline.left()
            if left <= 0:
                break
            try:
                return (yield from attempt(left))
            except Again as again:
                if number == self.attempts:
                    raise again.error from None
            except Exception as exc:
                if number == self.attempts or not retryable(exc):
                    raise
            pause = self.pause(number)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline.left()))
            if pause > 0:
                yield Sleep(pause)
        raise (out_of_time or _out_of_time)()


def _out_of_time() -> Exception:
    return TimeoutError("the call's deadline passed before its next try")


#: A pooled connection the server closed (idle time-out, restart), or a conflict another node of a
#: Galera cluster won: try again on a fresh connection (the lost statement reserved at most a gap).
CONNECTION = Retry(4, why="a connection the server dropped, or a conflict another node won")
#: A counter row another client changed between a reservation's UPDATE and its read: shrink, ask again.
CHANGED_ROW = Retry(4, why="a ticket row another client changed under a reservation")
#: etcd transactions lost to other clients (a compare on the key's revision that failed).
LOST_TRANSACTION = Retry(32, why="an etcd transaction another client won")
#: A sequence present on some servers only: another client may be creating it on the rest right now.
PARTIAL_SET = Retry(9, delay=0.05, growth=0.05, why="a sequence another client is creating on its servers")
#: A history row another process wrote between this one's read and its write.
HISTORY_ROW = Retry(3, why="a history row another process wrote meanwhile")
#: A Redis primary that serves more replicas than the write waited for: the write once more, waiting for them.
NEW_REPLICA = Retry(2, why="a replica that joined during a write")
#: A Redis reservation that would pass 2**63: asked again for what is left (fewer each time, so it ends).
OVERFLOW = Retry(1 << 30, why="a reservation another client's took past the limit")
#: An etcd member that does not answer (refused, reset, stalled, "no leader"): the next one, until the
#: deadline; a short pause with jitter between tries lets an election end.
MEMBERS = Retry(1 << 30, delay=0.02, jitter=0.03, why="an etcd member that does not answer")


def per_server(timeout: float, servers: int) -> float:
    """Each server's share of a call's deadline: a stalled server leaves the others theirs."""
    return timeout / servers


#: How long past the deadline a thread waits for a reservation under way to report its outcome.
GRACE = 0.5


def follower_wait(timeout: float) -> float:
    """How long a caller waits for a reservation someone else leads: the leader's deadline, then the
    time its outcome takes to arrive."""
    return timeout + GRACE


def grant_seconds(timeout: float, ttl: float, clock_tolerance: float) -> float:
    """The longest a worker-id grant may take: its round trips (the acquire, a renewal before the first id,
    a renewal during a wait, a release of an id it gives back), a quarantine of one ttl and the clock
    tolerance, and the wait for the previous holder's mark (the tolerance again), and a second."""
    return 4 * timeout + ttl + 2 * clock_tolerance + 1.0


def socket_share(timeout: float) -> float:
    """A socket's time-out (redis-py's, one etcd request's): half the call's deadline, so a call that
    tries once more still ends within it."""
    return timeout / 2


def redis_wait_ms(timeout: float) -> int:
    """``WAIT``'s own limit: a quarter of the deadline, so its answer arrives within the socket's half."""
    return max(1, int(timeout * 250))
