"""Adopted keys (seqid_orm.ids.adopted): one bits above a column's old keys, then the time.

Pure tests: the format's bits, its order as each engine compares it, the decision of the width from a
column's largest keys (scripted keys and clock), the live column's judgement (scripted readings), and
uniqueness across threads and forked processes.  The real servers' part is in
tests/sqlalchemy_adapter/test_adopting.py and tests/django/test_adopting.py.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import Layout, comb_at, describe, timestamp_of
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, StorageMismatchError
from seqid_orm.ids.adopted import (
    ABOVE_BITS,
    ABOVE_CHOSEN_MAX,
    above_for,
    adopted_format,
    expected_duplicates,
    leading_ones,
    recognise,
    record_comment,
    record_of,
    without_record,
)
from seqid_orm.ids.classify import classify
from seqid_orm.ids.comb import CombGenerator, adopted_of, decode_comb, generator_for
from seqid_orm.ids.layout import ORDER_SQLSERVER
from seqid_orm.schema.live import ColumnReading, declared_storage, judge, reading_from, reading_statements
from seqid_orm.vendors import Storage, target

ORDERS = [Layout.TIME_FIRST, Layout.TIME_LAST]
NOW_MS = 1_790_000_000_000  # 2026-09-21


def _clock(start_ms: int):
    """A clock at ``start_ms`` that moves one nanosecond a read (many ids a millisecond)."""
    state = [start_ms * 1_000_000]

    def clock() -> int:
        state[0] += 1
        return state[0]

    return clock


@pytest.mark.parametrize("layout", ORDERS)
@pytest.mark.parametrize("above", ABOVE_BITS)
def test_an_adopted_key_starts_with_its_one_bits_and_carries_its_time_and_counter(layout, above):
    fmt = adopted_format(layout, above)
    s = fmt.compose(NOW_MS, 12345, 0xDEADBEEF)
    u = uuid.UUID(int=fmt.to_uuid_int(s))
    if layout is Layout.TIME_FIRST:
        assert (u.version, u.variant) == (8, uuid.RFC_4122)  # every UUID validator takes it
    else:  # SQL Server's: the Microsoft variant says the order (as its TIME_LAST keys carry it)
        assert (u.int >> 76 & 0xF, u.variant) == (8, uuid.RESERVED_MICROSOFT)
    compared = layout.sort_key(u)
    assert leading_ones(compared) == above  # the time's top bit follows the one bits: it is 0 until 2248
    assert fmt.decode(fmt.from_uuid_int(u.int)) == (NOW_MS, 12345)
    assert recognise(u.int) is fmt and adopted_of(u) == (layout, above)
    info = describe(u, layout=layout)
    assert (info.kind, info.parts["above"], info.parts["counter"]) == ("adopted", above, 12345)
    assert info.timestamp == dt.datetime.fromtimestamp(NOW_MS / 1000, dt.timezone.utc)


def test_a_sql_server_key_that_starts_with_one_bytes_in_byte_order_is_still_read_as_sql_servers():
    """Its random bits sit in the bytes SQL Server compares last, which are uuid.UUID's first: ffff there is
    one key in 65,536, and the variant, not the bytes, says which order the key was made for."""
    fmt = adopted_format(Layout.TIME_LAST, 24)
    u = uuid.UUID(int=fmt.to_uuid_int(fmt.compose(NOW_MS, 7, 0xFFFF_FFFF)))
    assert u.bytes[:2] == b"\xff\xff"
    assert adopted_of(u) == (Layout.TIME_LAST, 24)
    assert describe(u).parts == {"counter": 7, "above": 24}


def test_widths_and_layouts_without_adopted_keys_are_refused_by_name():
    for bad in (0, 8, 15, 33, 36, 64):
        with pytest.raises(InvalidArgumentError, match=r"above must be one of 16\.\.32"):
            adopted_format(Layout.TIME_FIRST, bad)
    with pytest.raises(InvalidArgumentError, match="not sharded"):
        adopted_format(Layout.SHARDED, 16)
    with pytest.raises(InvalidArgumentError, match="not time_first_le"):
        CombGenerator(Layout.TIME_FIRST_LE, above=16)
    with pytest.raises(ArgumentTypeError, match="above must be an int"):
        CombGenerator(above=True)


@pytest.mark.parametrize("layout", ORDERS)
@pytest.mark.parametrize("above", [16, 24, 32])
def test_a_generator_makes_strictly_increasing_keys_in_the_engines_order_one_by_one_and_in_batches(layout, above):
    gen = CombGenerator(layout, above=above, clock=_clock(NOW_MS))
    made = [gen.next() for _ in range(3000)] + gen.batch(5000) + [gen.next() for _ in range(10)] + gen.batch(1)
    keys = [layout.sort_key(u) for u in made]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert {adopted_of(u) for u in made} == {(layout, above)}
    assert {decode_comb(u, layout, above)[0] for u in made} >= {NOW_MS}  # the clock's millisecond, and on


@pytest.mark.parametrize("above", [16, 32])
def test_a_counter_run_out_borrows_the_next_millisecond_and_stays_in_order(above):
    gen = CombGenerator(Layout.TIME_FIRST, above=above, clock=lambda: NOW_MS * 1_000_000)  # a stopped clock
    fmt = adopted_format(Layout.TIME_FIRST, above)
    first = gen.next()
    gen._counter = (1 << fmt.counter_bits) - 3
    made = [first] + [gen.next() for _ in range(6)] + gen.batch(4)
    assert made == sorted(made) and len(set(made)) == 11
    assert [decode_comb(u, Layout.TIME_FIRST, above)[0] for u in made] == [NOW_MS] * 3 + [NOW_MS + 1] * 8


@pytest.mark.parametrize("layout", ORDERS)
def test_adopted_keys_sort_after_every_key_with_fewer_one_bits_and_before_none_of_later_time(layout):
    fmt = adopted_format(layout, 24)
    old = [uuid.UUID(int=fmt.to_uuid_int(fmt.from_uuid_int(uuid.uuid4().int) >> 3)) for _ in range(2000)]
    early = uuid.UUID(int=fmt.to_uuid_int(fmt.compose(NOW_MS, 0, 0)))
    assert all(layout.sort_key(early) > layout.sort_key(u) for u in old)  # 21 or fewer one bits: all below
    later = uuid.UUID(int=fmt.to_uuid_int(fmt.compose(NOW_MS + 1, 0, 0)))
    assert layout.sort_key(later) > layout.sort_key(early)


@given(st.integers(min_value=0, max_value=(1 << 44) - 1), st.integers(min_value=0), st.integers(min_value=0))
def test_every_millisecond_counter_and_word_round_trips(ms, counter, word):
    for layout in ORDERS:
        for above in (16, 32):
            fmt = adopted_format(layout, above)
            c = counter % (1 << fmt.counter_bits)
            s = fmt.compose(ms, c, word % (1 << 64))
            assert fmt.decode(s) == (ms, c)
            assert fmt.from_uuid_int(fmt.to_uuid_int(s)) == s


def test_comb_at_gives_the_bounds_of_a_millisecond_of_adopted_keys():
    when = dt.datetime(2026, 9, 21, 12, 0, tzinfo=dt.timezone.utc)
    gen = CombGenerator(Layout.TIME_FIRST, above=20, clock=lambda: int(when.timestamp() * 1e9))
    made = gen.batch(100)
    low = comb_at(when, Layout.TIME_FIRST, "min", above=20)
    high = comb_at(when, Layout.TIME_FIRST, "max", above=20)
    assert all(low <= u <= high for u in made)
    assert timestamp_of(low) == when


# --- the width, from a column's largest keys -------------------------------------------------------


PG = target("postgresql", (15,), "native")


def test_a_column_of_random_keys_gets_one_more_one_bit_than_its_largest_key_and_at_least_16():
    assert PG.above_for([uuid.UUID("f0000000-0000-4000-8000-000000000000")], NOW_MS) == 16  # 4 ones: the least
    assert PG.above_for([uuid.UUID("fffff7ff-0000-4000-8000-000000000000")], NOW_MS) == 21  # 20 ones + 1
    assert PG.above_for([uuid.UUID("fffffff7-0000-4000-8000-000000000000")], NOW_MS) == 28  # 28 + 1: the budget's cap
    assert above_for([bytes.fromhex("ffffffffffffffffffffffffffffffff")]) == ABOVE_CHOSEN_MAX  # the very top


def test_sentinels_far_above_the_random_keys_stay_above_the_new_keys_and_do_not_widen_them():
    """The Max UUID and crafted keys: a random key of a table of N rows has about log2(N) one bits; one with
    OUTLIER_BITS more is not random.  Judged from the row count (the migration) or from the gap to the next
    key (a process reading the largest few)."""
    random_tail = uuid.UUID("fffe1234-0000-4000-8000-000000000000")  # 15 ones
    sentinels = [uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff"), uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff")]
    assert PG.above_for([*sentinels, random_tail], NOW_MS, rows=20_000) == 16
    assert PG.above_for([*sentinels, random_tail], NOW_MS) == 16  # the gaps say it too
    # without the row count, eight sentinels hide the random keys: the widest the budget allows
    assert PG.above_for(sentinels * 4, NOW_MS) == ABOVE_CHOSEN_MAX
    ones = [leading_ones(PG.rules and u.bytes) for u in sentinels]
    assert min(ones) >= 48


def test_the_fewest_one_bits_keep_a_huge_tables_uniqueness_budget():
    """At 10,000 inserts a second from 20 processes, the widest width keeps both Python- and database-made
    keys under 0.01 duplicates a year; the issue's figures (width 32, 200,000 a second) are reproduced."""
    assert expected_duplicates(ABOVE_CHOSEN_MAX, 10_000) <= 0.01
    assert expected_duplicates(ABOVE_CHOSEN_MAX, 10_000, made_by="database") <= 0.01
    assert expected_duplicates(ABOVE_CHOSEN_MAX + 1, 10_000, made_by="database") > 0.01  # why the cap is 28
    assert round(expected_duplicates(32, 200_000)) == 17  # 45 bits: what widths of whole hex digits cost
    assert expected_duplicates(0, 10_000) < 1e-9  # a UUIDv7's 73 bits
    with pytest.raises(InvalidArgumentError, match="made_by"):
        expected_duplicates(20, 1, made_by="sql")


