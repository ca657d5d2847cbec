"""Converting a UUID column between storages, with every foreign key that points at it.

The migration users of UUID keys ask for most (Doctrine DBAL #6310, healthchecks #929): a key stored
as text (``CHAR(36)``, ``CHAR(32)``) or ``BINARY(16)`` moved to the native UUID type, and back, with
every value and relationship kept.  A Django project meets it when MariaDB 10.7+ and Django 5.0 give
``UUIDField`` a native type its old ``char(32)`` columns do not have.

:func:`conversion_plan` writes the statements once: drop the foreign keys that reference the column,
convert the column and each referencing column (the vendor module's ``convert_column``, written for
PostgreSQL and MariaDB), re-create the keys (with their ``ON DELETE``/``ON UPDATE``).  The adapters
(Alembic ``op.convert_uuid_storage``, Django ``ConvertUUIDStorage``) only introspect the tables and run them.
Above :data:`REWRITE_UP_TO_ROWS` rows, where the statements would hold the tables for the whole rewrite, a key
of UUIDs kept as text made ``uuid`` runs online instead (:func:`runs_online`, :func:`seqid_orm.schema.rekey.
convert`); another conversion is refused there unless the caller allows the rewrite.

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
from typing import Any

from ..errors import InvalidArgumentError, MigrationRefusedError
from ..vendors import ColumnRef, InSchema, Quote, Storage, Target, as_storage, format_version, rules_for

__all__ = [
    "REWRITE_UP_TO_ROWS",
    "ColumnRef",
    "ForeignKeyRef",
    "check_rewrite",
    "conversion_plan",
    "references_to",
    "runs_online",
]


@dataclass(frozen=True)
class ForeignKeyRef:
    """A foreign key from ``column`` of ``table`` to the converted key."""

    name: str
    table: str
    column: str
    nullable: bool
    ondelete: str | None = None
    onupdate: str | None = None
    deferrable: str = ""
    """What follows the key's actions where it is deferrable (``DEFERRABLE INITIALLY DEFERRED``...)."""
    referenced_schema: str = ""
    """The key's table's database, where ``table`` is in another (MariaDB:
    :attr:`~seqid_orm.vendors.Reference.referenced_schema`)."""


def references_to(
    fetch: Callable[[str, dict[str, object]], list[tuple[Any, ...]]], vendor: str, table: str, column: str
) -> list[ForeignKeyRef] | None:
    """Every foreign key to ``column`` of ``table``, read from the database's catalog as the re-keying reads it:
    in every schema (a tenant's, named with it), composite ones too, with their actions and deferral, where the
    ORMs' introspection reads the search path's schema and keys of one column.  ``None`` where the vendor has
    no such read (SQLite: the adapter introspects).  Refused before any change: a composite key, whose other
    columns the rewrite cannot keep in its constraint's order (change it online: rekey_expand/RekeyExpand); it
    was met by the rewrite half done on MariaDB, where a statement that fails leaves the ones before it
    applied."""
    rules = rules_for(vendor).REKEY
    if rules is None:
        return None
    found = []
    for row in fetch(*rules.references(table, column)):
        ref = rules.reference(row)
        if ref.pairs:
            raise MigrationRefusedError(
                f"{ref.table}'s foreign key {ref.constraint} to {table}.{column} holds "
                f"{', '.join(c for c, _ in ref.pairs)}: a conversion in place changes keys of one column; drop "
                "it and make it again after, or change the key online (rekey_expand, RekeyExpand)"
            )
        actions = {"NO ACTION": None, "": None}
        found.append(
            ForeignKeyRef(
                ref.constraint,
                ref.table,
                ref.column,
                ref.nullable,
                actions.get(ref.on_delete, ref.on_delete),
                actions.get(ref.on_update, ref.on_update),
                ref.deferrable,
                ref.referenced_schema,
            )
        )
    return found


#: Above this many rows (the planner's estimate, the key's table and each that references it), a conversion
#: is refused unless the caller allows the rewrite: it holds the table for the whole of it.
REWRITE_UP_TO_ROWS = 100_000


