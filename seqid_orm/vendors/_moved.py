"""What the deprecated aliases of the modules that left this folder for :mod:`seqid_orm.schema` share: one
warning at import, and every name looked up in the module it moved to (PEP 562's module ``__getattr__``).

May import the standard library only (the module it moved to is looked up by name, when the alias is used).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved(old: str, new: str) -> tuple[Callable[[str], Any], list[str]]:
    """``old``'s ``__getattr__`` and ``__all__``: the names of ``new``, which ``old`` was."""
    warnings.warn(f"{old} moved to {new}; the old name goes in the next release", DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)

    def __getattr__(name: str) -> Any:
        return getattr(module, name)

    return __getattr__, list(module.__all__)