def test_generators_of_one_millisecond_draw_their_counters_and_random_bits_independently():
    """The budget's model: keys of different processes in one millisecond are equal with ``2 ** -b``.  Checked
    on the real generator by cutting ``b`` down to 12 (six low bits of the counter, whose seed is drawn each
    millisecond, and the six top random bits): the cross-process pairs of equal values counted over many
    simulated milliseconds match the model's ``pairs / 4096`` (a generator seeded alike in each process, or
    a counter not drawn afresh, would collide far more; five standard deviations of room)."""
    import collections
    import math
    import random

    fmt = adopted_format(Layout.TIME_FIRST, 20)
    rounds, processes = 3000, 3
    pairs = equal = 0
    for ms in range(rounds):
        drawn: list[collections.Counter[int]] = []
        for p in range(processes):
            gen = CombGenerator(Layout.TIME_FIRST, above=20, clock=lambda ms=ms: (NOW_MS + ms) * 1_000_000)
            values = collections.Counter()
            for _ in range(random.Random(ms * 7 + p).randint(1, 6)):
                compared = fmt.from_uuid_int(gen.next().int)
                _ms, counter = fmt.decode(compared)
                rnd = compared & ((1 << fmt.random_bits) - 1)
                values[((counter & 0x3F) << 6) | (rnd >> (fmt.random_bits - 6))] += 1
            drawn.append(values)
        for a in range(processes):
            for b in range(a + 1, processes):
                pairs += sum(drawn[a].values()) * sum(drawn[b].values())
                equal += sum(n * drawn[b][v] for v, n in drawn[a].items())
    expected = pairs / 4096
    assert abs(equal - expected) <= 5 * math.sqrt(expected), (equal, expected)


