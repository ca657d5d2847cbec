"""TicketField through the Django ORM, on the database of each settings module."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection, models, transaction

from seqid_orm.allocation.tickets import TicketSequence
from seqid_orm.django import TicketField, ticket_sequence
from seqid_orm.errors import InvalidArgumentError, InvalidIDError
from tests.django.testapp.models import Order
from tests.tickets.procs import Worker, start_together

# Transactions of their own: the ticket store writes on a connection of its own, which on SQLite
# would wait for a test-wide transaction's write lock until it ends.
pytestmark = pytest.mark.django_db(transaction=True)


def sqlalchemy_url() -> str:
    """The SQLAlchemy URL of Django's default test database (for a second kind of client)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    driver = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}[connection.vendor]
    return f"{driver}://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def test_the_seqid_app_migration_created_the_ticket_table():
    assert "seqid_tickets" in connection.introspection.table_names()
    call_command("makemigrations", "seqid", "--check", "--dry-run", verbosity=0)


def test_pk_is_known_before_save_and_order_by_pk_is_creation_order():
    orders = [Order(note=str(i)) for i in range(35)]
    made = [o.pk for o in orders]
    assert all(isinstance(pk, int) for pk in made) and made == sorted(made)
    for o in orders:
        o.save()
    assert list(Order.objects.order_by("pk").values_list("note", flat=True)) == [str(i) for i in range(35)]


def test_bulk_create_keeps_the_ids_drawn_at_construction():
    orders = [Order(note=str(i)) for i in range(100)]
    made = [o.pk for o in orders]
    Order.objects.bulk_create(orders, batch_size=30)
    assert list(Order.objects.order_by("pk").values_list("pk", flat=True)) == made


def test_the_field_is_not_editable_and_refuses_what_django_would_coerce():
    field = Order._meta.get_field("id")
    assert field.editable is False
    for bad in (1.5, True, -3, "12a"):
        with pytest.raises(ValidationError):
            field.clean(bad, None)
    assert field.to_python("42") == 42


def test_deconstruct_keeps_the_sequence_and_its_options():
    field = TicketField("invoices", using="other", block_size=5, primary_key=True)
    _name, path, args, kwargs = field.deconstruct()
    assert path == "seqid_orm.django.TicketField"
    assert args == ["invoices"]
    assert kwargs == {"using": "other", "block_size": 5, "primary_key": True}
    rebuilt = TicketField(*args, **kwargs)
    assert (rebuilt.sequence_name, rebuilt.using, rebuilt.block_size) == ("invoices", "other", 5)


def test_bad_definitions_raise_typed_errors():
    with pytest.raises(InvalidIDError, match="lower case"):
        TicketField("Orders")
    with pytest.raises(InvalidArgumentError, match="no known ticket server"):
        TicketField("orders", url="ftp://example.org")
    with pytest.raises(InvalidArgumentError, match="block_size"):
        TicketField("orders", block_size=0)
    with pytest.raises(InvalidArgumentError, match="not both"):
        TicketField("orders", using="default", url="redis://127.0.0.1/0")


def test_system_checks_name_a_missing_alias_and_a_missing_app(monkeypatch):
    class Probe(models.Model):
        id = TicketField("orders", using="nowhere", primary_key=True)

        class Meta:
            app_label = "testapp"

    errors = Probe._meta.get_field("id").check()
    assert [e.id for e in errors] == ["seqid.E004"]
    monkeypatch.setattr("seqid_orm.django.tickets._app_installed", lambda: False)
    warnings = Order._meta.get_field("id").check()
    assert [w.id for w in warnings] == ["seqid.W002"] and isinstance(warnings[0], checks.Warning)


@pytest.mark.slow
@pytest.mark.server_database
def test_an_open_atomic_block_that_drew_ids_blocks_no_other_process():
    """The ids come from the store's own connection: this thread's open transaction holds no lock
    on the ticket row, so another process (SQLAlchemy, one round trip per id) is not kept waiting."""
    url = sqlalchemy_url()
    with transaction.atomic():
        Order.objects.bulk_create([Order(note="held") for _ in range(25)])  # 3 reservations of 10
        other = Worker(servers=url, name="orders", count=20, options={"block_size": 1, "double_buffer": False})
        try:
            start_together([other])
            other.finish(timeout=20)
        finally:
            other.stop()
        held = set(Order.objects.values_list("pk", flat=True))
    assert not held & set(other.ids())


@pytest.mark.server_database
def test_django_and_sqlalchemy_processes_share_one_sequence():
    django_ids = [Order().pk for _ in range(30)]
    with TicketSequence("orders", sqlalchemy_url(), block_size=10, create_table=False) as seq:
        sqlalchemy_ids = seq.next_ids(30)
    more_django_ids = [Order().pk for _ in range(30)]
    flat = django_ids + sqlalchemy_ids + more_django_ids
    assert len(set(flat)) == 90


