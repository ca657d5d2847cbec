"""Sortable text ids: an order-preserving base64 ("bsv") and Crockford base32.

*bsv* (a .NET idea: a ticks prefix plus a GUID, as sortable text): 8 bytes of big-endian .NET
ticks (100 ns since 0001-01-01, UTC) followed by 16 random bytes, written with base64 whose
alphabet is re-ordered so that ASCII order equals value order: ``$ - 0-9 A-Z a-z``, padding
``!``. 24 bytes give exactly 32 characters. The alphabet mixes cases, so a column holding bsv
ids **must** use a binary collation (MySQL/MariaDB ``ascii_bin``, PostgreSQL ``"C"``, SQL
Server ``Latin1_General_BIN2``): under a case-insensitive one, two ids that differ only in case
collide.

*base32*: Crockford's alphabet, 26 characters for 128 bits, the text form of a ULID.  Upper
case only on output and case-insensitive on input, so it is safe under any collation.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import threading
import time
import uuid
import weakref
from collections.abc import Callable

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError
from ._uuid import from_int
from .comb import check_span, comb_at, epoch_us, uuid7
from .randomness import POOL, check_fork, on_fork

BSV_ALPHABET = "$-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BSV_PAD = "!"
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_TO_BSV = bytes.maketrans(_B64_ALPHABET, (BSV_ALPHABET + BSV_PAD).encode())
_FROM_BSV = bytes.maketrans((BSV_ALPHABET + BSV_PAD).encode(), _B64_ALPHABET)
_BSV_CHARS = frozenset(BSV_ALPHABET + BSV_PAD)

CROCKFORD_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_CHARS = frozenset(CROCKFORD_ALPHABET)
# Two characters per 10 bits: 13 look-ups encode 128 bits (+2 zero bits) into 26 characters.
_PAIRS = [a + b for a in CROCKFORD_ALPHABET for b in CROCKFORD_ALPHABET]
# int(text, 32) reads the digits 0-9a-v; Crockford's alphabet maps onto them one to one.
_TO_INT_DIGITS = str.maketrans(CROCKFORD_ALPHABET, "0123456789abcdefghijklmnopqrstuv")

#: .NET ticks at the Unix epoch.
DOTNET_TICKS_AT_UNIX_EPOCH = 621_355_968_000_000_000
BSV_LENGTH = 32
_BSV_BYTES = 24  # 8 bytes of ticks + 16 random
BASE32_LENGTH = 26


# --- bsv --------------------------------------------------------------------------------


_b2a_base64 = binascii.b2a_base64  # what base64.b64encode calls, without its Python frame


def encode_bsv(data: bytes) -> str:
    """Encode bytes with the order-preserving base64 alphabet (equal lengths sort as bytes)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentTypeError(f"data must be bytes, got {type(data).__name__}")
    return _b2a_base64(data, newline=False).translate(_TO_BSV).decode("ascii")