def test_the_record_is_kept_beside_a_comment_and_read_back():
    assert record_of(record_comment("the invoice key", 21)) == 21
    assert record_of(record_comment(None, 0)) == 0
    assert record_comment(record_comment("words", 20), 24) == "words [seqid adopted=24]"
    assert without_record("words [seqid adopted=24]") == "words" and without_record("[seqid adopted=0]") is None
    assert record_of("words [seqid adopted=7]") is None  # not a width seqid makes: no record
    with pytest.raises(InvalidArgumentError):
        record_comment(None, 40)


def test_an_empty_column_and_one_whose_largest_key_is_older_than_now_keep_plain_keys():
    assert PG.above_for([], NOW_MS) == 0
    v7 = comb_at(dt.datetime.fromtimestamp(NOW_MS / 1000 - 60, dt.timezone.utc), Layout.TIME_FIRST)
    assert PG.above_for([v7], NOW_MS) == 0
    small_v4 = uuid.UUID("00000000-0000-4000-8000-000000000001")  # below today's UUIDv7: nothing to sort after
    assert PG.above_for([small_v4], NOW_MS) == 0


def test_a_uuid7_from_a_clock_running_ahead_by_less_than_a_day_does_not_flip_a_column_to_adopted_keys():
    ahead = comb_at(dt.datetime.fromtimestamp(NOW_MS / 1000 + 3600, dt.timezone.utc), Layout.TIME_FIRST)
    assert PG.above_for([ahead], NOW_MS) == 0
    far = comb_at(dt.datetime.fromtimestamp(NOW_MS / 1000 + 3 * 86400, dt.timezone.utc), Layout.TIME_FIRST)
    assert PG.above_for([far], NOW_MS) == 16  # a key days ahead is not this column's clock: sort after it


