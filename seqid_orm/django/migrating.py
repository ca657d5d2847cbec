"""What ``makemigrations`` writes for a swapped key: the adoption beside the ``AlterField``.

Swapping ``UUIDField(default=uuid.uuid4)`` for ``SeqUUIDField`` is one ``AlterField`` that changes no
column on PostgreSQL and MariaDB, so nothing in Django's migration would decide, once and for every
process, how the new keys sort after the old ones.  :class:`SeqIDAutodetector` adds
:class:`~seqid_orm.django.operations.AdoptSeqUUID` for each field that becomes a ``SeqUUIDField``:
before the ``AlterField`` where the column stays what it is (a ``UUIDField``'s column), so a
``db_default=DatabaseSeqUUID()`` set by that ``AlterField`` reads the record and finds the function it
calls; after it where the ``AlterField`` changes the column's type (a ``CharField`` of hex keys), with a
``db_default`` then set by an ``AlterField`` of its own after the adoption.

A ``SeqUUIDField`` added to a model whose table exists already becomes
:class:`~seqid_orm.django.operations.AddSeqUUIDField`, the online form, in a migration with
``atomic = False``.

The ``seqid_orm.django`` app's ``makemigrations`` command uses it (Django 5.2's ``Command.autodetector``;
before 5.2 the command's module-level autodetector is replaced for the command's run).  With another
app that replaces ``makemigrations`` listed first in ``INSTALLED_APPS``, add ``AdoptSeqUUID`` by hand.

May import Django and this folder's ``operations`` and ``fields``.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.migrations import operations
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.writer import MigrationWriter

from .expressions import DatabaseSeqUUID
from .fields import SeqUUIDField
from .operations import AddSeqUUIDField, AdoptSeqUUID

__all__ = ["SeqIDAutodetector", "SeqIDMigrationWriter"]


class SeqIDMigrationWriter(MigrationWriter):
    """Django's migration writer, which also writes ``atomic = False`` (Django's never writes it: a
    migration it makes is always atomic) where the autodetector made a migration non-atomic."""

    def as_string(self) -> str:
        text = str(super().as_string())
        if getattr(self.migration, "atomic", True):
            return text
        head = "class Migration(migrations.Migration):\n"
        return text.replace(head, head + "    atomic = False  # each batch of AddSeqUUIDField commits\n", 1)


class SeqIDAutodetector(MigrationAutodetector):
    """Django's autodetector, with :class:`~seqid_orm.django.operations.AdoptSeqUUID` beside each swap,
    and a ``SeqUUIDField`` added to a model that has a table already added online
    (:class:`~seqid_orm.django.operations.AddSeqUUIDField`, in a migration with ``atomic = False``):
    Django's ``AddField`` would give every existing row the one default value it computes, and hold the
    table while it writes them."""

    def changes(self, *args: Any, **kwargs: Any) -> Any:
        found = super().changes(*args, **kwargs)
        for migrations in found.values():
            for migration in migrations:
                if any(isinstance(op, AddSeqUUIDField) for op in migration.operations):
                    migration.atomic = False  # each batch commits (MigrationWriter writes atomic = False)
        return found

    def generate_added_fields(self) -> None:
        # Django asks whether a callable default on a unique field is meant (its AddField would give every
        # old row the one value): not for a SeqUUIDField, which AddSeqUUIDField fills row by row
        questioner = self.questioner
        ask = getattr(questioner, "ask_unique_callable_default_addition", None)
        if ask is not None:

            def ask_unless_seq_uuid(field_name: str, model_name: str) -> Any:
                fields = [
                    state.fields.get(field_name)
                    for (_app, name), state in self.to_state.models.items()
                    if name == model_name.lower()
                ]
                if fields and all(isinstance(f, SeqUUIDField) for f in fields):
                    return None
                return ask(field_name, model_name)

            questioner.ask_unique_callable_default_addition = ask_unless_seq_uuid
        try:
            super().generate_added_fields()
        finally:
            if ask is not None:
                questioner.ask_unique_callable_default_addition = ask
        for app_label, ops in self.generated_operations.items():
            for i, op in enumerate(ops):
                if (
                    isinstance(op, operations.AddField)
                    and isinstance(op.field, SeqUUIDField)
                    and not op.field.primary_key
                    and (app_label, op.model_name) in self.from_state.models
                ):
                    online = AddSeqUUIDField(op.model_name, op.name, op.field)
                    online._auto_deps = getattr(op, "_auto_deps", [])
                    ops[i] = online

    def generate_altered_fields(self) -> None:
        super().generate_altered_fields()
        for app_label, ops in self.generated_operations.items():
            out: list[Any] = []
            for op in ops:
                if not self._is_swap(app_label, op):
                    out.append(op)
                    continue
                adopt = AdoptSeqUUID(op.model_name, op.name)
                adopt._auto_deps = []
                if self._keeps_column(app_label, op):
                    out += [adopt, op]
                    continue
                default = getattr(op.field, "db_default", models.NOT_PROVIDED)
                if isinstance(default, DatabaseSeqUUID):  # the type first; the default once adopted
                    _name, _path, args, kwargs = op.field.deconstruct()
                    kwargs.pop("db_default")
                    first = operations.AlterField(op.model_name, op.name, SeqUUIDField(*args, **kwargs))
                    first._auto_deps = getattr(op, "_auto_deps", [])
                    out += [first, adopt, op]
                else:
                    out += [op, adopt]
            ops[:] = out

    def _old_field(self, app_label: str, op: Any) -> Any:
        old_model = self.renamed_models.get((app_label, op.model_name), op.model_name)
        old_name = self.renamed_fields.get((app_label, op.model_name, op.name), op.name)
        return self.from_state.models[app_label, old_model].get_field(old_name)

    def _is_swap(self, app_label: str, op: Any) -> bool:
        """An ``AlterField`` that makes a field a ``SeqUUIDField`` (a field's key values kept, the maker swapped)."""
        if not isinstance(op, operations.AlterField) or not isinstance(op.field, SeqUUIDField):
            return False
        return not isinstance(self._old_field(app_label, op), SeqUUIDField)

    def _keeps_column(self, app_label: str, op: Any) -> bool:
        """Whether the swap keeps the column's type: ``SeqUUIDField`` is a ``UUIDField`` to the database."""
        return isinstance(self._old_field(app_label, op), models.UUIDField)
