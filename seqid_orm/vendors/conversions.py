"""Converting a UUID column between storages, with every foreign key that points at it.

The migration users of UUID keys ask for most (Doctrine DBAL #6310, healthchecks #929): a key stored
as text (``CHAR(36)``, ``CHAR(32)``) or ``BINARY(16)`` moved to the native UUID type, and back, with
every value and relationship kept.  A Django project meets it when MariaDB 10.7+ and Django 5.0 give
``UUIDField`` a native type its old ``char(32)`` columns do not have.

:func:`conversion_plan` writes the statements once, for PostgreSQL and MariaDB: drop the foreign
keys that reference the column, convert the column and each referencing column, re-create the keys
(with their ``ON DELETE``/``ON UPDATE``).  The adapters (Alembic ``op.convert_uuid_storage``,
Django ``ConvertUUIDStorage``) only introspect the tables and run them.

* PostgreSQL: ``ALTER COLUMN ... TYPE ... USING`` an expression through the canonical text, in
  the migration's transaction (a failure leaves nothing half done).
* MariaDB: ``MODIFY``, which converts text, 32 hex digits and ``BINARY(16)`` to ``UUID`` and back to
  text and ``BINARY(16)`` by itself (checked on 10.11); to 32 hex digits it goes through ``CHAR(36)``.
  MariaDB's DDL is not transactional: a failure midway leaves the statements before it applied.
* SQLite has no UUID type; the SQLAlchemy operation converts between text and ``BLOB`` there by
  rewriting the values in Python (``unhex()`` needs SQLite 3.41).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidArgumentError
from . import Storage, as_storage, format_version, has_native_uuid

__all__ = ["ColumnRef", "ForeignKeyRef", "column_type", "conversion_plan"]


@dataclass(frozen=True)
class ColumnRef:
    """A column to convert: the key itself, or a column of another table that references it."""

    table: str
    column: str
    nullable: bool


@dataclass(frozen=True)
class ForeignKeyRef:
    """A foreign key from ``column`` of ``table`` to the converted key."""

    name: str
    table: str
    column: str
    nullable: bool
    ondelete: str | None = None
    onupdate: str | None = None


_TYPES = {
    "postgresql": {Storage.NATIVE: "uuid", Storage.BINARY: "bytea", Storage.TEXT: "char(36)", Storage.HEX: "char(32)"},
    "mariadb": {
        Storage.NATIVE: "UUID",
        Storage.BINARY: "BINARY(16)",
        Storage.TEXT: "CHAR(36)",
        Storage.HEX: "CHAR(32)",
    },
}


def column_type(vendor: str, storage: Storage | str) -> str:
    """The column type a storage has on ``vendor`` (as seqid's ``SeqUUID`` declares it)."""
    if vendor not in _TYPES:
        raise InvalidArgumentError(f"UUID storage conversion is written for PostgreSQL and MariaDB, not {vendor!r}")
    return _TYPES[vendor][as_storage(storage)]


def _pg_text(column: str, storage: Storage) -> str:
    """PostgreSQL: the canonical lower-case text of ``column`` stored as ``storage``."""
    return {
        Storage.NATIVE: f"{column}::text",
        Storage.TEXT: f"lower({column})::uuid::text",
        Storage.HEX: f"lower({column})::uuid::text",
        Storage.BINARY: f"encode({column}, 'hex')::uuid::text",
    }[storage]


def _pg_from_text(text: str, storage: Storage) -> str:
    return {
        Storage.NATIVE: f"({text})::uuid",
        Storage.TEXT: text,
        Storage.HEX: f"replace({text}, '-', '')",
        Storage.BINARY: f"decode(replace({text}, '-', ''), 'hex')",
    }[storage]


def _convert_pg(q: Callable[[str], str], ref: ColumnRef, src: Storage, dst: Storage) -> list[str]:
    expr = _pg_from_text(_pg_text(q(ref.column), src), dst)
    return [f"ALTER TABLE {q(ref.table)} ALTER COLUMN {q(ref.column)} TYPE {_TYPES['postgresql'][dst]} USING {expr}"]


def _convert_mariadb(q: Callable[[str], str], ref: ColumnRef, src: Storage, dst: Storage) -> list[str]:
    null = "NULL" if ref.nullable else "NOT NULL"
    table, column = q(ref.table), q(ref.column)
    modify = f"ALTER TABLE {table} MODIFY {column} {{}} {null}"
    if Storage.NATIVE not in (src, dst):
        raise InvalidArgumentError("on MariaDB seqid converts to and from the native UUID type only")
    if dst is Storage.HEX:  # MODIFY would cut the 36 characters to 32: go through the text first
        return [
            modify.format("CHAR(36)"),
            f"UPDATE {table} SET {column} = REPLACE({column}, '-', '')",
            modify.format("CHAR(32)"),
        ]
    return [modify.format(_TYPES["mariadb"][dst])]  # MODIFY converts the values itself


def conversion_plan(
    vendor: str,
    server_version: tuple[int, ...] | None,
    key: ColumnRef,
    references: list[ForeignKeyRef],
    source: Storage | str,
    target: Storage | str,
    quote: Callable[[str], str],
) -> list[str]:
    """The statements that move ``key`` (and the columns in ``references``) from ``source`` to
    ``target`` storage, dropping and re-creating those foreign keys around the change.

    ``quote`` quotes an identifier for the dialect.  Raises
    :class:`~seqid_orm.errors.InvalidArgumentError` for a vendor or storage it cannot convert.
    """
    src, dst = as_storage(source), as_storage(target)
    if src is dst:
        raise InvalidArgumentError(f"the column is already stored as {src.value}")
    if Storage.NATIVE in (src, dst) and not has_native_uuid(vendor, server_version):
        raise InvalidArgumentError(
            f"{vendor} {format_version(server_version)} has no UUID column type to convert to or from"
        )
    convert = {"postgresql": _convert_pg, "mariadb": _convert_mariadb}.get(vendor)
    if convert is None:
        raise InvalidArgumentError(f"UUID storage conversion is written for PostgreSQL and MariaDB, not {vendor!r}")
    drop = "DROP CONSTRAINT" if vendor == "postgresql" else "DROP FOREIGN KEY"
    statements = [f"ALTER TABLE {quote(fk.table)} {drop} {quote(fk.name)}" for fk in references]
    statements += convert(quote, key, src, dst)
    for fk in references:
        statements += convert(quote, ColumnRef(fk.table, fk.column, fk.nullable), src, dst)
    for fk in references:
        actions = "".join(
            f" ON {word} {action}" for word, action in (("DELETE", fk.ondelete), ("UPDATE", fk.onupdate)) if action
        )
        statements.append(
            f"ALTER TABLE {quote(fk.table)} ADD CONSTRAINT {quote(fk.name)} FOREIGN KEY ({quote(fk.column)}) "
            f"REFERENCES {quote(key.table)} ({quote(key.column)}){actions}"
        )
    return statements