def test_the_width_of_the_adopted_keys_a_column_holds_wins_over_its_largest_key():
    """Every process that comes later agrees with the first: its keys' width is read off the column, even
    under a few random keys that old code wrote above them in a rolling deploy."""
    adopted = uuid.UUID(int=adopted_format(Layout.TIME_FIRST, 20).compose(NOW_MS, 0, 0))
    stray = uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff")
    assert PG.above_for([stray, stray, adopted], NOW_MS) == 20


def test_engines_that_fill_pages_where_inserts_go_keep_plain_keys():
    v4 = [uuid.UUID("ff000000-0000-4000-8000-000000000000")]
    for vendor, version, storage in (
        ("mariadb", (10, 11, 9), "native"),
        ("mariadb", (10, 11, 9), "binary"),
        ("mysql", (8, 0, 36), "hex"),
        ("sqlite", (3, 40), "binary"),
        ("cockroachdb", (23, 1), "native"),
    ):
        assert target(vendor, version, storage).above_for(v4, NOW_MS) == 0, vendor
    for vendor, storage in (("postgresql", "binary"), ("postgresql", "hex"), ("oracle", "binary")):
        assert target(vendor, (15,), storage).above_for(v4, NOW_MS) == 16, (vendor, storage)


def test_sql_server_puts_the_one_bits_where_it_compares_first():
    mssql = target("mssql", (16,), "native")
    assert mssql.adopted_layout is Layout.TIME_LAST and mssql.layout is Layout.TIME_LAST
    top = uuid.UUID("00000000-0000-4000-8000-fffff0000000")  # its last six bytes compare first
    assert mssql.above_for([top], NOW_MS) == 21
    made = mssql.adopted(24).generator.batch(50)
    assert all(sorted(ORDER_SQLSERVER[:3]) == [10, 11, 12] and u.bytes[10:13] == b"\xff\xff\xff" for u in made)
    with pytest.raises(Exception, match="make them in Python"):
        mssql.adopted(24).server_default  # noqa: B018 - NEWSEQUENTIALID() cannot make them


# --- the live column ----------------------------------------------------------------------------------


def _fix(found: Storage) -> str:
    return f"FIX {found.value}"


