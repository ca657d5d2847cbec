"""The README's quick start, run as a new user would: its code blocks, taken from the README itself,
on every database (make test-docs runs them once more on SQLite, with the docs' examples)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


QUICK_START = "## One line in your model"


def quick_start_blocks() -> list[str]:
    """The quick start's SQLAlchemy model and its Django model."""
    section = README.split(QUICK_START, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return [next(b for b in blocks if "seq_uuid_pk()" in b), next(b for b in blocks if "SeqUUIDField(" in b)]


def test_the_quick_start_comes_first_and_has_both_orms():
    assert README.index(QUICK_START) < README.index("## The id families") < README.index("make demo")
    assert README.index("pip install -e '.[sqlalchemy]'") < 2500  # on the first screen
    assert len(README.splitlines()) <= 300  # a front door; the manual is docs/
    sqlalchemy_model, django_model = quick_start_blocks()
    assert "SeqUUIDField" not in sqlalchemy_model and "seq_uuid_pk" not in django_model


def test_the_sqlalchemy_quick_start_runs(engine):
    import types

    from sqlalchemy.orm import Session

    module = types.ModuleType("readme_quick_start")  # a module of its own, as a user's models.py is
    sys.modules[module.__name__] = module  # SQLAlchemy resolves the annotations through it
    try:
        exec(compile(quick_start_blocks()[0], "README.md", "exec", dont_inherit=True), module.__dict__)
        base, order = module.Base, module.Order
        base.metadata.create_all(engine)
        try:
            with Session(engine) as session:
                for i in range(5):
                    session.add(order(note=f"n{i}"))
                    session.flush()
                session.commit()
                notes = session.scalars(sa.select(order.note).order_by(order.id)).all()
            assert notes == [f"n{i}" for i in range(5)]  # ORDER BY id, asked of the database: creation order
        finally:
            base.metadata.drop_all(engine)
    finally:
        del sys.modules[module.__name__]


@pytest.mark.django  # deselected, not skipped, in the nox sessions without Django
def test_the_django_quick_start_runs(tmp_path):
    """The README's model as the models.py of an app, in a project of its own (SQLite)."""
    pytest.importorskip("django")
    app = tmp_path / "readme"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "models.py").write_text(quick_start_blocks()[1])
    script = f"""
import django
from django.conf import settings

settings.configure(
    DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": {str(tmp_path / "db.sqlite3")!r}}}}},
    INSTALLED_APPS=["readme"],
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    USE_TZ=True,
)
django.setup()
from django.db import connection
from readme.models import Order
with connection.schema_editor() as editor:
    editor.create_model(Order)
made = [Order.objects.create(note=f"n{{i}}").pk for i in range(5)]
assert list(Order.objects.order_by("pk").values_list("pk", flat=True)) == made  # ORDER BY pk: creation order
print("ok", made[0].version)
"""
    checkout = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{checkout}", "DJANGO_SETTINGS_MODULE": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "7"]
