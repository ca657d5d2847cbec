"""Django adapter: vendor-aware model fields sharing the core's decisions with SQLAlchemy.

Needs the ``django`` extra.  May import the core (``ids``, ``vendors``, ``allocation``, ``public``,
``errors``) through its public names only; :mod:`.connection` reads a Django connection as a
:class:`~seqid_orm.vendors.Target`.  ``SeqUUIDField`` picks its layout from the database the
instance is written to; ``SnowflakeField``, ``SortableTextField`` and ``TicketField`` cover the
other id families.
"""

from __future__ import annotations

try:
    import django  # noqa: F401
except ImportError as exc:  # say which extra brings it, not just "No module named django"
    raise ImportError("seqid_orm.django needs Django: pip install 'seqid-orm[django]'") from exc

from .bulk import bulk_insert
from .expressions import DatabaseSeqUUID
from .fields import (
    IntegerKeyField,
    SeqUUIDField,
    SnowflakeField,
    SortableTextField,
    close_snowflakes,
    seq_uuid_default,
    settings_snowflake,
    snowflake_default,
)
from .tickets import TicketField, close_ticket_sequences, ticket_default, ticket_sequence
from .typeid import TypeIDField

__all__ = [
    "DatabaseSeqUUID",
    "IntegerKeyField",
    "SeqUUIDField",
    "SnowflakeField",
    "SortableTextField",
    "TicketField",
    "TypeIDField",
    "bulk_insert",
    "close_snowflakes",
    "close_ticket_sequences",
    "seq_uuid_default",
    "settings_snowflake",
    "snowflake_default",
    "ticket_default",
    "ticket_sequence",
]
