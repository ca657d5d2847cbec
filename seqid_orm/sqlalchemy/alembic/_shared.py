"""What the operations' modules share: the import a rendered migration needs (it registers the
operations when the migration runs), autogenerate's rewriter, and the comparators' priority.

May import: Alembic and the standard library.
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import rewriter

_IMPORT = "import seqid_orm.sqlalchemy.alembic"

writer = rewriter.Rewriter()
"""``process_revision_directives``: seqid's tables in the metadata become their own operations
(``op.create_ticket_table()``, ``op.create_lease_table()``), and a changed seqid key column seqid's
conversion or default (:mod:`.rewrites`); chain your own with ``writer.chain(yours)``."""

try:  # Alembic 1.18+: after its own comparators of the same priority
    from alembic.util.langhelpers import DispatchPriority

    _AFTER_ALEMBIC: dict[str, Any] = {"priority": DispatchPriority.LAST}
except ImportError:  # earlier: comparators run in the order they were registered, Alembic's own first
    _AFTER_ALEMBIC = {}
