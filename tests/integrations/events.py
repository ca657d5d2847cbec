"""What the tests of the production stacks (Patroni, pg_auto_failover, Redis Sentinel) ask of worker processes
through a stack's own events: the same processes go on by themselves after each one, no id repeats,
and none is refused for its store's history (no ``seqid ticket repair`` needed)."""

from __future__ import annotations

from collections.abc import Callable

from tests.tickets.procs import Worker, start_together


def drawing(urls: list[str], name: str, options: dict[str, object], first: int = 300) -> list[Worker]:
    """One ticket worker process per URL on sequence ``name``, started together, each past its
    ``first`` ids; they keep asking through refusals for 600 s (a stack's events)."""
    workers = [Worker(servers=url, name=name, count=10**7, pace=0.001, persist=600.0, options=options) for url in urls]
    try:
        start_together(workers)
        for w in workers:
            w.wait_for_ids(first)
    except BaseException:  # none is left drawing for its 600 s after the test
        for w in workers:
            w.stop()
        raise
    return workers


def go_on_through(
    workers: list[Worker],
    events: list[tuple[str, Callable[[], object]]],
    settle: Callable[[], None],
    context: Callable[[], str],
) -> None:
    """Run each event; then every worker hands out 300 more ids within 120 s, ``settle()`` waits for
    the stack to be whole again before the next event, and no id has repeated.  ``context()`` is
    what a failure shows of the stack (its members, its logs).  Prints what each event cost the
    workers in refusals, by error type."""
    for what, act in events:
        act()
        counts = {id(w): len(w.ids()) for w in workers}
        for w in workers:  # the same processes go on, on whichever member takes writes now
            try:
                w.wait_for_ids(counts[id(w)] + 300, timeout=120)
            except AssertionError as exc:
                raise AssertionError(f"after the {what}: {exc}\n{context()}") from None
        settle()  # the other member is back (and synchronous) before the next event
        ids = [i for w in workers for i in w.ids()]
        assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} repeats after the {what}"
        print(f"after the {what}: {len(ids)} ids, refusals so far {[w.refusals() for w in workers]}")
    errors = [e for w in workers for e in w.values("error")]
    assert not [e for e in errors if "StoreHistoryError" in e], errors[:3]
