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
from tests.django.tables import table_of

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
