"""Shared fixtures: real SQLite, PostgreSQL and MariaDB engines.

PostgreSQL, MariaDB and Redis URLs come from ``SEQID_TEST_POSTGRES_URL`` / ``SEQID_TEST_MYSQL_URL``
/ ``SEQID_TEST_REDIS_URL`` (defaults: the local servers the README names).  An unreachable server skips its tests with
the reason, unless ``SEQID_REQUIRE_DBS=1`` (as in CI), where it fails them.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Iterator

import pytest

POSTGRES_URL = os.environ.get("SEQID_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
MYSQL_URL = os.environ.get("SEQID_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
REDIS_URL = os.environ.get("SEQID_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PG18_URL = os.environ.get("SEQID_TEST_PG18_URL", "")  # PostgreSQL 18 beside 15, for the pg18 tests
REQUIRE_DBS = os.environ.get("SEQID_REQUIRE_DBS") == "1"

# Hypothesis times each example against a 200 ms deadline by default, and calls a slow start a
# failed health check: timed asserts, which failed on a loaded machine (an example took 577 ms with
# the suite's loaded runs beside it) and say nothing of the code.  Speed is measured in benchmarks.
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("seqid", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("seqid")
except ImportError:  # the tests that use it import it themselves
    pass

# The Django tests run once per settings module (see the Makefile); without one they are not collected.
collect_ignore = [] if os.environ.get("DJANGO_SETTINGS_MODULE") else ["django"]

# Server markers come from the fixtures a test uses, never by hand: `pytest -m postgres` runs
# every test that talks to PostgreSQL, whichever way it asks for the engine.
_MARK_BY_FIXTURE = {"pg_engine": "postgres", "mysql_engine": "mysql", "sqlite_engine": "sqlite", "redis_url": "redis"}
_MARK_BY_ENGINE_PARAM = {
    "postgresql": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "redis": "redis",
}
# the fixtures and parameters that name a server (a test's `engine`, a store URL's `server`, a test that
# opens its database in its body by its `vendor`, a lease behind a stalled proxy...)
_SERVER_PARAMS = ("engine", "server", "sql_server", "watched", "vendor", "stalled_lease")


def server_marks(item: pytest.Item) -> set[str]:
    """The server markers a collected test earns from its fixtures and parameters."""
    marks = {m for f, m in _MARK_BY_FIXTURE.items() if f in getattr(item, "fixturenames", ())}
    callspec = getattr(item, "callspec", None)
    for name, value in callspec.params.items() if callspec else ():
        if name in _SERVER_PARAMS and value in _MARK_BY_ENGINE_PARAM:
            marks.add(_MARK_BY_ENGINE_PARAM[value])
        elif isinstance(value, str) and value in _MARK_BY_FIXTURE:  # request.getfixturevalue(value)
            marks.add(_MARK_BY_FIXTURE[value])
    return marks


def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.system("part")``: skip with the reason and the apt line where a system part is
    missing (tests/system.py decides; under SEQID_REQUIRE_DBS=1 its absence fails the test)."""
    from tests.system import need

    for mark in item.iter_markers("system"):
        for part in mark.args:
            need(part)


def _cockroachdb_dialect_installs() -> bool:
    try:
        import sqlalchemy_cockroachdb  # noqa: F401
    except ImportError:
        return False
    return True


# the modules whose tests migrate with Alembic on the shared servers (one alembic_version table for all)
_SHARED_STATE_MODULES = {
    f"tests.sqlalchemy_adapter.{m}"
    for m in (
        "test_adopt",
        "test_alembic",
        "test_alembic_versions",
        "test_conversions",
        "test_sequential_functions",
        "test_tickets_sqlalchemy",
    )
}


