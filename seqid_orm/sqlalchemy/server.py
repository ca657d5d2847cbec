"""``DatabaseSeqUUID``: a server default that lets the database make time-ordered UUIDs.

The SQL depends on the engine, its version and the column's storage, so the element is
compiled per dialect when the DDL is emitted (the connection has seen the server by then);
the column's :class:`~seqid_orm.vendors.Target` chooses the generator (``Target.server_default``).  Use it through
``seq_uuid_pk(generate="database")`` or as ``server_default=DatabaseSeqUUID(...)`` on a
:class:`~seqid_orm.sqlalchemy.SeqUUID` column with the same storage.

``DatabaseSeqUUID(shift=timedelta(days=-30))`` moves the clock the default reads, as PostgreSQL 18's
``uuidv7(shift)`` does (:meth:`seqid_orm.vendors.Target.shifted_default`); as a value in an
``INSERT`` it makes that statement's keys so.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal

from ..errors import ServerDefaultUnavailableError
from ..ids.adopted import ABOVE_BITS
from ..vendors import ServerDefault, Storage, check_shift
from .types import SeqUUID


class DatabaseSeqUUID(ColumnElement[Any]):
    """SQL that generates a time-ordered UUID in the database, for the column's storage.

    ``storage`` must be the column's (``None``: the dialect's default, as for ``SeqUUID()``).
    Compiling raises :class:`~seqid_orm.errors.ServerDefaultUnavailableError` where the
    engine cannot (Oracle, CockroachDB, old versions) - at ``CREATE TABLE``, not at insert.
    """

    inherit_cache = True
    # a statement's cache key tells elements of another storage or shift apart
    _traverse_internals = [("storage", InternalTraversal.dp_plain_obj), ("shift", InternalTraversal.dp_plain_obj)]

    def __init__(self, storage: Storage | str | None = None, *, shift: dt.timedelta | None = None) -> None:
        self.seq_type = SeqUUID(storage=storage)  # validates storage; the column's must match
        self.type = self.seq_type
        self.storage = self.seq_type.storage
        self.shift = check_shift(shift)  # now, as the column is declared

    def __repr__(self) -> str:
        # what Alembic writes into a migration (seqid_orm.sqlalchemy.alembic.render_item): the SQL
        # is chosen when the migration runs, for the server it runs on
        given = [] if self.storage is None else [f"storage={self.storage.value!r}"]
        given += [] if self.shift is None else [f"shift={self.shift!r}"]
        return f"DatabaseSeqUUID({', '.join(given)})"

    def for_dialect(self, dialect: Any) -> ServerDefault:
        """The generator this element compiles to on ``dialect``."""
        return self.seq_type.target(dialect).shifted_default(self.shift)

    def signatures(self, dialect: Any) -> list[str]:
        """What a default of this element shows on ``dialect`` once the server stored it: the plain
        generator's signature, and that of the keys of a column that held other keys
        (``op.set_seqid_default``), where the engine has them."""
        where = self.seq_type.target(dialect)
        found = [self.for_dialect(dialect).signature]
        if where.rules.INNER_SPLITS_HALF:
            with contextlib.suppress(ServerDefaultUnavailableError):
                found.append(where.adopted(ABOVE_BITS[0]).shifted_default(self.shift).signature)
        return found

    def shift_signatures(self, dialect: Any) -> list[str]:
        """What only a shifted default shows on ``dialect`` (empty where the server cannot shift), so that
        a default without a shift is not taken for one with."""
        with contextlib.suppress(ServerDefaultUnavailableError):
            return [self.seq_type.target(dialect).shifted_default(dt.timedelta(microseconds=1)).signature]
        return []


@compiles(DatabaseSeqUUID)
def _compile(element: DatabaseSeqUUID, compiler: SQLCompiler, **kw: Any) -> str:
    sql = element.for_dialect(compiler.dialect).sql
    # parentheses: MariaDB, MySQL and SQLite accept an expression DEFAULT only inside them
    processed: str = compiler.post_process_text(f"({sql})")  # type: ignore[no-untyped-call]
    return processed
