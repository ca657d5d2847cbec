"""SQLModel: a seqid primary key in one line, with the connection-aware default.

SQLModel's ``Field(sa_type=SeqUUID(), primary_key=True)`` gives the column no default, so an
insert fails with ``NOT NULL constraint failed``; the default has to travel through
``sa_column_kwargs``, which SQLModel does not document for this.  :func:`seq_uuid_field` builds
that ``Field``: the id is made per row, in the layout of the connection, at the flush (``None``
before it, as with an integer key).  Needs the ``sqlmodel`` package.
"""

from __future__ import annotations

from typing import Any

from ..ids.layout import Layout
from .defaults import key_default
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

    column_kw = dict(field_kw.pop("sa_column_kwargs", None) or {})
    column_kw.setdefault(*key_default(storage, layout, generate))
    field_kw.setdefault("default", None)
    field_kw.setdefault("primary_key", True)
    return Field(sa_type=SeqUUID(storage=storage, layout=layout), sa_column_kwargs=column_kw, **field_kw)
