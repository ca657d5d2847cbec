"""A Snowflake leased through Django settings, on the database of each settings module."""

from __future__ import annotations

import os
import secrets
import time

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from seqid_orm.allocation.leases import WorkerLease
from seqid_orm.django import close_snowflakes, settings_snowflake
from tests.django.testapp.models import Event

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def leased_settings(settings):
    # a first id waits out the namespace's cold start (ttl + tolerance: 10 s, past the 5 s timeout)
    lease = {"namespace": "dj-events", "using": "default", "ttl": 5, "first_id_waits": True}
    settings.SEQID = {"SNOWFLAKE": {"lease": lease}}
    yield settings
    close_snowflakes()


def test_the_lease_table_comes_from_the_app_migration():
    assert "seqid_worker_leases" in connection.introspection.table_names()
    call_command("makemigrations", "seqid", "--check", "--dry-run", verbosity=0)


def test_snowflake_field_draws_from_a_leased_worker_id(leased_settings):
    gen = settings_snowflake()
    assert isinstance(gen.source, WorkerLease)
    with transaction.atomic():  # the lease is taken on seqid's own connection, not this transaction's
        events = [Event(name=str(i)) for i in range(50)]
        Event.objects.bulk_create(events)
    worker = gen.source.worker_id
    assert {gen.decode(e.id).worker_id + 32 * gen.decode(e.id).datacenter_id for e in events} == {worker}
    rows = gen.source.store.leases("dj-events")
    assert [r.worker_id for r in rows if r.held] == [worker]
    assert settings_snowflake() is gen  # one generator per process and configuration


def test_without_first_id_waits_a_first_id_in_a_cold_start_is_refused_at_once(settings):
    """The lease settings reach the lease: without ``first_id_waits`` a save during the cold start
    fails within the lease's timeout (WorkerIdNotReadyError, no row), it does not hold the request."""
    from seqid_orm.errors import WorkerIdNotReadyError

    lease = {"namespace": f"dj-cold-{secrets.token_hex(4)}", "using": "default", "ttl": 5, "timeout": 1}
    settings.SEQID = {"SNOWFLAKE": {"lease": lease}}
    try:
        before = Event.objects.count()
        began = time.monotonic()
        with pytest.raises(WorkerIdNotReadyError, match="safe to use in"):
            Event.objects.create(name="cold")
        assert time.monotonic() - began < 3 and Event.objects.count() == before
    finally:
        close_snowflakes()


def test_a_lease_and_a_worker_id_together_are_refused(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.SEQID = {"SNOWFLAKE": {"worker_id": 3, "lease": {"namespace": "x"}}}
    with pytest.raises(ImproperlyConfigured, match="not both"):
        settings_snowflake()
    settings.SEQID = {"SNOWFLAKE": {"lease": {"using": "default"}}}
    with pytest.raises(ImproperlyConfigured, match="namespace"):
        settings_snowflake()


def test_two_namespaces_filling_one_column_are_refused(settings):
    """A second lease namespace for Event's SnowflakeField: its first id finds the first namespace's
    keys with its worker id in the column and is refused (WorkerIdConflictError), leaving no row."""
    from seqid_orm.errors import WorkerIdConflictError

    suffix = secrets.token_hex(4)

    def lease(name: str) -> dict[str, object]:
        options = {"namespace": f"dj-{name}-{suffix}", "using": "default", "ttl": 1, "clock_tolerance": 0.5}
        options["max_workers"] = 1  # one worker id in each namespace: the second takes what the first stamps
        return {"SNOWFLAKE": {"lease": options}}

    try:
        settings.SEQID = lease("b")  # the second namespace exists already (its cold start is over)
        settings_snowflake().source.acquire()
        close_snowflakes()
        settings.SEQID = lease("a")
        first = [Event.objects.create(name=str(i)) for i in range(3)]
        settings.SEQID = lease("b")
        with pytest.raises(WorkerIdConflictError, match=rf"{Event._meta.db_table}\.id holds the key {first[0].id}"):
            Event.objects.create(name="b")
        assert sorted(Event.objects.values_list("name", flat=True)) == ["0", "1", "2"]
    finally:
        close_snowflakes()


def test_a_forked_child_leases_a_worker_id_of_its_own(settings):
    """gunicorn --preload: a leased generator taken in the parent, ids made in a forked child. The
    child's generator takes its own worker id over its own connection (before, the inherited
    Django lease store had no after_fork(), and every id in the child raised AttributeError)."""
    lease = {"namespace": f"dj-fork-{secrets.token_hex(4)}", "using": "default", "ttl": 1, "clock_tolerance": 0}
    settings.SEQID = {"SNOWFLAKE": {"lease": {**lease, "first_id_waits": True}}}
    try:
        parent = settings_snowflake()
        parent.source.acquire()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its worker id, or the error, and leave at once
            code = 1
            try:
                child = settings_snowflake()
                os.write(write, str(child.decode(child.next_id()).worker_id).encode())
                child.close()
                code = 0
            except BaseException as exc:
                os.write(write, repr(exc).encode()[:500])
            finally:
                os._exit(code)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        said = os.read(read, 1000).decode()
        os.close(read)
        assert os.waitstatus_to_exitcode(status) == 0, said
        assert int(said) != parent.source.worker_id
    finally:
        close_snowflakes()


def test_threads_making_the_first_call_at_once_share_one_generator(settings):
    """Sixteen threads ask for the settings' generator at once: one is built (two on one worker id
    could make the same ids; two leases would take two worker ids for one process)."""
    import threading

    lease = {"namespace": f"dj-first-{secrets.token_hex(4)}", "using": "default"}
    settings.SEQID = {"SNOWFLAKE": {"lease": lease}}
    start = threading.Barrier(16)
    made: list[object] = []

    def first() -> None:
        start.wait()
        made.append(settings_snowflake())

    threads = [threading.Thread(target=first) for _ in range(16)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(made) == 16 and len({id(g) for g in made}) == 1
    finally:
        close_snowflakes()
