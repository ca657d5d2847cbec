"""Autogenerate's ``alter_column`` of a seqid key column, as the operations that keep its values right."""

from __future__ import annotations

from typing import Any

from alembic.operations import ops

from ..server import DatabaseSeqUUID
from ..types import SeqUUID
from ._shared import writer
from .conversions import ConvertUUIDStorageOp, _storage_of_type
from .defaults import SetSeqIDDefaultOp


@writer.rewrites(ops.AlterColumnOp)
def _alter_column_as_seqid_ops(context: Any, revision: Any, op: ops.AlterColumnOp) -> Any:
    """Autogenerate's change of a seqid key column, as seqid's operations that keep the values right.

    * A type change between two storages of a UUID (``sa.Uuid``'s ``CHAR(32)`` on SQLite to
      ``SeqUUID()``'s BLOB, and back in the downgrade): :class:`ConvertUUIDStorageOp`, which converts
      every value and each foreign key to it.  Alembic's own ``ALTER COLUMN ... TYPE`` cannot run on
      SQLite, and a batch copy would cast the 32 characters to 32 bytes.
    * A :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID` server default added to a column: :class:`SetSeqIDDefaultOp`,
      which reads the column's keys when it runs and, on a column that held other keys, sets the default
      of keys that sort after them.
    """
    out: list[Any] = []
    dialect = context.dialect
    old, new = op.existing_type, op.modify_type
    if new is not None and old is not None and (isinstance(new, SeqUUID) or isinstance(old, SeqUUID)):
        source, target = _storage_of_type(old, dialect), _storage_of_type(new, dialect)
        if source is not None and target is not None and source is not target:
            out.append(ConvertUUIDStorageOp(op.table_name, op.column_name, source.value, target.value))
            op.modify_type = None
    default = getattr(op.modify_server_default, "arg", None)
    if isinstance(default, DatabaseSeqUUID):
        storage = default.seq_type.storage
        out.append(
            SetSeqIDDefaultOp(
                op.table_name, op.column_name, None if storage is None else storage.value, shift=default.shift
            )
        )
        op.modify_server_default = False
    if not out:
        return op
    changes_left = op.modify_type is not None or op.modify_nullable is not None or op.modify_name is not None
    changes_left = changes_left or op.modify_server_default is not False or op.modify_comment is not False
    return [*out, op] if changes_left else out
