"""Adopting SeqUUIDField on a table that already holds uuid4 keys, as a Django user does it: the field swapped,
the migration makemigrations writes (the autodetector's AlterField, serialized by its writer) applied as
migrate applies it, then rows through save(), bulk_create and seqid's bulk_insert, or through the database's
default (db_default=DatabaseSeqUUID()).  On the settings module's real database: every old row is found by
its key, the new rows sort in creation order (on PostgreSQL after every old one), and the primary key grows
as a seqid-only one does.  A column that keeps another form than the field writes fails `manage.py check`
(seqid.E005) and refuses a key before the row is written."""

from __future__ import annotations

import uuid

import django
import pytest
from django.db import connection, models
from django.db.migrations.graph import MigrationGraph
from django.db.migrations.operations import AlterField
from django.db.migrations.state import ModelState, ProjectState
from django.db.migrations.writer import MigrationWriter

from seqid_orm import describe
from seqid_orm.django import SeqUUIDField, bulk_insert
from seqid_orm.django.migrating import SeqIDAutodetector
from seqid_orm.django.operations import AdoptSeqUUID
from seqid_orm.errors import StorageMismatchError

pytestmark = pytest.mark.django_db(transaction=True)

N = 100_000
RATIO = 1.05


def _state(app: str, key: models.Field) -> ProjectState:
    project = ProjectState()
    project.add_model(
        ModelState(app, "Thing", [("id", key), ("n", models.IntegerField()), ("note", models.CharField(max_length=20))])
    )
    return project


def _swap(app: str, after_key: models.Field, rows: int = N):
    """The legacy model's table made and filled, the swap detected (by seqid's makemigrations) and applied
    as migrate applies it: (old model, new model)."""
    before = _state(app, models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False))
    after = _state(app, after_key)
    changes = SeqIDAutodetector(before, after)._detect_changes(graph=MigrationGraph())
    [migration] = changes[app]
    adopt, alter = migration.operations  # the adoption first: the column stays a UUIDField's
    assert isinstance(adopt, AdoptSeqUUID) and isinstance(alter, AlterField) and alter.name == "id"
    written = MigrationWriter(migration).as_string()  # what makemigrations writes
    assert "seqid_orm.django.SeqUUIDField" in written
    assert "import seqid_orm.django.operations" in written and "seqid_orm.django.operations.AdoptSeqUUID(" in written
    old = before.apps.get_model(app, "Thing")
    with connection.schema_editor() as editor:
        editor.create_model(old)
    for start in range(0, rows, 10_000):
        old.objects.bulk_create(old(n=-1 - i, note="old") for i in range(start, min(start + 10_000, rows)))
    with connection.schema_editor() as editor:
        migration.apply(before, editor)
    return old, after.apps.get_model(app, "Thing")


def _key_bytes(table: str) -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"SELECT pg_relation_size('{table}_pkey')")
        elif connection.vendor == "mysql":
            cursor.execute(f"ANALYZE TABLE {table}")
            cursor.fetchall()
            cursor.execute(
                "SELECT data_length FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = %s",
                [table],
            )
        else:
            cursor.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = %s", [f"sqlite_autoindex_{table}_1"])
        return int(cursor.fetchone()[0])


