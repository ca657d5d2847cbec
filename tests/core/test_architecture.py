"""The package's shape, read from its source: what each folder may import, no import cycle (lazy
imports included), no private name borrowed across folders, and the standard library alone for the core.

Every import statement counts, at module level or inside a function, since a lazy import is still a
dependency (and was how leases and snowflake once imported each other).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "seqid_orm"

# What each folder of the package may import from the package (its docstring says the same).
ALLOWED = {
    "errors": set(),
    "calls": {"calls"},  # how a call runs (steps, its deadline, its tries): the standard library only
    "ids": {"calls", "errors", "ids"},
    "vendors": {"calls", "errors", "ids", "vendors"},
    "schema": {"calls", "errors", "ids", "vendors", "schema"},  # the features on live tables: they ask the vendors
    "allocation": {
        "calls",
        "errors",
        "ids",
        "vendors",
        "allocation",
    },  # vendors: the per-vendor rules the SQL stores read
    "public": {"calls", "errors", "ids", "public"},
    "sqlalchemy": {"calls", "errors", "ids", "vendors", "schema", "allocation", "public", "sqlalchemy"},
    "django": {"calls", "errors", "ids", "vendors", "schema", "allocation", "public", "django"},
    "pydantic": {"calls", "errors", "ids", "public", "pydantic"},
    "cli": {"calls", "errors", "ids", "vendors", "schema", "allocation", "public", "sqlalchemy", "cli"},
}
# Outside the standard library, only these may be imported, and only by these modules (the stores
# of allocation load their driver when a store of that kind is opened).
THIRD_PARTY = {
    # and psycopg, imported where the engine's driver is psycopg: its client-side-binding cursor
    # sends a statement and its time-outs in one message (vendors.call_bounds)
    "allocation.stores.sqlalchemy": {"sqlalchemy", "psycopg"},
    "allocation.stores.redis": {"redis"},
    "allocation.stores.etcd": {"etcd3gw"},
    "allocation.stores.django": {"django"},
    "allocation.telemetry": {"opentelemetry"},
}
CORE = ("errors", "calls", "ids", "vendors", "schema", "allocation", "public")
# Old module paths kept one release as deprecated aliases of the modules that moved (each warns on
# import): what they import is the module they name, whatever folder it is in now.
DEPRECATED_ALIASES = {
    f"seqid_orm.vendors.{m}": f"seqid_orm.schema.{m}" for m in ("online", "live", "adoption", "conversions", "doctor")
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names) of every import in ``path``, relative ones resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target, [alias.name for alias in node.names]))
    return found


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py")) if "migrations" not in p.parts}


def folder(module: str) -> str | None:
    """The role folder of a package module (``None`` for the package root, its shims and ``__main__``)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return parts[1] if parts[1] in ALLOWED else None


def package_modules_imported(module: str) -> set[str]:
    """The package modules ``module`` imports (a ``from pkg import sub`` counts as ``pkg.sub``)."""
    out = set()
    for _, target, names in imports(MODULES[module]):
        if target.split(".")[0] != "seqid_orm":
            continue
        subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
        out.update(subs or [target])
    return out - {module}


@pytest.mark.parametrize("module", [m for m in MODULES if folder(m)])
def test_each_folder_imports_only_what_its_role_allows(module):
    role = folder(module)
    wrong = sorted(
        target
        for target in package_modules_imported(module)
        if folder(target) not in ALLOWED[role] | {None} and DEPRECATED_ALIASES.get(module) != target
    )
    wrong += [target for target in package_modules_imported(module) if target == "seqid_orm" and role in CORE]
    assert wrong == [], f"{module} ({role}/) may import {sorted(ALLOWED[role])}, not {wrong}"


@pytest.mark.parametrize("module", [m for m in MODULES if folder(m) in CORE])
def test_the_core_needs_the_standard_library_alone(module):
    allowed = THIRD_PARTY.get(module.removeprefix("seqid_orm."), set())
    outside = sorted(
        {
            target.split(".")[0]
            for _, target, _ in imports(MODULES[module])
            if target.split(".")[0] not in sys.stdlib_module_names and target.split(".")[0] != "seqid_orm"
        }
        - allowed
    )
    assert outside == [], f"{module} imports {outside}"


