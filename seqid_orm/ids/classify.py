"""What a column's keys are, read from a sample of them: the judgement behind ``seqid doctor``.

Pure code over values as a driver returns them (``uuid.UUID``, 16 ``bytes``, ``int``, ``str``);
no database, no I/O, so the doctor of either ORM reads the same answer from the same sample.

A key is *time-ordered* when a time can be read out of it, and the time is plausible (after 2000,
not after tomorrow) for nearly every sampled value.  The places tried are the ones generators
actually use, whatever the version nibble says (many COMB generators keep version 4):

* the first six bytes as Unix milliseconds (UUIDv7, RT.Comb's PostgreSQL provider, seqid's
  ``TIME_FIRST``), the last six (RT.Comb's SQL Server provider, seqid's ``TIME_LAST``), and the
  first six of ``bytes_le`` (.NET ``Guid`` order, seqid's ``TIME_FIRST_LE``);
* the last six as SQL Server ``datetime`` (two bytes of days since 1900, four of 1/300 s), as
  NHibernate's ``GuidCombGenerator`` writes them (Jimmy Nilsson's original COMB, 2002);
* UUID versions 1 and 6 (RFC 9562 section 5.1 and 5.6), seqid's ``SHARDED`` layout, and seqid's
  adopted keys (version 8 after 16 to 32 one bits, :mod:`seqid_orm.ids.adopted`);
* integers: Snowflake ids of Twitter's layout (also seqid's default), Discord's epoch, Sonyflake;
* text: ULID (Crockford base32, time in the first ten characters), bsv, and UUIDs as text.

A random 48-bit field read as milliseconds lands in 2000..tomorrow about once in 300 values, so
"90 % plausible" does not happen by chance on a sample of hundreds.  Whether a column's order
follows the time is not decided here but measured: :func:`in_order_share` reads keys in the
database's ``ORDER BY`` order and counts the adjacent pairs whose times do not go back.

May import the standard library, :mod:`seqid_orm.errors` and this folder.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import SeqIDError
from .adopted import recognise
from .comb import swap_le
from .layout import Layout
from .snowflake import SONYFLAKE_EPOCH_MS, TWITTER_EPOCH_MS
from .text import BASE32_LENGTH, BSV_LENGTH, bsv_parts, decode_base32

__all__ = ["KINDS", "Classification", "as_uuid", "classify", "in_order_share"]

#: What a column's keys can be found to be (``seqid doctor``'s ``kind``).
KINDS = ("random-uuid", "time-ordered", "integer-sequence", "snowflake", "text", "unknown")

_PLAUSIBLE_FROM_MS = 946_684_800_000  # 2000-01-01T00:00:00Z
_DAY_MS = 86_400_000
_SHARE = 0.9  # of the sampled values a format must fit
_MASK48 = (1 << 48) - 1
_GREGORIAN_TO_UNIX_100NS = 0x01B21DD213814000  # RFC 9562: 1582-10-15 to 1970-01-01 in 100 ns
_SQLSERVER_EPOCH_MS = -2_208_988_800_000  # 1900-01-01T00:00:00Z, SQL Server datetime's day 0
_SQLSERVER_TICKS_PER_DAY = 300 * 86_400  # datetime counts 1/300 s
_DISCORD_EPOCH_MS = 1_420_070_400_000  # 2015-01-01, Discord's Snowflake epoch (its API documentation)
_UNIX_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_HEX = frozenset("0123456789abcdefABCDEF")

MsOf = Callable[[object], "int | None"]


@dataclass(frozen=True)
class Classification:
    """What a sample of one column's keys is.

    ``kind`` is one of :data:`KINDS`; ``format`` names the generator's shape (``"uuid7"``,
    ``"comb-time-last"``, ``"twitter-snowflake"``, ``"ulid"``, ...); ``layout`` where a UUID
    carries its time, as :class:`~seqid_orm.ids.layout.Layout` values name it (``None`` when no
    layout says it: UUIDv1, or no time); ``fit`` the share of sampled values the format fits;
    ``text_form`` how UUIDs were written when the column is text (``"text"`` or ``"hex"``).
    """

    kind: str
    format: str | None
    layout: str | None
    fit: float
    ms_of: MsOf | None = None
    text_form: str | None = None


def as_uuid(value: object) -> uuid.UUID | None:
    """``value`` as a UUID when it is one as some driver returns it (the object, 16 bytes, 36- or
    32-character text); ``None`` otherwise."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return uuid.UUID(bytes=raw) if len(raw) == 16 else None
    if isinstance(value, str) and len(value) in (32, 36):
        hexed = value.replace("-", "") if len(value) == 36 else value
        if len(value) == 36 and [len(p) for p in value.split("-")] != [8, 4, 4, 4, 12]:
            return None
        if len(hexed) == 32 and set(hexed) <= _HEX:
            return uuid.UUID(hex=hexed)
    return None


