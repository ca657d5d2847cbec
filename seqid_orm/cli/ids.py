"""``seqid new``, ``decode``, ``probe`` and ``demo``: making ids, reading them back, and what a live database does.

Imports the core freely; the SQLAlchemy adapter only inside the commands that talk to a database.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from .. import Layout, Snowflake, base32, bsv, comb, uuid7, uuid_sequence_nextval, uuid_time_nextval
from ..errors import InvalidArgumentError, SeqIDError
from ..ids.decode import describe
from ..vendors import VENDORS
from .common import positive

KINDS = ("uuid7", "comb", "snowflake", "bsv", "base32", "time-prefix")


def _new(args: argparse.Namespace) -> int:
    layout = Layout(args.layout) if args.layout else Layout.TIME_FIRST
    if args.url:
        from sqlalchemy import create_engine

        from ..sqlalchemy import SeqUUID, layout_for

        engine = create_engine(args.url)
        with engine.connect():  # the layout may depend on the server version
            pass
        layout = layout_for(engine.dialect, SeqUUID(storage=args.storage))
        engine.dispose()
    elif args.dialect:
        from ..vendors import target

        layout = target(args.dialect, None, args.storage).layout
    kind = args.kind or ("comb" if args.layout or args.dialect or args.url else "uuid7")
    snowflake = Snowflake(worker_id=args.worker)
    makers: dict[str, Callable[[], object] | None] = {
        "uuid7": uuid7,
        "comb": lambda: comb(layout),
        "snowflake": snowflake.next_id,
        "bsv": bsv,
        "base32": base32,
        "time-prefix": lambda: uuid_time_nextval(layout=layout),
        "seq-prefix": None,
    }
    make = makers[kind]
    for i in range(args.n):
        print(uuid_sequence_nextval(i + 1, layout=layout) if make is None else make())  # a sequence's 1, 2, ...
    return 0


def _describe(text: str, kind: str | None = None, layout: str | None = None) -> dict[str, object]:
    text = text.strip()
    if kind is None and text.isascii() and text.isdigit() and len(text) not in (26, 32, 36):
        kind = "snowflake"  # describe() says which profile it assumed
    return describe(text, kind=kind, layout=layout).as_dict()  # type: ignore[arg-type]


def _decode(args: argparse.Namespace) -> int:
    info = _describe(args.value, args.kind, args.layout)
    if args.json:
        print(json.dumps(info))
        return 0
    for key, val in info.items():
        if key == "timestamp" and val is None:
            val = "none (this id carries no time)"
        print(f"{key}: {val}")
    return 0


def _runs(order: list[int]) -> str:
    """Byte positions as runs: ``[0, 1, ..., 15]`` -> ``"0-15"``, SQL Server's -> ``"10-15, 8-9, 7, 6, ..."``."""
    parts: list[str] = []
    start = prev = order[0]
    for pos in [*order[1:], None]:
        if pos is not None and pos == prev + 1:
            prev = pos
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if pos is not None:
            start = prev = pos
    return ", ".join(parts)


def _probe_etcd(args: argparse.Namespace) -> int:
    """``seqid probe etcd://...``: the cluster as a ticket and lease store sees it."""
    from ..allocation.stores.etcd import cluster_status

    status = cluster_status(args.url)
    if args.json:
        print(json.dumps(status))
        return 0 if status["healthy"] else 1
    state = "healthy" if status["healthy"] else "NOT HEALTHY (no majority answering one leader)"
    print(
        f"etcd {status['version']} cluster {status['cluster_id']} at {status['url']}: "
        f"{len(status['members'])} members, leader {status['leader']}, {state}"
    )
    for m in status["members"]:
        urls = ",".join(m["client_urls"])
        if m["answered"]:
            role = "leader  " if m["leader"] else "follower"
            print(f"  {m['name']:12} {urls:28} {role} raft term {m['raft_term']}, index {m['raft_index']}")
        else:
            print(f"  {m['name']:12} {urls:28} no answer: {m.get('error', '')}")
    return 0 if status["healthy"] else 1


