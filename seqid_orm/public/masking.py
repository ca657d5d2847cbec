"""Public ids that do not reveal when a row was made: a keyed, reversible mask over seqid's UUIDs.

A time-ordered key tells anyone who sees it when its row was created (to the millisecond) and, from
two of them, how many rows were made in between; some projects refuse UUIDv7 user ids for exactly
that reason (Keycloak issue #41920).  Keep the ordered key in the database and show the world
``mask(key, secret)``: a well-formed UUIDv4 that a holder of ``secret`` turns back with ``unmask``.

How: the id's variable bits (122 of its 128; the other six are its version and variant) go through
an 8-round Feistel network whose round function is keyed BLAKE2b (``hashlib``), tweaked by the
id's kind, and come out as the 122 random-looking bits of a version-4 UUID.  A Feistel network of
four or more rounds over a pseudorandom function is a pseudorandom permutation (Luby and Rackoff,
1988); eight leave a margin.  The layouts whose variant takes three bits (``time_last``,
``time_first_le``) have 121 variable bits: the spare bit is zero, and ``unmask`` checks it.

What it protects: without the key, the public id gives no creation time, no order, no count, and
masks of consecutive ids look unrelated.  What it does not: it is not encryption of secrets (the
key space of the row ids is what it is), it does not hide *that* two requests name the same row (a
masked id is as stable as the id), and anyone holding the key reads every time.  ``unmask`` with a
wrong key returns a wrong id unless that can be detected: for time-ordered layouts it refuses a
result whose time lies in the future (a wrong key passes this check about once in 160 tries for
48-bit times, once in 10 for the sharded layout's 44 bits); the ORM helpers also look the row up,
which no wrong key survives.  Rotating keys: see :func:`unmask_any`.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Literal

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError, UnmaskError
from ..ids.comb import decode_comb, ms_limit
from ..ids.layout import Layout, as_layout
from ..ids.validate import coerce_uuid

__all__ = ["MaskedLayout", "UnmaskError", "mask", "unmask", "unmask_any"]

#: What :func:`unmask` needs to know about the id behind a public id: its layout, or
#: ``"prefixed"`` for the wrapping-prefix ids (version 4), which carry no time.
MaskedLayout = Layout | Literal["prefixed"]

_ROUNDS = 8
_HALF = 61  # 122 bits as two halves
_M61 = (1 << _HALF) - 1
_PERSON = b"seqid-mask-v1"
_MIN_KEY = 16
_FUTURE_SLACK_MS = 86_400_000  # a clock a day fast is still believed

# (variant bits, version nibble) of each kind seqid masks, and the tweak that separates their
# permutations (so equal payloads of different kinds never share a public id)
_RFC, _NCS110 = 0b10, 0b110
_TWEAK = {(_RFC, 4): 4, (_RFC, 7): 7, (_RFC, 8): 8, (_NCS110, 4): 0x14, (_NCS110, 5): 0x15}
_KIND_OF: dict[Layout | str, tuple[int, int]] = {
    Layout.TIME_FIRST: (_RFC, 7),
    Layout.SHARDED: (_RFC, 8),
    Layout.TIME_LAST: (_NCS110, 4),
    Layout.TIME_FIRST_LE: (_NCS110, 5),
    "prefixed": (_RFC, 4),
}


_BASES: dict[bytes, hashlib.blake2b] = {}
_BASES_LOCK = threading.Lock()


def _base(key: object) -> hashlib.blake2b:
    """The keyed BLAKE2b state for ``key`` (kept: keying costs as much as a round)."""
    if not isinstance(key, (bytes, bytearray)):
        raise ArgumentTypeError(f"a mask key must be bytes, got {type(key).__name__}")
    raw = bytes(key)
    base = _BASES.get(raw)
    if base is not None:
        return base
    if len(raw) < _MIN_KEY:
        raise InvalidArgumentError(f"a mask key must be at least {_MIN_KEY} bytes, got {len(raw)}")
    material = raw if len(raw) <= 64 else hashlib.blake2b(raw, person=b"seqid-mask-key").digest()  # BLAKE2b's limit
    base = hashlib.blake2b(key=material, digest_size=8, person=_PERSON)
    with _BASES_LOCK:
        if len(_BASES) >= 64:  # a few keys in a process (current and previous): never grow unbounded
            _BASES.clear()
        _BASES[raw] = base
    return base


def _round(base: hashlib.blake2b, tweak: int, r: int, half: int) -> int:
    h = base.copy()
    h.update(bytes((tweak, r)) + half.to_bytes(8, "big"))
    return int.from_bytes(h.digest(), "big") & _M61


def _permute(bits: int, base: hashlib.blake2b, tweak: int) -> int:
    left, right = bits >> _HALF, bits & _M61
    for r in range(_ROUNDS):
        left, right = right, left ^ _round(base, tweak, r, right)
    return (left << _HALF) | right


def _unpermute(bits: int, base: hashlib.blake2b, tweak: int) -> int:
    left, right = bits >> _HALF, bits & _M61
    for r in reversed(range(_ROUNDS)):
        left, right = right ^ _round(base, tweak, r, left), left
    return (left << _HALF) | right


def _variant_and_version(i: int) -> tuple[int, int] | None:
    nibble = (i >> 76) & 0xF
    if (i >> 62) & 0b11 == _RFC:
        return _RFC, nibble
    if (i >> 61) & 0b111 == _NCS110:
        return _NCS110, nibble
    return None


def _payload(i: int, variant: int) -> int:
    """The variable bits of a UUID's int (122, or 121 for the three-bit variant)."""
    low_bits = 62 if variant == _RFC else 61
    return (((i >> 80) << 12 | ((i >> 64) & 0xFFF)) << low_bits) | (i & ((1 << low_bits) - 1))


