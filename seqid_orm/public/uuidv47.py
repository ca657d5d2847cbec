"""uuidv47: a UUIDv7 shown as a UUIDv4, readable by the other implementations of that format.

uuidv47 (https://github.com/stateless-me/uuidv47: a C header, a PostgreSQL extension, ports to Go,
JavaScript, .NET and Ruby) keeps the key a UUIDv7 and shows the world a *façade*: the 48-bit time
XORed with a keyed SipHash-2-4 of the id's own 74 random bits, the version nibble set to 4.  The
random bits stay as they are, so the façade carries them in the clear and the mask is undone by the
same XOR.  This module computes exactly what the C header computes (tested against its SipHash
vectors and against façades it made), with the key as the PostgreSQL extension's ``*_with_key``
functions take it: 16 bytes, ``k0`` then ``k1``, each little-endian (SipHash's own convention).

When to use which (both keep the stored key ordered and unmask exactly):

* seqid's :func:`~seqid_orm.mask` hides every variable bit (an 8-round Feistel network over all 122,
  keyed BLAKE2b), takes every seqid layout and the wrapping-prefix ids, and refuses a wrong key's
  result where it can tell (a time in the future);
* uuidv47 hides the time only (the 74 random bits are shown as stored, so a façade says which stored
  key it is to anyone who has both), takes UUIDv7 only, and cannot tell a wrong key (any key turns a
  façade into some UUIDv7).  Choose it when another system must read the same public ids: a
  PostgreSQL with the ``uuid47`` extension, a Go or Node service using a port.

>>> import uuid
>>> key = bytes.fromhex("00112233445566778899aabbccddeeff")
>>> public = mask_uuidv47(uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"), key)
>>> public
UUID('cf91d7da-5a8e-474b-bcce-b302099a8057')
>>> unmask_uuidv47(public, key)
UUID('01890a5d-ac96-774b-bcce-b302099a8057')
"""

from __future__ import annotations

import uuid

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError
from ..ids.validate import coerce_uuid

__all__ = ["mask_uuidv47", "siphash24", "unmask_uuidv47"]

_M64 = (1 << 64) - 1
_M48 = (1 << 48) - 1
_VERSION_NIBBLE = 0xF << 76
_VARIANT_RFC = 0b10 << 62
_VARIANT_BITS = 0b11 << 62


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(data: bytes, k0: int, k1: int) -> int:
    """SipHash-2-4 of ``data`` under the 128-bit key ``(k0, k1)`` (Aumasson and Bernstein, 2012):
    the keyed function uuidv47 derives its mask from.  ``k0`` and ``k1`` are the key's two
    little-endian 64-bit halves.

    >>> hex(siphash24(b"", 0x0706050403020100, 0x0F0E0D0C0B0A0908))  # the paper's first vector
    '0x726fdb47dd0e0e31'
    """
    v0, v1 = 0x736F6D6570736575 ^ k0, 0x646F72616E646F6D ^ k1
    v2, v3 = 0x6C7967656E657261 ^ k0, 0x7465646279746573 ^ k1

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _M64
            v2 = (v2 + v3) & _M64
            v1, v3 = _rotl(v1, 13) ^ v0, _rotl(v3, 16) ^ v2
            v0 = _rotl(v0, 32)
            v2 = (v2 + v1) & _M64
            v0 = (v0 + v3) & _M64
            v1, v3 = _rotl(v1, 17) ^ v2, _rotl(v3, 21) ^ v0
            v2 = _rotl(v2, 32)

    whole = len(data) & ~7
    for start in range(0, whole, 8):
        m = int.from_bytes(data[start : start + 8], "little")
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def _key_halves(key: object) -> tuple[int, int]:
    if not isinstance(key, (bytes, bytearray)):
        raise ArgumentTypeError(f"a uuidv47 key must be bytes, got {type(key).__name__}")
    if len(key) != 16:
        raise InvalidArgumentError(f"a uuidv47 key is 16 bytes (k0 then k1, little-endian), got {len(key)}")
    return int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")


def _mask48(i: int, k0: int, k1: int) -> int:
    """The mask of an id's time: SipHash of its random bits as 10 bytes (the header's message:
    the low nibble of byte 6, byte 7, byte 8 without its variant bits, bytes 9 to 15)."""
    b = i.to_bytes(16, "big")
    message = bytes((b[6] & 0x0F, b[7], b[8] & 0x3F)) + b[9:]
    return siphash24(message, k0, k1) & _M48


def _checked(value: object, version: int, what: str) -> int:
    u = coerce_uuid(value)
    i = u.int
    if (i & _VARIANT_BITS) != _VARIANT_RFC or u.version != version:
        raise InvalidIDError(f"{what} must be an RFC 9562 version {version} UUID, got {u}")
    return i


def _xor_time(i: int, key: bytes, version: int) -> uuid.UUID:
    """``i`` with its time XORed with the mask of its random bits, and version ``version``: the one
    transform both ways (the random bits, which the mask is made of, are the same on both sides)."""
    k0, k1 = _key_halves(key)
    time = (i >> 80) ^ _mask48(i, k0, k1)
    return uuid.UUID(int=(time << 80) | (i & ~(_M48 << 80) & ~_VERSION_NIBBLE) | (version << 76))


def mask_uuidv47(value: uuid.UUID | str, key: bytes) -> uuid.UUID:
    """The uuidv47 façade of a UUIDv7: its time masked, version 4, its random bits unchanged."""
    return _xor_time(_checked(value, 7, "the value to mask"), key, 4)


def unmask_uuidv47(public: uuid.UUID | str, key: bytes) -> uuid.UUID:
    """The UUIDv7 behind a uuidv47 façade (any key gives some UUIDv7: a wrong one is not detected)."""
    return _xor_time(_checked(public, 4, "a uuidv47 public id"), key, 7)
