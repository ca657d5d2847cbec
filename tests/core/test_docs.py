"""The API reference (docs/reference/api, rendered by mkdocstrings from the docstrings) names every
public name: a name added to an ``__all__`` and not to the reference would be missing from the site,
which ``mkdocs build --strict`` cannot see (it checks what is written, not what is left out)."""

from __future__ import annotations

import ast
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


def _source(module: str) -> Path | None:
    """The source file of ``module`` in the checkout (read, not imported: a core session has no
    Django or Pydantic to import the adapters with)."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _defined(path: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_directive_names_something_that_exists():
    for target in directives():
        if _source(target) is not None:
            continue  # a module
        module, _, name = target.rpartition(".")
        path = _source(module)
        assert path is not None and name in _defined(path), f"docs/reference names {target}, which is not there"
