"""What the awaitable API costs beside the synchronous one, in rotated rounds on one machine.

1. Within a block (no store involved): ``await seq.anext_id()`` against ``seq.next_id()`` per id,
   and ``await gen.anext_id()`` against ``gen.next_id()`` for a configured Snowflake; each timed
   over ``--ids`` calls in one coroutine, the sync calls from a coroutine too (what an async app does).
2. Under load on a real store: 1,000 tasks each awaiting 100 tickets (``--tasks``, ``--per-task``),
   one at a time or as one ``anext_ids(100)``, against one thread calling ``next_id()`` for as many,
   each from a fresh sequence of ``--block`` values per reservation, so all pay the same reservations.
3. One reservation on the store (``--reservations`` of them a run, also on ``--redis``): called in
   this thread, called in a worker thread from a loop (``asyncio.to_thread``, what the awaitable API
   did before the stores had asynchronous drivers), and awaited through the asynchronous driver::

    python -m benchmarks.async_ids [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from seqid_orm import Snowflake, TicketSequence
from seqid_orm.cli.bench.rounds import median_ratio, ratios, rotated


def _per_id(run: Callable[[], Coroutine[Any, Any, None]], n: int) -> float:
    started = time.perf_counter()
    asyncio.run(run())
    return (time.perf_counter() - started) / n * 1e9


def _reservations(urls: list[str], count: int, rounds: int) -> list[str]:
    """Part 3: the table rows of one reservation's latency per store and way of calling it."""

    return [line for url in urls for line in _reservation_rows(url, count, rounds)]


def _reservation_rows(url: str, count: int, rounds: int) -> list[str]:
    from seqid_orm.allocation.stores import open_ticket_store
    from seqid_orm.allocation.stores.base import TicketRow

    lines = []
    store: Any = open_ticket_store(url)
    name = f"bench-async-{secrets.token_hex(4)}"
    store.create(TicketRow(name, 1, 1, 0))

    def reserve() -> None:
        store.allocate(name, 10, 1, 0, 1 << 62)

    def called() -> float:
        started = time.perf_counter()
        for _ in range(count):
            reserve()
        return (time.perf_counter() - started) / count

    def threaded() -> float:
        async def run() -> float:
            started = time.perf_counter()
            for _ in range(count):
                await asyncio.to_thread(reserve)
            return (time.perf_counter() - started) / count

        return asyncio.run(run())

    def awaited() -> float:
        async def run() -> float:
            await store.aallocate(name, 10, 1, 0, 1 << 62)  # the loop's pool: opened once, as in an app
            started = time.perf_counter()
            for _ in range(count):
                await store.aallocate(name, 10, 1, 0, 1 << 62)
            return (time.perf_counter() - started) / count

        return asyncio.run(run())

    ways = {"allocate() in the caller's thread": called, "asyncio.to_thread(allocate)": threaded}
    ways["await aallocate() (async driver)"] = awaited
    seconds: dict[str, list[float]] = {k: [] for k in ways}
    for number in range(rounds):
        for way in rotated(list(ways), number):
            seconds[way].append(ways[way]())
    store.close()
    base = seconds["allocate() in the caller's thread"]
    label = url.split("://")[0]
    for way, values in seconds.items():
        r = ratios(values, base)
        lines.append(
            f"| {label} | {way} | {statistics.median(values) * 1000:.2f} | {median_ratio(values, base):.2f} "
            f"({min(r):.2f}-{max(r):.2f}) |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.async_ids", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--ids", type=int, default=200_000)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--per-task", type=int, default=100)
    parser.add_argument("--block", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0?accept_state_loss=true")
    parser.add_argument("--reservations", type=int, default=300)
    args = parser.parse_args(argv)
    n = args.ids

    big = TicketSequence(f"bench-async-{secrets.token_hex(4)}", args.url, block_size=n * (args.rounds * 2 + 2))
    big.next_id()  # the one reservation: every timed id below comes from memory
    flake = Snowflake(worker_id=1)

    async def ticket_sync() -> None:
        for _ in range(n):
            big.next_id()

    async def ticket_async() -> None:
        for _ in range(n):
            await big.anext_id()

    async def flake_sync() -> None:
        for _ in range(n):
            flake.next_id()

    async def flake_async() -> None:
        for _ in range(n):
            await flake.anext_id()

    memory = {
        "ticket next_id()": ticket_sync,
        "ticket await anext_id()": ticket_async,
        "snowflake next_id()": flake_sync,
        "snowflake await anext_id()": flake_async,
    }
    ns: dict[str, list[float]] = {k: [] for k in memory}
    for number in range(args.rounds):
        for name in rotated(list(memory), number):
            ns[name].append(_per_id(memory[name], n))
    big.close()

    total = args.tasks * args.per_task

    def one_thread() -> float:
        with TicketSequence(f"bench-async-{secrets.token_hex(4)}", args.url, block_size=args.block) as seq:
            started = time.perf_counter()
            for _ in range(total):
                seq.next_id()
            return total / (time.perf_counter() - started)

    def many_tasks(batch: bool) -> Callable[[], float]:
        def measure() -> float:
            async def run() -> float:
                with TicketSequence(f"bench-async-{secrets.token_hex(4)}", args.url, block_size=args.block) as seq:

                    async def task() -> None:
                        if batch:
                            await seq.anext_ids(args.per_task)
                            return
                        for _ in range(args.per_task):
                            await seq.anext_id()

                    started = time.perf_counter()
                    await asyncio.gather(*(task() for _ in range(args.tasks)))
                    return total / (time.perf_counter() - started)

            return asyncio.run(run())

        return measure

    load = {
        "one thread, next_id()": one_thread,
        f"{args.tasks} tasks, await anext_id() x {args.per_task}": many_tasks(False),
        f"{args.tasks} tasks, await anext_ids({args.per_task})": many_tasks(True),
    }
    rate: dict[str, list[float]] = {k: [] for k in load}
    for number in range(args.rounds):
        for name in rotated(list(load), number):
            rate[name].append(load[name]())

    trips = _reservations([args.url, args.redis], args.reservations, args.rounds)

    print(f"| within a block ({n:,} ids a run, {args.rounds} rotated rounds) | ns an id (median) | x sync |")
    print("|---|---:|---:|")
    for name, base in (
        ("ticket next_id()", "ticket next_id()"),
        ("ticket await anext_id()", "ticket next_id()"),
        ("snowflake next_id()", "snowflake next_id()"),
        ("snowflake await anext_id()", "snowflake next_id()"),
    ):
        r = ratios(ns[name], ns[base])
        print(
            f"| {name} | {statistics.median(ns[name]):,.0f} | {median_ratio(ns[name], ns[base]):.2f} "
            f"({min(r):.2f}-{max(r):.2f}) |"
        )
    print()
    print(
        f"| {total:,} tickets, blocks of {args.block:,} ({args.rounds} rotated rounds) "
        "| ids/s (median) | x one thread |"
    )
    print("|---|---:|---:|")
    base = rate["one thread, next_id()"]
    for name in load:
        r = ratios(rate[name], base)
        print(
            f"| {name} | {statistics.median(rate[name]):,.0f} | {median_ratio(rate[name], base):.2f} "
            f"({min(r):.2f}-{max(r):.2f}) |"
        )
    print()
    print(f"| store ({args.reservations} a run, {args.rounds} rotated rounds) | called as | ms each | x in thread |")
    print("|---|---|---:|---:|")
    for line in trips:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
