"""SEQID["SWAP_RANDOM_KEY_APPS"] on each settings module's real database: an app the project cannot
edit (tests/django/thirdparty, shaped as django-silk's and django-q2's keys) gets time-ordered keys,
checked by the database's ORDER BY, while its fields, defaults and migrations stay as they are."""

from __future__ import annotations

import datetime as dt
import sys
import uuid
from io import StringIO

import pytest
from django.core.management import call_command

import seqid_orm
from seqid_orm.django.checks import check_models
from tests.django.thirdparty.models import Request, Task, new_task_id

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_a_swapped_apps_uuid_keys_come_out_in_the_databases_order():
    made = [Request() for _ in range(300)]
    Request.objects.bulk_create(made)
    Request.objects.create(path="/last")
    stored = list(Request.objects.order_by("pk").values_list("pk", "path"))
    assert [pk for pk, _ in stored[:-1]] == [r.pk for r in made]  # ORDER BY id is creation order
    assert stored[-1][1] == "/last"
    assert all(isinstance(pk, uuid.UUID) for pk, _ in stored)
    when = seqid_orm.timestamp_of(made[0].pk)
    assert when is not None and abs(when - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=5)


def test_a_swapped_apps_text_keys_keep_their_form_and_come_out_in_order():
    made = [Task() for _ in range(300)]
    Task.objects.bulk_create(made)
    assert all(isinstance(t.pk, str) and len(t.pk) == 32 and int(t.pk, 16) >= 0 for t in made)  # hex, as before
    assert list(Task.objects.order_by("pk").values_list("pk", flat=True)) == [t.pk for t in made]


def test_the_fields_defaults_and_migrations_are_untouched():
    """The app's contract: its field and default as written (so makemigrations finds nothing to do
    in site-packages), and its own default still the random one when called directly."""
    assert Request._meta.pk.default is uuid.uuid4 and Task._meta.pk.default is new_task_id
    assert Request._meta.pk.deconstruct()[3]["default"] is uuid.uuid4
    out = StringIO()
    call_command("makemigrations", "thirdparty", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
    assert uuid.UUID(new_task_id()).version == 4


def test_w004_is_quiet_for_a_swapped_app_and_names_the_swap_for_an_installed_one(settings, monkeypatch):
    assert check_models([Request, Task]) == []  # swapped: nothing left to warn about
    settings.SEQID = {}
    monkeypatch.setattr(sys.modules[Request.__module__], "__file__", "/venv/lib/python3/site-packages/x/models.py")
    found = check_models([Request, Task])
    assert [m.obj.model for m in found] == [Request, Task]
    assert 'SEQID = {"SWAP_RANDOM_KEY_APPS": ["thirdparty"]}' in found[0].hint
    assert "with no migration" in found[0].hint
