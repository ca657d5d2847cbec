"""A process with a leased Snowflake, for the lease tests: ``python -m tests.leases.worker JSON``.

Prints ``ready`` and waits for a line on stdin; then takes its lease at the first id (with
``"retry"`` it keeps trying while every worker id is held), prints ``worker N``, ``acquired
SECONDS`` and ``count`` ids (one per line, ``pace`` seconds apart), ``done``, and with ``"hold"``
keeps its lease until stdin closes.  ``clock_offset_ms`` sets this process's clock behind;
``step_after`` and ``step_ms`` step it forward by ``step_ms`` after that many ids (an NTP step).
Errors print as ``error ClassName message``, also in the middle of the ids.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    opts = json.loads(sys.argv[1])
    from seqid_orm.errors import SeqIDError
    from tests.leases.stores import leased

    offset = [int(opts.get("clock_offset_ms", 0)) * 1_000_000]

    def clock() -> int:
        return time.time_ns() - offset[0]

    gen = leased(
        opts["store"],
        opts["namespace"],
        ttl=opts.get("ttl", 2.0),
        max_workers=opts.get("max_workers"),
        clock_tolerance=opts.get("tolerance", 5.0),
        clock=clock,
    )
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    while True:
        try:
            first = gen.next_id()
            break
        except SeqIDError as exc:
            if not opts.get("retry") or type(exc).__name__ != "LeaseUnavailableError":
                print(f"error {type(exc).__name__} {exc}", flush=True)
                return 0
            time.sleep(0.02)
    print(f"acquired {time.monotonic() - start:.3f}", flush=True)
    print(f"granted_at {gen.source.granted_at!r}", flush=True)  # CLOCK_MONOTONIC: one clock per machine
    print(f"mark_wait {gen.source.mark_wait!r}", flush=True)
    print(f"worker {gen.source.worker_id}", flush=True)
    print(first, flush=True)
    for n in range(opts.get("count", 1) - 1):
        if n == opts.get("step_after"):
            offset[0] -= int(opts["step_ms"]) * 1_000_000
            print("stepped", flush=True)
        try:
            print(gen.next_id(), flush=True)
        except SeqIDError as exc:
            print(f"error {type(exc).__name__} {exc}", flush=True)
            if not (opts.get("relet") and type(exc).__name__ == "LeaseLostError"):
                return 0
            time.sleep(0.05)  # the renewal thread leases again once the store answers
        if opts.get("pace"):
            time.sleep(opts["pace"])
    print("done", flush=True)
    if opts.get("hold"):
        sys.stdin.read()
    gen.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
