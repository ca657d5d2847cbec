"""Ticket servers under test: the shared PostgreSQL, MariaDB and Redis, and a SQLite file.

Each test draws from a sequence name of its own (``seq_name``), so tests never see each other's
counters on the shared servers; the rows and keys are removed afterwards.
"""

from __future__ import annotations

import secrets

import pytest

from tests.conftest import MYSQL_URL, POSTGRES_URL

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


@pytest.fixture
def seq_name(sqlite_ticket_url):
    """A fresh sequence name; its row (or Redis key) is deleted after the test on every server used."""
    name = f"t-{secrets.token_hex(6)}"
    yield name
    forget(name, [POSTGRES_URL, MYSQL_URL, sqlite_ticket_url])


def forget(name: str, sql_urls: list[str], redis_urls: tuple[str, ...] = ()) -> None:
    """Delete sequence ``name`` wherever it may have been created."""
    from tests.conftest import REDIS_URL

    for url in sql_urls:
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                if sa.inspect(conn).has_table("seqid_tickets"):
                    conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name = :n"), {"n": name})
        except sa.exc.OperationalError:
            pass  # a server that is down was reported by its own fixture
        finally:
            engine.dispose()
    import redis

    for url in (REDIS_URL, *redis_urls):
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        try:
            client.delete(f"seqid:tickets:{name}")
        except redis.RedisError:
            pass
        finally:
            client.close()
