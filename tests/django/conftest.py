"""pytest-django fixtures: each configured server must answer before Django builds test databases."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connections

from tests.conftest import unavailable

# the multi-db tests need the mixed-vendor settings module
collect_ignore = [] if "legacy" in settings.DATABASES else ["test_multidb.py"]


@pytest.fixture(scope="session", autouse=True)
def _databases_reachable(django_db_blocker):
    for alias, config in settings.DATABASES.items():
        if config["ENGINE"].endswith("sqlite3"):
            continue
        try:
            with django_db_blocker.unblock():
                connections[alias].ensure_connection()
        except Exception as exc:  # any driver error means: not reachable
            unavailable(f"Django database {alias!r} ({config['ENGINE']})", f"{config['HOST']}:{config['PORT']}", exc)
        finally:
            connections[alias].close()


@pytest.fixture(autouse=True)
def _fresh_ticket_sequences():
    """Each test starts without cached ticket sequences: TransactionTestCase flushes the ticket
    table after a test, which a sequence still holding segments would rightly refuse to follow."""
    yield
    from seqid_orm.django import close_ticket_sequences

    close_ticket_sequences()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of a settings module talks to its servers: mark them, so `-m postgres` selects."""
    engines = {config["ENGINE"].rsplit(".", 1)[-1] for config in settings.DATABASES.values()}
    marks = {"postgresql": "postgres", "mysql": "mysql", "sqlite3": "sqlite"}
    for item in items:
        for engine in engines:
            item.add_marker(marks.get(engine, engine))
    # Tests that reach the test database from another process need a server: with only SQLite's
    # in-memory test database they are deselected (counted in the summary), never skipped.
    # Tests of what only PostgreSQL does (adopted keys) run under the settings whose default database is
    # PostgreSQL: elsewhere deselected, never skipped; tests of a project on an SQLite file of its own run once,
    # under the SQLite settings.
    for marker, kept in (
        ("server_database", engines != {"sqlite3"}),
        ("postgres_settings", settings.DATABASES["default"]["ENGINE"].endswith("postgresql")),
        ("sqlite_settings", engines == {"sqlite3"}),
    ):
        dropped = [] if kept else [i for i in items if i.get_closest_marker(marker) is not None]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i.get_closest_marker(marker) is None]


def all_databases():
    return list(settings.DATABASES)