def runs_online(vendor: str, source: Storage | str, target: Storage, primary_key: bool) -> bool:
    """Whether a conversion of ``source`` to ``target`` storage can run online instead of rewriting the tables:
    a table's key of UUIDs kept as text made the database's ``uuid`` type, with its foreign keys, by the
    re-keying's steps back to back (:func:`seqid_orm.schema.rekey.convert`, PostgreSQL and MariaDB 10.7+)."""
    text = as_storage(source) in (Storage.TEXT, Storage.HEX)
    return primary_key and text and target is Storage.NATIVE and rules_for(vendor).REKEY is not None


def check_rewrite(
    vendor: str, table: str, column: str, rows: dict[str, int | None], allow: bool, *, online: bool = False
) -> bool:
    """Whether a conversion that would rewrite more than :data:`REWRITE_UP_TO_ROWS` rows of ``rows`` (each
    table's estimate) while holding them runs online instead (``online``: :func:`runs_online` says it can);
    refused where it cannot, unless ``allow`` (a maintenance window); the message names the online ways."""
    big = {t: n for t, n in rows.items() if n is not None and n > REWRITE_UP_TO_ROWS}
    how = rules_for(vendor).TYPE_CHANGE_HOLDS
    if allow or not big or how is None:
        return False
    if online:
        return True
    listed = ", ".join(f"{t} (about {n:,} rows)" for t, n in big.items())
    raise InvalidArgumentError(
        f"converting {table}.{column} rewrites {listed}, and {how}. The online ways: keep the column as it is and "
        f'declare its storage (seq_uuid_pk(storage="..."), or a SeqUUIDField subclass whose db_type() is the '
        "column's), which touches no row; or expand and contract: a new column kept in step by a trigger, filled "
        "in batches, swapped in in a short lock. seqid's rekey_expand and rekey_contract (Django: RekeyExpand, "
        "RekeyContract) do that for a key of UUIDs kept as text, made the uuid type with every foreign key to it "
        "(PostgreSQL, MariaDB 10.7+: docs/how-to/migrate.md, text keys); for another form, a tool made for it "
        "(pgroll on PostgreSQL, gh-ost or pt-online-schema-change on MariaDB). To rewrite it anyway, in a "
        "maintenance window: allow_rewrite=True."
    )


def conversion_plan(
    target: Target, key: ColumnRef, references: list[ForeignKeyRef], source: Storage | str, quote: Quote
) -> list[str]:
    """The statements that move ``key`` (and the columns in ``references``) from ``source`` storage to
    ``target``'s, dropping and re-creating those foreign keys around the change.

    ``quote`` quotes an identifier for the dialect.  Raises
    :class:`~seqid_orm.errors.InvalidArgumentError` for a vendor or storage it cannot convert.
    """
    src, dst = as_storage(source), target.storage
    if src is dst:
        raise InvalidArgumentError(f"the column is already stored as {src.value}")
    if Storage.NATIVE in (src, dst) and not target.native_uuid:
        raise InvalidArgumentError(
            f"{target.vendor} {format_version(target.server_version)} has no UUID column type to convert to or from"
        )
    convert, drop = target.rules.convert_column, target.rules.DROP_FOREIGN_KEY
    statements = [f"ALTER TABLE {quote(fk.table)} {drop} {quote(fk.name)}" for fk in references]
    statements += convert(quote, key, src, dst)
    for fk in references:
        statements += convert(quote, ColumnRef(fk.table, fk.column, fk.nullable), src, dst)
    for fk in references:
        actions = "".join(
            f" ON {word} {action}" for word, action in (("DELETE", fk.ondelete), ("UPDATE", fk.onupdate)) if action
        )
        deferrable = f" {fk.deferrable}" if fk.deferrable else ""
        # named with its database where the key's table is in another (MariaDB reads a bare name as its own's)
        parent = quote(InSchema(fk.referenced_schema, key.table) if fk.referenced_schema else key.table)
        statements.append(
            f"ALTER TABLE {quote(fk.table)} ADD CONSTRAINT {quote(fk.name)} FOREIGN KEY ({quote(fk.column)}) "
            f"REFERENCES {parent} ({quote(key.column)}){actions}{deferrable}"
        )
    return statements
