"""Column defaults that generate ids in the layout of the connection they are inserted over.

A SQLAlchemy default that takes one argument receives the execution context, which knows the
dialect (name, MariaDB or not, server version) and the column being filled.  From those and
the column's storage the core registry picks the layout; the answer is cached per dialect
instance (one per engine), so the registry runs once per engine and column kind, not per row.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import ForeignKey, event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.engine.interfaces import ExecutionContext
from sqlalchemy.orm import Mapper, mapped_column
from sqlalchemy.orm.properties import MappedColumn

from ..comb import comb
from ..errors import ArgumentTypeError, InvalidArgumentError
from ..layout import Layout
from ..registry import decide_layout
from ..snowflake import Snowflake
from ..text import text_id_kind
from .types import SeqUUID, SnowflakeID, SortableText, dialect_server_version


def layout_for(dialect: Dialect, type_: SeqUUID | None = None) -> Layout:
    """The layout that ``type_``'s generated values get on ``dialect``.

    This adapter only describes its target from the dialect; the decision, and its memo, are
    the core's (:func:`seqid_orm.registry.decide_layout`), shared with the Django fields.
    """
    type_ = type_ if type_ is not None else _DEFAULT_TYPE
    return decide_layout(
        dialect.name,
        getattr(dialect, "server_version_info", None),
        type_.storage,
        type_.layout,
        bool(getattr(dialect, "is_mariadb", False)),
    )


_DEFAULT_TYPE = SeqUUID()


def seq_uuid_default(context: ExecutionContext) -> uuid.UUID:
    """Default for a :class:`SeqUUID` column: a new id in the layout of this connection."""
    column = getattr(context, "current_column", None)
    type_ = column.type if column is not None and isinstance(column.type, SeqUUID) else None
    return comb(layout_for(context.dialect, type_))


def seq_uuid_pk(
    storage: str | None = None,
    layout: Layout | str | None = None,
    *,
    generate: str = "python",
    **column_kw: Any,
) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SeqUUID` primary key with its connection-aware default.

    ``generate="python"`` (default): this process makes the id, in the layout of the
    connection; it exists after the flush (as with an integer key), or at construction with
    :func:`assign_ids_on_init`.  ``generate="database"``: a server default
    (:class:`~seqid_orm.sqlalchemy.DatabaseSeqUUID`) makes it, so rows travel without a key,
    like an identity column; the ORM reads it back with ``RETURNING`` (PostgreSQL, MariaDB
    10.5+, SQLite 3.35+).  ``layout`` applies to Python-made ids only.
    """
    if generate not in ("python", "database"):
        raise InvalidArgumentError(f"generate must be 'python' or 'database', got {generate!r}")
    column_kw.setdefault("primary_key", True)
    if generate == "database":
        if layout is not None:
            raise InvalidArgumentError("layout= applies to ids made in Python; the database's generator fixes its own")
        from .server import DatabaseSeqUUID

        column_kw.setdefault("server_default", DatabaseSeqUUID(storage))
    else:
        column_kw.setdefault("default", seq_uuid_default)
    return mapped_column(SeqUUID(storage=storage, layout=layout), **column_kw)


def seq_uuid_fk(
    target: str | Any,
    storage: str | None = None,
    **column_kw: Any,
) -> MappedColumn[Any]:
    """``mapped_column`` for a foreign key to a seqid UUID key, with the same storage.

    (A plain ``Mapped[uuid.UUID]`` annotation would give SQLAlchemy's own ``Uuid`` type,
    whose storage differs from :class:`SeqUUID` on several dialects; or map ``uuid.UUID`` to
    ``SeqUUID()`` in the declarative base's ``type_annotation_map``.)
    """
    fk_kw = {k: column_kw.pop(k) for k in ("ondelete", "onupdate") if k in column_kw}
    return mapped_column(SeqUUID(storage=storage), ForeignKey(target, **fk_kw), **column_kw)


def snowflake_pk(generator: Snowflake, **column_kw: Any) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SnowflakeID` primary key filled by ``generator``."""
    if not isinstance(generator, Snowflake):
        raise ArgumentTypeError(f"generator must be a seqid_orm.Snowflake, got {type(generator).__name__}")
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("autoincrement", False)
    column_kw.setdefault("default", generator.next_id)
    return mapped_column(SnowflakeID(), **column_kw)


def sortable_text_pk(kind: str = "bsv", **column_kw: Any) -> MappedColumn[Any]:
    """``mapped_column`` for a :class:`SortableText` primary key (``"bsv"`` or ``"base32"``)."""
    type_ = SortableText(kind)
    column_kw.setdefault("primary_key", True)
    column_kw.setdefault("default", text_id_kind(kind)[1])
    return mapped_column(type_, **column_kw)


def assign_ids_on_init(mapped_class: type, bind: Engine) -> Callable[..., None]:
    """Opt-in: give new objects of ``mapped_class`` (and subclasses) their id at construction.

    The layout is decided for ``bind`` (connecting once if it has not yet seen the server),
    so ``obj.id`` is known before ``session.add`` and ``flush``.  Returns the event listener,
    which ``sqlalchemy.event.remove(mapped_class, "init", listener)`` takes off again.
    """
    from sqlalchemy import inspect

    mapper: Mapper[Any] = inspect(mapped_class)
    columns = [(c, c.type) for c in mapper.primary_key if isinstance(c.type, SeqUUID)]
    if not columns:
        raise ArgumentTypeError(f"{mapped_class.__name__} has no SeqUUID primary-key column")
    if dialect_server_version(bind.dialect) is None:
        with bind.connect():
            pass
    layouts = {c.key: layout_for(bind.dialect, type_) for c, type_ in columns}
    attrs = {c.key: mapper.get_property_by_column(c).key for c, _ in columns}

    def listener(target: Any, args: Any, kwargs: dict[str, Any]) -> None:
        for col_key, attr in attrs.items():
            if kwargs.get(attr) is None:
                kwargs[attr] = comb(layouts[col_key])

    event.listen(mapped_class, "init", listener, propagate=True)
    return listener
