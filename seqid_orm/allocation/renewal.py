"""A held lease's renewal, as steps, and its outcome decided once.

A renewal sends the store the lease's token with a new mark (the last Unix millisecond the holder
may stamp before it renews again) and the store answers whether the worker id is still this
holder's.  What follows is one of three, decided here and read by every caller:

* **renewed**: the lease is valid for another ttl, less a margin, counted from when the renewal
  was *sent* (the store's expiry is counted from a later instant, when it wrote the renewal, so the
  holder always stops first);
* **lost**: the store refused (the lease expired there and was taken, or the store forgot it), or
  the store could not be asked and the lease's time has run out meanwhile: no id is made until a
  lease is held again;
* **retry**: the store could not be asked (a typed store error: unreachable, stalled) and the lease
  is still valid: ask again soon, well before it runs out.

Three callers run the same steps: the renewal thread (:meth:`WorkerLease._renew_once`), a generator
whose clock passed the confirmed mark (:meth:`WorkerLease.extend_mark`), and a grant keeping its new
lease alive while it waits out its fence (:meth:`grants.GrantRun._keep`).  Only the store's typed
errors (:class:`~seqid_orm.errors.AllocationError`) mean "the store did not answer": anything else
is a bug and surfaces as itself.

May import: the standard library, :mod:`seqid_orm.errors` and this package's ``stores.base`` and
``stores.steps``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import AllocationError
from .stores.base import LeaseStore
from .stores.steps import Call, Steps

__all__ = ["MARGIN", "Outcome", "Renewal", "decide", "renew", "valid_until"]

#: The share of the ttl a holder gives up, so that it stops before the store's expiry.
MARGIN = 0.1


class Outcome(enum.Enum):
    """What a renewal came to (see the module docstring)."""

    RENEWED = "renewed"
    LOST = "lost"
    RETRY = "retry"


def valid_until(sent: float, ttl: float) -> float:
    """The monotonic time until which a lease renewed (or granted) by a request sent at ``sent`` may be used."""
    return sent + ttl * (1 - MARGIN)


@dataclass(frozen=True)
class Renewal:
    """One renewal's outcome: when it was sent, the mark it asked for, until when the lease may be
    used now, and the store's error where it did not answer."""

    outcome: Outcome
    sent: float
    mark_ms: int
    valid_until: float
    error: AllocationError | None = None

    def next_in(self, ttl: float, now: float) -> float:
        """Seconds until the next renewal: a third of the ttl after one that renewed, a tenth after a
        lost lease (an attempt to lease again), and half the time left (a tenth of the ttl at most,
        10 ms at least) after one the store did not answer."""
        if self.outcome is Outcome.RENEWED:
            return ttl / 3
        if self.outcome is Outcome.LOST:
            return ttl / 10
        return max(0.01, min(ttl / 10, (self.valid_until - now) / 2))


def decide(renewed: bool | None, sent: float, now: float, ttl: float, held_until: float) -> Outcome:
    """The outcome of a renewal sent at ``sent``, the store's answer ``renewed`` (``None``: no answer),
    at monotonic time ``now``, for a lease valid until ``held_until``.

    >>> decide(True, 10.0, 10.2, 30.0, 20.0).value
    'renewed'
    >>> decide(False, 10.0, 10.2, 30.0, 20.0).value
    'lost'
    >>> decide(None, 10.0, 10.2, 30.0, 20.0).value
    'retry'
    >>> decide(None, 10.0, 20.5, 30.0, 20.0).value
    'lost'
    """
    if renewed:
        return Outcome.RENEWED
    if renewed is False or now >= held_until:
        return Outcome.LOST
    return Outcome.RETRY


def renew(
    store: LeaseStore,
    namespace: str,
    worker_id: int,
    token: str,
    ttl: float,
    mark_ms: int,
    held_until: float,
    monotonic: Callable[[], float],
) -> Steps[Renewal]:
    """Renew the lease of ``worker_id`` (valid until ``held_until``) with mark ``mark_ms``, as steps."""
    sent = monotonic()
    error: AllocationError | None = None
    try:
        answer = yield Call(store.renew, (namespace, worker_id, token, int(ttl * 1000), mark_ms))
    except AllocationError as exc:  # the store's typed "no answer": a bug is not one, and surfaces
        answer, error = None, exc
    outcome = decide(answer, sent, monotonic(), ttl, held_until)
    until = {Outcome.RENEWED: valid_until(sent, ttl), Outcome.LOST: float("-inf")}.get(outcome, held_until)
    return Renewal(outcome, sent, mark_ms, until, error)
