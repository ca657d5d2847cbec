"""Two allocators filling one key column with the same worker ids (two lease
namespaces on one store, one namespace on two stores): before a leased Snowflake's first id of a
worker id is used, its column is read for keys another allocator stamped with it, and the insert
is refused (WorkerIdConflictError) instead of repeating about half of the other's ids.  Real
stores and columns on every database; no row of the refused insert is left."""

from __future__ import annotations

import time

import pytest

from seqid_orm import Snowflake
from seqid_orm.errors import WorkerIdConflictError
from tests.conftest import volatile_ok
from tests.leases.stores import insert_rows, keyed_model, leased

sa = pytest.importorskip("sqlalchemy")


def refused(call, *args, match: str | None = None) -> WorkerIdConflictError:
    """The WorkerIdConflictError an insert raised (SQLAlchemy wraps an error of a column default
    in a StatementError, as it does every error of a Python default, the original as ``.orig``)."""
    with pytest.raises(sa.exc.StatementError, match=match) as info:
        call(*args)
    assert isinstance(info.value.orig, WorkerIdConflictError)
    return info.value.orig


def store_of(engine, sqlite_ticket_url: str) -> str:
    """The lease store on the key column's own server (SQLite: a file of its own)."""
    return sqlite_ticket_url if engine.dialect.name == "sqlite" else engine.url.render_as_string(hide_password=False)


def test_two_namespaces_filling_one_column_are_refused(
    engine, table_name, namespace, other_namespace, sqlite_ticket_url
):
    store = store_of(engine, sqlite_ticket_url)
    first = leased(store, namespace, ttl=30)
    second = leased(store, other_namespace, ttl=30)
    a, b = keyed_model(table_name, first), keyed_model(table_name, second)
    a.metadata.create_all(engine)
    try:
        insert_rows(engine, a, range(100))
        refused(insert_rows, engine, b, range(100, 200), match=rf"{table_name}\.id .*holds the key \d+.* worker id 0")
        refused(insert_rows, engine, b, range(100, 200))  # refused until fixed, not once
        insert_rows(engine, a, range(200, 300))  # the first allocator goes on
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(a.__table__)).scalar() == 200
            assert conn.execute(sa.select(sa.func.max(a.n))).scalar() == 299  # nothing of the refused inserts
        # The first namespace's next holder of worker id 0 (a restart) inherits its mark: no refusal.
        first.close()
        again = leased(store, namespace, ttl=30)
        insert_rows(engine, keyed_model(table_name, again), range(300, 310))
        again.close()
    finally:
        a.metadata.drop_all(engine)
        first.close()
        second.close()


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
def test_one_namespace_on_two_stores_is_refused(engine, table_name, namespace, redis_url):
    on_postgres = leased(engine.url.render_as_string(hide_password=False), namespace, ttl=30)
    on_redis = leased(volatile_ok(redis_url), namespace, ttl=30)
    a, b = keyed_model(table_name, on_postgres), keyed_model(table_name, on_redis)
    a.metadata.create_all(engine)
    try:
        insert_rows(engine, a, range(50))
        refused(insert_rows, engine, b, range(50, 100), match="the same namespace on another store")
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(a.__table__)).scalar() == 50
    finally:
        a.metadata.drop_all(engine)
        on_postgres.close()
        on_redis.close()


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_keys_of_a_worker_id_configured_before_leases_refuse_only_while_it_may_still_write(
    engine, table_name, namespace, other_namespace, sqlite_ticket_url
):
    """Moving a column from a configured worker id to leases: the configured process's keys count
    within the lease's ttl + clock tolerance (it may still be running), not after.  Each half leases
    worker id 0 in a namespace where it was never leased (an aged namespace), so no previous holder's
    mark covers the configured keys and the window alone decides: without the wait, or with the first
    half's 6 s window, the second half is refused too."""
    configured = Snowflake(worker_id=0)
    old = keyed_model(table_name, configured)
    old.metadata.create_all(engine)
    try:
        insert_rows(engine, old, range(20))
        # within: a window of 6 s, which the lease's first acquire on a busy machine stays inside (with
        # ttl 0.5 s and a tolerance of 0.2 s, CI's acquire once took longer and the keys were history)
        live = leased(sqlite_ticket_url, namespace, ttl=5.0, clock_tolerance=1.0)
        refused(insert_rows, engine, keyed_model(table_name, live), range(20, 40), match="configured worker_id")
        live.close()
        insert_rows(engine, old, range(20, 30))  # the configured process writes on, then stops
        time.sleep(0.8)  # past the next lease's ttl + tolerance (0.7 s): the configured keys are history
        later = leased(sqlite_ticket_url, other_namespace, ttl=0.5, clock_tolerance=0.2)
        insert_rows(engine, keyed_model(table_name, later), range(30, 50))
        assert later.stats().worker_id == 0  # the configured process's worker id, never leased in this namespace
        later.close()
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(old.__table__)).scalar() == 50
    finally:
        old.metadata.drop_all(engine)
