"""The ``seqid`` command line (also ``python -m seqid_orm``).

May import the whole package; each command loads the adapter or extra it needs when it runs, so
``seqid new`` and ``seqid decode`` work with the standard library alone, and a missing extra is
one line saying which ``pip install`` brings it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import SeqIDError
from . import allocation, bench, doctor, ids
from .common import EXTRA_OF, in_cli_words

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``seqid`` parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="seqid", description="Index-friendly unique ids for SQL databases.")
    parser.add_argument("--version", action="version", version=f"seqid_orm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ids.add_parsers(sub)
    bench.add_parser(sub)
    allocation.add_parsers(sub)
    doctor.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``seqid`` command; 0 on success, 2 with one line on standard error otherwise."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (SeqIDError, ValueError, TypeError) as exc:
        print(f"seqid: error: {in_cli_words(str(exc))}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        extra = EXTRA_OF.get(top)
        fix = f"pip install 'seqid-orm[{extra}]'" if extra else f"pip install {top}"
        print(f"seqid: error: {top} is not installed; {fix}", file=sys.stderr)
        return 2
    except ImportError as exc:  # an adapter's own message, which names the pip line already
        print(f"seqid: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a database that cannot be reached, mostly
        if type(exc).__name__ == "NoSuchModuleError":  # SQLAlchemy knows no dialect by that URL's scheme
            scheme = str(getattr(args, "url", "") or "").split(":", 1)[0]
            print(
                f"seqid: error: {scheme!r} is not a database URL SQLAlchemy knows; this command takes one such as "
                "postgresql+psycopg://user@host/db, mysql+pymysql://root@host/db or sqlite:///file.db",
                file=sys.stderr,
            )
            return 2
        if type(exc).__module__.startswith("sqlalchemy"):
            print(f"seqid: error: {getattr(exc, 'orig', None) or exc}", file=sys.stderr)
            return 2
        raise
