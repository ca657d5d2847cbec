"""Version matrix beyond the default .venv (which runs everything on the machine's python3: Python
3.11, SQLAlchemy 2.1, Django 5.2 with every settings module, and the slow process and fault tests).

Each session runs what its versions can break, not everything again:

    nox -s core            # Python 3.10 and 3.13: the stdlib-only core, then the adapters and the
                           # awaitable API on SQLite and Redis
    nox -s sqlalchemy20    # the SQLAlchemy adapter and Alembic on SQLAlchemy 2.0.x
    nox -s django42 django60 django61   # Django 4.2 (Python 3.11), 6.0 (3.12), 6.1 (3.13)

Tests marked ``slow`` (real processes, private servers, faults: what the operating system and the
servers decide, not the Python, SQLAlchemy or Django version) and ``big`` (100,000 rows, for what a
server does at that size; smaller tests walk the same paths here) run in the default .venv only.
Django 5.2 is the .venv's own (``make test-django``), so it has no session here; the other Django
versions run the settings modules whose backends they change, each backend once beyond the .venv's
5.2: 4.2 on MariaDB (its UUID column is char(32), before Django 5.0's uuid type, and db_default is
missing; the fields' own code is the same on every backend), 6.0 on PostgreSQL, 6.1, the newest, on
MariaDB and SQLite (its PostgreSQL backend is 6.0's as far as seqid uses it; multidb only routes).

With pyenv, make the interpreters visible first:
``PYENV_VERSION=3.11.7:3.10.13:3.12.1:3.13.0 nox``.  `.ci/run` does this.
"""

from __future__ import annotations

import os

import nox

nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True
# uv builds a session's environment in seconds where pip takes a minute or two (measured in CI: the
# six sessions' installs took about 3 of their 9 minutes); virtualenv where uv is not installed.
nox.options.default_venv_backend = "uv|virtualenv"
# ... byte-compiled, as pip installs: uv does not by default, and with PYTHONDONTWRITEBYTECODE set
# (as on CI's machine) every process would compile its imports again
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")

# Tests are chosen by directory (tests/core, tests/sqlalchemy_adapter, tests/django) and by
# marker, never by a hand-kept list of files. These sessions have no Django: its example test
# is marked `django` and deselected.
CORE = "tests/core"
SQLALCHEMY = "tests/sqlalchemy_adapter"
TICKETS = "tests/tickets"
LEASES = "tests/leases"
ASYNC = "tests/async_ids"
INTEGRATIONS = "tests/integrations"
NO_DJANGO = ["-m", "not django and not slow and not big and not matrix and not mysqlclient and not etcd"]


@nox.session(python=["3.10", "3.13"])
def core(session: nox.Session) -> None:
    """Oldest and newest supported Python: core first with no extras, then the adapters."""
    session.install("-e", ".", "pytest", "pytest-timeout", "hypothesis", "python-ulid")
    session.run("python", "-c", "import seqid_orm, sys; assert 'sqlalchemy' not in sys.modules")
    session.run("pytest", "-q", "-p", "no:django", CORE, *session.posargs)
    session.install(
        "-e",
        ".[sqlalchemy,alembic,postgres,mysql,async,redis,etcd,pydantic]",
        "python-ulid",
        "sqlmodel",
        "fastapi",
        "httpx",
    )
    # A Python version changes how this code runs, not how PostgreSQL or MariaDB compare or lock: the
    # adapters run on SQLite and Redis here, every server in the .venv and sqlalchemy20. What changes
    # most between 3.10 and 3.13 is asyncio (cancellation, loop shutdown, timeouts), so the awaitable
    # API's tests run here; the ticket and lease stores' synchronous paths (threads, processes) run
    # on the .venv's Python and in sqlalchemy20, their decisions in tests/core above.
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:django",
        SQLALCHEMY,
        ASYNC,
        INTEGRATIONS,
        "-m",
        # matrix: the rekey tests' further servers and kinds, whose parameter (a tuple) earns no server marker
        "not django and not slow and not big and not matrix and not postgres and not mysql and not etcd",
        *session.posargs,
    )


