"""The documentation's ``python`` blocks, read the way a user reads them: in page order, each page's
blocks one program (a page builds on its earlier blocks), Django models apart (they belong in an
app's ``models.py``)."""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


@dataclasses.dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the block's first line of code, 1-based
    text: str

    @property
    def is_django_models(self) -> bool:
        """A models module: it imports ``django.db.models`` and defines a model."""
        return "from django.db import models" in self.text and "(models.Model)" in self.text

    @property
    def awaits_at_top_level(self) -> bool:
        """Written for ``python -m asyncio`` (a top-level ``await``), not for a script."""
        try:
            compile(self.text, self.page, "exec", dont_inherit=True)  # (the AST alone admits it)
            return False
        except SyntaxError:  # 'await' outside function; anything else fails here too
            compile(self.text, self.page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
            return True


def blocks(page: str) -> list[Block]:
    """Every fenced ``python`` block of a page, dedented as it is copied."""
    text = (ROOT / page).read_text()
    found = []
    for match in _FENCE.finditer(text):
        indent = len(match.group("indent"))
        body = "".join(line[indent:] for line in match.group("body").splitlines(keepends=True))
        found.append(Block(page, text.count("\n", 0, match.start("body")) + 1, body))
    return found


def script(page: str) -> str:
    """The page's blocks other than Django models, as one program whose line numbers are the page's
    (a traceback points into the document)."""
    lines: list[str] = []
    for block in blocks(page):
        if block.is_django_models:
            continue
        lines.extend([""] * (block.line - 1 - len(lines)))
        lines.extend(block.text.splitlines())
    return "\n".join(lines) + "\n"


__all__ = ["PAGES", "Block", "blocks", "script"]
