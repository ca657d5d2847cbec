"""``id__created_in=(start, end)`` through the Django ORM on each backend: exactly the rows made in
[start, end), in time order under ORDER BY id, with a plan that reads the primary key's index."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection

from seqid_orm import comb_at
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError
from tests.django.tables import reads_the_primary_key
from tests.django.testapp.models import Author

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 11, 3, tzinfo=dt.timezone.utc)


def test_the_rows_of_a_time_range_come_from_the_keys_index_in_time_order():
    layout = Author._meta.pk.layout_for(connection.alias)
    whens = [START + dt.timedelta(minutes=n) for n in range(3_000)]
    whens.append(START + dt.timedelta(hours=12, milliseconds=-1))  # the last millisecond inside
    Author.objects.bulk_create(Author(id=comb_at(when, layout), name=when.isoformat()) for when in whens)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Author._meta.db_table}")
    low, high = START + dt.timedelta(hours=10), START + dt.timedelta(hours=12)
    found = Author.objects.filter(id__created_in=(low, high)).order_by("id")
    assert [a.name for a in found] == sorted(w.isoformat() for w in whens if low <= w < high)
    assert found.count() == 2 * 60 + 1
    assert reads_the_primary_key(found), found.explain()


def test_what_it_refuses():
    now = dt.datetime.now(dt.timezone.utc)
    with pytest.raises(ArgumentTypeError, match="two datetimes"):
        list(Author.objects.filter(id__created_in=now))
    with pytest.raises(InvalidArgumentError, match="after end"):
        list(Author.objects.filter(id__created_in=(now, now - dt.timedelta(seconds=1))))
    with pytest.raises(InvalidArgumentError, match="timezone-aware"):
        list(Author.objects.filter(id__created_in=(now.replace(tzinfo=None), now)))


def test_snowflake_and_sortable_text_keys_are_asked_by_their_own_bounds():
    """A SnowflakeField's bounds come from its generator's profile, a SortableTextField's from its
    kind (bsv carries .NET ticks, base32 a UUIDv7): the same [start, end) on each, in time order."""
    from seqid_orm import Snowflake, comb_at
    from seqid_orm.django import settings_snowflake
    from seqid_orm.ids.text import encode_base32, encode_bsv
    from tests.django.testapp.models import Event, ShareCode, Ulid

    whens = [START + dt.timedelta(minutes=n) for n in range(300)]
    low, high = START + dt.timedelta(hours=1), START + dt.timedelta(hours=2)
    inside = [w for w in whens if low <= w < high]
    profile: Snowflake = settings_snowflake()
    Event.objects.bulk_create(Event(id=profile.min_id_at(w) | 7, name=w.isoformat()) for w in whens)
    ticks = [int((w - dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)).total_seconds()) * 10_000_000 for w in whens]
    ShareCode.objects.bulk_create(ShareCode(code=encode_bsv(t.to_bytes(8, "big") + bytes(range(16)))) for t in ticks)
    Ulid.objects.bulk_create(Ulid(id=encode_base32(comb_at(w)), note=w.isoformat()) for w in whens)
    events = Event.objects.filter(id__created_in=(low, high)).order_by("id")
    assert [e.name for e in events] == [w.isoformat() for w in inside]
    ulids = Ulid.objects.filter(id__created_in=(low, high)).order_by("id")
    assert [u.note for u in ulids] == [w.isoformat() for w in inside]
    assert ShareCode.objects.filter(code__created_in=(low, high)).count() == len(inside)


def test_time_prefixed_keys_are_asked_by_their_prefixes_across_a_wrap():
    """(start, end, (interval_length, interval_count)): uuid_time_nextval keys of 60-second intervals,
    256 of them, one every six seconds for 300 minutes from a lap's start; a range over the wrap reads
    two ranges of the key's index and holds the lap before's rows of the same prefixes."""
    from seqid_orm import uuid_time_nextval

    lap = 256 * 60
    start = dt.datetime.fromtimestamp(int(START.timestamp()) // lap * lap, dt.timezone.utc)  # prefix 0
    layout = Author._meta.pk.target_for(connection.alias).prefix_layout
    seconds = range(0, 300 * 60, 6)
    Author.objects.bulk_create(
        Author(id=uuid_time_nextval(60, 256, layout, now=start + dt.timedelta(seconds=s)), name=str(s)) for s in seconds
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Author._meta.db_table}")
    low, high = start + dt.timedelta(minutes=250), start + dt.timedelta(minutes=262)
    found = Author.objects.filter(id__created_in=(low, high, (60, 256))).order_by("id")
    got = [int(a.name) for a in found]
    assert sorted(got) == [s for s in seconds if 250 * 60 <= s < 262 * 60 or s < 6 * 60]
    prefixes = [s // 60 % 256 for s in got]
    assert prefixes == sorted(prefixes)  # in key order by prefix: 0-5, then 250-255
    assert reads_the_primary_key(found), found.explain()
    assert not Author.objects.filter(id__created_in=(low, low, (60, 256))).exists()  # an empty range
    with pytest.raises(ArgumentTypeError, match="SeqUUIDField"):
        from tests.django.testapp.models import Event

        list(Event.objects.filter(id__created_in=(low, high, (60, 256))))
    with pytest.raises(ArgumentTypeError, match="interval_length"):
        list(Author.objects.filter(id__created_in=(low, high, 60)))
