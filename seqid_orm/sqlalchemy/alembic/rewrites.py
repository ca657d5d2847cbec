"""Autogenerate's ``alter_column`` of a seqid key column, as the operations that keep its values right; an
integer key made a seqid key as two revisions, one a release (expand, then contract)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.operations import ops
from alembic.util import rev_id

from ..server import DatabaseSeqUUID
from ..types import SeqUUID
from ._shared import writer
from .conversions import ConvertUUIDStorageOp, _storage_of_type
from .defaults import SetSeqIDDefaultOp
from .rekey import RekeyContractOp, RekeyExpandOp, RekeyUndoContractOp, RekeyUndoExpandOp


@writer.rewrites(ops.AlterColumnOp)
def _alter_column_as_seqid_ops(context: Any, revision: Any, op: ops.AlterColumnOp) -> Any:
    """Autogenerate's change of a seqid key column, as seqid's operations that keep the values right.

    * A type change between two storages of a UUID (``sa.Uuid``'s ``CHAR(32)`` on SQLite to
      ``SeqUUID()``'s BLOB, and back in the downgrade): :class:`ConvertUUIDStorageOp`, which converts
      every value and each foreign key to it.  Alembic's own ``ALTER COLUMN ... TYPE`` cannot run on
      SQLite, and a batch copy would cast the 32 characters to 32 bytes.
    * An integer primary key made a ``SeqUUID``: :class:`RekeyExpandOp` and :class:`RekeyContractOp` (which
      :func:`_two_releases` puts in two revisions), and nothing for the foreign key columns to it, which they
      change; Alembic's ``ALTER COLUMN ... TYPE uuid`` cannot cast an integer, nor leave the application
      writing meanwhile.
    * A :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID` server default added to a column: :class:`SetSeqIDDefaultOp`,
      which reads the column's keys when it runs and, on a column that held other keys, sets the default
      of keys that sort after them.
    """
    out: list[Any] = []
    dialect = context.dialect
    old, new = op.existing_type, op.modify_type
    rekeyed = _rekeyed(context, op)
    if rekeyed is not None:
        return rekeyed
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


def _model_column(context: Any, op: ops.AlterColumnOp) -> Any:
    """The column ``op`` changes, as the target metadata declares it (``None`` where it does not)."""
    found = context.opts.get("target_metadata")
    for metadata in found if isinstance(found, (list, tuple)) else [found]:
        key = f"{op.schema}.{op.table_name}" if op.schema else op.table_name
        table = None if metadata is None else metadata.tables.get(key)
        if table is not None and op.column_name in table.c:
            return table.c[op.column_name]
    return None


def _rekeyed(context: Any, op: ops.AlterColumnOp) -> list[Any] | None:
    """An integer key column made a ``SeqUUID`` (or back, in the downgrade): the rekey's two operations for the
    key itself on the way up, nothing for the foreign key columns to it (the rekey changes them) nor on the
    way down (:func:`_two_releases` writes each revision's way back); ``None`` for any other change."""
    old, new = op.existing_type, op.modify_type
    if old is None or new is None:
        return None
    up = isinstance(old, sa.Integer) and isinstance(new, SeqUUID)
    if not (up or (isinstance(old, SeqUUID) and isinstance(new, sa.Integer))):
        return None
    column = _model_column(context, op)
    if column is None:
        return None
    seq = new if up else old
    if column.primary_key:
        if not up:
            return []
        storage = None if seq.storage is None else seq.storage.value
        return [RekeyExpandOp(op.table_name, storage), RekeyContractOp(op.table_name, storage)]
    keyed = any(fk.column.primary_key and isinstance(fk.column.type, SeqUUID) for fk in column.foreign_keys)
    return [] if keyed else None


def _walk(container: Any) -> Any:
    for op in container.ops:
        if isinstance(op, ops.OpContainer):
            yield from _walk(op)
        else:
            yield op


def _without(container: Any, kind: type) -> None:
    container.ops = [op for op in container.ops if not isinstance(op, kind)]
    for op in container.ops:
        if isinstance(op, ops.OpContainer):
            _without(op, kind)


def _two_releases(context: Any, revision: Any, directives: list[Any]) -> None:
    """Each revision holding a :class:`RekeyExpandOp` split in two, one a release: the expand steps first,
    in a revision of their own (ship it with the code that still has the integer key; its way back
    ``rekey_undo_expand``), then the rest with the contract steps (with the ``SeqUUID`` models, once no
    process of the release before writes; its way back ``rekey_undo_contract`` after the rest's)."""
    out: list[Any] = []
    for script in directives:
        expands = [op for up in script.upgrade_ops_list for op in _walk(up) if isinstance(op, RekeyExpandOp)]
        if not expands:
            out.append(script)
            continue
        tables = ", ".join(op.table for op in expands)
        first = ops.MigrationScript(
            script.rev_id,
            ops.UpgradeOps(ops=list(expands)),
            ops.DowngradeOps(ops=[RekeyUndoExpandOp(op.table, op.storage) for op in reversed(expands)]),
            message=f"expand {tables}: seqid keys beside the integer keys (release N, integers still written)",
            imports=set(script.imports),
            head=script.head,
            splice=script.splice,
            branch_label=script.branch_label,
            version_path=script.version_path,
            depends_on=script.depends_on,
        )
        for up in script.upgrade_ops_list:
            _without(up, RekeyExpandOp)
        contracts = [op for up in script.upgrade_ops_list for op in _walk(up) if isinstance(op, RekeyContractOp)]
        script.rev_id = rev_id()
        script.head = first.rev_id
        script.branch_label = None
        script.depends_on = None
        script.message = f"{script.message or 'contract'} (contract {tables}: release N+1, once no process of N writes)"
        down = script.downgrade_ops_list[-1]
        down.ops = [*down.ops, *(RekeyUndoContractOp(op.table, op.storage) for op in reversed(contracts))]
        out += [first, script]
    directives[:] = out


writer.after.append(_two_releases)
