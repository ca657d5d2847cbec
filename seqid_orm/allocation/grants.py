"""One grant of a worker id, as steps: when a newly leased worker id is safe to stamp with.

A store hands out a worker id (:meth:`~.stores.base.LeaseStore.acquire`) with what it knows of the
id's past: the previous holder's clock mark and, where the store cannot rule out a holder it
forgot (a takeover of an expired lease, a record lost or rolled back, a new namespace), a
quarantine to wait.  The new holder makes no id until both have passed:

1. **the quarantine** (``grant.wait_ms``), renewing the lease meanwhile: a holder the store does not
   show may stamp the id for up to one ttl past its last renewal (:meth:`GrantRun._quarantine`);
2. **the previous holder's mark**: the last Unix millisecond it may have stamped.  This node's
   clock must pass it, within ``clock_tolerance``, or the id is given back and the grant refused
   as :class:`~seqid_orm.errors.ClockMovedBackwardsError` (:meth:`GrantRun._wait_for_mark`).

The run records when its fence ends (:attr:`GrantRun.fence_until`) as soon as the store has
answered, so a caller that will not wait past its deadline can say when the id will be safe
(:class:`~seqid_orm.errors.WorkerIdNotReadyError`'s ``safe_in``).  A release of the lease while the
grant is under way gives the id back at the grant's next step (:class:`Released`).

Steps (:mod:`seqid_orm.calls.steps`): the store's calls and the sleeps are yielded, so a thread and an
event loop carry out the same decisions; each store call carries the grant's deadline.  The terms'
:meth:`~.lease_life.Timing.clear_since` is the other half of "when is a worker id ours": from which
millisecond a key stamped with it cannot be another holder's.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls` and this package's
``lease_life``, ``renewal`` and ``stores.base``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from ..calls.retry import Deadline
from ..calls.steps import Call, Steps
from ..errors import AllocationError, ClockMovedBackwardsError, LeaseLostError, LeaseUnavailableError
from .lease_life import Event, Taken, Terms
from .renewal import renew
from .stores.base import Grant, LeaseStore, new_token

__all__ = ["GrantRun", "Released", "Waits", "give_back", "released_error"]

log = logging.getLogger("seqid_orm.leases")


class Waits(Protocol):
    """A lease's wait before its first id: ``sleep`` in a thread, its twin ``asleep`` on a loop; a
    release of the lease ends it early (``releases`` is the count the grant began with)."""

    def sleep(self, seconds: float, releases: int) -> None: ...

    async def asleep(self, seconds: float, releases: int) -> None: ...


class Released(LeaseLostError):
    """The lease was released while a grant was under way: the grant gave its worker id back rather
    than hold it with no one to use or release it (callers waiting on it get this)."""


class GrantRun:
    """One grant of the lease with ``terms``, run once by :meth:`steps`.

    ``waits`` is the lease's sleep as a step target (a thread calls ``sleep``, a loop awaits
    ``asleep``); ``releases`` reads the lease's release count (moved: give the id back); ``fenced``
    is told when the fence ends (monotonic), once the store has answered; ``deadline`` bounds every
    store call of the grant (the grant's own bound, or its caller's).  :attr:`mark_wait` is the
    seconds waited for the fence; :attr:`granted_at` when the store's grant arrived (monotonic)."""

    def __init__(
        self,
        terms: Terms,
        waits: Waits,
        releases: Callable[[], int],
        fenced: Callable[[float], object] = lambda until: None,
        deadline: Deadline | None = None,
    ) -> None:
        self.terms = terms
        self.store = terms.store()
        self.waits = waits
        self.releases = releases
        self.fenced = fenced
        self.deadline = deadline
        self.fence_until: float | None = None
        self.mark_wait = 0.0
        self.granted_at: float | None = None

    def steps(self) -> Steps[Taken]:
        """Ask for a worker id, leave this holder's bound, and wait out the fence (renewing)."""
        t = self.terms
        releases = self.releases()
        token = new_token()
        sent = t.monotonic()
        asked = (t.namespace, token, t.max_workers, t.ttl_ms, t.quarantine_ms)
        grant = yield Call(self.store.acquire, asked, self.deadline)
        self.granted_at = t.monotonic()
        if grant is None:
            raise LeaseUnavailableError(
                f"all {t.max_workers} worker ids of namespace {t.namespace!r} on {self.store.label} are "
                "leased (max_workers); stop a process, wait for a dead one's lease to expire, or allow more workers"
            )
        # Leave our own bound before the first id: a holder killed before its first renewal
        # must still leave a mark (the store handed us the previous holder's, which stays if higher).
        bound = max(grant.mark_ms, t.own_mark_ms(t.wall_ms()))
        yield from self._unless_released(releases, grant, token)
        if not (yield Call(self.store.renew, (t.namespace, grant.worker_id, token, t.ttl_ms, bound), self.deadline)):
            raise LeaseLostError(f"worker id {grant.worker_id} in {t.namespace!r} was taken again at once")
        if grant.wait_ms > 0:
            sent = yield from self._quarantine(grant, token, sent, releases)
        sent = yield from self._wait_for_mark(grant, token, sent, releases)
        return Taken(grant, token, bound, sent, releases)

    def _quarantine(self, grant: Grant, token: str, sent: float, releases: int) -> Steps[float]:
        """Wait ``grant.wait_ms`` before the first id (a takeover, whose record may be older than what
        a live holder confirmed; a store that forgot a live holder), renewing the lease meanwhile;
        the time the last renewal was sent."""
        t = self.terms
        log.warning(
            "worker id %s in %r on %s may still be stamped by a holder the store does not show (a takeover of "
            "an expired lease, a record lost or rolled back, a new namespace): waiting %.1f s before its first id",
            grant.worker_id,
            t.namespace,
            self.store.label,
            grant.wait_ms / 1000,
        )
        began = t.monotonic()
        until = self.fence_until = began + grant.wait_ms / 1000
        self.fenced(until)
        while (now := t.monotonic()) < until:
            yield Call(self.waits.sleep, (min(t.renewal_interval(), until - now), releases))
            yield from self._unless_released(releases, grant, token)
            sent = yield from self._keep(grant.worker_id, token, sent)
        self.mark_wait += t.monotonic() - began
        return sent

    def _wait_for_mark(self, grant: Grant, token: str, sent: float, releases: int) -> Steps[float]:
        """Make no id until this clock has passed what the previous holder may have used, renewing
        the lease meanwhile (the wait may outlast a ttl); the time the last renewal was sent."""
        t = self.terms
        worker_id, mark_ms = grant.worker_id, grant.mark_ms
        if t.wall_ms() > mark_ms:
            return sent
        began = t.monotonic()
        deadline = began + t.clock_tolerance
        # the fence ends at the mark, or at the tolerance with a refusal (ClockMovedBackwardsError)
        ends = began + min((mark_ms - t.wall_ms() + 1) / 1000, t.clock_tolerance)
        self.fence_until = max(self.fence_until or 0.0, ends)
        self.fenced(self.fence_until)
        while (now := t.wall_ms()) <= mark_ms:
            if t.monotonic() >= deadline:
                yield Call(self.store.release, (t.namespace, worker_id, token, mark_ms), self.deadline)
                raise ClockMovedBackwardsError(
                    f"this node's clock reads {now} ms, {mark_ms - now + 1} ms before the mark the previous holder "
                    f"of worker id {worker_id} in {t.namespace!r} left ({mark_ms} ms); waited "
                    f"{t.clock_tolerance} s (clock_tolerance). Fix this node's clock (NTP) or raise the tolerance"
                )
            yield Call(self.waits.sleep, (min(0.05, (mark_ms - now + 1) / 1000), releases))
            yield from self._unless_released(releases, grant, token)
            sent = yield from self._keep(worker_id, token, sent)
        self.mark_wait += t.monotonic() - began
        return sent

    def _keep(self, worker_id: int, token: str, sent: float) -> Steps[float]:
        """Renew a lease taken but not yet used once a third of the ttl has passed since ``sent``
        (renewal.py decides the outcome, as for a lease held); the time the last renewal was sent."""
        t = self.terms
        if t.monotonic() - sent < t.renewal_interval():
            return sent
        renewal = yield from renew(self.store, t, worker_id, token, t.mark(), t.valid_until(sent), self.deadline)
        if renewal.outcome is Event.RETRY and renewal.error is not None:
            raise renewal.error  # the store did not answer: the grant fails as the store's call did
        if renewal.outcome is not Event.RENEWED:
            raise LeaseLostError(
                f"the lease of worker id {worker_id} in {t.namespace!r} was lost while it waited before its first id"
            )
        return renewal.sent

    def _unless_released(self, releases: int, grant: Grant, token: str) -> Steps[None]:
        """Go on unless the lease was released since the grant began; if it was, give the worker id
        back and raise :class:`Released`."""
        if self.releases() != releases:
            yield from give_back(self.terms.namespace, self.store, grant, token, self.deadline)
            raise released_error(self.terms.namespace)


def give_back(
    namespace: str, store: LeaseStore, grant: Grant, token: str, deadline: Deadline | None = None
) -> Steps[None]:
    """Give a worker id taken but never used back, its mark as the store handed it over."""
    with contextlib.suppress(AllocationError):  # the store is gone: the lease simply expires there
        yield Call(store.release, (namespace, grant.worker_id, token, grant.mark_ms), deadline)


def released_error(namespace: str) -> Released:
    return Released(
        f"the lease in namespace {namespace!r} was released while its grant was under way; "
        "the worker id went back to the store unused"
    )
