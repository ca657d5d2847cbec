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

An integer primary key, or a ``CharField`` one of UUIDs as text, made a ``SeqUUIDField`` becomes two
migrations, one a release:
:class:`~seqid_orm.django.operations.RekeyExpand` (``NNNN_expand_<model>_key``: ship it with the code that
still has the old key) and :class:`~seqid_orm.django.operations.RekeyContract`
(``NNNN+1_contract_<model>_key``, with the model as it is now, run once no process of the previous release
writes), each ``atomic = False``: Django's ``AlterField`` cannot cast an integer to a UUID, and rewrites a text
key's table and each that references it while holding them, and neither while the application writes.

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
from .operations import INTEGER_KEY_TYPES, AddSeqUUIDField, AdoptSeqUUID, RekeyContract, RekeyExpand

__all__ = ["SeqIDAutodetector", "SeqIDMigrationWriter"]


class SeqIDMigrationWriter(MigrationWriter):
    """Django's migration writer, which also writes ``atomic = False`` (Django's never writes it: a
    migration it makes is always atomic) where the autodetector made a migration non-atomic."""

    def as_string(self) -> str:
        text = str(super().as_string())
        if getattr(self.migration, "atomic", True):
            return text
        head = "class Migration(migrations.Migration):\n"
        said = "    atomic = False  # each batch of seqid's online operations commits\n"
        for op in self.migration.operations:
            if isinstance(op, RekeyExpand):
                said += (
                    f"    # release N: ship with the code that still has {op.model_name}'s old key (the next\n"
                    "    # migration, the contract, ships with the SeqUUIDField model: run it once no process of\n"
                    "    # release N writes)\n"
                )
            elif isinstance(op, RekeyContract):
                said += f"    # release N+1: run once no process of the release before writes {op.model_name} rows\n"
        return text.replace(head, head + said, 1)


class SeqIDAutodetector(MigrationAutodetector):
    """Django's autodetector, with :class:`~seqid_orm.django.operations.AdoptSeqUUID` beside each swap,
    and a ``SeqUUIDField`` added to a model that has a table already added online
    (:class:`~seqid_orm.django.operations.AddSeqUUIDField`, in a migration with ``atomic = False``):
    Django's ``AddField`` would give every existing row the one default value it computes, and hold the
    table while it writes them."""

    def changes(self, *args: Any, **kwargs: Any) -> Any:
        found = super().changes(*args, **kwargs)
        for app_label, migrations in found.items():
            _split_releases(found, app_label, migrations)
            for migration in migrations:
                if any(isinstance(op, (AddSeqUUIDField, RekeyExpand, RekeyContract)) for op in migration.operations):
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
                if op.field.primary_key and _rekeyed(self._old_field(app_label, op)):
                    expand, contract = RekeyExpand(op.model_name, op.field), RekeyContract(op.model_name, op.field)
                    expand._auto_deps = getattr(op, "_auto_deps", [])
                    contract._auto_deps = []
                    out += [expand, contract]  # two releases: _split_releases puts them in two migrations
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


def _rekeyed(field: Any) -> bool:
    """Whether a key of ``field`` becomes a ``SeqUUIDField`` by the rekey operations: integers, or text (a
    ``CharField`` of UUIDs: a ``UUIDField`` keeps its column, and is adopted)."""
    return str(field.get_internal_type()) in INTEGER_KEY_TYPES or field.get_internal_type() == "CharField"


def _split_releases(found: dict[str, list[Any]], app_label: str, migrations: list[Any]) -> None:
    """Each migration of ``app_label`` holding a :class:`RekeyExpand` split in two, one a release: the expand
    operations first, in a migration of their own with the first one's number and dependencies
    (``NNNN_expand_<models>_key``); the rest after it, renumbered (``NNNN+1_contract_<models>_key`` where a
    contract is all it holds), and every later migration of the run renumbered, the dependencies on them
    following."""
    i = 0
    while i < len(migrations):
        migration = migrations[i]
        expands = [op for op in migration.operations if isinstance(op, RekeyExpand)]
        if not expands or len(expands) == len(migration.operations):
            i += 1
            continue
        number = int(migration.name.split("_", 1)[0])
        named = "_".join(op.model_name.lower() for op in expands)
        first = type(migration)(f"{number:04d}_expand_{named}_key", app_label)
        first.operations = expands
        first.dependencies = list(migration.dependencies)
        migration.operations = [op for op in migration.operations if not isinstance(op, RekeyExpand)]
        migration.dependencies = [d for d in migration.dependencies if d[0] != app_label] + [(app_label, first.name)]
        renamed = {}
        for later in migrations[i:]:
            number_ = int(later.name.split("_", 1)[0]) + 1
            rest = later.name.split("_", 1)[1]
            if later is migration and all(isinstance(op, RekeyContract) for op in later.operations):
                rest = f"contract_{named}_key"
            renamed[later.name] = f"{number_:04d}_{rest}"
            later.name = renamed[later.name]
        for others in found.values():
            for other in others:
                other.dependencies = [
                    (app, renamed.get(name, name)) if app == app_label else (app, name)
                    for app, name in other.dependencies
                ]
        migrations.insert(i, first)
        i += 2
