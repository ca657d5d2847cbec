"""The API reference (docs/reference/api, rendered by mkdocstrings from the docstrings) names every
public name: a name added to an ``__all__`` and not to the reference would be missing from the site,
which ``mkdocs build --strict`` cannot see (it checks what is written, not what is left out)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# every module whose __all__ a user imports from
DOCUMENTED_MODULES = (
    "seqid_orm",
    "seqid_orm.errors",
    "seqid_orm.vendors",
    "seqid_orm.sqlalchemy",
    "seqid_orm.sqlalchemy.alembic",
    "seqid_orm.sqlalchemy.public_ids",
    "seqid_orm.django",
    "seqid_orm.django.public_ids",
    "seqid_orm.django.rest_framework",
    "seqid_orm.pydantic",
    "seqid_orm.allocation.telemetry",
)


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
    names = _all(module)
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


def _all(module: str) -> list[str]:
    """``module.__all__``, read from its source (a core session cannot import the adapters)."""
    path = _source(module)
    assert path is not None, module
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return sorted(n for n in _defined(path) - _imported(path) if not n.startswith("_"))  # no __all__: what it defines


def _imported(path: Path) -> set[str]:
    """The names a module imports at its top level."""
    return {
        (a.asname or a.name).split(".")[0]
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for a in node.names
    }


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


def test_every_public_constant_has_a_docstring():
    """mkdocstrings shows a module-level name only with a docstring (the string after it): a public
    constant without one is left off the page although its module is rendered."""
    for module in DOCUMENTED_MODULES:
        path = _source(module)
        assert path is not None
        body = ast.parse(path.read_text()).body
        public = set(_all(module))
        for node, after in zip(body, [*body[1:], None], strict=True):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for name in (t.id for t in targets if isinstance(t, ast.Name) and t.id in public):
                    documented = (
                        isinstance(after, ast.Expr)
                        and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)
                    )
                    assert documented, f"{module}.{name} has no docstring: the reference leaves it out"


def test_the_troubleshooting_page_says_what_to_do_for_every_error():
    """Each error seqid raises (every class of seqid_orm.errors but the bases) has an entry on the
    troubleshooting page: a user who meets one finds what it means and the fix."""
    page = (ROOT / "docs" / "how-to" / "troubleshooting.md").read_text()
    bases = {"SeqIDError", "AllocationError"}
    errors = [n for n in _all("seqid_orm.errors") if n.endswith("Error") and n not in bases]
    assert len(errors) > 20
    entries = " ".join(re.findall(r"\*\*(.+?)\*\*", page))  # the bold lead of each entry
    missing = [n for n in errors if not re.search(rf"`{n}\b", entries)]
    assert missing == [], f"docs/how-to/troubleshooting.md has no entry for {missing}"
