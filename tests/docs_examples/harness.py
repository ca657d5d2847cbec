"""On which servers the documentation's examples run: each URL an example writes, read as a test server's."""

from __future__ import annotations

import os
import sys

from tests.conftest import MYSQL_URL, POSTGRES_URL, REDIS_URL

_SCHEMA = "seqid_docs"  # PostgreSQL: the examples' own schema (search_path)
_MARIADB = ("seqid_docs_a", "seqid_docs_b")  # two MariaDB ticket servers' databases
_REDIS_DB = 11  # the examples' own Redis database, emptied before each run


def _mysql(database: str) -> str:
    return MYSQL_URL.rsplit("/", 1)[0] + f"/{database}"


def _redis() -> str:
    return REDIS_URL.rsplit("/", 1)[0] + f"/{_REDIS_DB}"


def _postgres() -> str:
    joiner = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{joiner}options=-csearch_path%3D{_SCHEMA}"


#: Each URL an example writes, and the test server it stands for.
SERVERS = {
    "postgresql+psycopg://app@db/app": _postgres,
    "mysql+pymysql://ticket-a/ids": lambda: _mysql(_MARIADB[0]),
    "mysql+pymysql://ticket-b/ids": lambda: _mysql(_MARIADB[1]),
    "redis://cache:6379/0": _redis,
    "redis://127.0.0.1:6379/0": _redis,
}


def fresh_servers() -> None:
    """Empty the examples' databases on every server (once per run)."""
    import redis
    import sqlalchemy as sa

    admin = sa.create_engine(POSTGRES_URL, poolclass=sa.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {_SCHEMA} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {_SCHEMA}")
    admin.dispose()
    admin = sa.create_engine(MYSQL_URL, poolclass=sa.NullPool)
    with admin.begin() as conn:
        for name in _MARIADB:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    client = redis.Redis.from_url(_redis())
    client.flushdb()
    client.close()


def reader_env() -> dict[str, str]:
    """The environment of a reader's shell in this project's virtualenv: its ``bin`` first on ``PATH``
    (``python``, ``django-admin``, ``alembic``, ``uvicorn``), and nothing of the test run's own (no Django
    settings module, no ``PYTHONPATH``: an example sees the installed package, not this checkout's tests)."""
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("PYTHONPATH", None)
    return env


def on_test_servers(source: str) -> str:
    """An example as written, its URLs those of the test servers: the one change a test makes."""
    for written, real in SERVERS.items():
        source = source.replace(written, real())
    return source


__all__ = ["SERVERS", "fresh_servers", "on_test_servers", "reader_env"]
