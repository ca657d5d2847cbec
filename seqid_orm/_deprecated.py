"""Old import paths and names, kept for one release with a ``DeprecationWarning`` (see CHANGELOG).

Imports nothing from the package at import time: each alias loads its new home when used.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["moved_module", "renamed"]


def moved_module(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old``, whose contents now live in ``new``; warns once, at import."""
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)
    target = importlib.import_module(new)

    def __getattr__(name: str) -> Any:
        return getattr(target, name)

    return __getattr__


def renamed(module: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` answering each old name of ``names`` (old -> ``"new.module:new_name"``)
    with its new object, and a ``DeprecationWarning`` naming the new spelling."""

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        path, _, new_name = where.partition(":")
        spelled = f"{path}.{new_name}" if new_name != name or path != module else path
        warnings.warn(
            f"{module}.{name} is deprecated; use {spelled} (the old name goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(path), new_name)

    return __getattr__
