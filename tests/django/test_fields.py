"""SeqUUIDField, SnowflakeField and SortableTextField through the real Django ORM."""

from __future__ import annotations

import io
import json
import uuid

import django
import pytest
from django.core import checks, serializers
from django.core.management import call_command
from django.db import connection, connections, models, transaction
from django.test import override_settings
from django.test.utils import isolate_apps
from django.urls import reverse

from seqid_orm import Layout, timestamp_of
from seqid_orm.django import SeqUUIDField, SnowflakeField, SortableTextField
from seqid_orm.django.connection import storage_of, vendor_of
from seqid_orm.ids.comb import layout_of
from seqid_orm.vendors import Storage
from tests.django.tables import table_of
from tests.django.testapp.models import Author, Book, Event, ShareCode, Tag, Ulid
from tests.ordering import check_time_ordered
from tests.system import need

pytestmark = pytest.mark.django_db


def db_order(model, column="id"):
    """Ids as the database orders them (raw SQL: no ORM ordering involved)."""
    table = connection.ops.quote_name(model._meta.db_table)
    field = model._meta.get_field(column)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name(field.column)} FROM {table} ORDER BY 1")
        return [field.to_python(row[0]) for row in cursor.fetchall()]


def test_column_type_and_layout_follow_the_backend():
    field = Author._meta.pk
    storage = storage_of(field, connection)
    expected_native = connection.vendor == "postgresql" or (
        connection.vendor == "mysql" and connection.features.has_native_uuid_field
    )
    assert (storage is Storage.NATIVE) == expected_native
    assert field.layout_for("default") is Layout.TIME_FIRST
    assert vendor_of(connection) in ("sqlite", "postgresql", "mariadb")


def test_pk_is_known_before_save_and_order_by_pk_is_creation_order():
    made = []
    for i in range(60):
        author = Author(name=f"a{i:03}")
        assert isinstance(author.pk, uuid.UUID)
        assert layout_of(author.pk) is Layout.TIME_FIRST
        before = author.pk
        author.save()
        assert author.pk == before, "saving to the routed database keeps the id"
        made.append(author.pk)
    made += [Author.objects.create(name=f"b{i:03}").pk for i in range(60)]
    assert list(Author.objects.order_by("pk").values_list("pk", flat=True)) == made
    assert db_order(Author) == made
    assert timestamp_of(made[0]) <= timestamp_of(made[-1])


def test_bulk_create_with_batch_size_and_get_or_create():
    authors = [Author(name=f"bulk{i:04}") for i in range(1000)]
    created = Author.objects.bulk_create(authors, batch_size=97)
    assert [a.pk for a in created] == [a.pk for a in authors]
    assert list(Author.objects.order_by("pk").values_list("name", flat=True)) == [f"bulk{i:04}" for i in range(1000)]
    obj, was_created = Author.objects.get_or_create(name="goc")
    again, created_again = Author.objects.get_or_create(name="goc")
    assert was_created and not created_again and obj.pk == again.pk


def test_foreign_keys_and_many_to_many():
    author = Author.objects.create(name="Le Guin")
    tags = [Tag.objects.create(name=f"t{i}") for i in range(3)]
    books = []
    for i in range(5):
        book = Book.objects.create(author=author, title=f"book {i}")
        book.tags.set(tags[: i % 3 + 1])
        books.append(book)
    fetched = Author.objects.get(pk=author.pk)
    assert list(fetched.books.order_by("pk").values_list("title", flat=True)) == [f"book {i}" for i in range(5)]
    assert Tag.objects.get(pk=tags[0].pk).books.count() == 5
    assert list(Book.objects.filter(tags=tags[2]).order_by("pk")) == [books[2]]
    through = Book.tags.through.objects.filter(book_id=books[4].pk).values_list("tag_id", flat=True)
    assert set(through) == {t.pk for t in tags[:2]}
    assert db_order(Book) == [b.pk for b in books]


def test_admin_change_view_urls(admin_client):
    author = Author.objects.create(name="Octavia")
    url = reverse("admin:testapp_author_change", args=[author.pk])
    assert str(author.pk) in url
    response = admin_client.get(url)
    assert response.status_code == 200
    assert b"Octavia" in response.content
    listing = admin_client.get(reverse("admin:testapp_author_changelist"))
    assert url.encode() in listing.content
    # the key is an editable form field, as a UUIDField's is: the add form offers the default, a
    # browser sends it back
    form = admin_client.get(reverse("admin:testapp_author_add")).context["adminform"].form
    offered = form["id"].value()
    add = admin_client.post(reverse("admin:testapp_author_add"), {"name": "Added in admin", "id": offered})
    assert add.status_code == 302
    added = Author.objects.get(name="Added in admin")
    assert layout_of(added.pk) is Layout.TIME_FIRST


