"""Every ``python`` block of README.md and docs/ runs as a user runs it, in a process of its own:

- a page's blocks, in order, as one script (``python page.py``), or, where they ``await`` at top
  level, pasted into ``python -m asyncio``;
- a Django ``models.py`` block as the models of an app in a project made by ``django-admin
  startproject``: ``makemigrations``, ``migrate``, then rows made and read back in key order.

Nothing is added to a block and nothing is set up behind it; the one change is its URLs, read as the
test servers' (:mod:`tests.docs_examples.harness`)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests.docs_examples import harness
from tests.docs_examples.pages import PAGES, blocks, script

SCRIPTED = [page for page in PAGES if any(not b.is_django_models for b in blocks(page))]
MODELS = [b for page in PAGES for b in blocks(page) if b.is_django_models]

#: What a page's program is asked after it ran, and what it must answer (a claim of the page).
CHECKS = {
    "docs/how-to/async.md": (
        "print('pasted-ok', len(batch), len(keys), order_id < batch[0])",
        "pasted-ok 500 1000 True",
    ),
}


@pytest.fixture(scope="session", autouse=True)
def _fresh_servers():
    harness.fresh_servers()


def _run(args: list[str], cwd: pathlib.Path, stdin: str | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=harness.reader_env(), input=stdin, capture_output=True, text=True, timeout=300
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in output, (args, output[-4000:])
    return output


@pytest.mark.parametrize("page", SCRIPTED)
def test_the_pages_blocks_run_as_a_program(page, tmp_path):
    check, expected = CHECKS.get(page, ("", ""))
    if any(b.awaits_at_top_level for b in blocks(page)):
        # pasted as shown, block after block: a REPL ends a compound statement at a blank line
        pasted = "\n".join(harness.on_test_servers(b.text) for b in blocks(page) if not b.is_django_models)
        output = _run([sys.executable, "-m", "asyncio"], tmp_path, stdin=f"{pasted}\n{check}\n")
    else:
        program = tmp_path / f"example_{pathlib.Path(page).stem}.py"  # not named as a module it imports
        program.write_text(harness.on_test_servers(script(page)) + check + "\n")
        output = _run([sys.executable, str(program)], tmp_path)
    assert expected in output, output[-4000:]


@pytest.mark.parametrize("block", MODELS, ids=[f"{b.page}:{b.line}" for b in MODELS])
def test_the_django_models_migrate_and_keep_their_order(block, tmp_path):
    """The block as an app's ``models.py`` in a new project on its default SQLite database, with the
    settings the Django pages name (``seqid_orm.django`` installed, a Snowflake worker id)."""
    _run(["django-admin", "startproject", "project", "."], tmp_path)
    _run([sys.executable, "manage.py", "startapp", "shop"], tmp_path)
    settings = tmp_path / "project" / "settings.py"
    installed = 'INSTALLED_APPS = [\n    "seqid_orm.django",\n    "shop",'
    text = settings.read_text().replace("INSTALLED_APPS = [", installed, 1)
    settings.write_text(text + '\nSEQID = {"SNOWFLAKE": {"worker_id": 1}}\n')
    (tmp_path / "shop" / "models.py").write_text(block.text)
    _run([sys.executable, "manage.py", "makemigrations", "shop"], tmp_path)
    _run([sys.executable, "manage.py", "migrate"], tmp_path)
    shell = (
        "import time\n"
        "from django.apps import apps\n"
        "for model in apps.get_app_config('shop').get_models():\n"
        "    made = []\n"
        "    for _ in range(20):\n"
        "        made.append(model.objects.create().pk)\n"
        "        time.sleep(0.002)  # past a clock tick (SQLite's database-made keys: a millisecond)\n"
        "    assert list(model.objects.order_by('pk').values_list('pk', flat=True)) == made, model\n"
        "    print('in-order', model.__name__, len(made))\n"
    )
    output = _run([sys.executable, "manage.py", "shell"], tmp_path, stdin=shell)
    assert output.count("in-order") == block.text.count("(models.Model)"), output
