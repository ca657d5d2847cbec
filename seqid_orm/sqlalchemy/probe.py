"""Ask a live database in which order it compares the 16 bytes of a UUID column.

For each byte position ``p`` one value is inserted: the fixed bits of the ids we would
generate (version, variant) plus the lowest bit of byte ``p``.  Two such values differ only in
two positions, and the larger is the one whose position the engine looks at first.  So
``ORDER BY id DESC`` lists the positions from most to least significant: the engine's
comparison order, measured rather than looked up.  The values carry the same version/variant
bits as generated ids because MariaDB's ``UUID`` type orders some versions differently.
"""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import Column, Integer, MetaData, Table, insert, select
from sqlalchemy.engine import Connection

from ..errors import UnknownLayoutError
from ..ids.layout import Layout, candidates, fits
from ..vendors import layout_sample
from .types import SeqUUID


def probe_order(
    connection: Connection, type_: SeqUUID | None = None, sample: uuid.UUID | None = None
) -> tuple[int, ...]:
    """The comparison order of ``type_``'s column on this connection, for values like ``sample``.

    Runs in a temporary table inside a nested transaction (SAVEPOINT) where the connection
    is already in one, so the caller's data and transaction are left as they were.
    """
    type_ = type_ if type_ is not None else SeqUUID()
    base = (sample or layout_sample(Layout.TIME_FIRST)).int
    fixed_mask = (0xF << 76) | (0b111 << 61)
    base &= fixed_mask
    values = {pos: uuid.UUID(int=base | (1 << (8 * (15 - pos)))) for pos in range(16)}

    table = Table(
        f"seqid_probe_{secrets.token_hex(4)}",
        MetaData(),
        Column("id", type_, primary_key=True),
        Column("pos", Integer, nullable=False),
        prefixes=["TEMPORARY"],
    )
    nested = connection.begin_nested() if connection.in_transaction() else connection.begin()
    try:
        table.create(connection)
        connection.execute(insert(table), [{"id": v, "pos": p} for p, v in values.items()])
        rows = connection.execute(select(table.c.pos).order_by(table.c.id.desc())).scalars().all()
        table.drop(connection)
    finally:
        nested.rollback()
    return tuple(rows)


def probe_layout(connection: Connection, type_: SeqUUID | None = None, *, preferred: Layout | None = None) -> Layout:
    """The layout whose generated values this live column keeps in generation order.

    Each layout is probed with values carrying its own fixed bits, ``preferred`` first.
    """
    orders = {}
    for layout in candidates(preferred):
        order = probe_order(connection, type_, layout_sample(layout))
        orders[layout] = order
        if fits(layout, order):
            return layout
    raise UnknownLayoutError(f"no layout fits the measured comparison orders {orders!r}")