def test_one_sequence_object_per_process_and_server():
    assert ticket_sequence("orders", block_size=10) is Order._meta.get_field("id").sequence()
    assert ticket_sequence("orders", block_size=11) is not Order._meta.get_field("id").sequence()


def test_a_sequence_on_another_kind_of_server(redis_url):
    """url= puts the sequence on any ticket server, here Redis, instead of a Django alias."""
    import secrets

    name = f"dj-{secrets.token_hex(4)}"
    field = TicketField(name, url=redis_url, block_size=7, accept_state_loss=True)
    ids = [field.new_value() for _ in range(20)]
    assert ids == list(range(1, 21)) and field.sequence().fetches >= 3
    assert field.sequence() is ticket_sequence(name, url=redis_url, block_size=7, accept_state_loss=True)
    import redis

    redis.Redis.from_url(redis_url).delete(f"seqid:tickets:{name}")


def test_an_in_memory_sqlite_database_is_refused_with_the_way_out(monkeypatch):
    from django.db import connections

    from seqid_orm.allocation.stores.django import DjangoTicketStore

    memory = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    scratch = connections.configure_settings({"default": memory, "scratch": memory})["scratch"]
    monkeypatch.setitem(connections.settings, "scratch", scratch)
    with pytest.raises(InvalidArgumentError, match="in-memory SQLite") as info:
        DjangoTicketStore("scratch").allocate("orders", 1, 1, 1, 10)
    assert "['TEST']['NAME']" in str(info.value)


def test_a_counter_behind_the_keys_in_the_table_is_refused_then_repaired():
    """The field binds its sequence to its column: keys already in the table (a restored counter, an
    adopted table) are never handed out again: a block holding one is refused (keys beyond the block
    are not its business); repair() moves the counter above them."""
    from seqid_orm.django import close_ticket_sequences
    from seqid_orm.errors import CounterBelowDataError

    close_ticket_sequences()
    Order.objects.bulk_create([Order(id=3 + i, note="old") for i in range(3)])  # id=: no id drawn
    with pytest.raises(CounterBelowDataError, match="already holds the key 5"):
        Order(note="new")  # the first block, 1..10, holds the keys 3..5
    ticket_sequence("orders", block_size=10).repair()
    made = Order(note="new")
    assert made.pk == 11  # the refused block 1..10 stays spent: repair never lowers a counter
    made.save()
    assert Order.objects.count() == 4


@pytest.mark.etcd
@pytest.mark.system("etcd")
def test_a_ticket_field_and_a_leased_snowflake_on_etcd(settings):
    """url= puts a TicketField's sequence on etcd; a lease url puts SnowflakeField's worker id there."""
    import secrets

    from seqid_orm.django import close_snowflakes, settings_snowflake
    from tests.django.testapp.models import Event
    from tests.servers.etcd import EtcdCluster
    from tests.system import need

    need("etcd")
    name = f"dj-{secrets.token_hex(4)}"
    with EtcdCluster(3) as cluster:
        field = TicketField(name, url=cluster.url, block_size=7)
        assert [field.new_value() for _ in range(20)] == list(range(1, 21))
        lease = {"url": cluster.url, "namespace": name, "ttl": 1, "clock_tolerance": 0}
        settings.SEQID = {"SNOWFLAKE": {"lease": lease}}
        try:
            gen = settings_snowflake()
            events = [Event.objects.create(name=str(i)) for i in range(5)]
            assert {gen.decode(e.id).worker_id for e in events} == {gen.source.worker_id}
            assert [r.worker_id for r in gen.source.store.leases(name) if r.held] == [gen.source.worker_id]
        finally:
            close_snowflakes()
            field.sequence().close()


