"""Replacing an object's method for a test, as a method still: a step names a store's call by reference
(``Call(store.acquire, ...)``) and a loop awaits its twin (``store.aacquire``) found through the bound
method's object and name, so a replacement must stay bound to the store under its own name."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any


def replace_method(obj: object, name: str, function: Callable[..., Any]) -> None:
    """Make ``obj.name`` call ``function(*args, **kwargs)``, as a method of ``obj`` named ``name``."""
    if inspect.iscoroutinefunction(function):

        async def bound(_self: object, *args: Any, **kwargs: Any) -> Any:
            return await function(*args, **kwargs)

    else:

        def bound(_self: object, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return function(*args, **kwargs)

    bound.__name__ = bound.__qualname__ = name
    setattr(obj, name, types.MethodType(bound, obj))