def _fill_new(model, rows: int = N) -> None:
    """``rows`` rows, n from 0 up: save() for the first thousand (a tenth of a few), then bulk_create, then
    seqid's bulk_insert."""
    saved, half = min(1000, rows // 10), rows // 2
    for i in range(saved):
        model.objects.create(n=i, note="new")
    for start in range(saved, half, 5000):
        model.objects.bulk_create(model(n=i, note="new") for i in range(start, min(start + 5000, half)))
    bulk_insert([model(n=i, note="new") for i in range(half, rows)])


def _drop(model) -> None:
    with connection.schema_editor() as editor:
        editor.delete_model(model)


def _fresh_key_bytes(app: str) -> int:
    fresh = _state(app, SeqUUIDField(primary_key=True, editable=False)).apps.get_model(app, "Thing")
    with connection.schema_editor() as editor:
        editor.create_model(fresh)
    try:
        _fill_new(fresh)
        return _key_bytes(fresh._meta.db_table)
    finally:
        _drop(fresh)


def _swapped_and_filled(app: str, rows: int) -> tuple[int, int]:
    """``rows`` old rows swapped to a SeqUUIDField, then ``rows`` new ones: every old row is found by its
    key, the new ones come in creation order by key, and after the old ones on PostgreSQL, where the keys
    are adopted (uuid7 elsewhere). The key index's bytes before and after the new rows."""
    old, new = _swap(app, SeqUUIDField(primary_key=True, editable=False), rows=rows)
    table = new._meta.db_table
    try:
        old_keys = list(old.objects.values_list("pk", flat=True))
        old_bytes = _key_bytes(table)
        _fill_new(new, rows)
        adopted_bytes = _key_bytes(table)
        found = sum(new.objects.filter(pk__in=old_keys[i : i + 500]).count() for i in range(0, rows, 500))
        by_key = list(new.objects.order_by("pk").values_list("n", flat=True))
        newest = new.objects.get(n=rows - 1).pk
    finally:
        _drop(new)
    assert found == rows
    assert [n for n in by_key if n >= 0] == list(range(rows))
    adopted = connection.vendor == "postgresql"
    assert describe(newest).kind == ("adopted" if adopted else "uuid7")
    if adopted:
        assert by_key[rows:] == list(range(rows))
    return old_bytes, adopted_bytes


@pytest.mark.big
def test_a_swapped_uuidfield_finds_its_old_rows_orders_its_new_ones_and_grows_as_a_new_one():
    old_bytes, adopted_bytes = _swapped_and_filled("adopt", N)
    ratio = adopted_bytes / (old_bytes + _fresh_key_bytes("adoptfresh"))
    assert ratio <= RATIO, (connection.vendor, old_bytes, adopted_bytes, ratio)


def test_a_swap_of_a_few_rows_finds_them_and_orders_the_new_ones_after_them():
    """The swap's path, makemigrations' operations and migrate's, at a size every Django version of the
    matrix runs (the 100,000-row tests, of what the server does at that size, are ``big``)."""
    _swapped_and_filled("adoptfew", 3000)


@pytest.mark.big
@pytest.mark.skipif(django.VERSION < (5, 0), reason="db_default arrived in Django 5.0")
def test_db_default_made_keys_on_a_column_of_random_keys_sort_after_them():
    """AlterField to db_default=DatabaseSeqUUID(): on PostgreSQL the migration reads the column and sets the
    default of adopted keys, which sort after every old one; MariaDB and SQLite keep their plain default
    (their B-trees fill pages where inserts go).  The rows Django sends without a key get them."""
    from seqid_orm.django import DatabaseSeqUUID

    _old, new = _swap("adoptdb", SeqUUIDField(primary_key=True, editable=False, db_default=DatabaseSeqUUID()))
    try:
        for start in range(0, 20_000, 5000):
            new.objects.bulk_create(new(n=i, note="new") for i in range(start, start + 5000))
        rows = list(new.objects.order_by("pk").values_list("pk", "n"))
    finally:
        _drop(new)
    made = [pk for pk, n in rows if n >= 0]
    assert len(made) == 20_000
    kinds = {describe(pk).kind for pk in made}
    if connection.vendor == "postgresql":
        assert kinds == {"adopted"}
        assert all(n < 0 for _, n in rows[:N]) and sorted(n for _, n in rows[N:]) == list(range(20_000))
    else:
        assert "adopted" not in kinds


def test_a_column_of_another_form_fails_the_check_and_refuses_a_key_before_its_row():
    """A char(32) column under a field that writes the database's uuid type (Django 5 on MariaDB 10.7+ made
    the change; columns made by 4.2 stay char(32)), or any other form than the field's."""
    table = "adoptmismatch_thing"
    other = {"postgresql": "bytea", "mysql": "varbinary(16)", "sqlite": "varchar(36)"}[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id {other} PRIMARY KEY, n integer NOT NULL, note varchar(20) NOT NULL)")
    try:
        model = _state("adoptmismatch", SeqUUIDField(primary_key=True, editable=False)).apps.get_model(
            "adoptmismatch", "Thing"
        )
        field = model._meta.pk
        [error] = [m for m in field.check(databases=["default"]) if m.id == "seqid.E005"]
        assert f"{table}.id" in error.msg and "ConvertUUIDStorage" in error.msg
        with pytest.raises(StorageMismatchError, match=f"{table}.id"):
            model(n=1, note="new")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")
            assert cursor.fetchone()[0] == 0
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {table}")


def test_a_seq_uuid_field_added_to_a_model_with_a_table_is_written_online_in_a_non_atomic_migration():
    """Django's AddField would give every old row the one value its default computes (a unique violation for
    a key) while holding the table: seqid's makemigrations writes AddSeqUUIDField, with atomic = False; a
    model made in the same migration keeps Django's own operations."""
    from seqid_orm.django.operations import AddSeqUUIDField

    before = _state("addonline", models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False))
    after = before.clone()
    after.models["addonline", "thing"].fields["seq_id"] = SeqUUIDField(unique=True)
    from django.db.migrations.questioner import MigrationQuestioner

    asks = MigrationQuestioner(defaults={"ask_initial": True})  # an app with no migrations yet: take it
    changes = SeqIDAutodetector(before, after, asks).changes(graph=MigrationGraph())  # what makemigrations calls
    [migration] = changes["addonline"]
    [operation] = migration.operations
    assert isinstance(operation, AddSeqUUIDField) and operation.name == "seq_id"
    from seqid_orm.django.migrating import SeqIDMigrationWriter

    written = SeqIDMigrationWriter(migration).as_string()  # what seqid's makemigrations writes
    assert "    atomic = False" in written and "seqid_orm.django.operations.AddSeqUUIDField(" in written
    namespace: dict[str, object] = {}
    exec(written, namespace)
    assert namespace["Migration"].atomic is False  # type: ignore[attr-defined]
    fresh = SeqIDAutodetector(ProjectState(), after)._detect_changes(graph=MigrationGraph())
    assert not any(isinstance(op, AddSeqUUIDField) for m in fresh["addonline"] for op in m.operations)