def test_dumpdata_loaddata_round_trip_and_json_ids(tmp_path):
    author = Author.objects.create(name="Tiptree")
    book = Book.objects.create(author=author, title="Houston")
    book.tags.add(Tag.objects.create(name="sf"))
    out = io.StringIO()
    call_command("dumpdata", "testapp.author", "testapp.tag", "testapp.book", stdout=out)
    data = json.loads(out.getvalue())
    assert {"model": "testapp.author", "pk": str(author.pk), "fields": {"name": "Tiptree"}} in data
    fixture = tmp_path / "dump.json"
    fixture.write_text(out.getvalue())
    Book.objects.all().delete()
    Author.objects.all().delete()
    Tag.objects.all().delete()
    call_command("loaddata", str(fixture), verbosity=0)
    loaded = Book.objects.get(pk=book.pk)
    assert loaded.author_id == author.pk and loaded.title == "Houston"
    assert [t.name for t in loaded.tags.all()] == ["sf"]
    assert json.loads(serializers.serialize("json", [loaded]))[0]["pk"] == str(book.pk)


def test_snowflake_field_uses_settings():
    events = [Event.objects.create(name=f"e{i}") for i in range(200)]
    ids = [e.pk for e in events]
    assert db_order(Event) == ids
    from seqid_orm.django import settings_snowflake

    parts = settings_snowflake().decode(ids[0])
    assert (parts.worker_id, parts.datacenter_id) == (3, 1)
    assert all(0 < i < 2**63 for i in ids)


def test_snowflake_column_type_per_database():
    from django.db import connection

    Event.objects.create(name="one")
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":  # "integer", as BigAutoField: the id is the rowid, no second index
            cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE rowid = id")
            assert cursor.fetchone()[0] == 1
            cursor.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = %s", [table])
            assert cursor.fetchone()[0] == 0
        else:
            column = next(c for c in connection.introspection.get_table_description(cursor, table) if c.name == "id")
            assert connection.introspection.get_field_type(column.type_code, column) == "BigIntegerField"


def test_sortable_text_uses_a_binary_collation_and_keeps_order():
    codes = [ShareCode.objects.create().code for _ in range(300)]
    assert db_order(ShareCode, "code") == codes
    first = codes[0]
    swapped = "".join(c.lower() if c.isupper() else c.upper() for c in first[:-1]) + first[-1]
    if swapped != first:
        ShareCode.objects.create(code=swapped)  # would collide under a case-insensitive collation
        assert ShareCode.objects.filter(code=first).count() == 1
    ulids = [Ulid.objects.create().id for _ in range(100)]
    assert db_order(Ulid) == ulids
    assert Ulid.objects.get(id=ulids[0].lower()).id == ulids[0]


def test_invalid_ids_are_refused_and_leave_no_row():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError), transaction.atomic():
        Author(id="not-a-uuid", name="x").save()
    with pytest.raises(ValidationError, match="outside its alphabet"), transaction.atomic():
        ShareCode.objects.create(code="+" * 32)
    with pytest.raises(ValidationError, match="32 characters"), transaction.atomic():
        ShareCode.objects.create(code="$$$$")
    assert not ShareCode.objects.exists() and not Author.objects.exists()


def test_makemigrations_is_clean():
    call_command("makemigrations", "testapp", "--check", "--dry-run", verbosity=0)


def test_deconstruct_keeps_options():
    field = SeqUUIDField(primary_key=True, layout="time_last")
    _name, path, args, kwargs = field.deconstruct()
    assert path == "seqid_orm.django.SeqUUIDField"
    assert kwargs == {"primary_key": True, "layout": "time_last"}
    rebuilt = SeqUUIDField(*args, **kwargs)
    assert rebuilt.layout is Layout.TIME_LAST and rebuilt.default is field.default
    _, path, _, kwargs = SortableTextField(kind="base32", unique=True).deconstruct()
    assert kwargs == {"kind": "base32", "unique": True}
    _, path, _, kwargs = SnowflakeField(generator="tests.django.ids.flake").deconstruct()
    assert kwargs == {"generator": "tests.django.ids.flake"}
    with pytest.raises(ValueError, match="layout must be one of"):
        SeqUUIDField(layout="sideways")