def _uuid_ms(decode: Callable[[int], int | None]) -> MsOf:
    def ms_of(value: object) -> int | None:
        u = as_uuid(value)
        return None if u is None else decode(u.int)

    return ms_of


def _nibble(i: int) -> int:
    return (i >> 76) & 0xF


def _rfc_variant(i: int) -> bool:
    return (i >> 62) & 0b11 == 0b10


def _gregorian_ms(ticks: int) -> int:
    return (ticks - _GREGORIAN_TO_UNIX_100NS) // 10_000


def _v1(i: int) -> int | None:
    if _nibble(i) != 1 or not _rfc_variant(i):
        return None
    return _gregorian_ms((((i >> 64) & 0xFFF) << 48) | (((i >> 80) & 0xFFFF) << 32) | (i >> 96))


def _v6(i: int) -> int | None:
    if _nibble(i) != 6 or not _rfc_variant(i):
        return None
    return _gregorian_ms(((i >> 96) << 28) | (((i >> 80) & 0xFFFF) << 12) | ((i >> 64) & 0xFFF))


def _v7(i: int) -> int | None:
    return i >> 80 if _nibble(i) == 7 and _rfc_variant(i) else None


def _sharded(i: int) -> int | None:
    return (i >> 80) & ((1 << 44) - 1) if _nibble(i) == 8 and _rfc_variant(i) else None


def _adopted(layout: Layout) -> Callable[[int], int | None]:
    """The time of seqid's adopted keys made for engines of ``layout``'s order (:mod:`.adopted`)."""

    def decode(i: int) -> int | None:
        fmt = recognise(i)
        if fmt is None or fmt.order != layout.order:
            return None
        return fmt.decode(fmt.from_uuid_int(i))[0]

    return decode


def _sqlserver_datetime(i: int) -> int | None:
    days, ticks = (i >> 32) & 0xFFFF, i & 0xFFFF_FFFF
    if ticks >= _SQLSERVER_TICKS_PER_DAY:
        return None
    return _SQLSERVER_EPOCH_MS + days * _DAY_MS + ticks * 10 // 3


# (format, layout, decoder), most specific first: a value a version names is read that way first.
_UUID_FORMATS: tuple[tuple[str, str | None, Callable[[int], int | None]], ...] = (
    ("uuid7", "time_first", _v7),
    ("uuid6", "time_first", _v6),
    ("uuid1", None, _v1),
    ("adopted", "time_first", _adopted(Layout.TIME_FIRST)),
    ("adopted-time-last", "time_last", _adopted(Layout.TIME_LAST)),
    ("sharded", "sharded", _sharded),
    ("comb-time-first", "time_first", lambda i: i >> 80),
    ("comb-time-first-le", "time_first_le", lambda i: swap_le(i) >> 80),
    ("comb-time-last", "time_last", lambda i: i & _MASK48),
    ("comb-time-last-datetime", "time_last", _sqlserver_datetime),
)

# (format, ms of an integer key): Snowflake profiles whose time sits above bit 22 (or 24).
_SNOWFLAKE_FORMATS: tuple[tuple[str, Callable[[int], int]], ...] = (
    ("twitter-snowflake", lambda v: (v >> 22) + TWITTER_EPOCH_MS),
    ("discord-snowflake", lambda v: (v >> 22) + _DISCORD_EPOCH_MS),
    ("sonyflake", lambda v: (v >> 24) * 10 + SONYFLAKE_EPOCH_MS),
)


