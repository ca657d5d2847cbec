"""Rows made in a time range, asked of the primary key: ``low <= id < high``.

A time-ordered key carries its creation time, so "the orders of last Tuesday" needs no second index
on a ``created_at`` column: the bounds are keys, found where the key's own index keeps them.  Which
keys depends on the column as the database holds it (the layout its engine orders, adopted keys), so
the bounds are read from the live connection, as a key's default is.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from ..errors import ArgumentTypeError
from ..ids.prefixed import check_time_prefix, time_prefix_bounds
from ..ids.snowflake import Snowflake
from ..ids.text import text_bounds
from .columns import column_target
from .types import SeqUUID, SnowflakeID, SortableText

__all__ = ["created_in"]


def created_in(
    bind: Connection | Session,
    column: Any,
    start: dt.datetime,
    end: dt.datetime,
    *,
    generator: Snowflake | None = None,
    time_prefix: tuple[int, int] | None = None,
) -> sa.ColumnElement[bool]:
    """``column`` (a key, as ``Model.id`` or a table's column) between the first possible key of
    ``start`` and that of ``end``: the rows made in ``[start, end)``, as a range on the key's index.
    ``bind`` is the connection or session the query runs on (its database decides the bounds of a
    UUID key)::

        stmt = select(Order).where(created_in(session, Order.id, start, end)).order_by(Order.id)

    The column's type says which bounds: a :class:`~seqid_orm.sqlalchemy.SeqUUID` key's (and a
    :class:`~seqid_orm.sqlalchemy.TypeID`'s) in the layout its database keeps it in, adopted keys
    included; a :class:`~seqid_orm.sqlalchemy.SortableText` key's by its kind; a
    :class:`~seqid_orm.sqlalchemy.SnowflakeID` key's by ``generator``'s profile (its epoch and bit
    widths: give the generator that fills the column).  ``start`` and ``end`` are timezone-aware
    datetimes; a key made in another way (``uuid4``, another library's UUIDv7 in a layout the
    database does not keep in order) is not found by its time.

    ``time_prefix=(interval_length, interval_count)``: the column's keys are
    :func:`~seqid_orm.uuid_time_nextval`'s with those arguments, asked by their prefix
    (:func:`~seqid_orm.ids.prefixed.time_prefix_bounds`, where the column's database compares it
    first): one or two ranges of the key's index, which hold the keys of earlier laps of the prefix too.
    """
    real = column.property.columns[0] if hasattr(column, "property") else column
    kind = getattr(real, "type", None)
    low: Any
    high: Any
    if time_prefix is not None and not isinstance(kind, SeqUUID):
        raise ArgumentTypeError(f"time_prefix= asks a SeqUUID column of uuid_time_nextval keys, got {kind!r}")
    if isinstance(kind, SnowflakeID):
        if not isinstance(generator, Snowflake):
            raise ArgumentTypeError("a SnowflakeID column's bounds need generator=, the Snowflake that fills it")
        low, high = generator.time_bounds(start, end)
    elif isinstance(kind, SortableText):
        low, high = text_bounds(kind.kind, start, end)
    elif isinstance(kind, SeqUUID):
        connection = bind.connection() if isinstance(bind, Session) else bind
        if not isinstance(connection, Connection):
            raise ArgumentTypeError(f"bind must be a Connection or a Session, got {type(bind).__name__}")
        target = column_target(connection, real)
        if time_prefix is not None:
            ranges = time_prefix_bounds(start, end, *check_time_prefix(time_prefix), layout=target.prefix_layout)
            return sa.or_(sa.false(), *(column.between(low, high) for low, high in ranges))
        low, high = target.time_bounds(start, end)
    else:
        raise ArgumentTypeError(f"column must be a SeqUUID, SortableText or SnowflakeID column, got {kind!r}")
    return sa.and_(column >= low, column < high)
