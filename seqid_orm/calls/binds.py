"""How a statement's ``:name`` binds are written for a driver that takes another style: one reading of a bind,
as ``sa.text()`` reads one (not PostgreSQL's ``::`` cast, not the middle of a word or of a time literal such as
``'00:00:00'``; ``\\:`` is a colon), for the SQL stores' statements and the migrations' alike.

May import: the standard library only.
"""

from __future__ import annotations

import re

__all__ = ["positional", "pyformat"]

_NAMED = re.compile(r"\\:|(?<![:\w\\]):(\w+)(?!:)")


def pyformat(sql: str) -> str:
    """``sql``'s ``:name`` binds as ``%(name)s`` (psycopg's and psycopg2's style), its ``%`` doubled."""
    return _NAMED.sub(lambda m: ":" if m.group(1) is None else f"%({m.group(1)})s", sql.replace("%", "%%"))


def positional(sql: str, params: dict[str, object]) -> tuple[str, list[object]]:
    """``sql``'s ``:name`` binds as positional ``%s`` ones, which every Django backend takes, with their
    values in order; its ``%`` doubled."""
    order: list[object] = []

    def place(match: re.Match[str]) -> str:
        if match.group(1) is None:  # ``\:``: a colon (in a quoted identifier)
            return ":"
        order.append(params[match.group(1)])
        return "%s"

    return _NAMED.sub(place, sql.replace("%", "%%")), order