def test_a_column_that_keeps_another_form_is_refused_naming_both_forms_and_the_fix():
    sqlite = target("sqlite", (3, 40), None)  # SeqUUID() writes 16 bytes there
    hexed = ColumnReading("CHAR(32)", (uuid.uuid4().hex,), uuid.uuid4().hex)
    with pytest.raises(StorageMismatchError) as raised:
        judge(sqlite, hexed, label="invoice.id", fix=_fix)
    text = str(raised.value)
    assert "invoice.id (declared CHAR(32)) holds hex (32 hex digits)" in text
    assert "writes binary (16 raw bytes)" in text and text.endswith("FIX hex")
    assert judge(target("sqlite", (3, 40), "hex"), hexed, label="x", fix=_fix).storage is Storage.HEX
    maria = target("mariadb", (10, 11, 9), None)
    with pytest.raises(StorageMismatchError, match="holds hex"):
        judge(maria, ColumnReading("char(32)"), label="t.id", fix=_fix)  # empty: the declared type decides


def test_sqlite_is_judged_by_what_its_rows_hold_at_both_ends_not_only_by_the_declared_type():
    sqlite = target("sqlite", (3, 40), None)
    mixed = ColumnReading("BLOB", (uuid.uuid4().bytes,), uuid.uuid4().hex)  # text sorts before blobs there
    with pytest.raises(StorageMismatchError, match="holds hex"):
        judge(sqlite, mixed, label="t.id", fix=_fix)
    assert judge(sqlite, ColumnReading("BLOB", (uuid.uuid4().bytes,), uuid.uuid4().bytes), label="t", fix=_fix)


def test_an_unknown_declared_type_or_an_absent_column_refuses_nothing():
    pg = target("postgresql", (15,), None)
    assert judge(pg, ColumnReading(None), label="t", fix=_fix) is pg
    assert judge(pg, ColumnReading("text", ()), label="t", fix=_fix) is pg


def test_declared_types_name_their_storage():
    cases = {
        "uuid": Storage.NATIVE,
        "UNIQUEIDENTIFIER": Storage.NATIVE,
        "bytea": Storage.BINARY,
        "BLOB": Storage.BINARY,
        "binary(16)": Storage.BINARY,
        "varbinary(16)": Storage.BINARY,
        "RAW(16)": Storage.BINARY,
        "character(36)": Storage.TEXT,
        "varchar(36)": Storage.TEXT,
        "CHAR(32)": Storage.HEX,
        "char(32)": Storage.HEX,
        "binary(32)": None,
        "text": None,
        "integer": None,
    }
    assert {k: declared_storage(k) for k in cases} == cases


def test_the_reading_statements_quote_what_they_name():
    [catalog, top, bottom] = reading_statements("postgresql", 'we"ird', "i'd")
    assert 'to_regclass(\'"we""ird"\')' in catalog and "a.attname = 'i''d'" in catalog
    assert "col_description(a.attrelid, a.attnum)" in catalog  # the record, without SELECT on the table
    assert top == 'SELECT "i\'d" FROM "we""ird" WHERE "i\'d" IS NOT NULL ORDER BY "i\'d" DESC LIMIT 8'
    assert bottom.endswith('ORDER BY "i\'d" LIMIT 1')
    [catalog, _top, _bottom] = reading_statements("mariadb", "t\\", "id")
    assert "TABLE_NAME = 't\\\\'" in catalog  # MariaDB reads a backslash as an escape
    assert "FIND_IN_SET('select', PRIVILEGES)" in catalog and "COLUMN_COMMENT" in catalog
    assert len(reading_statements("sqlite", "t", "id")) == 3
    assert reading_statements("mssql", "t", "id") == []
    assert reading_from([[]]) == ColumnReading(None)


# --- storage from the values ------------------------------------------------------------------------------

_HEX = "0190b1e25c3a7b2d8e4f0a1b2c3d4e5f"
_TEXT = "0190b1e2-5c3a-7b2d-8e4f-0a1b2c3d4e5f"


