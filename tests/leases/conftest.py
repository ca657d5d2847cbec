"""Worker-id lease tests: each test leases in a namespace of its own, removed afterwards."""

from __future__ import annotations

import secrets

import pytest

from tests.conftest import MYSQL_URL, POSTGRES_URL, REDIS_URL

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


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


@pytest.fixture
def namespace(sqlite_ticket_url):
    name = f"ns-{secrets.token_hex(5)}"
    yield name
    forget_namespace(name, [POSTGRES_URL, MYSQL_URL, sqlite_ticket_url], [REDIS_URL])
