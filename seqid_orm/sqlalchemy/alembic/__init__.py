"""Alembic helpers: seqid types that render and import, and the ticket table as an operation.

**Types and database-made ids.** Alembic renders a custom type by its ``repr`` with its module
path, but does not add the import, so the migration fails with ``NameError`` when it runs (the
well-known sqlalchemy-utils ``UUIDType`` trap).  Pass :func:`render_item` to ``context.configure``.
It also writes a :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID` server default as itself, not as
the SQL of the server autogenerate ran against: the SQL is chosen when the migration runs, for the
server it runs on (``uuidv7()`` on PostgreSQL 18, an expression on 13-17), as Django's migrations
do.  Offline (``--sql``) no server answers: call :func:`offline_server_version` in
``run_migrations_offline()`` and name the target, ``alembic -x seqid_server_version=16 upgrade head
--sql``.  With ``compare_server_default=compare_server_default`` autogenerate compares such a
default by its generator instead of evaluating it (a new id each time, never equal).

**seqid's tables**: the ticket table (:class:`~seqid_orm.allocation.tickets.TicketSequence`) is created by
``op.create_ticket_table()`` and dropped by ``op.drop_ticket_table()``, the worker-lease table
(:class:`~seqid_orm.allocation.leases.WorkerLease`) by ``op.create_lease_table()`` / ``op.drop_lease_table()``,
all registered when this module is imported.  Put the tables in your metadata
(``ticket_table(Base.metadata)``, ``lease_table(Base.metadata)``) and pass :data:`writer` as
``process_revision_directives``: autogenerate then writes those operations instead of a plain
``create_table``, and a second autogenerate finds nothing to do.
``env.py``::

    from seqid_orm.sqlalchemy.alembic import render_item, writer

    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_item=render_item,
        process_revision_directives=writer,
    )

Keeping the table out of your metadata instead?  Write ``op.create_ticket_table()`` into a
migration yourself and pass ``include_object=include_object`` so autogenerate does not offer to
drop it.  (This is GeoAlchemy2's arrangement for its spatial operations.)

One module per family of operation, each registered when this package is imported: :mod:`.tables`
(seqid's tables), :mod:`.functions` (the sequential-uuids SQL functions), :mod:`.conversions` (a UUID
column's storage), :mod:`.defaults` (a database-made default), :mod:`.adoption` (the adoption's record),
:mod:`.online` (a key column added while the table is used, and the migration lock), :mod:`.rekey` (an
integer key changed to a seqid key with its foreign keys, expand and contract), :mod:`.rewrites`
(autogenerate's changes of a key column as those operations) and :mod:`.hooks` (what ``env.py`` passes
to ``context.configure``).  Each asks :mod:`seqid_orm.schema` for the rules, which the Django operations
read too.
"""

from __future__ import annotations

try:
    import alembic.autogenerate  # noqa: F401 - say which extra brings it before any module needs it
except ImportError as exc:
    raise ImportError("seqid_orm.sqlalchemy.alembic needs Alembic: pip install 'seqid-orm[alembic]'") from exc

from ._shared import writer as writer
from .adoption import AdoptSeqIDKeysOp as AdoptSeqIDKeysOp
from .adoption import DropSeqIDRecordOp as DropSeqIDRecordOp
from .conversions import ConvertUUIDStorageOp as ConvertUUIDStorageOp
from .defaults import SetSeqIDDefaultOp as SetSeqIDDefaultOp
from .functions import CreateSequentialUUIDFunctionsOp as CreateSequentialUUIDFunctionsOp
from .functions import DropSequentialUUIDFunctionsOp as DropSequentialUUIDFunctionsOp
from .hooks import compare_server_default as compare_server_default
from .hooks import include_object as include_object
from .hooks import offline_server_version as offline_server_version
from .hooks import render_item as render_item
from .online import AddSeqIDColumnOp as AddSeqIDColumnOp
from .online import DropSeqIDColumnOp as DropSeqIDColumnOp
from .online import migration_lock as migration_lock
from .rekey import RekeyContractOp as RekeyContractOp
from .rekey import RekeyExpandOp as RekeyExpandOp
from .rekey import RekeyUndoContractOp as RekeyUndoContractOp
from .rekey import RekeyUndoExpandOp as RekeyUndoExpandOp
from .rewrites import _alter_column_as_seqid_ops  # noqa: F401 - registers the rewrite
from .tables import CreateLeaseTableOp as CreateLeaseTableOp
from .tables import CreateTicketTableOp as CreateTicketTableOp
from .tables import DropLeaseTableOp as DropLeaseTableOp
from .tables import DropTicketTableOp as DropTicketTableOp

__all__ = [
    "AdoptSeqIDKeysOp",
    "ConvertUUIDStorageOp",
    "CreateLeaseTableOp",
    "CreateTicketTableOp",
    "DropLeaseTableOp",
    "DropSeqIDRecordOp",
    "DropTicketTableOp",
    "RekeyContractOp",
    "RekeyExpandOp",
    "RekeyUndoContractOp",
    "RekeyUndoExpandOp",
    "SetSeqIDDefaultOp",
    "compare_server_default",
    "include_object",
    "migration_lock",
    "offline_server_version",
    "render_item",
    "writer",
]