def decode_bsv(text: str) -> bytes:
    """Decode text made by :func:`encode_bsv`; anything else raises :class:`InvalidIDError`.

    Only the canonical text is accepted: base64 lets several texts decode to the same bytes
    (pad characters, unused low bits before the padding), and two texts naming one id would
    be two keys for one row.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be a str, got {type(text).__name__}")
    bad = set(text) - _BSV_CHARS
    if bad:
        raise InvalidIDError(f"not a bsv id: characters {''.join(sorted(bad))!r} are outside its alphabet")
    if len(text) % 4:
        raise InvalidIDError(f"not a bsv id: length {len(text)} is not a multiple of 4")
    try:
        raw = base64.b64decode(text.encode("ascii").translate(_FROM_BSV), validate=True)
    except binascii.Error as exc:
        raise InvalidIDError(f"not a bsv id: {exc}") from None
    if encode_bsv(raw) != text:
        raise InvalidIDError(f"not a bsv id: {text!r} is not the canonical text of its bytes")
    return raw


_word = POOL.word_unchecked  # BsvGenerator runs check_fork() first
_LIVE: weakref.WeakSet[BsvGenerator] = weakref.WeakSet()


class BsvGenerator:
    """Strictly increasing bsv ids: ticks are bumped by one when the clock has not advanced.

    Ticks are 100 ns, so the embedded time can only lead the clock while more than ten
    million ids a second are made, or while a clock that stepped back catches up.
    """

    def __init__(self, *, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last = -1
        self._backfill = (-1, -1)  # at(): the ticks asked for by the run of calls now, and the last given
        _LIVE.add(self)

    def __call__(self) -> str:
        check_fork()
        lock = self._lock  # read each call: a forked child gets a new one
        lock.acquire()  # acquire and release rather than `with`, and one int's to_bytes rather than
        try:  # three joined, straight to binascii: 917 -> 675 ns a call (docs/benchmarks.md)
            ticks = self._clock() // 100 + DOTNET_TICKS_AT_UNIX_EPOCH
            if ticks <= self._last:
                ticks = self._last + 1
            self._last = ticks
            value = (ticks << 128) | (_word() << 64) | _word()
        finally:
            lock.release()
        # encode_bsv's steps, written here: the hot path skips its type check and one call
        return _b2a_base64(value.to_bytes(_BSV_BYTES, "big"), newline=False).translate(_TO_BSV).decode("ascii")

    def at(self, when: _dt.datetime) -> str:
        """A bsv id of the instant ``when`` (a backfill: rows imported with their own times).  Calls
        in time order get ids in their order: an instant asked for again, or one that the ids of the
        instants before it have passed, gets the next tick (100 ns) after the last id, as :meth:`__call__`
        does for a clock that has not moved; an earlier instant than the run's starts a new one."""
        check_fork()
        asked = _ticks_of(when, "when")
        with self._lock:
            first, last = self._backfill
            ticks = last + 1 if first <= asked <= last else asked
            self._backfill = (first if first <= asked <= last else asked, ticks)
            value = (ticks << 128) | (_word() << 64) | _word()
        return encode_bsv(value.to_bytes(_BSV_BYTES, "big"))


bsv = BsvGenerator()
"""A new 32-character bsv id (call it: ``bsv()``)."""


def bsv_at(when: _dt.datetime) -> str:
    """A bsv id of the instant ``when``, for backfills: see :meth:`BsvGenerator.at`."""
    return bsv.at(when)


def bsv_parts(text: str) -> tuple[_dt.datetime, bytes]:
    """The creation time (UTC, microsecond precision) and 16 random bytes of a bsv id."""
    raw = _bsv_bytes(text)
    ticks = int.from_bytes(raw[:8], "big")
    return _ticks_to_datetime(ticks), raw[8:]


def _ticks_to_datetime(ticks: int) -> _dt.datetime:
    try:
        return _dt.datetime(1, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=ticks // 10)
    except OverflowError:
        raise InvalidIDError(f"a bsv id's time, {ticks} .NET ticks, is past 9999-12-31") from None


def _ticks_of(when: object, name: str) -> int:
    """.NET ticks (100 ns since 0001-01-01 UTC) of an aware datetime; a typed error otherwise."""
    return epoch_us(when, name) * 10 + DOTNET_TICKS_AT_UNIX_EPOCH


def text_bounds(kind: str, start: _dt.datetime, end: _dt.datetime) -> tuple[str, str]:
    """``(low, high)``: the ``kind`` text ids made in ``[start, end)`` lie at or above ``low`` and below
    ``high`` under the column's binary collation (the texts sort as their bytes): the first id of each
    instant, so ``low <= id < high`` is a range on the key's index.  base32 ids are UUIDv7 (millisecond
    bounds); bsv ids carry .NET ticks (100 ns bounds)."""
    text_id_kind(kind)
    if kind == "base32":
        low, high = (encode_base32(comb_at(when, "time_first", "min")) for when in (start, end))
    else:
        low, high = (
            encode_bsv(_ticks_of(when, name).to_bytes(8, "big") + bytes(16))
            for when, name in ((start, "start"), (end, "end"))
        )
    check_span(start, end)
    return low, high


# --- base32 -----------------------------------------------------------------------------


def _id_bytes(value: object) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)):
        if len(value) != 16:
            raise InvalidIDError(f"value must be 16 bytes, got {len(value)}")
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < (1 << 128):
            raise InvalidIDError(f"value must be an unsigned 128-bit int, got {value}")
        return value.to_bytes(16, "big")
    raise ArgumentTypeError(f"value must be a uuid.UUID, 16 bytes or an int, got {type(value).__name__}")