def test_every_model_of_an_app_made_seqid_in_one_run_is_one_expand_and_one_contract_migration():
    """Three models of an app whose integer keys become SeqUUIDFields in one makemigrations run, another app's
    model left as it is and depending on the first: the run writes one expand migration (every RekeyExpand) and
    one contract migration after it (every RekeyContract), numbered after it; the other app's model is
    untouched."""
    from django.db.migrations.questioner import MigrationQuestioner

    from seqid_orm.django.operations import RekeyContract, RekeyExpand

    def state(key: models.Field | None) -> ProjectState:
        project = ProjectState()
        for name in ("Author", "Book", "Shelf"):
            fields = [("id", key.clone() if key else models.BigAutoField(primary_key=True))]
            project.add_model(ModelState("library", name, [*fields, ("n", models.IntegerField())]))
        project.add_model(
            ModelState(
                "thirdparty",
                "Note",
                [
                    ("id", models.BigAutoField(primary_key=True)),
                    ("book", models.ForeignKey("library.Book", on_delete=models.CASCADE)),
                ],
            )
        )
        return project

    before, after = state(None), state(SeqUUIDField(primary_key=True, serialize=False))
    asks = MigrationQuestioner(defaults={"ask_initial": True})
    graph = MigrationGraph()
    graph.add_node(("library", "0001_initial"), None)
    graph.add_node(("thirdparty", "0001_initial"), None)
    changes = SeqIDAutodetector(before, after, asks).changes(graph=graph)
    expand, contract = changes["library"]
    assert (expand.name, contract.name) == ("0002_expand_author_book_shelf_key", "0003_contract_author_book_shelf_key")
    assert [type(op) for op in expand.operations] == [RekeyExpand] * 3
    assert [type(op) for op in contract.operations] == [RekeyContract] * 3
    assert ("library", "0002_expand_author_book_shelf_key") in contract.dependencies
    assert expand.atomic is False and contract.atomic is False
    assert "thirdparty" not in changes  # its model did not change: its foreign key follows the key in the database