def test_a_snowflake_field_without_a_worker_id_warns_and_says_what_to_add(tmp_path):
    """A missing setting does not block makemigrations (BigAutoField needs none): a warning, seqid.W003,
    whose hint is the setting to add; the first id then fails with the same words."""
    from django.core.exceptions import ImproperlyConfigured

    from seqid_orm.django.fields import settings_snowflake

    with override_settings(SEQID={}):
        found = Event._meta.get_field("id").check()
        assert [(m.id, m.level) for m in found] == [("seqid.W003", checks.WARNING)]
        assert 'SEQID = {"SNOWFLAKE": {"worker_id": 1}}' in found[0].hint and "lease" in found[0].hint
        assert all(m.level < checks.ERROR for m in found)  # a warning does not stop makemigrations
        with pytest.raises(ImproperlyConfigured, match=r'SEQID = \{"SNOWFLAKE": \{"worker_id": 1\}\}'):
            settings_snowflake()


@isolate_apps("tests.django.testapp")
def test_system_checks():
    class BadCollation(models.Model):
        code = SortableTextField(primary_key=True, db_collation="utf8mb4_general_ci")
        fine = SortableTextField(db_collation="utf8mb4_bin")

        class Meta:
            app_label = "testapp"

    assert [e.id for e in BadCollation._meta.get_field("code").check()] == ["seqid.E001"]
    assert BadCollation._meta.get_field("fine").check() == []
    with override_settings(SEQID={"SNOWFLAKE": {"worker_id": 99}}):
        errors = Event._meta.get_field("id").check()
    assert [e.id for e in errors] == ["seqid.E002"]
    assert "worker_id must be between 0 and 31" in errors[0].msg
    assert 'SEQID = {"SNOWFLAKE": {"worker_id": 1}}' in errors[0].hint  # the setting to write
    assert Author._meta.pk.check(databases=list(connections)) == []
    problems = [m for m in checks.run_checks(databases=list(connections)) if m.level >= checks.ERROR]
    assert problems == []


def test_database_made_ids_need_django_5():
    from django.core.exceptions import ImproperlyConfigured

    from seqid_orm.django import DatabaseSeqUUID

    if django.VERSION >= (5, 0):
        field = SeqUUIDField(primary_key=True, db_default=DatabaseSeqUUID())
        assert field.default is models.NOT_PROVIDED, "the database, not Python, makes the id"
        assert field.deconstruct()[3]["db_default"].deconstruct()[0] == "seqid_orm.django.DatabaseSeqUUID"
        with pytest.raises(TypeError, match="db_default of a SeqUUIDField"):
            DatabaseSeqUUID().for_connection(connection)
    else:
        with pytest.raises(ImproperlyConfigured, match=r"Django 5\.0"):
            SeqUUIDField(primary_key=True, db_default=DatabaseSeqUUID())


# Django 4.2 has no db_default: its nox session deselects "db_default_made" (and "oracle")
@pytest.mark.django_db(transaction=True, databases="__all__")
@isolate_apps("tests.django.testapp")
def test_db_default_made_ids_are_time_ordered_through_the_orm():
    """db_default=DatabaseSeqUUID(): the schema editor creates the default, save() reads the id back."""
    import datetime as dt

    from seqid_orm.django import DatabaseSeqUUID

    class DbMade(models.Model):
        id = SeqUUIDField(primary_key=True, db_default=DatabaseSeqUUID())
        n = models.IntegerField()

        class Meta:
            app_label = "testapp"

    assert DbMade._meta.pk.check(databases=list(connections)) == []
    for alias in connections:
        conn = connections[alias]
        with conn.schema_editor() as editor:
            editor.create_model(DbMade)
        try:
            before = dt.datetime.now(dt.timezone.utc)
            made = [DbMade.objects.using(alias).create(n=i) for i in range(40)]
            assert all(isinstance(obj.pk, uuid.UUID) for obj in made), "RETURNING gave the id"
            DbMade.objects.using(alias).bulk_create([DbMade(n=i) for i in range(40, 240)])
            table = conn.ops.quote_name(DbMade._meta.db_table)
            with conn.cursor() as cursor:
                cursor.execute(f"SELECT n, id FROM {table} ORDER BY id")
                rows = [(n, DbMade._meta.pk.to_python(v)) for n, v in cursor.fetchall()]
            assert len(rows) == 240 and len({u for _, u in rows}) == 240
            assert {u for _, u in rows} >= {obj.pk for obj in made}
            # exact, but inside one millisecond on SQLite and PostgreSQL 13-17 (tests/ordering.py says why)
            check_time_ordered(conn.vendor, tuple(conn.get_database_version()), rows)
            assert abs(timestamp_of(made[0].pk) - before) < dt.timedelta(minutes=1)
        finally:
            with conn.schema_editor() as editor:
                editor.delete_model(DbMade)


