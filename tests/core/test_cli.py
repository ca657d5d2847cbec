"""The command line refuses bad arguments with a message and exit code 2 (regressions of defect 9)."""

from __future__ import annotations

import json

import pytest

from seqid_orm.cli import main


def _fails(capsys, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_counts_must_be_positive(capsys):
    _fails(capsys, ["new", "-n", "-1"], "at least 1")
    _fails(capsys, ["new", "-n", "0"], "at least 1")
    _fails(capsys, ["bench", "--rows", "0"], "at least 1")
    _fails(capsys, ["bench", "--batch", "-5"], "at least 1")


def test_an_unknown_dialect_is_refused_not_replaced_by_uuidv7(capsys):
    _fails(capsys, ["new", "--dialect", "foo"], "invalid choice: 'foo'")


def test_new_with_a_dialect_makes_that_dialects_layout(capsys):
    assert main(["new", "--dialect", "mssql", "-n", "2"]) == 0
    ids = capsys.readouterr().out.split()
    assert main(["decode", ids[0], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"] == "time_last"


def test_decode_says_what_is_wrong_and_what_it_assumed(capsys):
    assert main(["decode", "0190_aaa-0000-7000-8000-000000000000"]) == 2
    assert "invalid UUID text" in capsys.readouterr().err
    assert main(["decode", "zz"]) == 2
    assert "unrecognised id text" in capsys.readouterr().err
    assert main(["decode", "017F22E279B07CC398C4DC0C0C07398F"]) == 2  # upper-case HEX(id): not bsv
    assert "ambiguous" in capsys.readouterr().err
    assert main(["decode", "--kind", "uuid", "017F22E279B07CC398C4DC0C0C07398F", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "uuid7" and info["timestamp"].startswith("2022-02-22T19:22:22")
    assert main(["decode", "12345", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "snowflake" and "Twitter" in info["assumed"]


@pytest.mark.parametrize(
    ("blocked", "argv", "fix"),
    [
        ("sqlalchemy", ["probe", "sqlite://"], "pip install 'seqid-orm[sqlalchemy]'"),
        ("redis", ["ticket", "status", "redis://127.0.0.1:1/0"], "pip install 'seqid-orm[redis]'"),
    ],
)
def test_a_missing_extra_names_the_exact_install_line(blocked, argv, fix):
    """Run as a user without the extra would (the module made unimportable in a child process)."""
    import subprocess
    import sys

    code = f"import sys; sys.modules[{blocked!r}] = None\nfrom seqid_orm.__main__ import main\nsys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert fix in done.stderr and "Traceback" not in done.stderr


def test_the_pydantic_module_without_pydantic_names_the_extra():
    import subprocess
    import sys

    code = "import sys; sys.modules['pydantic'] = None\nimport seqid_orm.pydantic"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'seqid-orm[pydantic]'" in done.stderr
