"""Mixed vendors in one project: 'default' on PostgreSQL, 'legacy' on MariaDB (settings.multidb)."""

from __future__ import annotations

import json
from io import StringIO

import django
import pytest
from django.core.management import call_command
from django.db import connections

from seqid_orm import Layout
from seqid_orm.ids.comb import layout_of
from tests.django.testapp.models import Author, LegacyRecord

pytestmark = pytest.mark.django_db(databases=["default", "legacy"])


def db_order(model, alias):
    connection = connections[alias]
    table = connection.ops.quote_name(model._meta.db_table)
    field = model._meta.pk
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name(field.column)} FROM {table} ORDER BY 1")
        return [field.to_python(row[0]) for row in cursor.fetchall()]


def test_each_model_gets_the_layout_of_its_own_database():
    field = LegacyRecord._meta.pk
    assert connections["default"].vendor == "postgresql" and connections["legacy"].vendor == "mysql"
    assert field.layout_for("default") is Layout.TIME_FIRST  # PostgreSQL refuses the preference
    if django.VERSION >= (5, 0) and connections["legacy"].features.has_native_uuid_field:
        assert field.layout_for("legacy") is Layout.TIME_LAST  # MariaDB's UUID type honours it
    records = [LegacyRecord(label=f"r{i}") for i in range(200)]
    assert {layout_of(r.pk) for r in records} == {field.layout_for("legacy")}
    for record in records:
        record.save()
    assert record._state.db == "legacy"
    assert db_order(LegacyRecord, "legacy") == [r.pk for r in records]
    authors = [Author.objects.create(name=f"a{i}") for i in range(50)]
    assert {layout_of(a.pk) for a in authors} == {Layout.TIME_FIRST}
    assert db_order(Author, "default") == [a.pk for a in authors]


def test_using_another_database_reissues_an_unsaved_drawn_id():
    field = LegacyRecord._meta.pk
    record = LegacyRecord(label="to default")
    drawn = record.pk
    record.save(using="default")
    assert record._state.db == "default"
    assert layout_of(record.pk) is field.layout_for("default")
    assert (record.pk != drawn) == (field.layout_for("default") is not field.layout_for("legacy"))
    created = [LegacyRecord.objects.using("default").create(label=f"c{i}") for i in range(100)]
    assert {layout_of(c.pk) for c in created} == {field.layout_for("default")}
    assert db_order(LegacyRecord, "default") == [record.pk] + [c.pk for c in created]
    assert LegacyRecord.objects.using("default").get(pk=record.pk).label == "to default"


def test_an_id_set_by_the_user_is_never_replaced():
    from uuid import UUID

    chosen = UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    record = LegacyRecord(id=chosen, label="mine")
    record.save(using="legacy")
    assert record.pk == chosen
    assert LegacyRecord.objects.using("legacy").get(pk=chosen).label == "mine"


def test_bulk_insert_draws_keys_again_for_the_database_it_writes_to():
    """bulk_create sends no pre_save signal; seqid's bulk_insert re-draws as save() does."""
    from seqid_orm.django import bulk_insert

    field = LegacyRecord._meta.pk
    routed = bulk_insert([LegacyRecord(label=f"l{i}") for i in range(300)])  # the router: 'legacy'
    assert {r._state.db for r in routed} == {"legacy"}
    assert db_order(LegacyRecord, "legacy") == [r.pk for r in routed]
    built = [LegacyRecord(label=f"d{i}") for i in range(300)]  # drawn for 'legacy', where the router sends it
    drawn = [r.pk for r in built]
    bulk_insert(built, using="default")  # PostgreSQL: COPY
    assert {layout_of(r.pk) for r in built} == {field.layout_for("default")}
    moved = field.layout_for("default") is not field.layout_for("legacy")
    assert all((r.pk != d) == moved for r, d in zip(built, drawn, strict=True))
    assert db_order(LegacyRecord, "default") == [r.pk for r in built]
    assert LegacyRecord.objects.using("default").count() == 300


def _doctor_json(*args: str) -> list[dict[str, object]]:
    out = StringIO()
    call_command("seqid_doctor", "--json", *args, stdout=out)
    document = json.loads(out.getvalue())
    assert document["errors"] == []
    return document["findings"]


@pytest.mark.django_db(transaction=True, databases=["default", "legacy"])
def test_seqid_doctor_database_names_the_alias():
    """MariaDB's native UUID column keeps the time_last layout LegacyRecord asks for in order."""
    LegacyRecord.objects.using("legacy").bulk_create([LegacyRecord(label=str(n)) for n in range(2000)])
    found = {f["table"]: f for f in _doctor_json("--database", "legacy")}
    record = found[LegacyRecord._meta.db_table]
    assert (record["kind"], record["format"], record["in_order"]) == ("time-ordered", "comb-time-last", True), record
    assert found["django_migrations"]["kind"] == "integer-sequence"  # every table of that database
