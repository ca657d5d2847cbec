"""Django adapter: vendor-aware model fields sharing the core registry with SQLAlchemy.

Needs the ``django`` extra.  ``SeqUUIDField`` picks its layout from the database the instance
is written to; ``SnowflakeField`` and ``SortableTextField`` cover the other id families.
"""

from __future__ import annotations

try:
    import django  # noqa: F401
except ImportError as exc:  # say which extra brings it, not just "No module named django"
    raise ImportError("seqid_orm.django needs Django: pip install 'seqid-orm[django]'") from exc

from .expressions import DatabaseSeqUUID
from .fields import (
    SeqUUIDField,
    SnowflakeField,
    SortableTextField,
    new_seq_uuid,
    new_snowflake_id,
    settings_snowflake,
)

__all__ = [
    "DatabaseSeqUUID",
    "SeqUUIDField",
    "SnowflakeField",
    "SortableTextField",
    "new_seq_uuid",
    "new_snowflake_id",
    "settings_snowflake",
]
