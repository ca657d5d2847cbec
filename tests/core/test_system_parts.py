"""tests/system.py: the one place that decides whether a system part is here, and what a missing one does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import system


def _part_missing_on_purpose() -> system.Part:
    # a binary no machine has: what every part does when its package is missing
    return system.Part("no-such-part", ("no-such-package",), "this test", system._binary("seqid-no-such-binary"))


def test_a_missing_part_skips_with_the_reason_and_the_apt_line(monkeypatch):
    monkeypatch.setitem(system.PARTS, "no-such-part", _part_missing_on_purpose())
    monkeypatch.setattr(system, "REQUIRE_DBS", False)
    with pytest.raises(pytest.skip.Exception) as caught:
        system.need("no-such-part")
    message = str(caught.value)
    assert "seqid-no-such-binary not found" in message
    assert "this test needs no-such-part" in message
    assert "apt-get install no-such-package" in message


def test_a_missing_part_fails_where_every_part_is_required(monkeypatch):
    monkeypatch.setitem(system.PARTS, "no-such-part", _part_missing_on_purpose())
    monkeypatch.setattr(system, "REQUIRE_DBS", True)
    with pytest.raises(pytest.fail.Exception, match="SEQID_REQUIRE_DBS=1 but this test needs no-such-part"):
        system.need("no-such-part")


def test_a_present_part_lets_the_test_run():
    system.need("postgresql-server")  # the shared PostgreSQL's own binaries are on every machine here
    assert system.missing("postgresql-server") is None


def test_the_makefile_asks_the_same_place_from_the_command_line():
    """`make system-deps` runs `python3 -m tests.system apt` before any virtualenv: standard library only."""
    done = subprocess.run(
        [sys.executable, "-S", "-m", "tests.system", "missing", "no-such-part"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "unknown system part 'no-such-part'" in done.stderr
    here = subprocess.run([sys.executable, "-m", "tests.system", "missing", "postgresql-server"], capture_output=True)
    assert (here.returncode, here.stdout) == (0, b"present\n")
    apt = subprocess.run([sys.executable, "-m", "tests.system", "apt"], capture_output=True, text=True, check=True)
    wanted = {p for part in system.PARTS.values() if part.for_make_test for p in part.apt}
    assert set(apt.stdout.split()) <= wanted