def _shared_state(item: pytest.Item) -> bool:
    """Whether a test must not run beside others of its kind: Alembic's migrations share the
    alembic_version table of the shared databases, and the shared MariaDB 10.11 crashed once
    (signal 11 in a DESCRIBE, in ha_maria::drop_table) with four workers creating, describing and
    dropping tables on it at once."""
    return "mysql" in server_marks(item) or getattr(item.module, "__name__", "") in _SHARED_STATE_MODULES


_TIMER = pytest.StashKey[threading.Timer]()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: object) -> bool | None:
    """pytest-timeout's thread method, with its report where an xdist worker's output is seen: a
    hung test (a frozen event loop included) prints every thread's stack to the real stderr and
    ends its worker, which xdist reports as the test's failure and replaces, so the run goes on.
    (pytest-timeout's own thread method writes to the worker's terminal writer, whose output an
    xdist worker does not show: a frozen test failed with no stack.)  Other methods: its own."""
    seconds = getattr(settings, "timeout", 0) or 0
    if getattr(settings, "method", None) != "thread" or seconds <= 0:
        return None
    timer = threading.Timer(seconds, _report_and_exit, (item, seconds))
    timer.name = "seqid-test-timeout"
    timer.daemon = True
    timer.start()
    item.stash[_TIMER] = timer
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    timer = item.stash.get(_TIMER, None)
    if timer is None:
        return None
    timer.cancel()
    del item.stash[_TIMER]
    return True


def _report_and_exit(item: pytest.Item, seconds: float) -> None:
    capman = item.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.suspend_global_capture(in_=True)  # the real stderr again, not the test's capture
    names = {t.ident: t.name for t in threading.enumerate()}
    lines = [f"\n{'+' * 30} Timeout: {item.nodeid} ran past {seconds:g} s {'+' * 30}\n"]
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        lines.append(f"--- thread {names.get(ident, ident)} ---\n")
        lines.extend(traceback.format_stack(frame))
    sys.stderr.write("".join(lines))
    sys.stderr.flush()
    time.sleep(0.2)  # let the controller read it before the worker goes
    os._exit(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--part",
        choices=("shared-state", "rest"),
        help="only the tests of shared state (MariaDB, Alembic's version table), or only the rest",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marks = server_marks(item)
        for mark in marks:
            item.add_marker(mark)
    # make test-core runs the suite in two parts at once (--part): the tests of shared state in one
    # process, one after the other, and the rest in pytest-xdist workers (see _SHARED_STATE_MODULES)
    part = config.getoption("part")
    if part:
        wanted = part == "shared-state"
        config.hook.pytest_deselected(items=[i for i in items if _shared_state(i) != wanted])
        items[:] = [i for i in items if _shared_state(i) == wanted]
    # The Galera tests need the cluster `make galera-up` starts (`make test-galera` runs them with
    # SEQID_GALERA=1); the pg18 tests need PostgreSQL 18 beside 15 (`make test-pg18` sets
    # SEQID_TEST_PG18_URL). Elsewhere they are deselected (counted in the summary), never skipped.
    # The valgrind tests (the instruction-count benchmark's) need valgrind, a system package, and
    # run once, by `make test-valgrind` (SEQID_VALGRIND=1), not in every suite.
    for marker, present in (
        ("galera", os.environ.get("SEQID_GALERA") == "1"),
        ("pg18", bool(PG18_URL)),
        ("valgrind", os.environ.get("SEQID_VALGRIND") == "1"),
    ):
        if present:
            continue
        dropped = [i for i in items if i.get_closest_marker(marker) is not None]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i.get_closest_marker(marker) is None]
    # sqlalchemy-cockroachdb requires SQLAlchemy < 2.1, so its compile tests run in the nox
    # session on SQLAlchemy 2.0; here they are deselected (counted in the summary), not skipped.
    if not _cockroachdb_dialect_installs():
        keep = [i for i in items if i.get_closest_marker("cockroachdb") is None]
        dropped = [i for i in items if i.get_closest_marker("cockroachdb") is not None]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "mysql": "mysql+aiomysql", "sqlite": "sqlite+aiosqlite"}


