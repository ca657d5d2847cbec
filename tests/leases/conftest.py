"""Worker-id lease tests: each test leases in a namespace of its own, removed afterwards."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.conftest import MYSQL_URL, POSTGRES_URL, REDIS_URL
from tests.leases.stores import age_namespace, forget_namespace

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


def _aged_namespace(sqlite_ticket_url: str) -> Iterator[str]:
    name = f"ns-{secrets.token_hex(5)}"
    age_namespace(name, [POSTGRES_URL, MYSQL_URL, sqlite_ticket_url], [REDIS_URL])
    yield name
    forget_namespace(name, [POSTGRES_URL, MYSQL_URL, sqlite_ticket_url], [REDIS_URL])


@pytest.fixture
def namespace(sqlite_ticket_url):
    """A namespace of the test's own, already known to every store (see :func:`age_namespace`)."""
    yield from _aged_namespace(sqlite_ticket_url)


@pytest.fixture
def other_namespace(sqlite_ticket_url):
    """A second namespace, aged like ``namespace`` (two allocators of one column, say)."""
    yield from _aged_namespace(sqlite_ticket_url)


@pytest.fixture
def new_namespace(sqlite_ticket_url):
    """A namespace no store has seen: its first holders wait one ttl plus the clock tolerance."""
    name = f"ns-{secrets.token_hex(5)}"
    yield name
    forget_namespace(name, [POSTGRES_URL, MYSQL_URL, sqlite_ticket_url], [REDIS_URL])
