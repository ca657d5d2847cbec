"""What a live column says before seqid makes its first key there: how it stores a UUID, and the keys
it already holds.

A column seqid is put on may be one users already have: a table of ``uuid4`` keys (whose new keys
must sort after the old ones where the engine splits inner pages half, see
:mod:`seqid_orm.ids.adopted`), or a column another type made (``sa.Uuid`` keeps 32 hex characters
on SQLite and MySQL, where ``SeqUUID()`` writes 16 bytes).  So the first time an adapter makes a key
for a column (once per engine or database alias, then kept) it reads three things, each an index or
catalog look-up: the column's declared type, its largest keys (``ORDER BY key DESC LIMIT 8``) and, on
SQLite, its smallest (SQLite keeps any value in any column, and sorts numbers before text before
bytes, so the two ends name every storage class present).  :func:`judge` turns them into the
column's :class:`~seqid_orm.vendors.Target`: the same storage or a typed refusal before anything is
written, and the adopted keys' width.

Statements with their literals inline (no parameters, so any driver runs them as they are) and pure
judgement over what they return; the adapters run them on their own connection (h11's shape).

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids` and this folder.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import StorageMismatchError
from ..ids.classify import as_uuid
from . import Target
from ._base import Storage

__all__ = [
    "TOP",
    "ColumnReading",
    "declared_storage",
    "judge",
    "quote_identifier",
    "read_column",
    "readable",
    "reading_from",
    "reading_statements",
    "uuids_of",
]

#: How many of the largest keys are read: enough that a few old keys written above the adopted ones
#: (by code that still makes uuid4, in a rolling deploy) do not hide them.
TOP = 8

#: The vendors whose catalogs :func:`reading_statements` reads.
READ_VENDORS = ("postgresql", "mariadb", "mysql", "sqlite")


@dataclass(frozen=True)
class ColumnReading:
    """What the statements of :func:`reading_statements` returned for one column."""

    declared: str | None
    """The column's declared type as the catalog spells it; ``None``: no such column (the table is not
    there yet, or the vendor's catalog is not read)."""
    top: tuple[object, ...] = ()
    """The largest keys as the driver returned them, largest first (the database's order)."""
    bottom: object | None = None
    """SQLite: the smallest key (its storage class)."""


def quote_identifier(vendor: str, name: str) -> str:
    """``name`` as a quoted identifier of ``vendor``'s SQL."""
    if vendor in ("mariadb", "mysql", "tidb"):
        return "`" + name.replace("`", "``") + "`"
    if vendor == "mssql":
        return "[" + name.replace("]", "]]") + "]"
    return '"' + name.replace('"', '""') + '"'


def _literal(vendor: str, text: str) -> str:
    """``text`` as a string literal (MariaDB and MySQL read backslashes as escapes by default)."""
    if vendor in ("mariadb", "mysql"):
        text = text.replace("\\", "\\\\")
    return "'" + text.replace("'", "''") + "'"


def reading_statements(vendor: str, table: str, column: str, schema: str | None = None) -> list[str]:
    """The statements whose first rows make a :class:`ColumnReading` (see :func:`reading_from`): the
    declared type, the largest keys, and on SQLite the smallest.  Empty for a vendor whose catalog is
    not read here (the judgement then has nothing to refuse).  Run the key reads only where
    :func:`readable` says the first statement allows them."""
    if vendor not in READ_VENDORS:
        return []
    qt, qc = quote_identifier(vendor, table), quote_identifier(vendor, column)
    where = qt if schema is None else f"{quote_identifier(vendor, schema)}.{qt}"
    if vendor == "postgresql":
        # with whether this role may read the keys: a refused read would abort the caller's transaction
        declared = (
            "SELECT format_type(a.atttypid, a.atttypmod), has_column_privilege(a.attrelid, a.attnum, 'SELECT') "
            f"FROM pg_attribute a WHERE a.attrelid = to_regclass({_literal(vendor, where)}) "
            f"AND a.attname = {_literal(vendor, column)} AND NOT a.attisdropped"
        )
    elif vendor == "sqlite":
        in_schema = "" if schema is None else f", {_literal(vendor, schema)}"
        declared = (
            f"SELECT type FROM pragma_table_info({_literal(vendor, table)}{in_schema}) "
            f"WHERE name = {_literal(vendor, column)}"
        )
    else:
        owner = "DATABASE()" if schema is None else _literal(vendor, schema)
        declared = (
            "SELECT COLUMN_TYPE FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = {owner} AND TABLE_NAME = {_literal(vendor, table)} "
            f"AND COLUMN_NAME = {_literal(vendor, column)}"
        )
    keys = f"SELECT {qc} FROM {where} WHERE {qc} IS NOT NULL ORDER BY {qc}"
    statements = [declared, f"{keys} DESC LIMIT {TOP}"]
    if vendor == "sqlite":
        statements.append(f"{keys} LIMIT 1")
    return statements


