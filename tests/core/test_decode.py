"""timestamp_of across every id form."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

import seqid_orm
import seqid_orm.errors
import seqid_orm.ids.text
import seqid_orm.ids.validate
from seqid_orm import InvalidIDError, Layout, Snowflake, comb_at, timestamp_of
from seqid_orm.errors import NoTimestampError

UTC = dt.timezone.utc
WHEN = dt.datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


@pytest.mark.parametrize("layout", [lay for lay in Layout if lay is not Layout.SHARDED])
def test_uuids_of_every_layout_decode_without_a_hint(layout):
    assert timestamp_of(comb_at(WHEN, layout)) == WHEN
    assert timestamp_of(str(comb_at(WHEN, layout))) == WHEN


def test_sharded_ids_decode_when_the_layout_is_named():
    """SHARDED ids are RFC version 8, whose bits are vendor-specific: named, never guessed (RFC 9562 §5.8)."""
    assert timestamp_of(comb_at(WHEN, Layout.SHARDED), layout="sharded") == WHEN
    assert timestamp_of(str(comb_at(WHEN, Layout.SHARDED)), layout=Layout.SHARDED) == WHEN
    with pytest.raises(NoTimestampError):
        timestamp_of(comb_at(WHEN, Layout.SHARDED))


def test_snowflake_ints_use_the_given_profile():
    sony = Snowflake.sonyflake(1)
    value = sony.next_id()
    assert abs(timestamp_of(value, snowflake=sony) - dt.datetime.now(UTC)) < dt.timedelta(seconds=5)


def test_text_forms():
    assert abs(timestamp_of(seqid_orm.bsv()) - dt.datetime.now(UTC)) < dt.timedelta(seconds=5)
    assert timestamp_of(seqid_orm.ids.text.encode_base32(comb_at(WHEN))) == WHEN


def test_values_without_time_are_refused_clearly():
    with pytest.raises(NoTimestampError, match="carries no seqid timestamp"):
        timestamp_of(uuid.uuid4())
    with pytest.raises(InvalidIDError, match="ambiguous"):
        timestamp_of(uuid.uuid4().hex)
    with pytest.raises(InvalidIDError, match="length 5"):
        timestamp_of("abcde")
    with pytest.raises(InvalidIDError, match="invalid UUID text"):
        timestamp_of("x" * 36)
    with pytest.raises(TypeError):
        timestamp_of(1.5)
    with pytest.raises(TypeError):
        timestamp_of(True)


def test_layout_override():
    value = comb_at(WHEN, Layout.TIME_LAST)
    assert timestamp_of(value, layout="time_last") == WHEN
