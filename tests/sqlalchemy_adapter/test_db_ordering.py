"""Every ordering claim, asked of the real databases with ORDER BY.

Values are generated in a shuffled insert order, so a table that merely returns rows in
insertion order cannot pass.
"""

from __future__ import annotations

import random

import pytest

sa = pytest.importorskip("sqlalchemy")

from seqid_orm import Snowflake, base32, bsv, comb, uuid_sequence_nextval  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, SnowflakeID, SortableText, layout_for  # noqa: E402
from seqid_orm.sqlalchemy.types import dialect_server_version, dialect_vendor  # noqa: E402
from seqid_orm.vendors import choose_prefix_layout  # noqa: E402

N = 3000


def _round_trip_order(engine, metadata, table_name, type_, values):
    table = sa.Table(table_name, metadata, sa.Column("id", type_, primary_key=True))
    metadata.create_all(engine)
    shuffled = random.sample(values, len(values))
    with engine.begin() as conn:
        conn.execute(sa.insert(table), [{"id": v} for v in shuffled])
        return conn.execute(sa.select(table.c.id).order_by(table.c.id)).scalars().all()


@pytest.mark.parametrize("storage", [None, "native", "binary", "text", "hex"])
def test_comb_ids_come_back_in_generation_order(engine, metadata, table_name, storage):
    type_ = SeqUUID(storage=storage)
    with engine.connect():
        pass
    if storage == "native" and engine.dialect.name == "sqlite":
        with pytest.raises(ValueError, match="needs a UUID column type"):
            type_.storage_for(engine.dialect)
        return
    layout = layout_for(engine.dialect, type_)
    values = [comb(layout) for _ in range(N)]
    assert _round_trip_order(engine, metadata, table_name, type_, values) == values


@pytest.mark.parametrize("storage", [None, "binary", "text"])
def test_sequence_prefixed_ids_are_ordered_by_prefix(engine, metadata, table_name, storage):
    type_ = SeqUUID(storage=storage)
    placement = choose_prefix_layout(
        dialect_vendor(engine.dialect), dialect_server_version(engine.dialect), type_.storage_for(engine.dialect)
    )
    # one value per block, one lap of a sequence (1, 2, ...): the database order must be its order
    values = [uuid_sequence_nextval(i, block_size=1, block_count=65536, layout=placement) for i in range(1, 65537, 40)]
    assert _round_trip_order(engine, metadata, table_name, type_, values) == values


def test_snowflake_ids_in_bigint(engine, metadata, table_name):
    gen = Snowflake(worker_id=9, datacenter_id=1)
    values = [gen.next_id() for _ in range(N)]
    assert _round_trip_order(engine, metadata, table_name, SnowflakeID(), values) == values


@pytest.mark.parametrize(("kind", "make"), [("bsv", bsv), ("base32", base32)])
def test_sortable_text_in_a_binary_collation(engine, metadata, table_name, kind, make):
    values = [make() for _ in range(N)]
    assert _round_trip_order(engine, metadata, table_name, SortableText(kind), values) == values


def test_bsv_ids_differing_only_in_case_are_distinct_rows(engine, metadata, table_name):
    """On MariaDB's default case-insensitive collation these two would collide."""
    a = bsv()
    swapped = "".join(c.lower() if c.isupper() else c.upper() for c in a[:-1]) + a[-1]
    if swapped == a:  # pragma: no cover - needs a bsv without letters
        pytest.skip("no letters to swap")
    table = sa.Table(table_name, metadata, sa.Column("id", SortableText("bsv"), primary_key=True))
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(table), [{"id": a}, {"id": swapped}])
        assert conn.execute(sa.select(table.c.id).where(table.c.id == a)).scalars().all() == [a]