@pytest.mark.django_db(transaction=True, databases="__all__")
@isolate_apps("tests.django.testapp")
def test_db_default_made_ids_with_a_shift_carry_the_shifted_time():
    """db_default=DatabaseSeqUUID(shift=...), as Django 6.1's UUID7(shift): keys of the shifted time, in
    insertion order, below a key made now; the migration writer keeps the shift, a changed shift is
    another default to the autodetector."""
    import datetime as dt

    from django.db.migrations.writer import MigrationWriter

    from seqid_orm.django import DatabaseSeqUUID

    shift = dt.timedelta(days=-30)

    class DbMadeShifted(models.Model):
        id = SeqUUIDField(primary_key=True, db_default=DatabaseSeqUUID(shift=shift))
        n = models.IntegerField()

        class Meta:
            app_label = "testapp"

    field = DbMadeShifted._meta.pk
    assert field.check(databases=list(connections)) == []
    written, imports = MigrationWriter.serialize(field)
    assert "seqid_orm.django.DatabaseSeqUUID(shift=datetime.timedelta(days=-30))" in written, written
    assert "import datetime" in imports
    assert DatabaseSeqUUID(shift=shift) == DatabaseSeqUUID(shift=dt.timedelta(days=-30))
    assert DatabaseSeqUUID(shift=shift) != DatabaseSeqUUID(shift=dt.timedelta(days=-31))
    assert DatabaseSeqUUID(shift=shift) != DatabaseSeqUUID()
    with pytest.raises(TypeError, match="timedelta"):
        DatabaseSeqUUID(shift=-30)
    for alias in connections:
        conn = connections[alias]
        with table_of(DbMadeShifted, alias):
            now = dt.datetime.now(dt.timezone.utc)
            made = [DbMadeShifted.objects.using(alias).create(n=i) for i in range(20)]
            DbMadeShifted.objects.using(alias).bulk_create([DbMadeShifted(n=i) for i in range(20, 120)])
            DbMadeShifted.objects.using(alias).create(id=field.target_for(alias).generator.next(), n=-1)
            table = conn.ops.quote_name(DbMadeShifted._meta.db_table)
            with conn.cursor() as cursor:
                cursor.execute(f"SELECT n, id FROM {table} ORDER BY id")
                rows = [(n, field.to_python(v)) for n, v in cursor.fetchall()]
            assert rows[-1][0] == -1, "a key made now sorts after every key made a month back"
            check_time_ordered(conn.vendor, tuple(conn.get_database_version()), rows[:-1])
            assert abs(timestamp_of(made[0].pk) - (now + shift)) < dt.timedelta(minutes=1)


@isolate_apps("tests.django.testapp")
def test_oracle_cannot_make_ids_so_db_default_fails_check_e003():
    """Django's Oracle backend, built without a server: no time-ordered generator there."""
    from django.db.backends.oracle.base import DatabaseWrapper

    from seqid_orm.django import DatabaseSeqUUID

    class DbMadeOracle(models.Model):
        id = SeqUUIDField(primary_key=True, db_default=DatabaseSeqUUID())

        class Meta:
            app_label = "testapp"

    oracle = DatabaseWrapper({**connection.settings_dict, "ENGINE": "django.db.backends.oracle"}, "oracle")
    messages = DbMadeOracle._meta.pk.check_connection("oracle", oracle)
    assert [m.id for m in messages] == ["seqid.E003"]
    assert "Oracle has no time-ordered UUID generator" in messages[0].msg


def test_oracle_backend_gets_hex_storage_and_time_first():
    """Django's Oracle backend, built without a server: the column Django would create decides."""
    from django.db.backends.oracle.base import DatabaseWrapper

    from seqid_orm.vendors import choose_layout

    oracle = DatabaseWrapper({**connection.settings_dict, "ENGINE": "django.db.backends.oracle"}, "oracle")
    field = Author._meta.pk
    assert field.db_type(oracle) == "VARCHAR2(32)"
    assert storage_of(field, oracle) is Storage.HEX and vendor_of(oracle) == "oracle"
    assert choose_layout(vendor_of(oracle), None, storage_of(field, oracle)) is Layout.TIME_FIRST