def _assemble(payload: int, variant: int, version: int) -> int:
    low_bits = 62 if variant == _RFC else 61
    low = payload & ((1 << low_bits) - 1)
    mid = (payload >> low_bits) & 0xFFF
    high = payload >> (low_bits + 12)
    return (high << 80) | (version << 76) | (mid << 64) | (variant << low_bits) | low


def mask(value: uuid.UUID | str, key: bytes) -> uuid.UUID:
    """The public form of ``value``: a UUIDv4 that reveals nothing of it without ``key``.

    ``value`` is an id seqid makes: a UUIDv7 (``time_first``), a sharded version-8 id, a
    ``time_last`` or ``time_first_le`` id, or a wrapping-prefix (version 4) id; ``key`` is a
    secret of at least 16 bytes.
    """
    i = coerce_uuid(value).int
    kind = _variant_and_version(i)
    if kind is None or kind not in _TWEAK:
        raise InvalidIDError(
            f"mask() takes the UUIDs seqid makes (versions 4, 7 and 8, and the time_last and "
            f"time_first_le layouts), not {uuid.UUID(int=i)}"
        )
    public = _permute(_payload(i, kind[0]), _base(key), _TWEAK[kind])
    return uuid.UUID(int=_assemble(public, _RFC, 4))


def unmask(public: uuid.UUID | str, key: bytes, *, layout: MaskedLayout | str = Layout.TIME_FIRST) -> uuid.UUID:
    """The id behind ``public``, masked by :func:`mask` with ``key`` from an id in ``layout``.

    ``layout`` is where the ids came from (the column's layout; ``"prefixed"`` for
    wrapping-prefix ids).  Raises :class:`UnmaskError` when the result cannot be right: not a
    masked id, or (time-ordered layouts) a time in the future — the sign of another key.
    """
    expected = _KIND_OF["prefixed"] if layout == "prefixed" else _KIND_OF[as_layout(layout)]
    i = coerce_uuid(public).int
    if _variant_and_version(i) != (_RFC, 4):
        raise UnmaskError(f"{uuid.UUID(int=i)} is not a masked id (they are version-4 UUIDs)")
    bits = _unpermute(_payload(i, _RFC), _base(key), _TWEAK[expected])
    variant, version = expected
    if variant == _NCS110 and bits >> 121:
        raise UnmaskError(f"{uuid.UUID(int=i)} was not masked with this key from a {layout} id")
    value = uuid.UUID(int=_assemble(bits, variant, version))
    if layout != "prefixed":
        lay = as_layout(layout)
        ms = decode_comb(value, lay)[0]
        if ms > min(time.time_ns() // 1_000_000 + _FUTURE_SLACK_MS, ms_limit(lay)):
            raise UnmaskError(
                f"{uuid.UUID(int=i)} unmasks to an id made in the future: it was masked with another key "
                f"or from another layout than {lay.value}"
            )
    return value


def unmask_any(
    public: uuid.UUID | str, keys: Iterable[bytes], *, layout: MaskedLayout | str = Layout.TIME_FIRST
) -> list[uuid.UUID]:
    """Every id ``public`` can stand for under ``keys`` (newest first), for key rotation.

    Rotate by masking with the new key while still accepting the old ones: look the candidates
    up in order and take the first row that exists (the ORM helpers do).  A wrong key yields a
    candidate only when :func:`unmask` cannot detect it, and that candidate names no row.
    """
    out: list[uuid.UUID] = []
    for key in keys:
        try:
            out.append(unmask(public, key, layout=layout))
        except UnmaskError:
            continue
    return out
