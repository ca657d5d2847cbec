"""The examples and the demo run as a user would run them, on each real database."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import uuid

import pytest

from tests.system import need

pytest.importorskip("sqlalchemy")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(path: pathlib.Path):
    name = f"example_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # SQLAlchemy resolves Mapped[...] annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_sqlalchemy_example(engine, capsys):
    load(ROOT / "examples" / "sqlalchemy_models.py").main(engine.url.render_as_string(hide_password=False))
    out = capsys.readouterr().out
    assert "layout time_first" in out
    books = [line.split()[1] for line in out.splitlines() if line.strip().startswith("book ")]
    assert len(books) == 2 and books == sorted(books)
    assert all(uuid.UUID(b).version == 7 for b in books)


def test_demo_says_the_layout_it_read_and_the_order_it_buys(capsys):
    from seqid_orm.cli import main

    assert main(["demo", "--rows", "4"]) == 0
    out = capsys.readouterr().out
    assert "read from this connection: sqlite 3." in out and "seqid chose time_first" in out
    assert "SQL Server, uniqueidentifier     time_last" in out and "CockroachDB, uuid                sharded" in out
    assert "The database's order is the order they were made: yes." in out
    made = [line.split()[2] for line in out.splitlines() if line.strip().startswith("01") and " made " in line]
    assert made == ["1st,", "2nd,", "3rd,", "4th,"]  # ORDER BY id, asked of SQLite, is the generation order
    assert "seqid bench" in out


def test_cli_new_decode_and_errors(capsys):
    from seqid_orm.cli import main

    assert main(["new", "--kind", "comb", "--dialect", "mssql", "-n", "2"]) == 0
    values = capsys.readouterr().out.split()
    assert len(values) == 2
    assert main(["decode", values[0], "--json"]) == 0
    assert '"layout": "time_last"' in capsys.readouterr().out
    assert main(["decode", str(uuid.uuid4())]) == 0
    assert "timestamp: none (this id carries no time)" in capsys.readouterr().out
    assert main(["decode", "not-an-id"]) == 2
    assert "seqid: error:" in capsys.readouterr().err


def test_cli_new_with_a_live_url(engine, capsys):
    from seqid_orm.cli import main

    assert main(["new", "--kind", "comb", "--url", engine.url.render_as_string(hide_password=False), "-n", "3"]) == 0
    values = [uuid.UUID(v) for v in capsys.readouterr().out.split()]
    assert len(values) == 3 and all(v.version == 7 for v in values) and values == sorted(values)
    assert main(["new", "--url", "postgresql+psycopg://nobody@127.0.0.1:1/none"]) == 2
    assert "error" in capsys.readouterr().err


def test_cli_probe_against_live_server(engine, capsys):
    from seqid_orm.cli import main

    assert main(["probe", engine.url.render_as_string(hide_password=False)]) == 0
    out = capsys.readouterr().out
    assert "DISAGREES" not in out
    assert out.count("(seqid's table agrees)") == (3 if engine.dialect.name == "sqlite" else 4)
    vendor = {"mysql": "mariadb"}.get(engine.dialect.name, engine.dialect.name)  # the server here is MariaDB
    assert out.startswith(f"{vendor} ") and "order 0-15: layout time_first" in out
    assert "the byte positions" in out  # the order is explained, not a bare list


def test_cli_refuses_a_url_that_is_no_database_in_plain_words(capsys):
    from seqid_orm.cli import main

    assert main(["probe", "redis://127.0.0.1:6379/0"]) == 2
    err = capsys.readouterr().err  # a Redis store is named as one, with the command that reads it
    assert "redis:// is a Redis store: `seqid status URL`" in err and "Can't load plugin" not in err
    assert main(["probe", "ftp://example.org/x"]) == 2
    err = capsys.readouterr().err
    assert "'ftp' is not a database URL SQLAlchemy knows" in err and "Can't load plugin" not in err


@pytest.mark.django
@pytest.mark.parametrize("engine", ["sqlite", "postgresql", "mysql"], indirect=True)
def test_django_example_project_runs(engine, tmp_path):
    """manage.py check, makemigrations --check, migrate, seed, migrate back to zero."""
    if engine.dialect.name == "mysql":
        need("mysqlclient")
    import subprocess

    pytest.importorskip("django")
    project = ROOT / "examples" / "django_project"
    env = {
        **__import__("os").environ,
        "SEQID_EXAMPLE_DB": {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mariadb"}[engine.dialect.name],
        "SEQID_EXAMPLE_SQLITE": str(tmp_path / "example.sqlite3"),
        "PYTHONPATH": str(ROOT),
        # the server under test, wherever it listens (not the settings' default port)
        "SEQID_EXAMPLE_DB_HOST": engine.url.host or "",
        "SEQID_EXAMPLE_DB_PORT": str(engine.url.port or ""),
        "SEQID_EXAMPLE_DB_USER": engine.url.username or "",
        "SEQID_EXAMPLE_DB_PASSWORD": engine.url.password or "",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)

    def manage(*args):
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=project, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    # a database of its own, so runs sharing a server cannot trip over each other's tables
    db_name = f"seqid_example_{uuid.uuid4().hex[:8]}"
    env["SEQID_EXAMPLE_DB_NAME"] = db_name
    admin = engine.execution_options(isolation_level="AUTOCOMMIT")
    if engine.dialect.name != "sqlite":
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {db_name}")
    try:
        if engine.dialect.name != "sqlite":  # the project talks to the server under test
            where = "from django.db import connection as c; c.ensure_connection(); print(c.settings_dict['PORT'])"
            assert manage("shell", "-c", where).strip().splitlines()[-1] == str(engine.url.port)
        manage("check")
        manage("makemigrations", "--check", "--dry-run")
        manage("migrate", "-v0")
        out = manage("seed_library")
        assert "layout time_first" in out
        books = [line.split()[1] for line in out.splitlines() if line.strip().startswith("book ")]
        assert len(books) == 2 and books == sorted(books)
    finally:
        if engine.dialect.name != "sqlite":
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {db_name}")
