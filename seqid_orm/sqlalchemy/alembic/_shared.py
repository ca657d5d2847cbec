"""What the operations' modules share: the import a rendered migration needs (it registers the
operations when the migration runs), autogenerate's rewriter, and the comparators' priority.

May import: Alembic and the standard library.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from alembic.autogenerate import rewriter

_IMPORT = "import seqid_orm.sqlalchemy.alembic"


class _Writer(rewriter.Rewriter):
    """Alembic's rewriter, then each of :attr:`after` over the revisions it made (which may split one in two:
    a rewrite sees one operation at a time, never the script)."""

    def __init__(self) -> None:
        super().__init__()
        self.after: list[Any] = []

    def process_revision_directives(self, context: Any, revision: Any, directives: list[Any]) -> None:
        super().process_revision_directives(context, revision, directives)
        for step in self.after:
            step(context, revision, directives)


writer = _Writer()
"""``process_revision_directives``: seqid's tables in the metadata become their own operations
(``op.create_ticket_table()``, ``op.create_lease_table()``), a changed seqid key column seqid's
conversion or default, and an integer key made a seqid key two revisions, one a release (:mod:`.rewrites`);
chain your own with ``writer.chain(yours)``."""

try:  # Alembic 1.18+: after its own comparators of the same priority
    from alembic.util.langhelpers import DispatchPriority

    _AFTER_ALEMBIC: dict[str, Any] = {"priority": DispatchPriority.LAST}
except ImportError:  # earlier: comparators run in the order they were registered, Alembic's own first
    _AFTER_ALEMBIC = {}


def rendered(autogen_context: Any, name: str, op: Any, last: tuple[str, ...] = (), positional: int = 2) -> str:
    """``op.<name>(...)`` of a seqid operation (a dataclass), as a migration writes it: its first ``positional``
    fields (the table and the column) as they are, each other by name where it is not its default (always,
    where it has none), the fields ``last`` names at the end; with the import that registers the operations."""
    autogen_context.imports.add(_IMPORT)
    fields = dataclasses.fields(op)
    args = [repr(getattr(op, f.name)) for f in fields[:positional]]
    for f in sorted(fields[positional:], key=lambda f: f.name in last):  # stable: the order of the fields otherwise
        value = getattr(op, f.name)
        if f.default is dataclasses.MISSING or value != f.default:
            args.append(f"{f.name}={value!r}")
    return f"op.{name}({', '.join(args)})"
