"""CreateSequentialUUIDFunctions: applied and unapplied through Django's schema editor on each backend."""

from __future__ import annotations

import uuid

import pytest
from django.db import DatabaseError, connection

from seqid_orm.django.operations import CreateSequentialUUIDFunctions
from seqid_orm.errors import InvalidArgumentError
from seqid_orm.ids.prefixed import extension_prefix, prefix_of

pytestmark = pytest.mark.django_db(transaction=True)


def run(operation, direction: str) -> None:
    with connection.schema_editor() as editor:
        method = operation.database_forwards if direction == "forwards" else operation.database_backwards
        method("testapp", editor, None, None)


def test_the_operation_creates_and_drops_the_functions():
    operation = CreateSequentialUUIDFunctions()
    assert operation.deconstruct() == ("CreateSequentialUUIDFunctions", [], {})  # Django's writer adds the module
    assert CreateSequentialUUIDFunctions(storage="hex").deconstruct()[2] == {"storage": "hex"}
    if connection.vendor == "sqlite":
        with pytest.raises(InvalidArgumentError, match="PostgreSQL 13\\+ and MariaDB"):
            run(operation, "forwards")
        return
    run(operation, "forwards")
    try:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("CREATE SEQUENCE seqid_dj_seq START 9985")
                cursor.execute("SELECT uuid_sequence_nextval('seqid_dj_seq', 100, 100)")
            else:
                cursor.execute("SELECT uuid_sequence_nextval(9985, 100, 100)")
            made = uuid.UUID(str(cursor.fetchone()[0]))
        # Django 5.0+ makes UUIDField MariaDB's native UUID type, which compares its last group first
        # for version-4 values: the prefix leads the last six bytes there; elsewhere the first bytes
        import django

        native = connection.vendor == "mysql" and connection.mysql_is_mariadb and django.VERSION >= (5, 0)
        layout = "time_last" if native else "time_first"
        assert prefix_of(made, 100, layout) == extension_prefix(9984, 100, 100) == 0  # wrapped after 9,984
    finally:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("DROP SEQUENCE IF EXISTS seqid_dj_seq")
        run(operation, "backwards")
    with pytest.raises(DatabaseError, match=r"uuid_time_nextval|does not exist"), connection.cursor() as cursor:
        cursor.execute("SELECT uuid_time_nextval(60, 256)")


def test_convert_uuid_storage_moves_a_key_and_its_foreign_keys_there_and_back():
    from django.apps import apps
    from django.db.migrations.state import ProjectState

    from seqid_orm.django.operations import ConvertUUIDStorage
    from tests.django.testapp.models import Author, Book

    authors = [Author.objects.create(name=f"a{i}") for i in range(5)]
    for i in range(20):
        Book.objects.create(author=authors[i % 5], title=f"b{i}")
    operation = ConvertUUIDStorage("author", "id", from_storage="native", to_storage="hex")
    assert operation.deconstruct() == (
        "ConvertUUIDStorage",
        ["author", "id"],
        {"from_storage": "native", "to_storage": "hex"},
    )
    state = ProjectState.from_apps(apps)
    if connection.vendor == "sqlite":
        with (
            pytest.raises(InvalidArgumentError, match=r"no UUID column type|PostgreSQL and MariaDB"),
            connection.schema_editor() as editor,
        ):
            operation.database_forwards("testapp", editor, state, state)
        return
    with connection.schema_editor() as editor:
        operation.database_forwards("testapp", editor, state, state)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM testapp_author")
        stored = sorted(str(r[0]) for r in cursor.fetchall())
        cursor.execute("SELECT COUNT(*) FROM testapp_book b JOIN testapp_author a ON a.id = b.author_id")
        joined = cursor.fetchone()[0]
        if connection.vendor == "postgresql":  # Django makes its foreign keys deferred: made again, they stay so
            cursor.execute(
                "SELECT condeferrable AND condeferred FROM pg_constraint WHERE contype = 'f' "
                "AND conrelid = 'testapp_book'::regclass AND confrelid = 'testapp_author'::regclass"
            )
            assert cursor.fetchall() == [(True,)]
    assert stored == sorted(a.pk.hex for a in authors) and joined == 20  # 32 hex digits, joins intact
    with connection.schema_editor() as editor:
        operation.database_backwards("testapp", editor, state, state)
    assert {b.author_id for b in Book.objects.all()} == {a.pk for a in authors}  # native again, read by the ORM
    assert sorted(a.name for a in Author.objects.all()) == [f"a{i}" for i in range(5)]


def test_backfill_gives_old_rows_keys_in_the_order_they_were_made():
    import datetime as dt

    from django.apps import apps
    from django.db.migrations.state import ProjectState

    from seqid_orm.django.operations import BackfillSeqUUID
    from tests.django.testapp.models import Visit

    base = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
    visits = [Visit(created_at=base + dt.timedelta(seconds=(i * 7919) % 300), seq_id=None) for i in range(300)]
    visits.append(Visit(created_at=None, seq_id=None))  # no time: a new id, after the others
    Visit.objects.bulk_create(visits)
    assert not Visit.objects.exclude(seq_id=None).exists()  # rows from before seqid
    operation = BackfillSeqUUID("visit", "seq_id", from_field="created_at")
    assert operation.deconstruct()[1:] == (["visit", "seq_id"], {"from_field": "created_at"})
    state = ProjectState.from_apps(apps)
    with connection.schema_editor() as editor:
        operation.database_forwards("testapp", editor, state, state)
    ordered = list(Visit.objects.order_by("seq_id").values_list("created_at", flat=True))
    assert ordered[:-1] == sorted(t for t in ordered if t is not None) and ordered[-1] is None