def _probe(args: argparse.Namespace) -> int:
    from ..allocation.stores import ETCD_SCHEMES, REDIS_SCHEMES, scheme_of

    scheme = scheme_of(args.url)
    if scheme in ETCD_SCHEMES:
        return _probe_etcd(args)
    if scheme in REDIS_SCHEMES:  # it was told "not a database URL SQLAlchemy knows", which helps no one
        raise InvalidArgumentError(
            f"seqid probe reads a SQL database (the id layout it needs) or an etcd cluster; "
            f"{args.url.split(':', 1)[0]}:// is a Redis store: `seqid status URL` shows its counters and leases"
        )
    from sqlalchemy import create_engine

    from ..sqlalchemy import SeqUUID, probe_layout, probe_order

    engine = create_engine(args.url)
    results: list[dict[str, object]] = []
    with engine.connect() as conn:
        for storage in ("native", "binary", "text", "hex"):
            type_ = SeqUUID(storage=storage)
            try:
                where = type_.target(engine.dialect)
            except SeqIDError as exc:
                results.append({"storage": storage, "error": str(exc)})
                continue
            results.append(
                {
                    "storage": storage,
                    "column": str(type_.dialect_impl(engine.dialect).compile(dialect=engine.dialect)),
                    "order": list(probe_order(conn, type_)),
                    "probed_layout": probe_layout(conn, type_).value,
                    "registry_layout": where.layout.value,
                }
            )
    where = SeqUUID().target(engine.dialect)
    version = ".".join(map(str, where.server_version or ()))
    if args.json:
        print(json.dumps({"dialect": where.vendor, "server_version": version, "storages": results}))
        return 0
    print(f"{where.vendor} {version}: how it orders each UUID storage, measured with one value per byte")
    print("(order: the byte positions of the UUID's 16 bytes, as its text reads them, most significant first)")
    for r in results:
        if "error" in r:
            print(f"  {r['storage']:7} {r['error']}")
            continue
        agree = "agrees" if r["probed_layout"] == r["registry_layout"] else "DISAGREES"
        print(
            f"  {r['storage']:7} {r['column']:11} order {_runs(r['order'])}: layout {r['probed_layout']} "  # type: ignore[arg-type]
            f"(seqid's table {agree})"
        )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args.url, args.rows)


def add_parsers(sub: Any) -> None:
    """``new``, ``decode``, ``probe`` and ``demo`` on the ``seqid`` parser's subcommands."""
    p = sub.add_parser("new", help="print new ids")
    p.add_argument(
        "--kind",
        choices=(*KINDS, "seq-prefix"),
        help="default: comb when --layout, --dialect or --url chooses a layout, else uuid7",
    )
    p.add_argument("--layout", choices=[m.value for m in Layout])
    p.add_argument("--dialect", choices=VENDORS, help="choose the layout for this database")
    p.add_argument("--url", help="choose the layout for this live database (SQLAlchemy URL)")
    p.add_argument("--storage", choices=("native", "binary", "text", "hex"))
    p.add_argument("--worker", type=int, default=0, help="Snowflake worker id")
    p.add_argument("-n", type=positive("ids"), default=1, help="how many ids")
    p.set_defaults(func=_new)

    p = sub.add_parser("decode", help="tell what an id is and when it was made")
    p.add_argument("value")
    p.add_argument(
        "--kind", choices=("uuid", "snowflake", "bsv", "base32"), help="say what the value is where the text cannot"
    )
    p.add_argument(
        "--layout",
        choices=[m.value for m in Layout],
        help="read a UUID as made in this seqid layout (a version-8 UUID is read as 'sharded' only when told)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_decode)

    p = sub.add_parser(
        "probe",
        help="measure how a live database orders UUIDs (needs the sqlalchemy extra); for an etcd:// URL, "
        "report the cluster's members, leader, version and health (needs the etcd extra)",
    )
    p.add_argument("url", help="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db, or etcd://host:port[,...]")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_probe)

    p = sub.add_parser("demo", help="insert rows with seqid keys through SQLAlchemy and read them back")
    p.add_argument("--url", default="sqlite://")
    p.add_argument("--rows", type=int, default=5)
    p.set_defaults(func=_demo)
