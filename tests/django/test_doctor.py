"""manage.py seqid_doctor on each settings module's real database: a legacy uuid4 key and seqid's own keys."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections, models
from django.test.utils import isolate_apps

from tests.django.tables import table_of
from tests.django.testapp.models import Author, Receipt

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def _doctor(*args: str) -> list[dict[str, object]]:
    out = StringIO()
    call_command("seqid_doctor", "--json", *args, stdout=out)
    document = json.loads(out.getvalue())
    assert document["errors"] == []
    return document["findings"]


@contextlib.contextmanager
def uuid4_keyed(db_table: str) -> Iterator[type[models.Model]]:
    """A model keyed by ``UUIDField(default=uuid.uuid4)`` (call it inside ``isolate_apps``), its
    table created on the default database for the block and dropped after it."""
    meta = type("Meta", (), {"app_label": "testapp", "db_table": db_table})
    fields = {"id": models.UUIDField(primary_key=True, default=uuid.uuid4), "Meta": meta, "__module__": __name__}
    model = type(f"Keyed_{db_table}", (models.Model,), fields)
    with table_of(model) as made:
        yield made


@isolate_apps("tests.django.testapp")
def test_the_legacy_table_comes_first_and_seqids_tables_append():
    with uuid4_keyed("doctor_legacy_order") as LegacyOrder:
        LegacyOrder.objects.bulk_create([LegacyOrder() for _ in range(3000)])
        Author.objects.bulk_create([Author(name=f"a{n}") for n in range(3000)])
        found = {f["table"]: f for f in _doctor()}
        assert found["doctor_legacy_order"]["kind"] == "random-uuid"
        assert next(iter(found)) == "doctor_legacy_order"  # the worst first
        author = found[Author._meta.db_table]
        assert (author["kind"], author["in_order"]) == ("time-ordered", True), author
        with pytest.raises(CommandError, match="random-uuid") as info:
            call_command("seqid_doctor", "--fail-on", "random-uuid", stdout=StringIO())
        assert info.value.returncode == 1
        out = StringIO()
        call_command("seqid_doctor", stdout=out)
        assert "doctor_legacy_order.id (random-uuid): SQLAlchemy:" in out.getvalue()


def test_an_unknown_fail_on_name_is_refused_before_anything_is_read():
    with pytest.raises(CommandError, match="--fail-on takes"):
        call_command("seqid_doctor", "--fail-on", "random", stdout=StringIO())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--database", "nope"), r"no database alias 'nope' in settings.DATABASES \(it has: default"),
        (("--timeout", "-1"), "timeout must be seconds between 0 and 3600, got -1.0"),
        (("--timeout", "0"), "timeout must be seconds between 0 and 3600"),
    ],
)
def test_bad_input_is_a_command_error_that_exits_2(args, says):
    """Before: --database nope was a KeyError traceback, --timeout -1 was not checked, and an
    error exited 1, which --fail-on uses for "found".  Now each is named, with exit status 2; with
    --json the same document as ever is printed first, its error listed."""
    with pytest.raises(CommandError, match=says) as info:
        call_command("seqid_doctor", *args, stdout=StringIO())
    assert info.value.returncode == 2
    out = StringIO()
    with pytest.raises(CommandError, match=says):
        call_command("seqid_doctor", "--json", *args, stdout=out)
    document = json.loads(out.getvalue())
    assert document["findings"] == [] and len(document["errors"]) == 1


def test_a_table_with_a_colon_in_its_name_is_read_like_any_other():
    """Before: a table ``a :b`` reached the executor as a parameter ``:b`` and cost the report."""
    connection = connections["default"]
    q = connection.ops.quote_name
    table = "doctor a :b"
    column_type = "uuid" if connection.vendor == "postgresql" else "char(36)"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {q(table)} ({q(':pivot')} {column_type} PRIMARY KEY)")
        for _ in range(100):
            cursor.execute(f"INSERT INTO {q(table)} VALUES (%s)", [str(uuid.uuid4())])
    try:
        found = {f["table"]: f for f in _doctor()}
        assert (found[table]["column"], found[table]["kind"]) == (":pivot", "random-uuid"), found[table]
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {q(table)}")


def test_schema_narrows_the_report_on_postgresql_and_sqlite_and_is_refused_on_mariadb():
    """`--schema` (the doctor reads every schema): the test database's own schema
    holds the legacy table; a schema that does not exist holds nothing; on MariaDB, which has no
    schemas beside its databases, a schema is refused with exit status 2 before anything is read."""
    connection = connections["default"]
    if connection.vendor == "mysql":
        with pytest.raises(CommandError, match="schemas are PostgreSQL's") as info:
            call_command("seqid_doctor", "--schema", "public", stdout=StringIO())
        assert info.value.returncode == 2
        return
    Author.objects.bulk_create([Author(name=f"a{n}") for n in range(300)])
    schema = "main"  # SQLite's own database (attached ones have their names)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_schema()")
            (schema,) = cursor.fetchone()
    assert Author._meta.db_table in {row["table"] for row in _doctor("--schema", schema)}
    assert _doctor("--schema", "no_such_schema") == []


@isolate_apps("tests.django.testapp")
def test_ids_the_application_sets_itself_are_said_to_be_the_applications():
    """Before: a key with no default, filled by the application's own uuid4(), was told to change a
    default that is never used.  The Django command knows the model (Receipt, in the app's models,
    as the command reads the project's): it says the ids are the app's."""
    with uuid4_keyed("doctor_defaulted") as Defaulted:
        Receipt.objects.bulk_create([Receipt(id=uuid.uuid4()) for _ in range(500)])
        Defaulted.objects.bulk_create([Defaulted() for _ in range(500)])
        found = {f["table"]: f for f in _doctor()}
        app_keyed, defaulted = found[Receipt._meta.db_table], found["doctor_defaulted"]
        assert app_keyed["kind"] == defaulted["kind"] == "random-uuid"
        assert "testapp.Receipt.id has no default: the application sets these ids itself" in app_keyed["advice"]
        assert "SeqUUIDField(primary_key=True" not in app_keyed["advice"]
        assert "SeqUUIDField(primary_key=True" in defaulted["advice"] and "application" not in defaulted["advice"]