def test_mssql_django_backend_layout_follows_its_column_type():
    """mssql-django, built without a server: char(32) hex today, uniqueidentifier in older releases."""
    need("unixodbc")  # pyodbc loads unixODBC's libodbc; mssql-django wraps its ImportError
    from mssql.base import DatabaseWrapper

    from seqid_orm.vendors import choose_layout

    mssql = DatabaseWrapper({**connection.settings_dict, "ENGINE": "mssql"}, "mssql")
    field = Author._meta.pk
    assert vendor_of(mssql) == "mssql"
    expected = {"char(32)": (Storage.HEX, Layout.TIME_FIRST), "uniqueidentifier": (Storage.NATIVE, Layout.TIME_LAST)}
    assert (storage_of(field, mssql), choose_layout("mssql", None, storage_of(field, mssql))) == expected[
        field.db_type(mssql)
    ]
    # a backend that declares uniqueidentifier gets the SQL Server order
    mssql.data_types = {**mssql.data_types, "UUIDField": "uniqueidentifier"}
    assert storage_of(field, mssql) is Storage.NATIVE
    assert choose_layout(vendor_of(mssql), None, storage_of(field, mssql)) is Layout.TIME_LAST
    assert ShareCode._meta.pk.db_parameters(mssql)["collation"] == "Latin1_General_BIN2"


# --- hardening: what UUIDField refuses is refused (tests/django/test_drop_in.py: what it accepts) ----


def test_seq_uuid_field_refuses_a_bool_and_bytes_that_uuidfield_would_take_or_crash_on():
    from django.core.exceptions import ValidationError

    for bad in (True, b"\x01" * 16):
        with pytest.raises(ValidationError), transaction.atomic():
            Author(id=bad, name="bad").save()
        with pytest.raises(ValidationError):
            Author._meta.pk.to_python(bad)
    assert not Author.objects.exists()


def test_seq_uuid_field_refuses_a_uuid_whose_int_is_out_of_range():
    from django.core.exceptions import ValidationError

    forged = object.__new__(uuid.UUID)
    object.__setattr__(forged, "int", 1 << 128)
    object.__setattr__(forged, "is_safe", uuid.SafeUUID.unknown)
    with pytest.raises(ValidationError, match="is not a valid UUID"), transaction.atomic():
        Author(id=forged, name="forged").save()
    assert not Author.objects.exists()


@pytest.mark.parametrize("bad", [12.9, True, -1, 2**63, "12.9", "-1", " 12", "1_000"])
def test_snowflake_field_refuses_keys_django_would_coerce(bad):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError), transaction.atomic():
        Event(id=bad, name="bad").save()
    assert not Event.objects.exists()


def test_snowflake_field_takes_an_int_or_its_decimal_text():
    event = Event.objects.create(id=1234567890123, name="chosen")
    assert Event.objects.get(pk="1234567890123") == event
    assert Event.objects.filter(pk__in=[1234567890123, "5"]).count() == 1


def test_binds_take_what_uuidfield_binds_take():
    """Django's binds follow UUIDField (32 hex digits, braces, urn:, ints: see test_drop_in.py); the
    SQLAlchemy type keeps its stricter rule, where no user's swap depends on the looser one."""
    value = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    field, plain = Author._meta.pk, models.UUIDField()
    for ok in (value, str(value), str(value).upper(), value.hex, value.urn, "{" + str(value) + "}", value.int):
        assert field.get_db_prep_value(ok, connection) == plain.get_db_prep_value(ok, connection)


