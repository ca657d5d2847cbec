"""seqid_orm.django.bulk_insert on each real database: COPY on PostgreSQL with psycopg 3, bulk_create
elsewhere; values prepared as bulk_create prepares them, checked before anything is sent; one transaction."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from seqid_orm.django import bulk_insert
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError
from tests.django.testapp.models import Author, Book, Tag, Visit

pytestmark = pytest.mark.django_db


def copies() -> bool:
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return connection.vendor == "postgresql" and bool(is_psycopg3)


class Statements:
    """The SQL Django's cursors run (COPY goes to psycopg's cursor directly, so it is not seen here)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        self.seen.append(sql)
        return execute(sql, params, many, context)

    def inserts(self) -> list[str]:
        return [s for s in self.seen if s.lstrip().upper().startswith("INSERT")]


def db_rows(model, *columns):
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(model._meta.get_field(c).column) for c in columns)
    order = connection.ops.quote_name(model._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {names} FROM {table} ORDER BY {order}")
        return cursor.fetchall()


def test_instances_go_in_with_their_keys_in_database_order():
    authors = [Author(name=f"a{i}") for i in range(2_500)]
    statements = Statements()
    with connection.execute_wrapper(statements):
        saved = bulk_insert(authors)
    assert saved is not authors and saved == authors
    assert all(a._state.db == "default" and not a._state.adding for a in authors)
    assert (statements.inserts() == []) == copies()  # COPY on PostgreSQL + psycopg 3, INSERTs elsewhere
    stored = db_rows(Author, "id", "name")  # ORDER BY id, asked of the database: the order they were built in
    assert [Author._meta.pk.to_python(i) for i, _ in stored] == [a.pk for a in authors]
    assert [n for _, n in stored] == [f"a{i}" for i in range(2_500)]
    books = bulk_insert(Book(author=authors[i % 7], title=f"t{i}") for i in range(300))
    assert Book.objects.filter(author=authors[3]).count() == len(range(3, 300, 7))
    assert Author.objects.get(pk=authors[5].pk).books.order_by("pk").first() == books[5]


def test_every_kind_of_value_goes_in_as_save_would_send_it():
    when = dt.datetime(2026, 11, 24, 12, 30, 15, 123456, tzinfo=dt.timezone.utc)
    chosen = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    visits = [Visit(pk=10 + i, created_at=when + dt.timedelta(seconds=i), seq_id=None) for i in range(5)]
    visits.append(Visit(pk=99, created_at=None, seq_id=str(chosen)))  # text, as a form posts it
    bulk_insert(visits)
    got = {v.pk: (v.created_at, v.seq_id) for v in Visit.objects.all()}
    assert got == {
        **{10 + i: (when + dt.timedelta(seconds=i), None) for i in range(5)},
        99: (None, chosen),
    }


def test_a_key_the_database_assigns_goes_through_bulk_create_and_comes_back():
    visits = bulk_insert([Visit(created_at=None) for _ in range(20)])
    assert Visit.objects.count() == 20
    if connection.features.can_return_rows_from_bulk_insert:
        assert sorted(v.pk for v in visits) == sorted(Visit.objects.values_list("pk", flat=True))


def test_bad_values_raise_before_anything_is_sent():
    cases = [
        [Author(name="ok"), Author(id="not a uuid", name="bad")],  # SeqUUIDField's own message and code
        [Visit(pk=1, created_at="yesterday")],  # DateTimeField's
        [Author(id=True, name="a bool")],  # refused by SeqUUIDField, as documented
    ]
    for objs in cases:
        statements = Statements()
        # as around bulk_create, a savepoint lets the test's own transaction go on after the error
        with pytest.raises(ValidationError), connection.execute_wrapper(statements), transaction.atomic():
            bulk_insert(objs)
        assert statements.inserts() == []
    assert Author.objects.count() == Visit.objects.count() == 0


def test_a_load_that_fails_midway_leaves_none_of_its_rows():
    kept = Author.objects.create(name="kept")
    authors = [Author(name=f"n{i}") for i in range(3_000)]
    authors[2_222].pk = kept.pk  # the server refuses this one, after taking the rows before it
    with pytest.raises(IntegrityError), transaction.atomic():
        bulk_insert(authors)
    assert list(Author.objects.values_list("name", flat=True)) == ["kept"]
    assert all(a._state.adding for a in authors)


def test_refusals_of_the_arguments():
    assert bulk_insert([]) == []
    with pytest.raises(ArgumentTypeError, match="one model"):
        bulk_insert([Author(name="a"), Tag(name="t")])
    with pytest.raises(ArgumentTypeError, match="model instances"):
        bulk_insert([{"name": "a"}])  # type: ignore[list-item]
    assert Author.objects.count() == Tag.objects.count() == 0


def test_multi_table_inheritance_is_refused_as_bulk_create_refuses_it():
    from django.db import models
    from django.test.utils import isolate_apps

    with isolate_apps("tests.django.testapp"):

        class Child(Author):
            extra = models.IntegerField(default=0)

            class Meta:
                app_label = "testapp"

        with pytest.raises(InvalidArgumentError, match="inherits"):
            bulk_insert([Child(name="c")])
