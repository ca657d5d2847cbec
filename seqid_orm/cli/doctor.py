"""``seqid doctor URL``: which tables of an existing database suffer from their keys, read-only.

Loads SQLAlchemy when it runs (:mod:`seqid_orm.sqlalchemy.doctor`); Django projects have
``manage.py seqid_doctor``, which prints the same report from the same decisions.
"""

from __future__ import annotations

import argparse

from ..schema.doctor import FAIL_ON, failing, render, render_json
from .common import positive

__all__ = ["add_parser"]


def _fail_on(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    wrong = [n for n in names if n not in FAIL_ON]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"expected some of {','.join(FAIL_ON)}, got {text!r}")
    return names


def _doctor(args: argparse.Namespace) -> int:
    try:
        from ..sqlalchemy.doctor import diagnose

        findings = diagnose(args.url, sample=args.sample, timeout=args.timeout, schemas=args.schema)
    except Exception as exc:
        if args.json:  # a document on stdout whatever happened; the one-line error and exit 2 follow
            print(render_json([], [exc]))
        raise
    print(render_json(findings) if args.json else render(findings))
    return 1 if args.fail_on and failing(findings, args.fail_on) else 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``seqid doctor``."""
    p = sub.add_parser(
        "doctor",
        help="read an existing database's keys and say which tables suffer and the fix (read-only)",
        description=(
            "Classify every table's primary key (and unique UUID/integer keys) from a bounded sample: "
            "random-uuid, adopted (random keys with time-ordered ones made since, and where those land), "
            "time-ordered (with whether this database keeps them in order), integer-sequence, "
            "snowflake, text, unknown. Read-only, with a statement timeout; never a full scan."
        ),
    )
    p.add_argument("url", help="a SQLAlchemy URL: postgresql+psycopg://..., mysql+pymysql://..., sqlite:///file.db")
    p.add_argument("--json", action="store_true", help="a JSON list of findings instead of the table")
    p.add_argument(
        "--fail-on",
        type=_fail_on,
        default=None,
        metavar="KINDS",
        help=f"exit 1 when a key is one of these (comma-separated: {','.join(FAIL_ON)}); for CI",
    )
    p.add_argument("--sample", type=positive("keys"), default=1000, help="keys read per column (default 1000)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds allowed per statement (default 5)")
    p.add_argument(
        "--schema",
        action="append",
        metavar="NAME",
        help="PostgreSQL: read only this schema (SQLite: this attached database); repeat for several; default: all",
    )
    p.set_defaults(func=_doctor)
