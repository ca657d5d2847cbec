"""SQLModel: a seqid primary key in one line, with the connection-aware default.

SQLModel's ``Field(sa_type=SeqUUID(), primary_key=True)`` gives the column no default, so an
insert fails with ``NOT NULL constraint failed``; the default has to travel through
``sa_column_kwargs``, which SQLModel does not document for this.  :func:`seq_uuid_field` builds
that ``Field``: the id is made per row, in the layout of the connection, at the flush (``None``
before it, as with an integer key).  Needs the ``sqlmodel`` package.
"""

from __future__ import annotations

from typing import Any

from ..layout import Layout
from .defaults import seq_uuid_default
from .server import DatabaseSeqUUID
from .types import SeqUUID

__all__ = ["seq_uuid_field"]


def seq_uuid_field(
    storage: str | None = None,
    layout: Layout | str | None = None,
    *,
    generate: str = "python",
    **field_kw: Any,
) -> Any:
    """A SQLModel ``Field`` for a :class:`SeqUUID` primary key (arguments as ``seq_uuid_pk``).

    ``id: uuid.UUID | None = seq_uuid_field()``; ``generate="database"`` gives the column a
    :class:`DatabaseSeqUUID` server default instead.  Other keywords go to ``sqlmodel.Field``.
    """
    from sqlmodel import Field

    from ..errors import InvalidArgumentError

    if generate not in ("python", "database"):
        raise InvalidArgumentError(f"generate must be 'python' or 'database', got {generate!r}")
    column_kw = dict(field_kw.pop("sa_column_kwargs", None) or {})
    if generate == "database":
        if layout is not None:
            raise InvalidArgumentError("layout= applies to ids made in Python; the database's generator fixes its own")
        column_kw.setdefault("server_default", DatabaseSeqUUID(storage))
    else:
        column_kw.setdefault("default", seq_uuid_default)
    field_kw.setdefault("default", None)
    field_kw.setdefault("primary_key", True)
    return Field(sa_type=SeqUUID(storage=storage, layout=layout), sa_column_kwargs=column_kw, **field_kw)
