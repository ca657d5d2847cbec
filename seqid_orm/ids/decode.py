"""Reading ids back: what an id is, when it was made, and in which layout.

:func:`describe` is the one place that recognises every form seqid_orm produces — the fixed
version/variant bits of the UUID layouts, the length and alphabet of the text forms —
and :func:`timestamp_of` and ``seqid decode`` are built on it.  Text is parsed with the same
strict rules as the column types (:mod:`seqid_orm.ids.validate`).  What cannot be known from the
value alone is said, not guessed: an integer is read as a Snowflake id of the profile you pass
(Twitter's by default, reported in :attr:`IdInfo.assumed`), and 32 hex digits, which are both
a UUID as ``HEX(id)`` prints it and valid bsv text, need ``kind=``.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from dataclasses import dataclass, field
from typing import Literal

from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError, NoTimestampError
from .adopted import ABOVE_BITS, adopted_format
from .comb import adopted_of, decode_comb, layout_of, ms_to_datetime
from .layout import Layout, as_layout
from .snowflake import Snowflake
from .text import BASE32_LENGTH, BSV_LENGTH, bsv_parts, decode_base32
from .validate import coerce_int_id, coerce_uuid, is_uuid_hex, parse_uuid_text

__all__ = ["IdInfo", "Kind", "describe", "timestamp_of"]

Kind = Literal["uuid", "snowflake", "bsv", "base32"]
_KINDS = ("uuid", "snowflake", "bsv", "base32")
_DEFAULT_SNOWFLAKE = Snowflake(worker_id=0)
_GREGORIAN_EPOCH = _dt.datetime(1582, 10, 15, tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class IdInfo:
    """What :func:`describe` found in an id.

    ``kind``: ``"uuid7"``, ``"comb"`` (a seqid layout other than ``TIME_FIRST``), ``"adopted"``
    (seqid's key for a column that held other keys: one bits first, ``parts["above"]`` of them),
    ``"uuid1"`` (MariaDB's ``UUID()``), ``"uuid"`` (no time in it, e.g. a UUIDv4), ``"snowflake"``,
    ``"bsv"`` or ``"base32"``.  ``timestamp`` is ``None`` when the id carries no time.
    ``parts`` holds the remaining fields (counter, worker id, ...).  ``assumed`` says what was
    taken on trust rather than read from the value (``None`` when nothing was).
    """

    kind: str
    value: uuid.UUID | int | str
    timestamp: _dt.datetime | None = None
    layout: Layout | None = None
    parts: dict[str, int | str] = field(default_factory=dict)
    assumed: str | None = None

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields (for ``seqid decode --json``)."""
        out: dict[str, object] = {"kind": self.kind, "value": str(self.value)}
        out["timestamp"] = None if self.timestamp is None else self.timestamp.isoformat()
        if self.layout is not None:
            out["layout"] = self.layout.value
        out.update(self.parts)
        if self.assumed is not None:
            out["assumed"] = self.assumed
        return out


def describe(
    value: uuid.UUID | int | str,
    *,
    kind: Kind | None = None,
    layout: Layout | str | None = None,
    snowflake: Snowflake | None = None,
) -> IdInfo:
    """Recognise ``value`` and read its fields.

    * ``uuid.UUID`` (or its 36-character text): a UUIDv7 or a seqid ``TIME_LAST``/
      ``TIME_FIRST_LE`` id, told apart by their fixed bits (``layout=`` forces one); a
      version-1 or version-6 UUID is read from its 60-bit time; a version-8 UUID is vendor-specific:
      it is read as seqid's adopted key when it starts with 16 to 32 one bits (as the database
      compares it; its variant says whether that is SQL Server's order), as the ``SHARDED`` layout only with
      ``layout="sharded"``, else without a time; any other UUID is ``kind="uuid"``, no time.
    * ``int``: a Snowflake id of ``snowflake``'s profile (Twitter's if none is given).
    * ``str``: 36 characters is a UUID, 26 a base32/ULID id, 32 a bsv id; 32 hex digits are
      refused as ambiguous unless ``kind="uuid"`` or ``kind="bsv"`` says which.

    Raises :class:`~seqid_orm.errors.InvalidIDError` for a malformed value and
    :class:`~seqid_orm.errors.ArgumentTypeError` for a value of another type.
    """
    if kind is not None and kind not in _KINDS:
        raise InvalidArgumentError(f"kind must be one of {', '.join(map(repr, _KINDS))}, got {kind!r}")
    lay = None if layout is None else as_layout(layout)
    if isinstance(value, uuid.UUID):
        return _describe_uuid(coerce_uuid(value), lay)
    if isinstance(value, bool):
        raise ArgumentTypeError("value must be a uuid.UUID, an int or a str, got bool")
    if isinstance(value, int):
        return _describe_snowflake(value, snowflake)
    if not isinstance(value, str):
        raise ArgumentTypeError(f"value must be a uuid.UUID, an int or a str, got {type(value).__name__}")
    if kind == "snowflake":
        return _describe_snowflake(coerce_int_id(value, "a Snowflake id"), snowflake)
    if kind == "uuid" or (kind is None and len(value) == 36):
        if is_uuid_hex(value):
            return _describe_uuid(uuid.UUID(hex=value), lay)
        return _describe_uuid(parse_uuid_text(value), lay)
    if kind == "base32" or (kind is None and len(value) == BASE32_LENGTH):
        parsed = decode_base32(value)
        return IdInfo("base32", value.upper(), ms_to_datetime(parsed.int >> 80), Layout.TIME_FIRST)
    if kind is None and is_uuid_hex(value):
        raise InvalidIDError(
            f"{value!r} is ambiguous: 32 hex digits may be a UUID (as HEX(id) prints it) or a bsv id; "
            'pass kind="uuid" or kind="bsv" (seqid decode --kind uuid|bsv)'
        )
    if kind == "bsv" or (kind is None and len(value) == BSV_LENGTH):
        when, rnd = bsv_parts(value)
        return IdInfo("bsv", value, when, parts={"random": rnd.hex()})
    raise InvalidIDError(
        f"unrecognised id text of length {len(value)}: expected 36 (UUID), 32 (bsv) or 26 (base32) characters"
    )


def _adopted(value: uuid.UUID, layout: Layout | None) -> tuple[Layout, int] | None:
    """``(layout, above)`` of an adopted key: as its bits say, or in the order ``layout`` names."""
    if layout is None:
        return adopted_of(value)
    if layout in (Layout.TIME_FIRST, Layout.TIME_LAST):
        for above in ABOVE_BITS:
            if adopted_format(layout, above).matches(value.int):
                return layout, above
    return None


def _describe_uuid(value: uuid.UUID, layout: Layout | None) -> IdInfo:
    adopted = _adopted(value, layout)
    if adopted is not None:
        order_of, above = adopted
        ms, counter = decode_comb(value, order_of, above)
        return IdInfo("adopted", value, ms_to_datetime(ms), order_of, {"counter": counter, "above": above})
    found = layout_of(value)
    lay = layout if layout is not None else None if found is Layout.SHARDED else found
    if lay is not None:
        ms, counter = decode_comb(value, lay)
        kind = "uuid7" if lay is Layout.TIME_FIRST and found is lay else "comb"
        return IdInfo(kind, value, ms_to_datetime(ms), lay, {"counter": counter})
    rfc = value.variant == uuid.RFC_4122
    if rfc and value.version in (1, 6):
        # version 1 (MariaDB's UUID(), DatabaseSeqUUID there) and 6 (RFC 9562 §5.6, the same time
        # reordered): 100 ns ticks since 1582-10-15
        ticks = value.time if value.version == 1 else ((value.int >> 80) << 12) | ((value.int >> 64) & 0xFFF)
        when = _GREGORIAN_EPOCH + _dt.timedelta(microseconds=ticks // 10)
        return IdInfo(f"uuid{value.version}", value, when, parts={"uuid_version": value.version})
    if rfc and value.version == 8:
        # RFC 9562 §5.8: vendor-specific bits.  seqid's sharded layout is one such use; reading any
        # version-8 UUID as seqid's would invent a time (the RFC's own examples would say 2128 and 2390).
        return IdInfo(
            "uuid",
            value,
            parts={"uuid_version": 8},
            assumed="UUID version 8 (vendor-specific): no time is read unless layout='sharded' says it is seqid's",
        )
    return IdInfo("uuid", value, parts={"uuid_version": value.version or 0})


def _describe_snowflake(value: int, snowflake: Snowflake | None) -> IdInfo:
    gen = snowflake or _DEFAULT_SNOWFLAKE
    parts = gen.decode(value)
    assumed = None
    if snowflake is None:
        assumed = "an integer is read as a Snowflake id of Twitter's profile (41-bit ms since 2010-11-04)"
    return IdInfo(
        "snowflake",
        value,
        parts.timestamp,
        parts={"datacenter_id": parts.datacenter_id, "worker_id": parts.worker_id, "sequence": parts.sequence},
        assumed=assumed,
    )


def timestamp_of(
    value: uuid.UUID | int | str,
    *,
    layout: Layout | str | None = None,
    snowflake: Snowflake | None = None,
    kind: Kind | None = None,
) -> _dt.datetime:
    """The UTC creation time embedded in ``value`` (see :func:`describe` for what is read how).

    Raises :class:`~seqid_orm.errors.NoTimestampError` for an id that carries no time (a
    random UUIDv4, a wrapping-prefix id).
    """
    info = describe(value, kind=kind, layout=layout, snowflake=snowflake)
    if info.timestamp is None:
        assert isinstance(info.value, uuid.UUID)
        raise NoTimestampError(
            f"{info.value} carries no seqid timestamp (version {info.value.version}, variant "
            f"{info.value.variant!r}); pass layout= if it was generated in a known layout"
        )
    return info.timestamp