def test_no_private_name_is_borrowed_across_folders():
    """A folder's private names (``_x``) and private modules stay inside it: others use its public doors."""
    borrowed = []
    for module, path in MODULES.items():
        for line, target, names in imports(path):
            if target.split(".")[0] != "seqid_orm" or folder(target) == folder(module) is not None:
                continue
            private = [n for n in names if n.startswith("_") and n != "__version__"]
            if any(part.startswith("_") and part != "__main__" for part in target.split(".")[1:]):
                private.append(target)
            if private and folder(module) is not None:
                borrowed.append(f"{module}:{line} {target} {private}")
    assert borrowed == []


def test_no_import_cycle_lazy_imports_included():
    graph = {module: package_modules_imported(module) & MODULES.keys() for module in MODULES}
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if target == "seqid_orm":
                continue  # the root's re-exports are a facade, imported by nothing in the core
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_folders_say_what_they_may_import():
    for role in ALLOWED:
        path = ROOT / role / "__init__.py" if (ROOT / role).is_dir() else ROOT / f"{role}.py"
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "import" in doc, f"{path} has no docstring saying what it may import"


# --- each module of allocation/ says what it may import, and keeps to it --------------------------

ALLOCATION = [m for m in MODULES if m.startswith("seqid_orm.allocation")]


def may_import(module: str) -> tuple[bool, set[str], str]:
    """What ``module``'s docstring lets it import: the standard library or not, the package modules (a
    module named allows what lies below it), and the line itself (third-party names are read from it)."""
    doc = ast.get_docstring(ast.parse(MODULES[module].read_text())) or ""
    found = re.search(r"May import:?(.*?)(?:\n\s*\n|\Z)", doc, flags=re.S)
    assert found is not None, f"{module}'s docstring has no 'May import:' line"
    line = " ".join(found.group(1).split())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    allowed: set[str] = set()
    for name in re.findall(r":mod:`~?([\w.]+)`", line):
        allowed.add(f"{package}{name}" if name.startswith(".") else name)
    for name in re.findall(r"``([\w.]+)``", line):
        if f"{package}.{name}" in MODULES or any(m.startswith(f"{package}.{name}.") for m in MODULES):
            allowed.add(f"{package}.{name}")
    if "this package's modules" in line:
        allowed.add(package)
    return "standard library" in line, allowed, line.lower()


_THIRD_PARTY_NAMES = {"sqlalchemy": "sqlalchemy", "psycopg": "psycopg", "redis": "redis", "etcd3gw": "etcd3gw"}


@pytest.mark.parametrize("module", ALLOCATION)
def test_each_allocation_module_says_what_it_may_import_and_keeps_to_it(module):
    stdlib, allowed, line = may_import(module)
    own = THIRD_PARTY.get(module.removeprefix("seqid_orm."), set())
    wrong = []
    for _, target, _names in imports(MODULES[module]):
        top = target.split(".")[0]
        if top == "seqid_orm":
            continue
        if top in sys.stdlib_module_names:
            if not stdlib:
                wrong.append(target)
        elif top not in own or _THIRD_PARTY_NAMES.get(top, top) not in line:
            wrong.append(target)
    for target in package_modules_imported(module):
        if not any(target == a or target.startswith(f"{a}.") for a in allowed):
            wrong.append(target)
    assert wrong == [], f"{module} says it may import {line!r}, and imports {sorted(set(wrong))}"


def test_the_pure_modules_of_allocation_import_no_factory_and_no_driver():
    """The modules that decide (the buffer, the flight, the server set, a grant, a renewal, the floors, the
    steps, the contracts) sit below the stores' factory and drivers: they import neither."""
    pure = ["segments", "flight", "servers", "grants", "renewal", "floors", "stores.base"]
    below = {
        f"seqid_orm.allocation.{m}"
        for m in ("stores", "stores.sqlalchemy", "stores.redis", "stores.etcd", "stores.django", "leases", "tickets")
    }
    for name in pure:
        imported = package_modules_imported(f"seqid_orm.allocation.{name}")
        assert not imported & below, f"{name} imports {sorted(imported & below)}"