def _int_ms(decode: Callable[[int], int]) -> MsOf:
    def ms_of(value: object) -> int | None:
        return decode(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    return ms_of


def _ulid_ms(value: object) -> int | None:
    if not isinstance(value, str) or len(value) != BASE32_LENGTH:
        return None
    return decode_base32(value).int >> 80  # a ULID's first 48 bits are Unix milliseconds


def _bsv_ms(value: object) -> int | None:
    if not isinstance(value, str) or len(value) != BSV_LENGTH:
        return None
    made = bsv_parts(value)[0]
    return (made - _UNIX_EPOCH) // _dt.timedelta(milliseconds=1)


def _fit(values: Sequence[object], ms_of: MsOf, now_ms: int) -> float:
    ok = 0
    for value in values:
        try:
            ms = ms_of(value)
        except (SeqIDError, ValueError, OverflowError):  # not of this format at all
            ms = None
        if ms is not None and _PLAUSIBLE_FROM_MS <= ms <= now_ms + _DAY_MS:
            ok += 1
    return ok / len(values)


def _best(
    values: Sequence[object], candidates: Iterable[tuple[str, str | None, MsOf]], now_ms: int
) -> tuple[str, str | None, MsOf, float] | None:
    best = None
    for name, layout, ms_of in candidates:
        share = _fit(values, ms_of, now_ms)
        if best is None or share > best[3]:
            best = (name, layout, ms_of, share)
    return best


def classify(values: Sequence[object], *, now_ms: int | None = None) -> Classification:
    """What ``values`` (one column's sampled keys, ``None`` left out) are; see the module docstring.

    >>> import uuid
    >>> classify([uuid.UUID(int=(1_700_000_000_000 + n) << 80 | 0x7 << 76 | 1 << 63) for n in range(50)]).format
    'uuid7'
    >>> classify(list(range(1, 1001))).kind
    'integer-sequence'
    >>> classify([]).kind
    'unknown'
    """
    values = [v for v in values if v is not None]
    if not values:
        return Classification("unknown", None, None, 0.0)
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    uuids = [as_uuid(v) for v in values]
    if all(u is not None for u in uuids):
        form = None
        if all(isinstance(v, str) for v in values):
            form = "text" if all(len(str(v)) == 36 for v in values) else "hex"
        return _classify_uuids(values, [u.int for u in uuids if u is not None], now, form)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return _classify_ints([int(str(v)) for v in values], now)
    if all(isinstance(v, str) for v in values):
        found = _best(values, (("ulid", None, _ulid_ms), ("bsv", None, _bsv_ms)), now)
        if found is not None and found[3] >= _SHARE:
            return Classification("text", found[0], None, found[3], found[2])
    return Classification("unknown", None, None, 0.0)


def _classify_uuids(values: Sequence[object], ints: list[int], now_ms: int, form: str | None) -> Classification:
    found = _best(values, ((n, lay, _uuid_ms(d)) for n, lay, d in _UUID_FORMATS), now_ms)
    assert found is not None
    name, layout, ms_of, share = found
    if share >= _SHARE:
        return Classification("time-ordered", name, layout, share, ms_of, form)
    v4 = sum(1 for i in ints if _nibble(i) == 4 and _rfc_variant(i)) / len(ints)
    if v4 >= _SHARE:
        return Classification("random-uuid", "uuid4", None, v4, None, form)
    return Classification("unknown", None, None, 0.0, None, form)


def _classify_ints(values: list[int], now_ms: int) -> Classification:
    if min(values) >= 1 << 32:
        found = _best(values, ((n, None, _int_ms(d)) for n, d in _SNOWFLAKE_FORMATS), now_ms)
        if found is not None and found[3] >= _SHARE:
            return Classification("snowflake", found[0], None, found[3], found[2])
    if min(values) >= 0 and max(values) < 1 << 48:
        return Classification("integer-sequence", None, None, 1.0)
    return Classification("unknown", None, None, 0.0)


def in_order_share(runs: Iterable[Sequence[object]], ms_of: MsOf) -> tuple[float | None, int]:
    """The share of adjacent pairs, within each run of keys read in the database's ``ORDER BY``
    order, whose times do not go back; and the number of pairs judged (``None`` when there are none).

    Equal times count as in order: keys of one millisecond follow their counter or random bits.
    """
    pairs = ordered = 0
    for run in runs:
        times = [ms_of(v) for v in run]
        for a, b in itertools.pairwise(times):
            if a is None or b is None:
                continue
            pairs += 1
            ordered += a <= b
    return (ordered / pairs if pairs else None), pairs
