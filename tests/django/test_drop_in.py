"""SeqUUIDField as a drop-in for Django's UUIDField: the same values accepted and refused on every path
(save, lookups, to_python, clean, forms, DRF), Django's messages and codes, Django's editability, and a
swap that changes no column.  ``bool`` is the one input refused on purpose (UUIDField reads True as
UUID(int=1)); a forged uuid.UUID whose int is not 128 bits is refused too."""

from __future__ import annotations

import uuid

import pytest
from django import forms
from django.core.exceptions import ValidationError
from django.db import connection, models, transaction
from rest_framework import serializers

from seqid_orm import describe
from seqid_orm.django import SeqUUIDField
from tests.django.testapp.models import Author

pytestmark = pytest.mark.django_db(transaction=True)

VALUE = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
SPELLINGS = [
    VALUE,
    str(VALUE),
    str(VALUE).upper(),
    VALUE.hex,  # 32 hex digits, as Django's char(32) columns hold it
    "{" + str(VALUE) + "}",
    VALUE.urn,
    VALUE.int,
]
REFUSED = ["zzz", "", "01890a5d-ac96-774b-bcce-b302099a80", 1.5, -1, 1 << 128, b"\x01" * 16, ["x"]]
UUIDFIELD = models.UUIDField()


def django_verdict(value):
    try:
        return ("ok", UUIDFIELD.to_python(value))
    except ValidationError as exc:
        return ("invalid", exc.messages, exc.code)
    except TypeError:
        return ("TypeError",)


@pytest.mark.parametrize("value", SPELLINGS, ids=repr)
def test_what_uuidfield_accepts_seqid_accepts_on_every_path(value):
    field = Author._meta.pk
    assert field.to_python(value) == UUIDFIELD.to_python(value) == VALUE
    assert field.clean(value, None) == VALUE
    Author(id=value, name="a").save()
    assert Author.objects.get(pk=value).pk == VALUE
    assert list(Author.objects.filter(pk__in=[value]).values_list("pk", flat=True)) == [VALUE]
    assert list(Author.objects.in_bulk([value])) == [VALUE]
    assert Author.objects.filter(pk=value).delete()[0] == 1


@pytest.mark.parametrize("value", REFUSED, ids=repr)
def test_what_uuidfield_refuses_seqid_refuses_with_djangos_message_and_code(value):
    field = Author._meta.pk
    with pytest.raises(ValidationError) as caught:
        field.to_python(value)
    assert caught.value.code == "invalid"
    assert caught.value.messages == [f"“{value}” is not a valid UUID."]
    verdict = django_verdict(value)
    # UUIDField says the same, except for bytes and lists, where it lets a TypeError out: stricter, never looser
    assert verdict == ("invalid", caught.value.messages, "invalid") or verdict == ("TypeError",)
    with pytest.raises(ValidationError), transaction.atomic():
        Author(id=value, name="bad").save()
    with pytest.raises(ValidationError):
        Author.objects.filter(pk=value).exists()
    assert not Author.objects.exists()


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_refused_on_purpose(value):
    """UUIDField takes True as UUID(int=1): a key nobody means.  Documented as seqid's one difference."""
    assert UUIDFIELD.to_python(value) == uuid.UUID(int=int(value))
    with pytest.raises(ValidationError) as caught:
        Author._meta.pk.to_python(value)
    assert caught.value.messages == [f"“{value}” is not a valid UUID."]


def test_editability_follows_uuidfield_and_forms_show_the_key():
    assert Author._meta.pk.editable is models.UUIDField(primary_key=True).editable is True
    form_class = forms.modelform_factory(Author, fields="__all__")
    assert list(form_class.base_fields) == ["id", "name"]
    assert isinstance(form_class.base_fields["id"], forms.UUIDField)
    form = form_class(data={"id": "zzz", "name": "x"})
    assert not form.is_valid() and form.errors["id"] == ["Enter a valid UUID."]  # Django's form field, unchanged
    form = form_class(data={"id": VALUE.hex, "name": "x"})
    assert form.is_valid(), form.errors
    assert form.save().pk == VALUE
    assert not SeqUUIDField(primary_key=True, editable=False).editable  # as Django's docs show for UUIDField


def test_rest_framework_treats_it_as_a_uuid_field_a_client_may_write():
    class AuthorSerializer(serializers.ModelSerializer):
        class Meta:
            model = Author
            fields = ["id", "name"]

    field = AuthorSerializer().fields["id"]
    assert isinstance(field, serializers.UUIDField) and not field.read_only
    bad = AuthorSerializer(data={"id": "zzz", "name": "x"})
    assert not bad.is_valid() and [str(e) for e in bad.errors["id"]] == ["Must be a valid UUID."]
    good = AuthorSerializer(data={"id": VALUE.hex, "name": "x"})
    assert good.is_valid(), good.errors
    assert good.save().pk == VALUE
    made = AuthorSerializer(data={"name": "y"})  # no id given: seqid's default makes one
    assert made.is_valid(), made.errors
    assert made.save().pk.version == 7


def test_swapping_uuidfield_for_seq_uuid_field_changes_no_column():
    """makemigrations writes one AlterField (the field's class and Python default change); applied, it
    leaves the column as it was: the same type, key and rows on every backend, and no SQL at all on
    PostgreSQL and MariaDB.  (SQLite has no ALTER COLUMN: Django copies the table into one with the same
    columns, the altered one last, for any change of a field's default, UUIDField's own included.)"""
    from django.db.migrations.autodetector import MigrationAutodetector
    from django.db.migrations.graph import MigrationGraph
    from django.db.migrations.operations import AlterField
    from django.db.migrations.state import ModelState, ProjectState

    def state(key: models.Field) -> ProjectState:
        project = ProjectState()
        project.add_model(ModelState("swap", "Thing", [("id", key), ("name", models.CharField(max_length=20))]))
        return project

    before = state(models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False))
    after = state(SeqUUIDField(primary_key=True, editable=False))
    changes = MigrationAutodetector(before, after)._detect_changes(graph=MigrationGraph())
    [migration] = changes["swap"]
    [operation] = migration.operations
    assert isinstance(operation, AlterField) and operation.name == "id"

    model = before.apps.get_model("swap", "Thing")
    with connection.schema_editor() as editor:
        editor.create_model(model)
    try:
        rows = [model.objects.create(name=f"n{i}").pk for i in range(3)]
        columns_before = _columns(model._meta.db_table)
        with connection.schema_editor(collect_sql=connection.vendor != "sqlite") as editor:
            operation.database_forwards("swap", editor, before, after)
            statements = getattr(editor, "collected_sql", [])
        if connection.vendor != "sqlite":
            assert statements == [], statements
        assert _columns(model._meta.db_table) == columns_before
        moved = after.apps.get_model("swap", "Thing")
        assert sorted(moved.objects.values_list("pk", flat=True)) == sorted(rows)
        new = moved.objects.create(name="new").pk  # the new default, in the same column
        # on PostgreSQL, which splits inner index pages half, a key that sorts after the old random ones
        adopted = connection.vendor == "postgresql"
        assert describe(new).kind == ("adopted" if adopted else "uuid7")
        if adopted:
            assert list(moved.objects.order_by("pk").values_list("pk", flat=True))[-1] == new
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(model)


def _columns(table: str) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        description = connection.introspection.get_table_description(cursor, table)
        primary = connection.introspection.get_primary_key_column(cursor, table)
    return sorted((c.name, c.type_code, c.internal_size, c.null_ok, c.name == primary) for c in description)