def test_a_random_uuid_primary_key_gets_seqid_w004_and_the_rest_nothing():
    """seqid.W004 for UUIDField(primary_key=True, default=uuid.uuid4) (and uuid1), naming the model and
    SeqUUIDField; nothing for integer keys, SeqUUIDField, a UUID key with no default, a proxy."""
    import uuid

    from django.db import models as dj
    from django.test.utils import isolate_apps

    from seqid_orm.django import SeqUUIDField
    from seqid_orm.django.checks import check_models

    with isolate_apps("tests.django.testapp"):

        class Base(dj.Model):
            class Meta:
                abstract = True
                app_label = "testapp"

        class Legacy(Base):
            id = dj.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)

        class Old(Base):
            id = dj.UUIDField(primary_key=True, default=uuid.uuid1)

        class LegacyProxy(Legacy):
            class Meta:
                proxy = True
                app_label = "testapp"

        class Clean(Base):
            id = SeqUUIDField(primary_key=True)

        class Counted(Base):
            id = dj.BigAutoField(primary_key=True)

        class Given(Base):
            id = dj.UUIDField(primary_key=True)  # the caller sets it: nothing random here

        class NotTheKey(Base):
            token = dj.UUIDField(default=uuid.uuid4, unique=True)

        found = check_models([Legacy, Old, LegacyProxy, Clean, Counted, Given, NotTheKey])
    assert [(m.id, m.obj.model.__name__) for m in found] == [("seqid.W004", "Legacy"), ("seqid.W004", "Old")]
    assert "uuid.uuid4()" in found[0].msg and "uuid.uuid1()" in found[1].msg
    assert "SeqUUIDField(primary_key=True" in found[0].hint and "AlterField" in found[0].hint
    assert isinstance(found[0], checks.Warning)


def _new_key() -> str:  # a project's own function wrapping uuid4, as django-silk's keys are made
    import uuid

    return str(uuid.uuid4())


def _fixed_key() -> str:  # one value: not random keys, whatever it looks like
    return "0b6a4f5e-9c1d-4a8e-8f00-000000000001"


def test_seqid_w004_covers_char_keys_wrapped_defaults_and_installed_packages(settings, monkeypatch):
    """Before: W004 missed CharField(default=uuid4) keys (django-silk) and a project's function
    wrapping uuid4; its hint could not be followed for a model of an installed package, and
    silencing it silenced the project's own models too.  Now each is found; an installed package's
    model is told so, with SEQID["RANDOM_KEY_APPS"] to silence that app alone; uuid1 is not
    warned about on SQL Server, which keeps it in order."""
    import sys
    import uuid

    from django.db import models as dj
    from django.test.utils import isolate_apps

    from seqid_orm.django.checks import check_models

    with isolate_apps("tests.django.testapp"):

        class Base(dj.Model):
            class Meta:
                abstract = True
                app_label = "testapp"

        class Silk(Base):
            id = dj.CharField(primary_key=True, max_length=36, default=uuid.uuid4)

        class Wrapped(Base):
            id = dj.CharField(primary_key=True, max_length=36, default=_new_key)

        class Lambda(Base):
            id = dj.UUIDField(primary_key=True, default=lambda: uuid.uuid4())

        class Fixed(Base):
            id = dj.CharField(primary_key=True, max_length=36, default=_fixed_key)

        class Timed(Base):
            id = dj.UUIDField(primary_key=True, default=uuid.uuid1)

        models_ = [Silk, Wrapped, Lambda, Fixed]
        found = check_models(models_)
        assert [m.obj.model.__name__ for m in found] == ["Silk", "Wrapped", "Lambda"]
        assert "CharField primary key filled by uuid.uuid4()" in found[0].msg
        assert "tests.django.test_fields._new_key()" in found[1].msg
        assert "rewrites the table" in found[0].hint and "AlterField" in found[2].hint
        assert 'SEQID = {"RANDOM_KEY_APPS": ["testapp"]}' in found[0].hint

        # a model of an installed package: told so, not to edit it
        monkeypatch.setattr(sys.modules[Silk.__module__], "__file__", "/venv/lib/python3/site-packages/silk/models.py")
        (third_party,) = check_models([Silk])
        assert "belongs to an installed package" in third_party.hint and "history_id_field" in third_party.hint
        monkeypatch.undo()

        settings.SEQID = {"RANDOM_KEY_APPS": ["testapp"]}
        assert check_models(models_) == []
        settings.SEQID = {}

        (wraps,) = check_models([Timed])
        assert "uuid.uuid1()" in wraps.msg and "429 seconds" in wraps.msg
        from django.db import connections

        monkeypatch.setattr(type(connections["default"]), "vendor", "microsoft", raising=False)
        assert check_models([Timed]) == []  # SQL Server orders uuid1 by its time


def test_manage_py_check_runs_seqid_w004_over_the_project(capsys):
    """The app registers the check: the test project's models (seqid's own keys) pass it silently."""
    from django.core.checks import registry

    assert "random_uuid_keys" in {c.__name__ for c in registry.registry.registered_checks}
    call_command("check", "--tag", "models")
    assert "seqid.W004" not in capsys.readouterr().err
