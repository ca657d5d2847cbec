"""Making ``uuid.UUID`` objects from an int without ``__init__``'s parsing: this folder's shared internals.

What CPython 3.14 calls ``UUID._from_int``, through the class's slot descriptors (faster than
``object.__setattr__``, which looks the slot up by name).  The generators set the slots inline;
:func:`from_int` is for the other callers.
"""

from __future__ import annotations

import uuid

NEW = object.__new__
SET_INT = uuid.UUID.__dict__["int"].__set__
SET_SAFE = uuid.UUID.__dict__["is_safe"].__set__
SAFE_UNKNOWN = uuid.SafeUUID.unknown


def from_int(value: int) -> uuid.UUID:
    """A ``uuid.UUID`` of ``value`` (an int the caller made from 128 bits: not checked)."""
    u = NEW(uuid.UUID)
    SET_INT(u, value)
    SET_SAFE(u, SAFE_UNKNOWN)
    return u
