"""``DatabaseSeqUUID``: a ``db_default`` that lets the database make time-ordered UUIDs.

``SeqUUIDField(primary_key=True, db_default=DatabaseSeqUUID())`` sends rows without a key, like
an ``AutoField``; Django reads the id back with ``RETURNING`` (PostgreSQL, MariaDB 10.5+,
SQLite 3.35+), so ``obj.pk`` is known after ``save()``, not before.  The SQL is the column's
:class:`~seqid_orm.vendors.Target`'s (``Target.server_default``), for the database and the column
Django creates there; system check ``seqid.E003`` reports a database that cannot (Oracle,
CockroachDB, MySQL before 8.0.13, PostgreSQL before 13).  Needs Django 5.0+ (``db_default``).

``DatabaseSeqUUID(shift=timedelta(days=-30))`` moves the clock the default reads, as Django 6.1's
``UUID7(shift)`` and PostgreSQL 18's ``uuidv7(shift)`` do
(:meth:`seqid_orm.vendors.Target.shifted_default`); ``makemigrations`` keeps the shift, and a
database whose default cannot take one is ``seqid.E003``.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from django.db.models import Func, UUIDField
from django.utils.deconstruct import deconstructible

from ..errors import ArgumentTypeError
from ..vendors import ServerDefault, check_shift
from .connection import column_target


@deconstructible(path="seqid_orm.django.DatabaseSeqUUID")
class DatabaseSeqUUID(Func):
    """The database generates the id: see the vendor modules of :mod:`seqid_orm.vendors` for what runs where."""

    allowed_default = True
    arity = 0
    output_field = UUIDField()
    _field: Any = None

    def __init__(self, *, shift: dt.timedelta | None = None) -> None:
        super().__init__()
        self.shift = check_shift(shift)  # now, as the field is declared

    def bind(self, field: Any) -> DatabaseSeqUUID:
        """A copy tied to ``field``, whose column type decides the SQL (done by SeqUUIDField)."""
        bound = copy.copy(self)
        bound._field = field
        return bound

    def for_connection(self, connection: Any) -> ServerDefault:
        """The generator this default compiles to on ``connection``: for the column as it is there, so a
        column that already holds random keys gets keys that sort after them (read when the migration
        that sets the default runs, :func:`~seqid_orm.django.connection.column_target`)."""
        if self._field is None:
            raise ArgumentTypeError("DatabaseSeqUUID() works only as the db_default of a SeqUUIDField")
        return column_target(self._field, connection)[0].shifted_default(self.shift)

    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, list[Any]]:
        default = self.for_connection(connection)
        if default.setup:  # an adopted column's default calls a function: AdoptSeqUUID makes it, or here
            ensure_functions(connection, default.setup)
        # Django formats SQL with %-parameters: SQLite's printf('%012x') must arrive as '%%'
        return default.sql.replace("%", "%%"), []


def ensure_functions(connection: Any, setup: tuple[str, ...]) -> None:
    """Run ``setup`` (the ``CREATE OR REPLACE FUNCTION`` of an adopted key's default) where the function is
    not there yet: a ``db_default`` set by an ``AlterField`` that no ``AdoptSeqUUID`` preceded (a swap
    migrated before seqid wrote the adoption) still finds what it calls."""
    from ..vendors.postgresql import ADOPTED_FUNCTION

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE p.proname = %s AND n.nspname = ANY (current_schemas(false))",
            [ADOPTED_FUNCTION],
        )
        if cursor.fetchone()[0] >= len(setup):
            return
        for statement in setup:
            cursor.execute(statement)
