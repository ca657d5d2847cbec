"""SeqUUIDField against columns another Django version or another program filled, on the settings module's
real database: look-ups (``get``, ``filter``, ``exists``) are guarded as inserts are: a column whose values are
not what the field writes is refused with ``StorageMismatchError`` instead of answering ``DoesNotExist``, and
nothing is written.  And ``uuid.UUID`` subclasses (asyncpg's, a library's) are taken as ``UUIDField`` takes
them."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection, models
from django.test.utils import isolate_apps

from seqid_orm.django import SeqUUIDField
from seqid_orm.django.connection import forget_columns
from seqid_orm.errors import StorageMismatchError

pytestmark = pytest.mark.django_db(transaction=True)


class SubUUID(uuid.UUID):
    """A subclass as asyncpg's ``pgproto.UUID`` and other libraries' are."""


def _other_form() -> tuple[str, object, str]:
    """A column type and values in a form the field does not write on this backend, and the refusal."""
    native = SeqUUIDField().db_type(connection) == "uuid"
    if connection.vendor == "mysql" and native:  # the char(32) column Django 4.2 made on MariaDB
        return "char(32)", lambda u: u.hex, "holds hex"
    if native:  # PostgreSQL: a text column of hex another program wrote
        return "varchar(32)", lambda u: u.hex, "holds hex"
    return "char(32)", lambda u: u.hex.upper(), "upper-case 32 hex digits"  # another program's upper case


def test_look_ups_of_a_column_of_another_form_are_refused_not_missed():
    declared, written, refusal = _other_form()
    table = "storageform_thing"
    old = [uuid.uuid4() for _ in range(20)]
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id {declared} PRIMARY KEY, note varchar(20) NOT NULL)")
        for u in old:
            cursor.execute(f"INSERT INTO {table} VALUES (%s, 'old')", [written(u)])
    forget_columns()
    try:
        with isolate_apps("tests.django.testapp"):

            class Thing(models.Model):
                id = SeqUUIDField(primary_key=True)
                note = models.CharField(max_length=20)

                class Meta:
                    app_label = "testapp"
                    db_table = table

            with pytest.raises(StorageMismatchError, match=refusal):
                Thing.objects.get(pk=old[0])  # DoesNotExist before: the row is there, in another form
            with pytest.raises(StorageMismatchError, match=refusal):
                Thing.objects.filter(pk=old[1]).exists()
            with pytest.raises(StorageMismatchError, match=refusal):
                Thing.objects.create(note="new")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT note, count(*) FROM {table} GROUP BY note")
            assert [tuple(row) for row in cursor.fetchall()] == [("old", 20)]
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {table}")


def test_uuid_subclasses_are_saved_and_looked_up_as_uuidfield_takes_them():
    from tests.django.tables import table_of

    with isolate_apps("tests.django.testapp"):

        class Holder(models.Model):
            id = SeqUUIDField(primary_key=True)
            ref = SeqUUIDField(null=True)

            class Meta:
                app_label = "testapp"

        plain = models.UUIDField()
        value = SubUUID(int=uuid.uuid4().int)
        assert SeqUUIDField().to_python(value) is value is plain.to_python(value)
        with table_of(Holder):
            made = Holder.objects.create(pk=value, ref=SubUUID(int=uuid.uuid4().int))
            assert Holder.objects.get(pk=value).ref == made.ref
            assert Holder.objects.filter(ref=made.ref).count() == 1
            assert Holder.objects.create().pk != value  # the default still makes its own


def test_a_forged_uuid_and_booleans_are_still_refused_with_uuidfields_message():
    from django.core.exceptions import ValidationError

    forged = uuid.UUID(int=1)
    object.__setattr__(forged, "int", 1 << 130)
    for bad in (forged, True, False, b"\x00" * 16):
        with pytest.raises(ValidationError) as raised:
            SeqUUIDField().to_python(bad)
        assert raised.value.code == "invalid"