def test_the_functions_as_a_db_default_made_by_the_database():  # Django 5.0+ (nox deselects it on 4.2)
    """PostgreSQL: the generator is the column's database default; MariaDB refuses stored functions
    in DEFAULT (error 1901), which is why seqid documents them for inserts there."""
    from django.db import models
    from django.db.models import Func, Value

    class Stamped(models.Model):
        id = models.UUIDField(
            primary_key=True,
            db_default=Func(Value(1), Value(256), function="uuid_time_nextval", output_field=models.UUIDField()),
        )
        n = models.IntegerField()

        class Meta:
            app_label = "testapp"
            db_table = "seqid_stamped"

    operation = CreateSequentialUUIDFunctions()
    if connection.vendor == "sqlite":  # no stored functions, so nothing to be a default
        with pytest.raises(InvalidArgumentError, match="PostgreSQL 13"):
            run(operation, "forwards")
        return
    run(operation, "forwards")
    try:
        if connection.vendor == "mysql":
            with (
                pytest.raises(DatabaseError, match=r"1901|cannot be used in the DEFAULT"),
                connection.schema_editor() as e,
            ):
                e.create_model(Stamped)
            return
        with connection.schema_editor() as editor:
            editor.create_model(Stamped)
        made = [Stamped.objects.create(n=i) for i in range(5)]
        assert len({m.pk for m in made}) == 5 and all(isinstance(m.pk, uuid.UUID) and m.pk.version == 4 for m in made)
        with connection.schema_editor() as editor:
            editor.delete_model(Stamped)
    finally:
        run(operation, "backwards")


def test_every_operation_is_written_by_makemigrations_as_code_that_imports_and_runs():
    """Django's migration writer puts an operation as ``<its module>.<the name deconstruct() gives>(...)``: a
    dotted name there was written twice over (``seqid_orm.django.operations.seqid_orm.django...``), and the
    migration failed to import."""
    from django.db import migrations
    from django.db.migrations.writer import MigrationWriter

    from seqid_orm.django.operations import (
        AdoptSeqUUID,
        BackfillSeqUUID,
        ConvertUUIDStorage,
        CreateSequentialUUIDFunctions,
    )

    operations = [
        AdoptSeqUUID("order", "id"),
        BackfillSeqUUID("visit", "seq_id", from_field="created_at"),
        ConvertUUIDStorage("author", "id", from_storage="hex"),
        CreateSequentialUUIDFunctions(storage="hex"),
    ]
    migration = type("Migration", (migrations.Migration,), {"operations": operations, "dependencies": []})(
        "0002", "shop"
    )
    namespace: dict[str, object] = {}
    exec(MigrationWriter(migration).as_string(), namespace)
    written = namespace["Migration"].operations  # type: ignore[attr-defined]
    assert [type(op) for op in written] == [type(op) for op in operations]
    assert [op.deconstruct() for op in written] == [op.deconstruct() for op in operations]


@pytest.mark.parametrize("atomic", [True, False])
def test_add_seq_uuid_field_adds_fills_and_constrains_the_column_and_unapplies(atomic):
    """A small table (the big ones and the live traffic: tests/django/test_online.py): online outside an
    atomic migration on PostgreSQL and MariaDB, the single-transaction form inside one and on SQLite; either
    way the column ends filled in the rows' time order, unique, NOT NULL, and old code's inserts get keys
    where the database makes them; unapplying drops it."""
    import datetime as dt

    from django.db import models
    from django.db.migrations.state import ModelState, ProjectState

    from seqid_orm.django import SeqUUIDField
    from seqid_orm.django.operations import AddSeqUUIDField

    before = ProjectState()
    before.add_model(
        ModelState(
            "testapp",
            "Stamp",
            [
                ("id", models.BigAutoField(primary_key=True)),
                ("created_at", models.DateTimeField(null=True)),
                ("note", models.CharField(max_length=10, default="x")),
            ],
        )
    )
    operation = AddSeqUUIDField("stamp", "seq_id", SeqUUIDField(unique=True), from_field="created_at")
    after = before.clone()
    operation.state_forwards("testapp", after)
    old = before.apps.get_model("testapp", "Stamp")
    with connection.schema_editor() as editor:
        editor.create_model(old)
    try:
        base = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
        old.objects.bulk_create(old(created_at=base + dt.timedelta(seconds=(i * 37) % 200)) for i in range(200))
        with connection.schema_editor(atomic=atomic) as editor:
            operation.database_forwards("testapp", editor, before, after)
        new = after.apps.get_model("testapp", "Stamp")
        times = list(new.objects.order_by("seq_id").values_list("created_at", flat=True))
        assert times == sorted(times) and new.objects.filter(seq_id__isnull=True).count() == 0
        field = new._meta.get_field("seq_id")
        assert field.unique and not field.null
        with connection.cursor() as cursor:  # the column as the database has it: NOT NULL
            description = connection.introspection.get_table_description(cursor, new._meta.db_table)
        assert not next(c for c in description if c.name == "seq_id").null_ok
        with connection.schema_editor(atomic=atomic) as editor:
            operation.database_backwards("testapp", editor, after, before)
        with connection.cursor() as cursor:
            names = [c.name for c in connection.introspection.get_table_description(cursor, old._meta.db_table)]
        assert "seq_id" not in names
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(old)
