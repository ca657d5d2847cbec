"""Finding a row by its public (masked) id with SQLAlchemy: the view side of :func:`seqid_orm.mask`.

The outside world sees ``mask(key, secret)``; a request brings it back.  :func:`get_by_public_id`
unmasks it under each key (newest first, so keys can rotate) in the layout of the column on this
connection, looks the candidates up in one query, and returns the row or ``None`` — a wrong
key's candidate names no row, so another row is never returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ..errors import InvalidIDError
from ..ids.validate import coerce_uuid
from ..public.masking import MaskedLayout, mask, unmask_any
from .defaults import layout_for
from .types import SeqUUID

__all__ = ["get_by_public_id", "public_id_of"]

T = TypeVar("T")


def _keys(keys: bytes | Sequence[bytes]) -> list[bytes]:
    return [keys] if isinstance(keys, (bytes, bytearray)) else list(keys)


def public_id_of(value: uuid.UUID, keys: bytes | Sequence[bytes]) -> uuid.UUID:
    """The public form of a key (masked with the newest key)."""
    return mask(value, _keys(keys)[0])


def get_by_public_id(
    session: Session, model: type[T], public: uuid.UUID | str, keys: bytes | Sequence[bytes]
) -> T | None:
    """The ``model`` row whose primary key ``public`` masks, or ``None`` (also for malformed text)."""
    mapper: Any = sa.inspect(model)
    (column,) = mapper.primary_key
    dialect = session.connection(bind_arguments={"mapper": mapper}).dialect  # connected: its version known
    layout: MaskedLayout = layout_for(dialect, column.type) if isinstance(column.type, SeqUUID) else "prefixed"
    try:
        candidates = unmask_any(coerce_uuid(public), _keys(keys), layout=layout)
    except InvalidIDError:
        return None
    if not candidates:
        return None
    rows = session.scalars(sa.select(model).where(column.in_(candidates)).limit(2)).all()
    return rows[0] if len(rows) == 1 else None  # two rows would take undetected collisions of two keys
