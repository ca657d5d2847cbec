"""The hooks an Alembic ``env.py`` passes to ``context.configure``: seqid's types rendered with their
import, a database-made default compared by its generator, the offline server's version named, and
seqid's own tables left out of autogenerate where they are not in the metadata."""

from __future__ import annotations

from typing import Any

from ...allocation.stores.base import LEASE_TABLE, TICKET_TABLE
from ...errors import InvalidArgumentError
from ..server import DatabaseSeqUUID
from ..types import SeqUUID, SnowflakeID, SortableText, TicketID

_SEQID_TYPES = (SeqUUID, SnowflakeID, SortableText, TicketID)


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """``render_item`` hook for ``context.configure``; ``False`` leaves other items to Alembic.

    seqid's types render as ``seqid_orm.sqlalchemy.SeqUUID(...)`` with the import they need.  SQLModel's
    own types (``sqlmodel.sql.sqltypes.AutoString`` for every ``str`` field) are left to Alembic, which
    renders them by their module path without importing it; the hook adds ``import sqlmodel``, which
    stock Alembic projects must otherwise write into ``script.py.mako`` by hand.
    """
    if type_ == "type" and isinstance(obj, _SEQID_TYPES):
        autogen_context.imports.add("import seqid_orm.sqlalchemy")
        return f"seqid_orm.sqlalchemy.{obj!r}"
    if type_ == "type" and type(obj).__module__.split(".")[0] == "sqlmodel":
        autogen_context.imports.add("import sqlmodel")
        return False
    if type_ == "server_default" and isinstance(getattr(obj, "arg", None), DatabaseSeqUUID):
        autogen_context.imports.add("import seqid_orm.sqlalchemy")
        if obj.arg.shift is not None:
            autogen_context.imports.add("import datetime")
        return f"seqid_orm.sqlalchemy.{obj.arg!r}"
    return False


def offline_server_version(context: Any) -> None:
    """Tell an offline migration (``--sql``) which server it is written for.

    Call it in ``run_migrations_offline()`` after ``context.configure(...)``; it reads
    ``-x seqid_server_version=16`` (PostgreSQL), ``=mariadb-10.11.5``, ``=8.0.36`` (MySQL) or
    ``=3.45`` (SQLite) and gives the offline dialect that version, so database-made ids get the
    SQL of that server and seqid types the layout of that version.  Without it such a default
    raises :class:`~seqid_orm.errors.UnknownServerVersionError`, naming this remedy.
    """
    value = context.get_x_argument(as_dictionary=True).get("seqid_server_version")
    if value is None:
        return
    dialect = context.get_context().dialect
    text = str(value).strip().lower()
    is_mariadb = text.startswith("mariadb-")
    digits = text.split("-", 1)[1] if is_mariadb else text
    try:
        version = tuple(int(part) for part in digits.split("."))
    except ValueError:
        raise InvalidArgumentError(
            f"-x seqid_server_version={value!r}: expected a version such as 16, 8.0.36 or mariadb-10.11.5"
        ) from None
    dialect.server_version_info = version
    if is_mariadb:
        dialect.is_mariadb = True


def compare_server_default(
    context: Any,
    inspected_column: Any,
    metadata_column: Any,
    inspected_default: str | None,
    metadata_default: Any,
    rendered_metadata_default: str | None,
) -> bool | None:
    """``compare_server_default`` hook: a :class:`DatabaseSeqUUID` default matches the database's
    when that default calls the generator seqid would choose for this server (``None`` leaves every
    other column to Alembic)."""
    element = getattr(metadata_column.server_default, "arg", None)
    if not isinstance(element, DatabaseSeqUUID):
        return None
    if inspected_default is None:
        return True
    found = inspected_default.lower()
    if not any(signature in found for signature in element.signatures(context.dialect)):
        return True
    # a shift added or removed: the default without one must not show a shift's mark
    return element.shift is None and any(mark in found for mark in element.shift_signatures(context.dialect))


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """``include_object`` for ``context.configure``: leave seqid's tables that are not in the
    metadata out of autogenerate (so it does not offer to drop a table made by a hand-written
    ``op.create_ticket_table()`` or ``op.create_lease_table()``)."""
    return not (type_ == "table" and reflected and compare_to is None and name in (TICKET_TABLE, LEASE_TABLE))
