"""The tutorial's Django part, followed step by step as a reader follows it: its commands in a new
directory, the edit it asks for in words, its files, and its shell block pasted into ``manage.py shell``."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from tests.docs_examples.harness import reader_env

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _section(page: str, heading: str, end: str) -> list[tuple[str, str]]:
    """The fenced blocks of a page's section, as ``(language, text)`` in order."""
    text = (ROOT / page).read_text()
    part = text[text.index(heading) : text.index(end, text.index(heading))]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)[^\n]*\n(.*?)```", part, re.S)]


def test_the_tutorials_django_part_runs_from_startproject(tmp_path):
    """The tutorial's Django section, step by step in a new directory: its commands (``pip install``
    left out: the package is installed here), the one edit it asks for in words (the app added to
    ``INSTALLED_APPS``), its ``models.py`` as shown, and its shell block piped into ``manage.py shell``."""
    blocks = _section("docs/tutorials/getting-started.md", "## 4. The same in Django", "## Where next")
    languages = [language for language, _ in blocks]
    assert languages == ["sh", "py", "sh", "py"], languages
    (_, create), (_, models), (_, migrate), (_, shell) = blocks
    env = reader_env()
    cwd = tmp_path

    def run(line: str, stdin: str | None = None) -> str:
        done = subprocess.run(line, shell=True, cwd=cwd, env=env, input=stdin, capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout + done.stderr

    for line in create.splitlines():
        if line.startswith("pip install"):
            continue
        if line.startswith("cd "):
            cwd = cwd / line.split()[1]
            continue
        run(line.replace("python ", f"{sys.executable} ", 1))
    settings = cwd / "shop" / "settings.py"
    settings.write_text(settings.read_text().replace("INSTALLED_APPS = [", 'INSTALLED_APPS = [\n    "orders",', 1))
    (cwd / "orders" / "models.py").write_text(models)
    out = ""
    for line in migrate.splitlines():
        command = line.replace("python ", f"{sys.executable} ", 1)
        out += run(command, stdin=shell + "\nprint('tutorial-ok', len(made))\n" if line.endswith("shell") else None)
    assert "Traceback" not in out and "tutorial-ok 10" in out, out[-3000:]