@pytest.mark.server_database  # counts the server's sessions on the test database
def test_a_floor_read_from_a_thread_of_seqids_own_leaves_no_connection_open():
    """A TicketField's next block is reserved, and its floor read, by a thread of seqid's own (the
    prefetch); the Django connection that read opened there was closed by nothing, and a test
    database could not be dropped ("being accessed by other users").  Now the read closes what
    it opened, and once the sequences are closed no session of this process is left on the
    database but the test's own (PostgreSQL's and MariaDB's session lists)."""
    from seqid_orm.django import close_ticket_sequences

    for i in range(35):  # blocks of 10: prefetches run in the sequence's own thread
        Order(note=str(i)).save()
    close_ticket_sequences()

    def others() -> int:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                sql = (
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            else:  # MariaDB/MySQL: the test database is this xdist worker's own, as on PostgreSQL
                sql = (
                    "SELECT count(*) FROM information_schema.PROCESSLIST"
                    " WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
                )
            cursor.execute(sql)
            return int(cursor.fetchone()[0])

    import time

    deadline = time.monotonic() + 5
    while (left := others()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == 0


def test_a_ticket_row_another_transaction_holds_never_holds_a_call_past_its_deadline():
    """Another transaction holds the sequence's row (``SELECT ... FOR UPDATE``; SQLite: its write lock) for ten
    seconds: every call that needs a reservation ends in StoreTimeoutError within its deadline and a second
    (the store's call waited on the lock with no end, and every later call behind it on the store's own
    lock), and once the row is free the sequence goes on, no id repeated."""
    import threading
    import time

    from django.db import connections

    from seqid_orm.errors import StoreTimeoutError

    sequence = ticket_sequence("locked_row", block_size=2, timeout=1.0)
    first = [sequence.next_id() for _ in range(2)]  # the row exists, the block is spent
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        holder = connections.create_connection("default")  # a connection belongs to the thread that made it
        with holder.cursor() as cursor:
            if holder.vendor == "sqlite":
                cursor.execute("BEGIN IMMEDIATE")
            else:
                holder.set_autocommit(False)
                cursor.execute("SELECT next_value FROM seqid_tickets WHERE name = %s FOR UPDATE", ["locked_row"])
            locked.set()
            release.wait(30)
            cursor.execute("ROLLBACK")
        holder.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert locked.wait(10)
    spans, refused, drawn = [], 0, list(first)
    try:
        until = time.monotonic() + 10
        while time.monotonic() < until:  # what memory holds (a prefetched block) first, then refusals
            began = time.monotonic()
            try:
                drawn.append(sequence.next_id())
            except StoreTimeoutError:
                refused += 1
            spans.append(time.monotonic() - began)
    finally:
        release.set()
        thread.join(30)
    assert refused >= 4 and max(spans) < 1.0 + 0.5 + 1.0, spans  # timeout, the follower's grace, a second
    drawn += [sequence.next_id() for _ in range(6)]
    assert len(set(drawn)) == len(drawn) and drawn == sorted(drawn)


def test_migrate_keeps_a_ticket_table_a_store_made_and_refuses_one_that_is_not_seqids(capsys):
    """The seqid app's migration creates its tables, or keeps those a store opened with create_table=True made
    first (before: `relation "seqid_tickets" already exists`, and only --fake-initial got past it), saying so."""
    from django.core.exceptions import ImproperlyConfigured

    call_command("migrate", "seqid", "zero", verbosity=0)
    try:
        with TicketSequence("made-first", sqlalchemy_url(), block_size=5, create_table=True) as seq:
            made = seq.next_ids(3)  # the table is the store's now
        call_command("migrate", "seqid", verbosity=1)
        assert "seqid: table seqid_tickets already exists" in capsys.readouterr().out
        assert ticket_sequence("made-first", block_size=5).next_id() > max(made)  # the store's row, kept
        call_command("migrate", "seqid", "zero", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE seqid_tickets (name VARCHAR(64) PRIMARY KEY, total BIGINT)")
        with pytest.raises(ImproperlyConfigured, match=r"without column.*next_value"):
            call_command("migrate", "seqid", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE seqid_tickets")
    finally:
        from seqid_orm.django import close_ticket_sequences

        close_ticket_sequences()
        call_command("migrate", verbosity=0)  # every app, should one depend on seqid's


@pytest.mark.server_database  # ends the server's sessions of the store
def test_a_store_connection_the_server_ended_is_opened_again_within_the_call():
    """The stores' connection is their own and lives long; the server ended its session (a restart, its
    wait_timeout, an operator's kill) and the next call tried again on a fresh connection within the same
    call (the one SQL store runner, as the SQLAlchemy store does), where before the runner it was the
    Django store's own copy of that policy.  Both stores, on the ticket row and the lease row."""
    import secrets

    from seqid_orm.allocation.stores.base import TicketRow
    from seqid_orm.allocation.stores.django import DjangoLeaseStore, DjangoTicketStore

    def end_other_sessions() -> int:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                return int(cursor.fetchone()[0])
            cursor.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
            )
            ids = [row[0] for row in cursor.fetchall()]
            for pid in ids:
                cursor.execute(f"KILL CONNECTION {int(pid)}")
            return len(ids)

    name = f"ended_{secrets.token_hex(3)}"
    tickets, leases = DjangoTicketStore("default", timeout=3.0), DjangoLeaseStore("default", timeout=3.0)
    try:
        tickets.create(TicketRow(name, 1, 1, 1))
        first = tickets.allocate(name, 10, 1, 1, 10**9)
        grant = leases.acquire(name, "a" * 32, 4, 60_000, 0)
        assert grant is not None
        assert end_other_sessions() >= 2  # the two stores' connections
        second = tickets.allocate(name, 10, 1, 1, 10**9)  # the first try meets the ended session
        assert second == (first[0] + 10, 10), (first, second)  # a lost try reserved nothing: no gap here
        assert [row.worker_id for row in leases.leases(name) if row.held] == [grant.worker_id]
    finally:
        tickets.close()
        leases.close()