@pytest.mark.parametrize(
    ("values", "storage", "refused"),
    [
        ((_HEX,), "text", "holds hex"),  # a text or varchar(255) column of uuid4().hex: 36 characters would follow
        ((_TEXT,), "hex", "holds text"),
        ((_TEXT.upper(),), "text", "upper-case 36-character text"),
        ((_HEX.upper(),), "hex", "upper-case 32 hex digits"),
        (("{" + _TEXT + "}",), "text", "36-character text in braces"),
        (("urn:uuid:" + _TEXT,), "text", "urn:uuid: text"),
        (("not-a-key",), "text", "that is not a UUID"),
        ((bytes(20),), "binary", "20-byte values"),
        ((_TEXT, _TEXT.upper()), "text", "upper-case"),  # the odd one among canonical ones
    ],
)
def test_a_column_whose_values_are_not_what_the_type_writes_is_refused_on_every_engine(values, storage, refused):
    for vendor, version in (("postgresql", (15,)), ("mariadb", (10, 11, 9)), ("sqlite", (3, 40))):
        where = target(vendor, version, storage)
        reading = ColumnReading("text", values[:-1] or values, values[-1])
        with pytest.raises(StorageMismatchError, match=refused):
            judge(where, reading, label="t.id", fix=_fix)


def test_values_in_the_types_form_pass_whatever_the_declared_type_says_of_length():
    for storage, value in (("text", _TEXT), ("hex", _HEX), ("binary", bytes(16))):
        where = target("postgresql", (15,), storage)
        judged = judge(where, ColumnReading("varchar(255)", (value,), value), label="t", fix=_fix)
        assert judged.storage is where.storage
    # a native UUID column: the driver's form says nothing (MariaDB's comes back as text)
    maria = target("mariadb", (10, 11, 9), "native")
    assert judge(maria, ColumnReading("uuid", (_TEXT,), _TEXT), label="t", fix=_fix).storage is Storage.NATIVE


def test_the_record_decides_the_width_over_the_keys_read_and_over_none():
    old = uuid.UUID("fffff000-0000-4000-8000-000000000000")  # 20 ones: a process would pick 21
    assert judge(PG, ColumnReading("uuid", (old,), identity=1), label="t", fix=_fix).above == 21
    recorded = ColumnReading("uuid", (old,), identity=1, comment="[seqid adopted=24]")
    assert judge(PG, recorded, label="t", fix=_fix).above == 24
    nothing = ColumnReading("uuid", (), identity=1, comment="key [seqid adopted=24]", may_read=False)  # INSERT-only
    assert judge(PG, nothing, label="t", fix=_fix).above == 24
    emptied = ColumnReading("uuid", (), identity=1, comment="[seqid adopted=24]")  # after a TRUNCATE
    assert judge(PG, emptied, label="t", fix=_fix).above == 24
    maria = target("mariadb", (10, 11, 9), "native")  # plain keys there whatever a record says
    assert judge(maria, ColumnReading("uuid", (), comment="[seqid adopted=24]"), label="t", fix=_fix).above == 0


class _Catalog:
    """A scripted database: each table name resolves to a real table per ``search_path``; counts statements."""

    def __init__(self, tables: dict[object, tuple[list[object], str | None]], path: str = "a") -> None:
        self.tables, self.path, self.statements = tables, path, []

    def fetch(self, statement: str) -> list[tuple[object, ...]]:
        self.statements.append(statement)
        keys, comment = self.tables[self.path]
        if statement.startswith("SELECT a.attrelid"):
            return [(self.path, "uuid", True, comment)]
        if "DESC LIMIT" in statement:
            return [(k,) for k in keys]
        return [(keys[-1],)] if keys else []


def test_live_columns_keep_one_judgement_per_real_table_and_resolve_names_per_connection():
    from seqid_orm.schema.live import ColumnName, LiveColumns

    big = [uuid.UUID("fffff000-0000-4000-8000-000000000000")]
    db = _Catalog({"a": ([], "[seqid adopted=0]"), "b": (big, "[seqid adopted=21]")})
    live, name = LiveColumns(), ColumnName("t", "id")
    seen: dict[object, object] = {}
    assert live.target(PG, name, db.fetch, seen, _fix).above == 0  # tenant a's table
    ran = len(db.statements)
    assert live.target(PG, name, db.fetch, seen, _fix).above == 0 and len(db.statements) == ran  # kept: no SQL
    db.path = "b"
    seen.clear()  # what a search_path statement does to the connection's names
    assert live.target(PG, name, db.fetch, seen, _fix).above == 21  # tenant b's own record
    other_connection: dict[object, object] = {}
    db.path = "a"
    assert live.target(PG, name, db.fetch, other_connection, _fix).above == 0
    assert [s for s in db.statements if "LIMIT" in s].__len__() == 4  # each real table's keys read once


