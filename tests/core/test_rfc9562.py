"""RFC 9562's own test vectors (Appendices A and B): the right time, or none, never a guessed one."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from seqid_orm import describe, timestamp_of
from seqid_orm.cli import main
from seqid_orm.errors import NoTimestampError

WHEN = dt.datetime(2022, 2, 22, 19, 22, 22, tzinfo=dt.timezone.utc)  # "Tuesday, February 22, 2022 2:22:22 PM GMT-05:00"

TIMED = {
    "C232AB00-9414-11EC-B3C8-9F6BDECED846": 1,  # A.1, version 1
    "1EC9414C-232A-6B00-B3C8-9F6BDECED846": 6,  # A.5, version 6: the same time, reordered
    "017F22E2-79B0-7CC3-98C4-DC0C0C07398F": 7,  # A.6, version 7
}
UNTIMED = {
    "5df41881-3aed-3515-88a7-2f4a814cf09e": 3,  # A.2, name-based (MD5)
    "919108f7-52d1-4320-9bac-f847db4148a8": 4,  # A.3, random
    "2ed6657d-e927-568b-95e1-2665a8aea6a2": 5,  # A.4, name-based (SHA-1)
    "2489E9AD-2EE2-8E00-8EC9-32D5F69181C0": 8,  # B.1, version 8 "time-based" (vendor-specific bits)
    "5c146b14-3c52-8afd-938a-375d0df1fbf6": 8,  # B.2, version 8 name-based
}


@pytest.mark.parametrize(("text", "version"), TIMED.items())
def test_the_timed_vectors_give_the_rfcs_time(text, version):
    value = uuid.UUID(text)
    assert value.version == version
    assert timestamp_of(value) == WHEN
    assert describe(text.lower()).timestamp == WHEN


@pytest.mark.parametrize(("text", "version"), UNTIMED.items())
def test_the_other_vectors_give_no_time(text, version):
    """Version 8 is vendor-specific: seqid's sharded layout is one use of it, and reading the RFC's
    examples as seqid's would say 2128-02-20 and 2390-11-19 (it did)."""
    info = describe(uuid.UUID(text))
    assert (info.kind, info.timestamp, info.parts["uuid_version"]) == ("uuid", None, version)
    with pytest.raises(NoTimestampError):
        timestamp_of(uuid.UUID(text))
    if version == 8:
        assert "vendor-specific" in (info.assumed or "")


def test_a_version_8_id_is_read_as_seqids_sharded_layout_when_the_caller_says_so():
    from seqid_orm import CombGenerator, Layout

    sharded = CombGenerator(Layout.SHARDED).next()
    assert describe(sharded).timestamp is None
    assert abs(timestamp_of(sharded, layout="sharded") - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(seconds=5)


def test_the_command_line_says_the_same(capsys):
    assert main(["decode", "2489E9AD-2EE2-8E00-8EC9-32D5F69181C0"]) == 0
    out = capsys.readouterr().out
    assert "UUID version 8 (vendor-specific)" in out and "2128" not in out
    assert "timestamp: none" in out and "None" not in out
    assert main(["decode", "919108f7-52d1-4320-9bac-f847db4148a8"]) == 0
    assert "timestamp: none" in capsys.readouterr().out
    assert main(["decode", "1EC9414C-232A-6B00-B3C8-9F6BDECED846"]) == 0
    assert "timestamp: 2022-02-22T19:22:22+00:00" in capsys.readouterr().out
