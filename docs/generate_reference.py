"""Write docs/reference/*.md from the package's own source: every public name, its import path, its
signature and the first paragraph of its docstring.  ``python docs/generate_reference.py`` rewrites
them; ``tests/core/test_docs.py`` fails when a committed page is behind the code.

It reads the source with ``ast`` and imports nothing, so it needs no extra (Django, Pydantic...).
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "seqid_orm"
OUT = ROOT / "docs" / "reference"

# (page, title, introduction, [(module, names or None for the module's __all__)])
PAGES = [
    (
        "ids",
        "Ids: generators, codecs, reading back",
        "Standard library only. The top level re-exports what most code needs.",
        [
            (
                "seqid_orm",
                [
                    "uuid7",
                    "comb",
                    "comb_batch",
                    "comb_at",
                    "CombGenerator",
                    "Layout",
                    "describe",
                    "timestamp_of",
                    "IdInfo",
                    "Snowflake",
                    "bsv",
                    "base32",
                    "uuid_sequence_nextval",
                    "uuid_time_nextval",
                ],
            ),
            ("seqid_orm.ids.comb", ["generator_for"]),
            ("seqid_orm.ids.snowflake", ["WorkerSource", "SnowflakeParts"]),
            ("seqid_orm.ids.text", ["encode_bsv", "decode_bsv", "bsv_parts", "encode_base32", "decode_base32"]),
            ("seqid_orm.ids.prefixed", ["prefix_of", "sequence_prefixer"]),
            ("seqid_orm.ids.validate", ["coerce_uuid", "coerce_int_id"]),
        ],
    ),
    (
        "vendors",
        "Vendors: what each database does, and the Target",
        "Standard library only. One module per vendor answers the same questions (`VendorRules`).",
        [("seqid_orm.vendors", None), ("seqid_orm.vendors.cockroachdb", ["hash_sharded_primary_key"])],
    ),
    (
        "allocation",
        "Allocation: ticket sequences and leased worker ids",
        "The stores load SQLAlchemy, redis-py or Django when opened.",
        [("seqid_orm", ["TicketSequence", "WorkerLease"]), ("seqid_orm.allocation.leases", ["open_lease_store"])],
    ),
    (
        "public",
        "Public ids",
        "A time-ordered key shown without its time.",
        [("seqid_orm", ["mask", "unmask", "unmask_any"])],
    ),
    (
        "errors",
        "Errors",
        "Every error is a `SeqIDError` and a `ValueError`, `TypeError` or `RuntimeError`.",
        [("seqid_orm.errors", None)],
    ),
    (
        "sqlalchemy",
        "SQLAlchemy",
        "`pip install 'seqid-orm[sqlalchemy]'`.",
        [("seqid_orm.sqlalchemy", None), ("seqid_orm.sqlalchemy.sqlmodel", None)],
    ),
    (
        "alembic",
        "Alembic",
        "`pip install 'seqid-orm[alembic]'`; `import seqid_orm.sqlalchemy.alembic` registers the operations.",
        [("seqid_orm.sqlalchemy.alembic", None)],
    ),
    (
        "django",
        "Django",
        "`pip install 'seqid-orm[django]'`; add `\"seqid_orm.django\"` to `INSTALLED_APPS` for tickets and leases.",
        [
            ("seqid_orm.django", None),
            ("seqid_orm.django.operations", None),
            ("seqid_orm.django.rest_framework", None),
            ("seqid_orm.django.public_ids", None),
        ],
    ),
    ("pydantic", "Pydantic", "`pip install 'seqid-orm[pydantic]'`.", [("seqid_orm.pydantic", None)]),
]


def module_path(module: str) -> Path:
    parts = module.split(".")[1:]
    folder = PACKAGE.joinpath(*parts)
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


def definitions(module: str) -> dict[str, ast.AST]:
    """The module's top-level definitions, following ``from .x import name`` re-exports to their source."""
    tree = ast.parse(module_path(module).read_text())
    found: dict[str, ast.AST] = {}
    package = module if module_path(module).name == "__init__.py" else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if (alias.asname or alias.name) not in found and module_path(source).exists():
                    found[alias.asname or alias.name] = ("reexport", source, alias.name)  # type: ignore[assignment]
    return found


def public_names(module: str) -> list[str]:
    tree = ast.parse(module_path(module).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return [n for n in definitions(module) if not n.startswith("_")]


def resolve(module: str, name: str) -> tuple[ast.AST | None, str]:
    """The definition of ``name`` and the module it is written in."""
    node = definitions(module).get(name)
    while isinstance(node, tuple):
        _, module, original = node
        node = definitions(module).get(original)
    return node, module


def assignment_doc(node: ast.AST, module: str) -> str | None:
    """A name's ``#:`` comment lines (Sphinx's convention), else a string given to the call that makes it."""
    lines = module_path(module).read_text().splitlines()
    comment: list[str] = []
    at = node.lineno - 2  # type: ignore[attr-defined]
    while at >= 0 and lines[at].lstrip().startswith("#:"):
        comment.insert(0, lines[at].lstrip()[2:].strip())
        at -= 1
    if comment:
        return " ".join(comment)
    body = ast.parse(module_path(module).read_text()).body
    after = [b for a, b in itertools.pairwise(body) if a.lineno == node.lineno]  # type: ignore[attr-defined]
    if after and isinstance(after[0], ast.Expr) and isinstance(after[0].value, ast.Constant):
        return str(after[0].value.value)  # an attribute docstring, the string just after the assignment
    value = getattr(node, "value", None)
    if isinstance(value, ast.Call):
        texts = [a.value for a in value.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        return max(texts, key=len) if texts and len(max(texts, key=len)) > 20 else None
    return None


def first_paragraph(doc: str | None) -> str:
    return (doc or "").strip().split("\n\n")[0].replace("\n", " ").strip()


def describe(module: str, name: str) -> str:
    node, written_in = resolve(module, name)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        signature = f"{name}({ast.unparse(node.args)})"
        kind, doc = "function", ast.get_docstring(node)
    elif isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        args = ast.unparse(init.args).removeprefix("self, ").removeprefix("self") if init else ""
        signature, kind, doc = f"{name}({args})", "class", ast.get_docstring(node)
    else:
        signature, kind, doc = name, "name", assignment_doc(node, written_in) if node is not None else None
    text = first_paragraph(doc) or "(see the source)"
    return f"### `{signature}`\n\n*{kind}*, `from {module} import {name}`\n\n{text}\n"


def page(title: str, intro: str, entries: list[tuple[str, list[str] | None]]) -> str:
    lines = [f"# {title}", "", intro, "", "*Generated from the source by `docs/generate_reference.py`.*", ""]
    for module, names in entries:
        lines += [f"## `{module}`", ""]
        for name in names if names is not None else public_names(module):
            lines.append(describe(module, name))
    return "\n".join(lines).rstrip() + "\n"


def pages() -> dict[str, str]:
    out = {f"{slug}.md": page(title, intro, entries) for slug, title, intro, entries in PAGES}
    index = ["# Reference", "", "Every public name with its import path, by role:", ""]
    index += [f"- [{title}](reference/{slug}.md)" for slug, title, _, _ in PAGES]
    index += ["", "The command line: `seqid --help` and `seqid COMMAND --help`.", ""]
    out["../reference.md"] = "\n".join(index)
    return out


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (OUT / name).resolve().write_text(text)
    print(f"wrote {len(PAGES) + 1} pages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
