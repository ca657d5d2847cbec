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
from .columns import column_target
from .types import SeqUUID

__all__ = ["created_in"]


def created_in(bind: Connection | Session, column: Any, start: dt.datetime, end: dt.datetime) -> sa.ColumnElement[bool]:
    """``column`` (a :class:`~seqid_orm.sqlalchemy.SeqUUID` key, as ``Model.id`` or a table's column)
    between the first possible key of ``start`` and that of ``end``: the rows made in ``[start, end)``,
    as a range on the key's index.  ``bind`` is the connection or session the query runs on (its
    database decides the bounds)::

        stmt = select(Order).where(created_in(session, Order.id, start, end)).order_by(Order.id)

    ``start`` and ``end`` are timezone-aware datetimes; a key made in another way (``uuid4``, another
    library's UUIDv7 in a layout the database does not keep in order) is not found by its time.
    """
    real = column.property.columns[0] if hasattr(column, "property") else column
    if not isinstance(getattr(real, "type", None), SeqUUID):
        raise ArgumentTypeError(f"column must be a SeqUUID column, got {getattr(real, 'type', real)!r}")
    connection = bind.connection() if isinstance(bind, Session) else bind
    if not isinstance(connection, Connection):
        raise ArgumentTypeError(f"bind must be a Connection or a Session, got {type(bind).__name__}")
    target = column_target(connection.connection.dbapi_connection, connection.dialect, real)
    low, high = target.time_bounds(start, end)
    return sa.and_(column >= low, column < high)
