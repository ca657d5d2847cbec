"""SQLAlchemy adapter: dialect-aware id column types, connection-aware defaults, a live probe, Alembic.

Needs the ``sqlalchemy`` extra (and ``alembic`` for :mod:`.alembic`).  May import the core
(``ids``, ``vendors``, ``allocation``, ``public``, ``errors``) through its public names only.  The
decisions are the core's: this package describes a dialect (:func:`.types.dialect_target` turns it
into a :class:`~seqid_orm.vendors.Target`, kept per dialect) and moves values in and out.
"""

from __future__ import annotations

try:
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # say which extra brings it, not just "No module named sqlalchemy"
    raise ImportError("seqid_orm.sqlalchemy needs SQLAlchemy: pip install 'seqid-orm[sqlalchemy]'") from exc

from ..allocation.stores.sqlalchemy import ColumnFloor, lease_table, ticket_table
from ..ids.validate import coerce_uuid
from .bulk import abulk_insert, bulk_insert
from .defaults import (
    assign_ids_on_init,
    layout_for,
    prefixed_uuid_default,
    prefixed_uuid_pk,
    seq_uuid_default,
    seq_uuid_fk,
    seq_uuid_pk,
    snowflake_pk,
    sortable_text_pk,
    ticket_pk,
    typeid_pk,
)
from .probe import probe_layout, probe_order
from .ranges import created_in
from .server import DatabaseSeqUUID
from .types import SeqUUID, SnowflakeID, SortableText, TicketID, TypeID

__all__ = [
    "ColumnFloor",
    "DatabaseSeqUUID",
    "SeqUUID",
    "SnowflakeID",
    "SortableText",
    "TicketID",
    "TypeID",
    "abulk_insert",
    "assign_ids_on_init",
    "bulk_insert",
    "coerce_uuid",
    "created_in",
    "layout_for",
    "lease_table",
    "prefixed_uuid_default",
    "prefixed_uuid_pk",
    "probe_layout",
    "probe_order",
    "seq_uuid_default",
    "seq_uuid_fk",
    "seq_uuid_pk",
    "snowflake_pk",
    "sortable_text_pk",
    "ticket_pk",
    "ticket_table",
    "typeid_pk",
]
