"""Lease namespaces in the stores the tests use: age one (as a store that has served it for a while
holds it) and forget one afterwards; a leased Snowflake's model and its inserts.  Plain functions,
imported by the lease and cluster tests."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


def forget_namespace(namespace: str, sql_urls: list[str], redis_urls: list[str]) -> None:
    import redis

    for url in sql_urls:
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                if sa.inspect(conn).has_table("seqid_worker_leases"):
                    conn.execute(sa.text("DELETE FROM seqid_worker_leases WHERE namespace = :n"), {"n": namespace})
        except sa.exc.OperationalError:
            pass
        finally:
            engine.dispose()
    for url in redis_urls:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        try:
            keys = list(client.scan_iter(match=f"seqid:lease:{{{namespace}}}:*"))
            client.delete(*keys, f"seqid:lease-marks:{{{namespace}}}")
        except redis.RedisError:
            pass
        finally:
            client.close()


def age_namespace(namespace: str, sql_urls: list[str], redis_urls: list[str]) -> None:
    """Record ``namespace`` as first seen long ago (``born`` = 0), as a store that has served it for
    a while holds it: its first holder then has no forgotten holder to wait out.  Tests of that
    wait (a new namespace, a store that lost its state) use a namespace that was not aged."""
    import redis

    from seqid_orm.allocation.stores.sqlalchemy import lease_table

    for url in sql_urls:
        engine = sa.create_engine(url)
        try:
            table = lease_table(sa.MetaData())
            table.create(engine, checkfirst=True)
            with engine.begin() as conn:
                conn.execute(
                    table.insert().values(namespace=namespace, worker_id=-1, token="", expires_at=0, last_timestamp=-1)
                )
        finally:
            engine.dispose()
    for url in redis_urls:
        client = redis.Redis.from_url(url.split("?")[0], socket_connect_timeout=2)
        try:
            client.hset(f"seqid:lease-marks:{{{namespace}}}", mapping={"_born": 0, "_high": -1})
        finally:
            client.close()


LEASE_OPTIONS = (
    "ttl",
    "max_workers",
    "clock_tolerance",
    "create_table",
    "accept_state_loss",
    "connect_timeout",
    "first_id_waits",
    "timeout",
)


def leased(store: object, namespace: str, **kwargs: object):
    """``Snowflake(worker_id=WorkerLease(store, namespace, ...), ...)``: the lease's options (and its
    ``monotonic`` clock) go to the lease, the rest to the generator.  The first id waits out its
    fence (``first_id_waits=True`` unless given): these tests are about the store's faults, whose
    fences outlast a call's deadline; test_first_id_deadline.py tests the refusal without it."""
    from seqid_orm import Snowflake, WorkerLease

    kwargs.setdefault("first_id_waits", True)
    lease_kw = {k: kwargs.pop(k) for k in (*LEASE_OPTIONS, "monotonic") if k in kwargs}
    return Snowflake(worker_id=WorkerLease(store, namespace, **lease_kw), **kwargs)


def keyed_model(table_name: str, gen: object) -> type:
    """A model of ``table_name`` (``id``, ``n``) whose key ``snowflake_pk(gen)`` fills; one per
    allocator, as two deployments of one model would have."""
    from seqid_orm.sqlalchemy import snowflake_pk

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = table_name
        id: Mapped[int] = snowflake_pk(gen)  # type: ignore[arg-type]
        n: Mapped[int] = mapped_column()

    return Row


def insert_rows(engine: sa.Engine, model: type, numbers: range) -> None:
    """One session inserting ``model(n=i)`` for each number, committed."""
    with Session(engine) as session:
        session.add_all([model(n=i) for i in numbers])
        session.commit()
