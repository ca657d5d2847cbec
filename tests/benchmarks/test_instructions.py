"""The instruction-count benchmark: valgrind's real totals, the real inserts it counts."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

sa = pytest.importorskip("sqlalchemy")
from benchmarks import instructions  # noqa: E402
from seqid_orm.errors import InvalidArgumentError  # noqa: E402
from tests.system import need  # noqa: E402

pytestmark = pytest.mark.valgrind  # run once, by `make test-valgrind`, which installs valgrind


def _valgrind() -> str:
    need("valgrind")  # `make test-valgrind` installs it as root
    found = shutil.which("valgrind")
    assert found
    return found


def _callgrind_stderr(code: str) -> str:
    done = subprocess.run(
        [_valgrind(), "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr


@pytest.mark.slow
def test_the_total_is_read_from_valgrinds_own_report():
    idle = instructions.instructions_of(_callgrind_stderr("pass"))
    busy = instructions.instructions_of(_callgrind_stderr("sum(range(1_000_000))"))
    assert idle > 1_000_000  # an interpreter's start-up alone
    assert busy - idle > 1_000_000  # at least one instruction per number added


def test_output_without_a_total_is_refused_with_what_it_ended_on():
    with pytest.raises(InvalidArgumentError, match=r"no 'I refs' total.*valgrind: command not found"):
        instructions.instructions_of("==1== Callgrind\nbash: valgrind: command not found\n")


def test_without_valgrind_the_error_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no valgrind on it
    with pytest.raises(InvalidArgumentError, match="apt-get install valgrind"):
        instructions.counts("sqlite://", ["bigint"])


@pytest.mark.parametrize(("small", "large"), [(0, 10), (10, 10), (20, 10)])
def test_the_two_run_lengths_must_grow(small, large):
    _valgrind()
    with pytest.raises(InvalidArgumentError, match="small < large"):
        instructions.counts("sqlite://", ["bigint"], small=small, large=large)


def test_unknown_or_uninstalled_key_kinds_are_named_before_any_run(monkeypatch):
    _valgrind()
    with pytest.raises(InvalidArgumentError, match=r"unknown key kinds \['uuid9'\]; choose from bigint"):
        instructions.counts("sqlite://", ["bigint", "uuid9"])
    import importlib.util

    # as if uuid-utils (the bench extra) were not installed
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "uuid_utils" else real_find_spec(n, *a))
    with pytest.raises(InvalidArgumentError, match=r"sa-uuid7 needs uuid_utils.*seqid-orm\[bench\]"):
        instructions.counts("sqlite://", ["sa-uuid7"])


def test_the_command_line_names_bad_arguments(capsys):
    _valgrind()
    for argv, message in [
        (["--url", "sqlite://", "--rows", "5k,15k"], "--rows takes two whole numbers"),
        (["--url", "sqlite://", "--keys", "bigint", "--base", "comb"], "--base 'comb' is not among --keys"),
        (["--url", "sqlite://", "--keys", "uuid9"], "unknown key kinds"),
        (["--url", "sqlite://", "--rows", "900,300"], "small < large"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            instructions.main(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_the_child_inserts_every_row_on_each_database_and_drops_its_table(engine, table_name):
    """The measured process, run without valgrind: it checks the table held every row itself."""
    url = engine.url.render_as_string(hide_password=False)
    for key in ("comb-default", "bigint"):
        child = ["--child", "--url", url, "--keys", key, "--rows", "1200", "--batch", "500"]
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.instructions", *child, "--table-prefix", f"{table_name}_"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    assert not [t for t in sa.inspect(engine).get_table_names() if t.startswith(table_name)]


@pytest.mark.slow
def test_the_counts_of_a_key_come_from_two_runs_under_callgrind_on_postgresql(pg_engine, table_name):
    """The harness end to end: two runs of the child under callgrind, their difference per row, the
    table. One key kind: how keys compare (a client-made key costs the client more instructions per
    row than an identity column) is the benchmark's finding, in docs/benchmarks.md with its command,
    not a test's assertion; each run here costs about a minute of CPU under valgrind."""
    url = pg_engine.url.render_as_string(hide_password=False)
    _valgrind()
    [found] = instructions.counts(url, ["bigint"], small=300, large=900, batch=300, prefix=f"{table_name}_")
    assert found.key == "bigint"
    assert found.large > found.small > 0
    assert found.per_row > 1_000  # a row through SQLAlchemy and psycopg is thousands of instructions
    text = instructions.markdown([found], "bigint")
    assert "| bigint |" in text and "| 1.000 |" in text
    assert not [t for t in sa.inspect(pg_engine).get_table_names() if t.startswith(table_name)]
