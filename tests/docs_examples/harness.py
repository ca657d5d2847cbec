"""How the documentation's examples run: the servers their URLs name, Django, top-level ``await``."""

from __future__ import annotations

import ast
import asyncio
import inspect
import textwrap
from typing import Any

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


def django_setup() -> None:
    """Django on an in-memory SQLite database, with seqid's app and the examples' app."""
    import django
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        INSTALLED_APPS=["django.contrib.contenttypes", "seqid_orm.django", "tests.docs_examples"],
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        SEQID={"SNOWFLAKE": {"worker_id": 1}},
        USE_TZ=True,
    )
    django.setup()


def forget_models() -> None:
    """Each document defines its own models (several call theirs ``Order``): forget the last one's."""
    from django.apps import apps

    apps.all_models["docs_examples"].clear()
    apps.get_app_config("docs_examples").models.clear()
    apps.clear_cache()


_fresh: list[bool] = []


def setup(namespace: dict[str, Any]) -> None:
    """Before each document: the servers' example databases emptied (once a run), Django ready,
    the document's models its own, in the examples' app (their module is tests.docs_examples.models)."""
    if not _fresh:
        fresh_servers()
        _fresh.append(True)
    django_setup()
    forget_models()
    namespace["__name__"] = "tests.docs_examples.models"


def evaluate(example: Any) -> None:
    """Run one ``python`` block as a module's code: its URLs read as the test servers', a top-level
    ``await`` run on a loop of its own, line numbers as in the document."""
    source = textwrap.dedent(example.parsed)
    for written, real in SERVERS.items():
        source = source.replace(written, real())
    source = "\n" * (example.line) + source  # tracebacks point into the document
    code = compile(source, str(example.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    result = eval(code, example.namespace)
    if inspect.iscoroutine(result):
        asyncio.run(result)


__all__ = ["SERVERS", "evaluate", "fresh_servers", "setup"]
