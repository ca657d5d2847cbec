"""``seqid ticket`` and ``seqid lease``: what the ticket servers and lease stores hold, and the repair.

Imports the allocation package; its stores load their drivers (SQLAlchemy, redis-py) when opened.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import seconds


def _ticket_status(args: argparse.Namespace) -> int:
    from ..allocation.stores import open_ticket_store

    rows: list[dict[str, object]] = []
    for url in args.url:
        store = open_ticket_store(url, create_table=False)
        try:
            for row in store.rows():
                rows.append(
                    {
                        "server": store.label,
                        "name": row.name,
                        "next_value": row.next_value,
                        "step": row.step,
                        "offset": row.offset,
                    }
                )
        finally:
            store.close()
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no ticket sequences on " + ", ".join(args.url))
        return 0
    headings = ("server", "name", "next_value", "step", "offset")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in headings]
    print("  ".join(h.ljust(w) for h, w in zip(headings, widths, strict=True)).rstrip())
    for r in rows:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(headings, widths, strict=True)).rstrip())
    return 0


def _ticket_init(args: argparse.Namespace) -> int:
    from ..allocation.stores import ETCD_SCHEMES, REDIS_SCHEMES, hide_password, open_ticket_store, scheme_of

    for url in args.url:
        if scheme_of(url) in REDIS_SCHEMES + ETCD_SCHEMES:
            kind = "Redis" if scheme_of(url) in REDIS_SCHEMES else "etcd"
            print(f"{hide_password(url)}: {kind} needs no table; sequences are created on first use")
            continue
        from ..allocation.stores.sqlalchemy import SQLAlchemyTicketStore

        store = open_ticket_store(url)
        assert isinstance(store, SQLAlchemyTicketStore)
        try:
            with store.engine.connect() as conn:
                store.prepare(conn)
        finally:
            store.close()
        print(f"{store.label}: table {store.table.name} is ready")
    return 0


def _ticket_repair(args: argparse.Namespace) -> int:
    """Move a sequence's counters above the largest id in use, on every server of its list."""
    from ..allocation.tickets import TicketSequence

    floors = []
    for url, where in args.key or ():
        from ..allocation.stores.sqlalchemy import ColumnFloor, create_engine_for, sa_column_of

        floors.append(ColumnFloor(create_engine_for(url), sa_column_of(where), timeout=args.timeout))
    offsets = None if args.offsets is None else [int(o) for o in args.offsets.split(",")]
    with TicketSequence(
        args.name,
        args.url,
        step=args.step,
        offsets=offsets,
        start=args.start,
        floor=floors,
        accept_state_loss=args.accept_state_loss,
    ) as sequence:
        rows = sequence.repair(above=args.above)
    for floor in floors:
        floor.engine.dispose()
    for label, row in rows:
        print(f"{label}: sequence {row.name!r} next_value {row.next_value} (step {row.step}, offset {row.offset})")
    return 0


def _lease_status(args: argparse.Namespace) -> int:
    from ..allocation.stores import check_name, open_lease_store

    check_name(args.namespace, "lease namespace")  # a name no store can hold is refused, not "none held"
    store = open_lease_store(args.url, create_table=False)
    try:
        rows = store.leases(args.namespace)
    finally:
        store.close()
    found = [
        {
            "worker_id": r.worker_id,
            "held": r.held,
            "expires_in_ms": r.expires_in_ms,
            "mark_ms": r.mark_ms,
            "holder": r.holder,
        }
        for r in rows
    ]
    if args.json:
        print(json.dumps(found))
        return 0
    if not found:
        print(f"no worker ids leased in namespace {args.namespace!r} on {store.label}")
        return 0
    print(f"{'worker_id':>9}  {'held':5}  {'expires_in_ms':>13}  mark")
    for r in rows:
        print(f"{r.worker_id:>9}  {'yes' if r.held else 'no':5}  {r.expires_in_ms:>13}  {r.mark_ms}")
    return 0


