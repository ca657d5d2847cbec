"""The API reference (docs/reference/api, rendered by mkdocstrings from the docstrings) names every
public name: a name added to an ``__all__`` and not to the reference would be missing from the site,
which ``mkdocs build --strict`` cannot see (it checks what is written, not what is left out)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED_MODULES = ("seqid_orm", "seqid_orm.errors", "seqid_orm.vendors")


def directives() -> set[str]:
    found = set()
    for page in (ROOT / "docs" / "reference").rglob("*.md"):
        found.update(re.findall(r"^::: ([\w.]+)$", page.read_text(), flags=re.MULTILINE))
    return found


@pytest.mark.parametrize("module", DOCUMENTED_MODULES)
def test_every_public_name_is_in_the_reference(module):
    shown = directives()
    if module in shown:
        return  # the whole module is rendered, its public members with it
    names = importlib.import_module(module).__all__
    others = {d.rsplit(".", 1)[-1] for d in shown}
    errors = {"AllocationError", "InvalidIDError", "SeqIDError", "UnmaskError"}  # on the errors page
    missing = sorted(n for n in names if f"{module}.{n}" not in shown and n not in others and n not in errors)
    assert missing == [], f"docs/reference/api does not show {module}: {missing}"


def test_every_directive_names_something_that_exists():
    for target in directives():
        module, _, name = target.rpartition(".")
        try:
            importlib.import_module(target)
            continue
        except ImportError:
            pass
        assert hasattr(importlib.import_module(module), name), target
