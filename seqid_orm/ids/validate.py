"""The one validator both ORMs use for key values, so a wrong key never reaches the database.

Both the SQLAlchemy types and the Django fields call these before a value is bound, and
:func:`~seqid_orm.ids.decode.describe` parses text with the same rules.  They refuse rather than
guess: a silently converted key points at another row, or at none.

UUID keys accept exactly two spellings:

* a :class:`uuid.UUID` (whose ``int`` is a real 128-bit value), and
* the 36-character text ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` in hex digits of either case
  (RFC 9562 §4: hex is case-insensitive on input).

Refused: integers and bools (``uuid.UUID(int=12345)`` is a valid but certainly unintended
key), bytes, 32-digit hex without hyphens (it is also valid bsv text), braces, ``urn:uuid:``,
surrounding spaces, underscores and misplaced hyphens, all of which ``uuid.UUID()`` accepts.

Integer keys (Snowflake, tickets) accept an ``int`` in ``[0, 2**63)`` or its plain decimal text
(ASCII digits only, as a URL argument arrives); refused: ``bool``, ``float`` (``12.9`` would
become 12), negatives, values a signed BIGINT cannot hold, signs, spaces and underscores.
"""

from __future__ import annotations

import math
import re
import uuid

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError

__all__ = [
    "BIGINT_MAX",
    "UUID_INT_LIMIT",
    "check_bool",
    "check_seconds",
    "coerce_int_id",
    "coerce_uuid",
    "is_uuid_hex",
    "parse_uuid_text",
]

BIGINT_MAX = (1 << 63) - 1
UUID_INT_LIMIT = 1 << 128
_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_UUID_HEX = re.compile(r"[0-9a-fA-F]{32}\Z")
_DIGITS = re.compile(r"[0-9]+\Z")


def parse_uuid_text(text: str) -> uuid.UUID:
    """A UUID from its canonical 36-character text (either case); anything else raises."""
    if _UUID_TEXT.match(text) is None:
        raise InvalidIDError(f"invalid UUID text {text!r}: expected the 36-character form xxxxxxxx-xxxx-...")
    return uuid.UUID(text)


def is_uuid_hex(text: str) -> bool:
    """Whether ``text`` is 32 hex digits (either case): a UUID as ``HEX(id)`` or Django's ``char(32)``
    holds it, and also valid bsv text, so only callers that know which they read may parse it."""
    return _UUID_HEX.match(text) is not None


def coerce_uuid(value: object) -> uuid.UUID:
    """``value`` as a ``uuid.UUID`` if it is one or its canonical text; a typed error otherwise."""
    if isinstance(value, uuid.UUID):
        if not 0 <= value.int < UUID_INT_LIMIT:  # only a UUID built around __init__ can be
            raise InvalidIDError(f"a UUID's int must be an unsigned 128-bit value, got {value.int}")
        return value
    if isinstance(value, str):
        return parse_uuid_text(value)
    raise ArgumentTypeError(f"a UUID key must be a uuid.UUID or its text, got {type(value).__name__}")


def coerce_int_id(value: object, what: str = "an integer key") -> int:
    """``value`` as an integer key in ``[0, 2**63)``: an ``int`` or its decimal text."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ArgumentTypeError(f"{what} must be an int, got {type(value).__name__}")
    if isinstance(value, str):
        if _DIGITS.match(value) is None:
            raise InvalidIDError(f"{what} must be decimal digits only, got {value!r}")
        if len(value.lstrip("0")) > len(str(BIGINT_MAX)):  # no int() of a huge string (CPython caps it)
            raise InvalidIDError(f"{what} must be between 0 and 2**63-1, got {len(value)} digits")
        value = int(value)
    if not 0 <= value <= BIGINT_MAX:
        raise InvalidIDError(f"{what} must be between 0 and 2**63-1, got {value}")
    return value


def check_seconds(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a finite number of seconds in ``[low, high]``; a typed error naming ``name`` otherwise.

    Refuses ``bool``, ``None`` and text (``"5"``) with :class:`ArgumentTypeError`, and ``nan``,
    ``inf`` and values out of range with :class:`InvalidArgumentError`, before they reach a
    driver or an ``int()`` that would raise ``OverflowError``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be between {low:g} and {high:g} seconds, got {value!r}")
    return float(value)


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is a ``bool``; :class:`ArgumentTypeError` naming ``name`` otherwise (``"no"`` is true)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, got {type(value).__name__}")
    return value