def _status(args: argparse.Namespace) -> int:
    """One store's ticket counters and worker-id leases, read-only."""
    from ..allocation.stores import check_name, open_lease_store, open_ticket_store

    if args.namespace:
        check_name(args.namespace, "lease namespace")  # refused before any store is asked
    tickets = open_ticket_store(args.url, create_table=False)
    try:
        label = tickets.label
        counters = [
            {"name": r.name, "next_value": r.next_value, "step": r.step, "offset": r.offset} for r in tickets.rows()
        ]
    finally:
        tickets.close()
    leases = open_lease_store(args.url, create_table=False)
    try:
        names = [args.namespace] if args.namespace else leases.namespaces()
        held = {
            ns: [
                {
                    "worker_id": r.worker_id,
                    "held": r.held,
                    "holder": r.holder,
                    "expires_in_s": round(r.expires_in_ms / 1000, 3) if r.held else None,
                    "mark_ms": r.mark_ms,
                }
                for r in leases.leases(ns)
            ]
            for ns in names
        }
    finally:
        leases.close()
    if args.json:
        print(json.dumps({"store": label, "sequences": counters, "namespaces": held}))
        return 0
    print(f"store {label}")
    print(f"ticket sequences: {len(counters) or 'none'}")
    for c in counters:
        print(f"  {c['name']}: next value {c['next_value']:,} (step {c['step']}, offset {c['offset']})")
    print(f"lease namespaces: {len(held) or 'none'}")
    for ns, rows in held.items():
        live = [r for r in rows if r["held"]]
        print(f"  {ns}: {len(live)} worker id(s) held, {len(rows)} known")
        for r in live:
            print(f"    worker id {r['worker_id']:>5}  {r['holder'] or '?':<16}  expires in {r['expires_in_s']:.1f} s")
    return 0


def add_parsers(sub: Any) -> None:
    """``ticket status|init|repair`` and ``lease status`` on the ``seqid`` parser's subcommands."""
    p = sub.add_parser("ticket", help="ticket sequences: show servers' counters, create the table, repair")
    tsub = p.add_subparsers(dest="ticket_command", required=True)
    t = tsub.add_parser("status", help="every sequence on the servers: next value, step, offset")
    t.add_argument("url", nargs="+", help="SQLAlchemy or Redis URL of a ticket server")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_ticket_status)
    t = tsub.add_parser("init", help="create the ticket table on SQL servers (what op.create_ticket_table() does)")
    t.add_argument("url", nargs="+", help="SQLAlchemy URL of a ticket server")
    t.set_defaults(func=_ticket_init)
    t = tsub.add_parser(
        "repair",
        help="move a sequence's counters above the largest id in use (after a restore, a lost Redis, a new server)",
        description=(
            "Sets the sequence's next value on every server of the list (in the order its clients list them) "
            "to the first value above --above and above the largest key of each --key column; creates it where "
            "it is missing; never lowers a counter. Running clients that refused a block go on once restarted."
        ),
    )
    t.add_argument("name", help="the sequence name")
    t.add_argument("url", nargs="+", help="SQLAlchemy or Redis URL of each ticket server, in the clients' order")
    t.add_argument("--above", type=int, help="the largest id in use, if no --key column says it")
    t.add_argument(
        "--key",
        nargs=2,
        action="append",
        metavar=("DATABASE_URL", "TABLE.COLUMN"),
        help="a key column the sequence fills (repeat for several tables); its largest value counts",
    )
    t.add_argument(
        "--timeout",
        type=seconds,
        default=30.0,
        help="seconds each --key column's read may take, a lock it waits for included (default 30)",
    )
    t.add_argument("--step", type=int, help="the clients' step (default: the number of servers)")
    t.add_argument("--offsets", help="the clients' offsets, comma-separated (default 1..number of servers)")
    t.add_argument("--start", type=int, default=1, help="the clients' start (default 1)")
    t.add_argument(
        "--accept-state-loss", action="store_true", help="allow a Redis server without persistence (see the README)"
    )
    t.set_defaults(func=_ticket_repair)

    p = sub.add_parser(
        "status", help="a store's ticket counters and held worker-id leases (holder, time left), read-only"
    )
    p.add_argument("url", help="SQLAlchemy, Redis or etcd URL of the store")
    p.add_argument("namespace", nargs="?", help="one lease namespace (default: every one the store knows)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_status)

    p = sub.add_parser("lease", help="worker-id leases: who holds which worker id")
    lsub = p.add_subparsers(dest="lease_command", required=True)
    t = lsub.add_parser("status", help="every worker id of a namespace: held, expiry, high-water mark")
    t.add_argument("url", help="SQLAlchemy or Redis URL of the lease store")
    t.add_argument("--namespace", required=True)
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_lease_status)