def test_a_judgement_made_without_a_record_follows_a_record_written_since(monkeypatch, caplog):
    from seqid_orm.schema import live as live_module
    from seqid_orm.schema.live import ColumnName, LiveColumns

    old = [uuid.UUID("fffff000-0000-4000-8000-000000000000")]
    db = _Catalog({"a": (old, None)})
    live, name, seen = LiveColumns(), ColumnName("t", "id"), {}
    with caplog.at_level("WARNING", logger="seqid_orm"):
        assert live.target(PG, name, db.fetch, seen, _fix).above == 21  # judged from the keys, and said so
    assert "t.id has no adoption record" in caplog.text and "op.adopt_seqid_keys('t', 'id')" in caplog.text
    db.tables["a"] = (old, "[seqid adopted=24]")  # the migration ran meanwhile
    assert live.target(PG, name, db.fetch, seen, _fix).above == 21  # within RECHECK_SECONDS: kept
    monkeypatch.setattr(live_module, "RECHECK_SECONDS", 0.0)
    db.tables["a"] = (old, None)
    live, seen = LiveColumns(), {}
    assert live.target(PG, name, db.fetch, seen, _fix).above == 21  # kept for no time at all now
    db.tables["a"] = (old, "[seqid adopted=24]")
    assert live.target(PG, name, db.fetch, seen, _fix).above == 24  # the catalog read again: the record


def test_a_failed_read_is_a_typed_error_naming_the_statement():
    from seqid_orm.errors import ColumnReadError
    from seqid_orm.schema.live import ColumnName, LiveColumns

    def fetch(statement: str) -> list[tuple[object, ...]]:
        raise TimeoutError("canceling statement due to statement timeout")

    said = r"reading t\.id .* TimeoutError: canceling .*statement: SELECT a\.attrelid"
    with pytest.raises(ColumnReadError, match=said) as raised:
        LiveColumns().target(PG, ColumnName("t", "id"), fetch, {}, _fix)
    assert isinstance(raised.value.__cause__, TimeoutError)


def test_the_doctor_reads_adopted_keys_as_time_ordered():
    keys = generator_for(Layout.TIME_FIRST, 28).batch(100)
    found = classify(keys)
    assert (found.kind, found.format, found.layout) == ("time-ordered", "adopted", "time_first")


# --- unique across threads and processes -----------------------------------------------------------


def test_threads_sharing_the_generator_of_a_width_never_repeat_and_get_one_generator():
    gens, out = [], []
    lock = threading.Lock()

    def draw() -> None:
        gen = generator_for(Layout.TIME_FIRST, 24)
        made = [gen.next() for _ in range(2000)] + gen.batch(500)
        with lock:
            gens.append(gen)
            out.extend(made)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g in gens}) == 1
    assert len(set(out)) == len(out) == 8 * 2500


def _child(queue) -> None:
    gen = generator_for(Layout.TIME_FIRST, 24)
    queue.put([str(u) for u in [gen.next() for _ in range(500)] + gen.batch(500)])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
def test_forked_children_of_a_process_that_made_adopted_keys_never_repeat_its_keys_or_each_others():
    parent = [generator_for(Layout.TIME_FIRST, 24).next() for _ in range(10)]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    children = [context.Process(target=_child, args=(queue,)) for _ in range(4)]
    for child in children:
        child.start()
    made = [u for _ in children for u in queue.get(timeout=60)]
    for child in children:
        child.join(timeout=60)
    assert len(set(made)) == len(made) == 4000
    assert not set(made) & {str(u) for u in parent}
