"""TypeIDField through the Django ORM on each backend: TypeID text in Python, its UUID in the column,
new keys in the order made under ORDER BY, look-ups by text or UUID, Django's own refusals (a
ValidationError with code ``invalid``), and a migration that writes and reads it back."""

from __future__ import annotations

import uuid

import pytest
from django.core import exceptions
from django.db import connection, models
from django.test.utils import isolate_apps

from seqid_orm.django import TypeIDField
from seqid_orm.errors import InvalidArgumentError
from seqid_orm.ids.typeid import decode_typeid
from seqid_orm.vendors import Storage, target
from tests.django.tables import reads_the_primary_key, table_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def customer_model():
    with isolate_apps("tests.django.testapp"):

        class Customer(models.Model):
            id = TypeIDField("cust", primary_key=True)
            n = models.IntegerField()

            class Meta:
                app_label = "testapp"
                db_table = "seqid_typeid_customer"

        with table_of(Customer):
            yield Customer


def test_keys_are_typeids_in_python_and_uuidv7s_in_the_column(customer_model):
    made = [customer_model.objects.create(n=n) for n in range(200)]
    assert all(c.id.startswith("cust_") for c in made)
    stored = list(customer_model.objects.order_by("id").values_list("n", flat=True))
    assert stored == list(range(200))  # ORDER BY id, asked of the database
    first = customer_model.objects.order_by("id").first()
    assert first.id == made[0].id and isinstance(first.id, str)
    with connection.cursor() as cursor:  # the column as stored: the UUID (native, or its hex)
        cursor.execute("SELECT id FROM seqid_typeid_customer WHERE n = 0")
        raw = cursor.fetchone()[0]
    assert (raw if isinstance(raw, uuid.UUID) else uuid.UUID(raw)) == decode_typeid(made[0].id)[1]
    assert decode_typeid(made[0].id)[1].version == 7
    assert customer_model.objects.get(id=made[5].id).n == 5
    assert customer_model.objects.get(id=decode_typeid(made[5].id)[1]).n == 5  # a uuid.UUID too
    assert customer_model.objects.filter(id__in=[m.id for m in made[:3]]).count() == 3


def test_refusals_speak_as_uuidfield_does(customer_model):
    other = "user" + customer_model.objects.create(n=1).id[4:]
    with pytest.raises(exceptions.ValidationError) as refused:
        customer_model.objects.get(id=other)
    assert refused.value.code == "invalid" and "cust" in str(refused.value)
    field = customer_model._meta.get_field("id")
    with pytest.raises(exceptions.ValidationError):
        field.clean("cust_not-a-typeid", None)
    with pytest.raises(InvalidArgumentError, match="lowercase ASCII"):
        TypeIDField("Cust")
    assert field.deconstruct()[1:3] == ("seqid_orm.django.TypeIDField", ["cust"])
    assert field.formfield().max_length == len("cust_") + 26


class Char32TypeIDField(TypeIDField):
    """The fix seqid.E006's hint names: the UUID as 32 hex digits, whatever type the backend has."""

    def db_type(self, connection):
        return "char(32)"


def test_a_char32_column_keeps_the_keys_as_hex_in_the_order_made():
    with isolate_apps("tests.django.testapp"):

        class Order(models.Model):
            id = Char32TypeIDField("ord", primary_key=True)
            n = models.IntegerField()

            class Meta:
                app_label = "testapp"
                db_table = "seqid_typeid_char32"

        with table_of(Order):
            made = [Order.objects.create(n=n) for n in range(50)]
            assert list(Order.objects.order_by("id").values_list("n", flat=True)) == list(range(50))
            with connection.cursor() as cursor:
                cursor.execute("SELECT id FROM seqid_typeid_char32 WHERE n = 7")
                raw = cursor.fetchone()[0]
            assert raw == decode_typeid(made[7].id)[1].hex  # 32 hex digits, not the 36-character form
            assert Order.objects.get(id=made[7].id).n == 7
            assert Order._meta.get_field("id").check(databases=[connection.alias]) == []


def test_the_live_database_keeps_typeids_in_order_so_no_check_fires(customer_model):
    field = customer_model._meta.get_field("id")
    assert [m.id for m in field.check(databases=[connection.alias])] == []


@pytest.mark.parametrize(
    ("vendor", "version", "storage", "refused"),
    [
        ("mariadb", (10, 11, 4), Storage.NATIVE, True),  # uuid compares a v7's low time bits first
        ("mariadb", (10, 7, 0), Storage.NATIVE, True),  # the first uuid type, created by Django 5+
        ("mariadb", (10, 11, 5), Storage.NATIVE, False),  # compares a v7 by its time from 10.11.5
        ("mariadb", (10, 11, 4), Storage.HEX, False),  # char(32): compared as written
        ("mssql", (16, 0), Storage.NATIVE, True),  # uniqueidentifier compares the last six bytes first
        ("postgresql", (15, 0), Storage.NATIVE, False),
        ("sqlite", (3, 45, 0), Storage.HEX, False),
        ("mariadb", None, Storage.NATIVE, False),  # no version known: nothing to judge
    ],
)
def test_e006_names_a_column_that_would_scatter_the_keys(customer_model, vendor, version, storage, refused):
    field = customer_model._meta.get_field("id")
    found = field.check_target("default", target(vendor, version, storage))
    assert [m.id for m in found] == (["seqid.E006"] if refused else [])
    if refused:
        assert "does not keep in the order" in found[0].msg and "char(32)" in found[0].hint


def test_created_in_finds_the_rows_of_a_time_range_by_their_keys(customer_model):
    import datetime as dt

    from seqid_orm import comb_at
    from seqid_orm.ids.typeid import encode_typeid

    start = dt.datetime(2026, 11, 3, tzinfo=dt.timezone.utc)
    whens = [start + dt.timedelta(minutes=n) for n in range(3_000)]
    customer_model.objects.bulk_create(
        customer_model(id=encode_typeid("cust", comb_at(when, "time_first")), n=n) for n, when in enumerate(whens)
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE seqid_typeid_customer")
    low, high = start + dt.timedelta(hours=10), start + dt.timedelta(hours=12)
    found = customer_model.objects.filter(id__created_in=(low, high)).order_by("id")
    assert [c.n for c in found] == [n for n, when in enumerate(whens) if low <= when < high]
    assert reads_the_primary_key(found), found.explain()