def read_column(
    vendor: str,
    table: str,
    column: str,
    fetch: Callable[[str], Sequence[Sequence[object]]],
    schema: str | None = None,
) -> ColumnReading:
    """The :class:`ColumnReading` of ``table.column``, each statement run by ``fetch`` (the adapter's
    I/O: it runs one statement and returns its rows); the key reads only where :func:`readable` allows."""
    results: list[list[Sequence[object]]] = []
    for n, statement in enumerate(reading_statements(vendor, table, column, schema)):
        rows = list(fetch(statement))
        results.append(rows)
        if n == 0 and not readable(rows):  # no such column, or none this role may read
            break
    return reading_from(results)


def readable(first: Sequence[Sequence[object]]) -> bool:
    """Whether the rows of the first statement let the key reads run: the column is there, and (on
    PostgreSQL, where a refused statement aborts the transaction it is in) this role may read it."""
    return bool(first) and (len(first[0]) < 2 or bool(first[0][1]))


def reading_from(results: Sequence[Sequence[Sequence[object]]]) -> ColumnReading:
    """A :class:`ColumnReading` from the rows each statement of :func:`reading_statements` returned
    (the key reads are not run where the first found no column: pass what was run)."""
    if not results or not results[0]:
        return ColumnReading(None)
    declared = str(results[0][0][0] or "")
    top = tuple(row[0] for row in results[1]) if len(results) > 1 else ()
    bottom = results[2][0][0] if len(results) > 2 and results[2] else None
    return ColumnReading(declared, top, bottom)


_LENGTH = re.compile(r"\((\d+)\)")


def declared_storage(declared: str) -> Storage | None:
    """The storage a declared column type holds UUIDs in (``None``: not one seqid can tell)."""
    low = declared.strip().lower()
    if low in ("uuid", "uniqueidentifier"):
        return Storage.NATIVE
    name = low.split("(")[0].strip()
    if name in ("bytea", "blob", "longblob", "mediumblob", "largebinary"):
        return Storage.BINARY
    length = _LENGTH.search(low)
    size = int(length.group(1)) if length else None
    if name in ("binary", "varbinary", "raw") and size == 16:
        return Storage.BINARY
    if any(word in name for word in ("char", "character", "text", "varchar", "varchar2", "string")):
        return {36: Storage.TEXT, 32: Storage.HEX}.get(size or 0)
    return None


def stored_storage(value: object) -> Storage | None:
    """The storage a value as the driver returned it was kept in, where the value says (bytes, or
    text of 36 or 32 characters); ``None`` otherwise (a ``uuid.UUID`` the driver converted)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Storage.BINARY
    if isinstance(value, str):
        return {36: Storage.TEXT, 32: Storage.HEX}.get(len(value))
    return None


def judge(
    where: Target,
    reading: ColumnReading,
    *,
    label: str,
    fix: Callable[[Storage], str],
    now_ms: int | None = None,
) -> Target:
    """The target of the column ``label`` (``table.column``) read as ``reading``, given ``where``
    (the type's own target): the same storage, or :class:`~seqid_orm.errors.StorageMismatchError`
    naming what the column holds and ``fix(found)``, the adapter's two remedies; and the adopted
    keys' width (:meth:`Target.above_for`).

    What the column holds is its declared type's storage, and on SQLite (which keeps any value in
    any column) the storage of the keys at both ends as well: a column of text keys declared
    ``BLOB`` is text.
    """
    found = _found_storages(where.vendor, reading)
    wrong = sorted(s.value for s in found if s is not where.storage)
    if wrong:
        holds = " and ".join(f"{s} ({_FORMS[Storage(s)]})" for s in wrong)
        declared = f" (declared {reading.declared})" if reading.declared else ""
        raise StorageMismatchError(
            f"{label}{declared} holds {holds}, but this column type writes {where.storage.value} "
            f"({_FORMS[where.storage]}) on {where.vendor}: new rows would be stored in a second form beside "
            f"the old ones, and a look-up of an old key would find nothing. {fix(Storage(wrong[0]))}"
        )
    return where.adopted(where.above_for(uuids_of(reading.top), now_ms))


_FORMS = {
    Storage.NATIVE: "the database's UUID type",
    Storage.BINARY: "16 raw bytes",
    Storage.TEXT: "36-character text",
    Storage.HEX: "32 hex digits",
}


def _found_storages(vendor: str, reading: ColumnReading) -> set[Storage]:
    found = set()
    declared = None if reading.declared is None else declared_storage(reading.declared)
    if vendor == "sqlite":
        for value in (*reading.top[:1], reading.bottom):
            stored = stored_storage(value) if value is not None else None
            if stored is not None:
                found.add(stored)
        if not found and declared is not None:
            found.add(declared)
    elif declared is not None:
        found.add(declared)
    return found


def uuids_of(values: Sequence[object]) -> list[uuid.UUID]:
    """The values that are UUIDs in some driver's form, as ``uuid.UUID``."""
    return [u for u in map(as_uuid, values) if u is not None]
