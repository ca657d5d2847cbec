"""A held lease's renewal, as steps, its outcome decided once, and the thread that renews.

A renewal sends the store the lease's token with a new mark (the last Unix millisecond the holder
may stamp before it renews again) and the store answers whether the worker id is still this
holder's.  What follows is one of three :class:`~.lease_life.Event` values, decided here
(:func:`decide`) and made the lease's by :meth:`~.lease_life.LeaseLife.apply`:

* **renewed**: the lease is valid for another ttl, less a margin, counted from when the renewal
  was *sent* (the store's expiry is counted from a later instant, when it wrote the renewal, so the
  holder always stops first);
* **lost**: the store refused (the lease expired there and was taken, or the store forgot it), or
  the store could not be asked and the lease's time has run out meanwhile: no id is made until a
  lease is held again;
* **retry**: the store could not be asked (a typed store error: unreachable, stalled) and the lease
  is still valid: ask again soon, well before it runs out.

Three callers run the same steps (:func:`renew`): the renewal thread (:meth:`Renewer.once`), a
generator whose clock passed the confirmed mark and a caller whose lease ran out before its first
use (both through :meth:`Renewer.renew`), and a grant keeping its new lease alive while it waits
out its fence (:meth:`~.grants.GrantRun._keep`).  The mark a renewal records is the terms'
(:meth:`~.lease_life.Terms.mark`); its store call is bounded by what is left of the lease's validity,
or the caller's deadline where that ends sooner (:func:`renewal_deadline`), written at the call.
Only the store's typed errors (:class:`~seqid_orm.errors.AllocationError`) mean "the store did not
answer": anything else is a bug and surfaces as itself.

No lock is held across the round trip: a release meanwhile is the store's to order (the token it
gives back is the one the renewal carries, so whichever comes second is refused).

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's
``lease_life`` and ``stores.base``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..calls.retry import Deadline
from ..calls.steps import Call, Steps, drive
from ..errors import AllocationError
from .lease_life import Event, LeaseLife, Renewal, State, Terms
from .stores.base import LeaseStore

__all__ = ["Renewer", "decide", "renew", "renewal_deadline"]


def decide(renewed: bool | None, sent: float, now: float, ttl: float, held_until: float) -> Event:
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
        return Event.RENEWED
    if renewed is False or now >= held_until:
        return Event.LOST
    return Event.RETRY


def renew(
    store: LeaseStore,
    terms: Terms,
    worker_id: int,
    token: str,
    mark_ms: int,
    held_until: float,
    caller: Deadline | None = None,
) -> Steps[Renewal]:
    """Renew the lease of ``worker_id`` (valid until ``held_until``) with mark ``mark_ms``, as steps;
    its store call bounded by :func:`renewal_deadline` (``caller``: the deadline of the call it serves)."""
    monotonic = terms.monotonic
    sent = monotonic()
    error: AllocationError | None = None
    bound = renewal_deadline(held_until, monotonic, caller)
    try:
        answer = yield Call(store.renew, (terms.namespace, worker_id, token, terms.ttl_ms, mark_ms), bound)
    except AllocationError as exc:  # the store's typed "no answer": a bug is not one, and surfaces
        answer, error = None, exc
    outcome = decide(answer, sent, monotonic(), terms.ttl, held_until)
    until = {Event.RENEWED: terms.valid_until(sent), Event.LOST: float("-inf")}.get(outcome, held_until)
    return Renewal(outcome, sent, mark_ms, until, error)


def renewal_deadline(
    held_until: float, monotonic: Callable[[], float], caller: Deadline | None = None
) -> Deadline | None:
    """The deadline a renewal's store call gets: what is left of the lease's validity, where some is (an
    answer after it comes too late to keep the lease, so the call is not left the store's whole time-out:
    a renewal sent with 0.2 s left got 5 s of a stalled store), or ``caller``'s where that ends sooner;
    with no validity left, ``caller``'s, else the store's own bound (``None``: a late renewal of a lease
    that lapsed, which may still find its row its own)."""
    left = held_until - monotonic()
    if left <= 0:
        return caller
    own = Deadline.after(left, monotonic)
    return own if caller is None or own.end <= caller.end else caller


class Renewer:
    """A lease's renewal thread: a renewal every third of the ttl (:meth:`~.lease_life.Timing.renewal_interval`),
    sooner after one the store did not answer; once the lease is lost, ``lease_again`` instead (the grant
    :mod:`.acquiring` leads, which hands it this renewer)."""

    def __init__(self, life: LeaseLife, lease_again: Callable[[threading.Event], None]) -> None:
        self._life = life
        self._lease_again = lease_again
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread, unless one is running (a lease lost and taken again)."""
        if self.thread is not None and self.thread.is_alive() and not self.stop.is_set():
            return
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(self.stop,), daemon=True, name="seqid-lease")
        self.thread.start()

    def halt(self) -> threading.Thread | None:
        """Stop the thread; the thread, for the caller to join outside the lease's lock."""
        self.stop.set()
        thread, self.thread = self.thread, None
        return thread

    def _loop(self, stop: threading.Event) -> None:
        interval = self._life.terms.renewal_interval()
        while not stop.wait(interval):
            interval = self.once(stop)

    def once(self, stop: threading.Event) -> float:
        """One renewal (or, once lost, one attempt to lease again); the seconds until the next."""
        terms = self._life.terms
        if self._life.now() is State.LOST:
            self._lease_again(stop)
            return terms.renewal_interval()
        renewal = self.renew(0, stop)
        if renewal is None:
            return terms.renewal_interval()  # released meanwhile, or not held
        return terms.next_renewal_in(renewal.outcome, renewal.valid_until, terms.monotonic())

    def renew(
        self, at_least_ms: int, stop: threading.Event | None = None, caller: Deadline | None = None
    ) -> Renewal | None:
        """Renew the lease held now (expired or not), recording the terms' mark of ``at_least_ms``; the
        renewal as applied, or ``None`` where no lease is held (or it was released, or taken again,
        while the store answered: that answer is not applied).  ``caller``: the deadline of the call it
        serves (a late renewal's acquire)."""
        life, terms = self._life, self._life.terms
        held = life.renewing()
        if held is None or (stop is not None and stop.is_set()):
            return None
        worker_id, token, acquisition, held_until = held
        steps = renew(terms.store(), terms, worker_id, token, terms.mark(at_least_ms), held_until, caller)
        renewal = drive(steps, None)
        return renewal if life.apply(renewal, acquisition) else None
