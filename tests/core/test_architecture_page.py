"""docs/architecture.md names the module and function of each decision: every name it gives must
still be one the source defines, or the page sends a newcomer to code that moved."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def defined_names() -> set[str]:
    """Every class, function, method, argument and attribute name the package defines, and the
    test files' paths."""
    names: set[str] = {"tests", "await"}
    for path in (ROOT / "tests").rglob("*.py"):
        names.update(path.relative_to(ROOT).with_suffix("").parts)
    for path in (ROOT / "seqid_orm").rglob("*.py"):
        names.add(path.parent.name if path.stem == "__init__" else path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def test_every_function_the_architecture_page_names_exists():
    page = (ROOT / "docs" / "architecture.md").read_text()
    names = defined_names()
    cited = set()
    for token in re.findall(r"`([^`\s]+)`", page):
        token = token.removesuffix("()").removesuffix(".py")
        if not re.fullmatch(r"[A-Za-z_][\w]*(?:[./][A-Za-z_]\w*)*", token):
            continue  # a value, a command, a setting
        cited.update(part for part in re.split(r"[./]", token) if part != "py")
    ignored = {"seqid_orm", "stores", "allocation", "vendors", "django", "ids", "redis", "sqlalchemy", "asyncio"}
    missing = sorted(name for name in cited - ignored if name not in names)
    assert len(cited) > 60, "the page's names were not read"
    assert missing == [], f"docs/architecture.md names what the source no longer defines: {missing}"
