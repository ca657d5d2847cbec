"""docs/reference is generated from the source (docs/generate_reference.py): it must not lag behind it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_pages_are_what_the_source_says_now():
    spec = importlib.util.spec_from_file_location("generate_reference", ROOT / "docs" / "generate_reference.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    pages = generator.pages()
    stale = [name for name, text in pages.items() if (ROOT / "docs" / "reference" / name).resolve().read_text() != text]
    assert stale == [], f"run `python docs/generate_reference.py`: {stale} are behind the source"
    assert all("(see the source)" not in text for text in pages.values()), "a public name has no docstring"
