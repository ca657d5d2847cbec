"""Reading ids back: when was an id made, and in which layout.

:func:`timestamp_of` recognises every form seqid_orm produces from the value alone (the
fixed version/variant bits of the UUID layouts, the length and alphabet of the text forms);
integers are read as Snowflake ids of the default (Twitter) profile unless a generator is
passed.  Anything that carries no time raises :class:`~seqid_orm.errors.NoTimestampError`.
"""

from __future__ import annotations

import datetime as _dt
import string
import uuid

from .comb import decode_comb, layout_of, ms_to_datetime
from .errors import InvalidIDError, NoTimestampError
from .layout import Layout
from .snowflake import Snowflake
from .text import BASE32_LENGTH, BSV_LENGTH, bsv_parts, decode_base32

_DEFAULT_SNOWFLAKE = Snowflake(worker_id=0)
_LOWER_HEX = frozenset(string.hexdigits.lower())
_GREGORIAN_EPOCH = _dt.datetime(1582, 10, 15, tzinfo=_dt.timezone.utc)


def timestamp_of(
    value: uuid.UUID | int | str,
    *,
    layout: Layout | str | None = None,
    snowflake: Snowflake | None = None,
) -> _dt.datetime:
    """The UTC creation time embedded in ``value``.

    * ``uuid.UUID``: a UUIDv7 (``TIME_FIRST``) or a seqid ``TIME_LAST``/``TIME_FIRST_LE`` id,
      recognised by its bits; ``layout=`` forces one.  A version-1 UUID (what
      :class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID` gets from MariaDB's ``UUID()``) is read
      from its 60-bit timestamp.
    * ``int``: a Snowflake id, decoded with ``snowflake``'s profile (default: Twitter's).
    * ``str``: a 32-character bsv id, a 26-character base32/ULID id, or a UUID's 36-character
      text.  A 32-character lower-case hex string is refused as ambiguous (it could be a
      ``char(32)`` UUID or a bsv id): pass ``uuid.UUID(text)`` instead.
    """
    if isinstance(value, uuid.UUID):
        lay = layout_of(value) if layout is None else Layout(layout)
        if lay is None and value.version == 1 and value.variant == uuid.RFC_4122:
            # version 1, as MariaDB's UUID() makes for DatabaseSeqUUID: 100 ns ticks since 1582
            return _GREGORIAN_EPOCH + _dt.timedelta(microseconds=value.time // 10)
        if lay is None:
            raise NoTimestampError(
                f"{value} carries no seqid timestamp (version {value.version}, variant "
                f"{value.variant!r}); pass layout= if it was generated in a known layout"
            )
        return ms_to_datetime(decode_comb(value, lay)[0])
    if isinstance(value, bool):
        raise TypeError("value must be a uuid.UUID, an int or a str, got bool")
    if isinstance(value, int):
        return (snowflake or _DEFAULT_SNOWFLAKE).decode(value).timestamp
    if isinstance(value, str):
        if len(value) == BSV_LENGTH:
            if set(value) <= _LOWER_HEX:
                raise InvalidIDError(
                    f"{value!r} is ambiguous: 32 hex digits may be a UUID or a bsv id; pass uuid.UUID(value) for a UUID"
                )
            return bsv_parts(value)[0]
        if len(value) == BASE32_LENGTH:
            return ms_to_datetime(decode_base32(value).int >> 80)
        if len(value) == 36:
            try:
                parsed = uuid.UUID(value)
            except ValueError:
                raise InvalidIDError(f"invalid UUID text: {value!r}") from None
            return timestamp_of(parsed, layout=layout)
        raise InvalidIDError(
            f"unrecognised id text of length {len(value)}: expected 32 (bsv), 26 (base32) or 36 (UUID)"
        )
    raise TypeError(f"value must be a uuid.UUID, an int or a str, got {type(value).__name__}")