@nox.session(python="3.11")
def sqlalchemy20(session: nox.Session) -> None:
    """The lowest supported SQLAlchemy and Alembic series, and the CockroachDB dialect, which
    requires SQLAlchemy < 2.1 (its compile tests are marked `cockroachdb`)."""
    session.install(
        "-e",
        ".[sqlalchemy,postgres,mysql,async,redis,etcd]",
        "SQLAlchemy>=2.0,<2.1",
        "alembic>=1.13,<1.14",
        "sqlalchemy-cockroachdb",
        "sqlmodel",
        "pytest",
        "pytest-timeout",
        "hypothesis",
        "python-ulid",
    )
    session.run("python", "-c", "import sqlalchemy_cockroachdb")  # its tests must run here, not vanish
    session.run("pytest", "-q", "-p", "no:django", SQLALCHEMY, *NO_DJANGO, *session.posargs)
    # tickets and leases: the stores SQLAlchemy runs (PostgreSQL, MariaDB, SQLite); Redis's and etcd's
    # do not go through SQLAlchemy, and run in the .venv. Of the leases, the files whose tests reach the
    # store's own calls (its pool, a dropped or stalled connection, the awaited engine, two stores on one
    # row): tests/leases/test_leases.py runs the lease's table and fences, which SQLAlchemy cannot change
    # (26 s of this session's 83 s, measured with --durations=0), in the .venv
    sql_stores = f"{NO_DJANGO[1]} and not redis"
    lease_calls = [
        f"{LEASES}/{name}.py" for name in ("test_connections", "test_deadline_passed_down", "test_worker_conflicts")
    ]
    session.run("pytest", "-q", "-p", "no:django", TICKETS, *lease_calls, "-m", sql_stores, *session.posargs)


def _django_suite(session: nox.Session, spec: str, settings_modules: list[str], *, mssql: bool = True) -> None:
    extra = ["mssql-django"] if mssql else []
    session.install(
        "-e",
        ".[django,mysqlclient,postgres,mysql,sqlalchemy,redis,drf]",  # the ticket tests start SQLAlchemy workers
        spec,
        "pytest",
        "pytest-timeout",
        "pytest-django",
        "hypothesis",
        "oracledb",
        # tests/peers fetches Django's own test suite with `python -m pip download`: uv builds a
        # session's environment without pip (and ~/.cache/seqid-peers may be empty on a fresh machine)
        "pip",
        *extra,
    )
    # mssql-django needs Django >= 5.2, and Django 4.2's Oracle backend wants cx_Oracle rather
    # than oracledb: on 4.2 those two backend checks are deselected (not skipped), as is the
    # test of db_default=DatabaseSeqUUID() (db_default arrived in Django 5.0)
    deselect = [] if mssql else ["-k", "not mssql and not oracle and not db_default_made"]
    # Django's own tests/model_fields/test_uuid.py with SeqUUIDField swapped in, on this Django (SQLite:
    # the main suite runs it on every server with Django 5.2)
    session.run("pytest", "-q", "-p", "no:django", "tests/peers", "-k", "djangos_own and sqlite", *session.posargs)
    for settings in settings_modules:
        session.run(
            "pytest",
            "-q",
            "tests/django",
            "-m",
            "not slow and not big and not etcd",  # etcd3gw and the etcd server: the .venv's tests
            *deselect,
            *session.posargs,
            env={"DJANGO_SETTINGS_MODULE": f"tests.django.settings.{settings}"},
        )


@nox.session(python="3.11")
def django42(session: nox.Session) -> None:
    """Django 4.2 LTS (UUIDField is char(32) on MariaDB; no db_default)."""
    _django_suite(session, "Django>=4.2,<5.0", ["mysql"], mssql=False)


@nox.session(python="3.12")
def django60(session: nox.Session) -> None:
    """Django 6.0, which needs Python 3.12 or later: PostgreSQL only (6.1 beside it runs MariaDB and
    SQLite, and 5.2 in the .venv every settings module)."""
    _django_suite(session, "Django>=6.0,<6.1", ["postgres"])


@nox.session(python="3.13")
def django61(session: nox.Session) -> None:
    """Django 6.1, the current release: MariaDB and SQLite (PostgreSQL: 6.0's session)."""
    _django_suite(session, "Django>=6.1,<6.2", ["mysql", "sqlite"])