def unavailable(name: str, url: str, exc: BaseException) -> None:
    """Skip (or, with SEQID_REQUIRE_DBS=1, fail) because a server cannot be reached."""
    message = f"{name} at {url} is unreachable: {type(exc).__name__}: {exc}"
    if REQUIRE_DBS:
        pytest.fail(f"SEQID_REQUIRE_DBS=1 but {message}")
    pytest.skip(message)


def _connect(name: str, url: str):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect():
            pass
    except Exception as exc:  # any driver error means: not reachable
        engine.dispose()
        unavailable(name, url, exc)
    return engine


@pytest.fixture(scope="session")
def pg_engine():
    engine = _connect("PostgreSQL", POSTGRES_URL)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def mysql_engine():
    engine = _connect("MariaDB/MySQL", MYSQL_URL)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def sqlite_engine(tmp_path_factory):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.sqlite3'}")
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def redis_url():
    """The Redis server's URL, after a PING (skipped, or failed under SEQID_REQUIRE_DBS=1, if it does not answer)."""
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except Exception as exc:  # any client error means: not reachable
        unavailable("Redis", REDIS_URL, exc)
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture(scope="module")
def etcd_cluster():
    """A private 3-member etcd cluster for one test module (tests/servers/etcd.py), stopped after it."""
    from tests.servers.etcd import EtcdCluster
    from tests.system import need

    need("etcd")
    with EtcdCluster(3) as running:
        yield running


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def engine(request):
    """Each real database in turn."""
    return request.getfixturevalue(
        {"sqlite": "sqlite_engine", "postgresql": "pg_engine", "mysql": "mysql_engine"}[request.param]
    )


@pytest.fixture
def table_name() -> str:
    return f"t_{secrets.token_hex(4)}"


@pytest.fixture
def metadata(engine) -> Iterator[object]:
    """A MetaData whose tables are dropped after the test."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    md = sqlalchemy.MetaData()
    yield md
    md.drop_all(engine)


# --- allocation backends (ticket sequences, worker leases) ---------------------------------

ALLOCATION_SERVERS = ["postgresql", "mysql", "sqlite", "redis"]


@pytest.fixture(scope="session")
def sqlite_ticket_url(tmp_path_factory):
    """A SQLite file of its own for tickets (SQLite has one writer per file: never the app's file)."""
    return f"sqlite:///{tmp_path_factory.mktemp('tickets') / 'tickets.sqlite3'}"


@pytest.fixture(params=ALLOCATION_SERVERS)
def server(request):
    """Each kind of ticket server in turn, as a URL (the parameter name sets the server marker)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_engine")  # reachable, or skipped/failed with the reason
        return POSTGRES_URL
    if request.param == "mysql":
        request.getfixturevalue("mysql_engine")
        return MYSQL_URL
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_ticket_url")
    # The shared Redis keeps nothing on disk; a store refuses it unless told that losing it is
    # acceptable (VolatileStoreError), which the URL option says for every test but the one on it.
    return volatile_ok(request.getfixturevalue("redis_url"))


def volatile_ok(url: str) -> str:
    """A Redis URL that accepts a server without persistence (``?accept_state_loss=true``)."""
    return url + ("&" if "?" in url else "?") + "accept_state_loss=true"


@pytest.fixture
def pair_factory(pg_engine):
    """Makes private PostgreSQL primary + streaming standby pairs (tests/servers/replica.py) of the
    shared server's major version; every pair is stopped and deleted after the test."""
    from tests.servers.private import pg_bindir, server_major
    from tests.servers.replica import PrimaryAndStandby
    from tests.system import need

    need("postgresql-server")
    made = []

    def make(synchronous: bool) -> PrimaryAndStandby:
        pair = PrimaryAndStandby(pg_bindir(server_major(pg_engine.url.render_as_string(False))), synchronous)
        made.append(pair)
        return pair.start()

    yield make
    for pair in made:
        pair.stop()
