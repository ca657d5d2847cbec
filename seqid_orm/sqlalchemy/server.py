"""``DatabaseSeqUUID``: a server default that lets the database make time-ordered UUIDs.

The SQL depends on the engine, its version and the column's storage, so the element is
compiled per dialect when the DDL is emitted (the connection has seen the server by then);
the column's :class:`~seqid_orm.vendors.Target` chooses the generator (``Target.server_default``).  Use it through
``seq_uuid_pk(generate="database")`` or as ``server_default=DatabaseSeqUUID(...)`` on a
:class:`~seqid_orm.sqlalchemy.SeqUUID` column with the same storage.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ColumnElement

from ..errors import ServerDefaultUnavailableError
from ..ids.adopted import ABOVE_BITS
from ..vendors import ServerDefault, Storage
from .types import SeqUUID


class DatabaseSeqUUID(ColumnElement[Any]):
    """SQL that generates a time-ordered UUID in the database, for the column's storage.

    ``storage`` must be the column's (``None``: the dialect's default, as for ``SeqUUID()``).
    Compiling raises :class:`~seqid_orm.errors.ServerDefaultUnavailableError` where the
    engine cannot (Oracle, CockroachDB, old versions) - at ``CREATE TABLE``, not at insert.
    """

    inherit_cache = True

    def __init__(self, storage: Storage | str | None = None) -> None:
        self.seq_type = SeqUUID(storage=storage)  # validates storage; the column's must match
        self.type = self.seq_type

    def __repr__(self) -> str:
        # what Alembic writes into a migration (seqid_orm.sqlalchemy.alembic.render_item): the SQL
        # is chosen when the migration runs, for the server it runs on
        storage = self.seq_type.storage
        return "DatabaseSeqUUID()" if storage is None else f"DatabaseSeqUUID(storage={storage.value!r})"

    def for_dialect(self, dialect: Any) -> ServerDefault:
        """The generator this element compiles to on ``dialect``."""
        return self.seq_type.target(dialect).server_default

    def signatures(self, dialect: Any) -> list[str]:
        """What a default of this element shows on ``dialect`` once the server stored it: the plain
        generator's signature, and that of the keys of a column that held other keys
        (``op.set_seqid_default``), where the engine has them."""
        where = self.seq_type.target(dialect)
        found = [where.server_default.signature]
        if where.rules.INNER_SPLITS_HALF:
            with contextlib.suppress(ServerDefaultUnavailableError):
                found.append(where.adopted(ABOVE_BITS[0]).server_default.signature)
        return found


@compiles(DatabaseSeqUUID)
def _compile(element: DatabaseSeqUUID, compiler: SQLCompiler, **kw: Any) -> str:
    sql = element.for_dialect(compiler.dialect).sql
    # parentheses: MariaDB, MySQL and SQLite accept an expression DEFAULT only inside them
    processed: str = compiler.post_process_text(f"({sql})")  # type: ignore[no-untyped-call]
    return processed