def encode_base32(value: uuid.UUID | bytes | int) -> str:
    """The 26-character Crockford base32 (ULID) text of a 128-bit id; sorts as the bytes do."""
    n = value.int if isinstance(value, uuid.UUID) else int.from_bytes(_id_bytes(value), "big")
    p = _PAIRS  # ten bits a look-up, written out: 848 -> 493 ns against a comprehension over the shifts
    return "".join(
        (
            p[n >> 120],
            p[n >> 110 & 1023],
            p[n >> 100 & 1023],
            p[n >> 90 & 1023],
            p[n >> 80 & 1023],
            p[n >> 70 & 1023],
            p[n >> 60 & 1023],
            p[n >> 50 & 1023],
            p[n >> 40 & 1023],
            p[n >> 30 & 1023],
            p[n >> 20 & 1023],
            p[n >> 10 & 1023],
            p[n & 1023],
        )
    )


def decode_base32(text: str) -> uuid.UUID:
    """Parse a 26-character Crockford base32 id (any case) into a ``uuid.UUID``.

    Crockford's look-alike letters I, L, O and U are refused rather than read as 1, 1, 0:
    an id that was mistyped should fail, not silently point at another row.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be a str, got {type(text).__name__}")
    if len(text) != BASE32_LENGTH:
        raise InvalidIDError(f"a base32 id has {BASE32_LENGTH} characters, got {len(text)}")
    # ASCII first: str.upper() maps some non-ASCII letters onto ASCII ones (U+017F long s -> 'S') or onto
    # two letters ('ß' -> 'SS'), which would let foreign text, or a 27-letter "id", through.
    if not text.isascii():
        raise InvalidIDError(f"not a base32 id: {text!r} has non-ASCII characters")
    upper = text.upper()
    bad = set(upper) - _CROCKFORD_CHARS
    if bad:
        raise InvalidIDError(f"not a base32 id: characters {''.join(sorted(bad))!r} are outside Crockford's alphabet")
    if upper[0] > "7":
        raise InvalidIDError(f"not a base32 id: {text!r} exceeds 128 bits (first character must be 0-7)")
    return from_int(int(upper.translate(_TO_INT_DIGITS), 32))


def base32() -> str:
    """A new ULID-compatible id: a UUIDv7 in Crockford base32 (time first, monotonic)."""
    return encode_base32(uuid7())


# --- text ids in columns ---------------------------------------------------------------


def text_id_kind(kind: str) -> tuple[int, Callable[[], str]]:
    """Column length and generator of a text-id kind (``"bsv"`` or ``"base32"``)."""
    if kind == "bsv":
        return BSV_LENGTH, bsv
    if kind == "base32":
        return BASE32_LENGTH, base32
    raise InvalidArgumentError(f"kind must be 'bsv' or 'base32', got {kind!r}")


def check_text_id(value: object, kind: str) -> str:
    """``value`` as the canonical text of a ``kind`` id, or a typed error naming the problem.

    Crockford base32 is case-insensitive by definition, so it is upper-cased; bsv is returned
    as given (its case is part of the value).
    """
    length, _ = text_id_kind(kind)
    if not isinstance(value, str):
        raise ArgumentTypeError(f"a {kind} id must be a str, got {type(value).__name__}")
    if len(value) != length:
        raise InvalidIDError(f"a {kind} id has {length} characters, got {len(value)}: {value!r}")
    if kind == "bsv":
        _bsv_bytes(value)
        return value
    decode_base32(value)
    return value.upper()


def _bsv_bytes(text: object) -> bytes:
    """The 24 bytes of a bsv id, or a typed error: only the form :func:`bsv` makes is valid.

    32 characters with padding are canonical base64 of 22 or 23 bytes, so the byte count, not
    the text, tells a bsv id from other base64.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"a bsv id must be a str, got {type(text).__name__}")
    if len(text) != BSV_LENGTH:
        raise InvalidIDError(f"a bsv id has {BSV_LENGTH} characters, got {len(text)}: {text!r}")
    raw = decode_bsv(text)
    if len(raw) != _BSV_BYTES:
        raise InvalidIDError(f"not a bsv id: {text!r} holds {len(raw)} bytes, not {_BSV_BYTES} (it has padding)")
    return raw


def _reset_after_fork() -> None:
    for gen in list(_LIVE):
        gen._lock = threading.Lock()
        gen._backfill = (-1, -1)  # the child's backfill starts its own run


on_fork(_reset_after_fork)  # the random words are the pool's, which drops them itself
