"""TypeID: a type prefix and a UUID in base32, ``user_01h455vb4pex5vsknk084sn02q``.

The format is jetify's TypeID specification, version 0.3.0
(https://github.com/jetify-com/typeid/tree/main/spec), read exactly:

* the prefix: at most 63 characters of lowercase ASCII ``a-z`` and ``_``, starting and ending with a
  letter, or empty (then no separator: ``01h455vb4pex5vsknk084sn02q`` is a TypeID of no type);
* the suffix: the UUID's 128 bits behind two zero bits, in 26 characters of Crockford's alphabet
  written in lowercase only, so the first character is ``0``-``7``.  Nothing else decodes: no upper
  case, no hyphens, none of the letters Crockford's decoding reads as others (``i l o u``), so one id
  has one text (every one of the specification's ``invalid`` cases is refused).

The suffix is the same base32 as seqid's :func:`~seqid_orm.base32` ids (a ULID's text), in lower case;
new TypeIDs carry a :func:`~seqid_orm.uuid7`, and any UUID can be written as one (the specification
allows other versions "when the bits are provided by end users").  Stored as a UUID, a TypeID key
sorts as its UUID: time first.

>>> import uuid
>>> encode_typeid("prefix", uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
'prefix_01h455vb4pex5vsknk084sn02q'
>>> decode_typeid("prefix_01h455vb4pex5vsknk084sn02q")
('prefix', UUID('01890a5d-ac96-774b-bcce-b302099a8057'))
>>> decode_typeid("user_01h455vb4pex5vsknk084sn02q", prefix="order")
Traceback (most recent call last):
...
seqid_orm.errors.InvalidIDError: a TypeID of type 'order' was expected, got type 'user'
"""

from __future__ import annotations

import re
import uuid

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError
from ._uuid import from_int
from .comb import uuid7
from .text import encode_base32

__all__ = ["TYPEID_ALPHABET", "TYPEID_PREFIX_MAX", "check_typeid_prefix", "decode_typeid", "encode_typeid", "typeid"]

#: The suffix's alphabet: Crockford's, in lower case (the specification's table).
TYPEID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
#: The longest prefix the specification allows.
TYPEID_PREFIX_MAX = 63

_SUFFIX_LENGTH = 26
_PREFIX = re.compile(r"[a-z](?:[a-z_]*[a-z])?")  # ASCII letters only: re's a-z is that range
_SUFFIX_CHARS = frozenset(TYPEID_ALPHABET)
# int(text, 32) reads 0-9a-v; the alphabet maps onto those digits one to one
_TO_INT_DIGITS = str.maketrans(TYPEID_ALPHABET, "0123456789abcdefghijklmnopqrstuv")


def _check_prefix(prefix: object, error: type[Exception]) -> str:
    if not isinstance(prefix, str):
        raise ArgumentTypeError(f"a TypeID prefix must be a str, got {type(prefix).__name__}")
    if len(prefix) > TYPEID_PREFIX_MAX:
        raise error(f"a TypeID prefix has at most {TYPEID_PREFIX_MAX} characters, got {len(prefix)}")
    if prefix and _PREFIX.fullmatch(prefix) is None:
        raise error(
            f"a TypeID prefix is lowercase ASCII letters and underscores, starting and ending with a letter: {prefix!r}"
        )
    return prefix


def check_typeid_prefix(prefix: object) -> str:
    """``prefix`` if the specification allows it as a type (for a column declared with it), else
    :class:`~seqid_orm.errors.InvalidArgumentError` naming the rule."""
    return _check_prefix(prefix, InvalidArgumentError)


def encode_typeid(prefix: str, value: uuid.UUID) -> str:
    """The TypeID text of ``value`` under ``prefix`` (``""``: no type, no separator)."""
    _check_prefix(prefix, InvalidArgumentError)
    if not isinstance(value, uuid.UUID):
        raise ArgumentTypeError(f"value must be a uuid.UUID, got {type(value).__name__}")
    suffix = encode_base32(value).lower()
    return f"{prefix}_{suffix}" if prefix else suffix


def typeid(prefix: str) -> str:
    """A new TypeID of type ``prefix``: a :func:`~seqid_orm.uuid7` (time first, strictly increasing)."""
    return encode_typeid(prefix, uuid7())  # which checks the prefix


def decode_typeid(text: str, prefix: str | None = None) -> tuple[str, uuid.UUID]:
    """``(prefix, uuid)`` of a TypeID's text; with ``prefix``, the type it must have.

    Anything the specification does not allow raises :class:`~seqid_orm.errors.InvalidIDError`
    naming what is wrong.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"a TypeID must be a str, got {type(text).__name__}")
    found, separator, suffix = text.rpartition("_")
    if separator and not found:
        raise InvalidIDError(f"not a TypeID: {text!r} has a separator but no prefix (an empty prefix has none)")
    _check_prefix(found, InvalidIDError)
    if len(suffix) != _SUFFIX_LENGTH:
        raise InvalidIDError(f"not a TypeID: its suffix has {_SUFFIX_LENGTH} characters, got {len(suffix)}")
    bad = set(suffix) - _SUFFIX_CHARS
    if bad:
        raise InvalidIDError(
            f"not a TypeID: characters {''.join(sorted(bad))!r} are outside its alphabet (lowercase {TYPEID_ALPHABET})"
        )
    if suffix[0] > "7":
        raise InvalidIDError(f"not a TypeID: {suffix!r} exceeds 128 bits (the first character must be 0-7)")
    if prefix is not None and found != _check_prefix(prefix, InvalidArgumentError):
        raise InvalidIDError(f"a TypeID of type {prefix!r} was expected, got type {found!r}")
    return found, from_int(int(suffix.translate(_TO_INT_DIGITS), 32))
