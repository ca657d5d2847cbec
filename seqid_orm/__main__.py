"""``python -m seqid_orm``: the ``seqid`` command line (:mod:`seqid_orm.cli`)."""

from __future__ import annotations

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
