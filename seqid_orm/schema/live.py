"""What a live column says before seqid makes its first key there: how it stores a UUID, the keys it
already holds, and the decision its adoption recorded.  The one live-column layer of both ORMs.

A column seqid is put on may be one users already have: a table of ``uuid4`` keys (whose new keys
must sort after the old ones where the engine splits inner pages half, see
:mod:`seqid_orm.ids.adopted`), or a column another type or application filled (``sa.Uuid`` keeps 32
hex characters on SQLite and MySQL, where ``SeqUUID()`` writes 16 bytes; a ``String`` column of
``uuid4().hex``; upper-case or braced text another program wrote).  So before an adapter makes a
key for a column, or looks one up, it reads, each an index or catalog look-up:

* the catalog row (:func:`reading_statements`' first statement): which real table the name
  resolves to on this connection (PostgreSQL's ``oid``, under the connection's ``search_path``), the
  declared type, whether this role may read the keys, and the column's comment, which holds the
  adoption's record (:func:`seqid_orm.ids.adopted.record_of`);
* where the role may read them, the largest keys (``ORDER BY key DESC LIMIT 8``) and the smallest.

:func:`judge` turns a :class:`ColumnReading` into the column's :class:`~seqid_orm.vendors.Target`:
the storage is what the *values* are (their length, hyphens, case, braces), the declared type only
where there are none to read, and a column whose values are not what the type writes is refused
(:class:`~seqid_orm.errors.StorageMismatchError`) before a row is written or a look-up misses; the
adopted keys' width is the record's, the same for every role, tenant and process, or, where the
column has none (a swap made without its migration), judged from the keys this process can read.

:class:`LiveColumns` keeps the judgements of one database (a SQLAlchemy engine, a Django alias) per
*real* table, and each connection's map from names to real tables: a table of the same name in
another tenant's schema is another table.  Statements with their literals inline (no parameters, so
any driver runs them as they are) and pure judgement over what they return; the adapters run them
on their own connections (h11's shape), and a statement that fails is :class:`ColumnReadError`.

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ColumnReadError, StorageMismatchError
from ..ids.adopted import record_of
from ..ids.classify import as_uuid
from ..vendors import Storage, Target, qualified, quote_identifier, rules_for

__all__ = [
    "TOP",
    "ColumnName",
    "ColumnReading",
    "Form",
    "Kept",
    "LiveColumns",
    "declared_storage",
    "judge",
    "read_column",
    "readable",
    "reading_from",
    "reading_statements",
    "uuids_of",
    "value_form",
]

log = logging.getLogger("seqid_orm")

#: How many of the largest keys are read: enough that a few old keys written above the adopted ones
#: (sentinels, or keys of code that still makes uuid4) do not hide them.
TOP = 8

#: How long a judgement made without a record is kept before the catalog row is read again, so a
#: record written since (the adoption's migration, run while this process lives) is followed.
RECHECK_SECONDS = 60.0


@dataclass(frozen=True)
class ColumnName:
    """A key column as the application names it: the name resolves to a real table per connection."""

    table: str
    column: str
    schema: str | None = None

    @property
    def label(self) -> str:
        return f"{self.table}.{self.column}" if self.schema is None else f"{self.schema}.{self.table}.{self.column}"


@dataclass(frozen=True)
class ColumnReading:
    """What the statements of :func:`reading_statements` returned for one column."""

    declared: str | None
    """The column's declared type as the catalog spells it; ``None``: no such column (the table is not
    there yet, or the vendor's catalog is not read)."""
    top: tuple[object, ...] = ()
    """The largest keys as the driver returned them, largest first (the database's order)."""
    bottom: object | None = None
    """The smallest key."""
    identity: object | None = None
    """Where the name resolved to: PostgreSQL's oid of the real table; the schema elsewhere (with the
    table's name, the real table)."""
    comment: str | None = None
    """The column's comment, where the adoption's record is kept."""
    may_read: bool = True
    """Whether this role may read the keys (an INSERT-only role may not)."""

    @property
    def record(self) -> int | None:
        """The adopted keys' width the column's adoption recorded (``0``: plain keys), or ``None``."""
        return record_of(self.comment)


def reading_statements(vendor: str, table: str, column: str, schema: str | None = None) -> list[str]:
    """The statements whose first rows make a :class:`ColumnReading` (see :func:`reading_from`): the
    catalog row (the vendor's: the real table, the declared type, whether the role may read the keys,
    the comment), the largest keys and the smallest.  Empty for a vendor whose catalog is not read here
    (the judgement then has nothing to refuse).  Run the key reads only where :func:`readable` says the
    first statement allows them: on PostgreSQL a refused read would abort the caller's transaction."""
    catalog = rules_for(vendor).column_catalog(table, column, schema)
    if catalog is None:
        return []
    qc = quote_identifier(vendor, column)
    keys = f"SELECT {qc} FROM {qualified(vendor, table, schema)} WHERE {qc} IS NOT NULL ORDER BY {qc}"
    return [catalog, f"{keys} DESC LIMIT {TOP}", f"{keys} LIMIT 1"]


def read_column(
    vendor: str,
    name: ColumnName,
    fetch: Callable[[str], Sequence[Sequence[object]]],
    *,
    catalog: Sequence[Sequence[object]] | None = None,
) -> ColumnReading:
    """The :class:`ColumnReading` of ``name``, each statement run by ``fetch`` (the adapter's I/O: it
    runs one statement and returns its rows); the key reads only where :func:`readable` allows.
    ``catalog``: the first statement's rows where the caller has them already.  A statement that
    fails raises :class:`~seqid_orm.errors.ColumnReadError`, naming it, from the driver's error."""
    statements = reading_statements(vendor, name.table, name.column, name.schema)
    results: list[list[Sequence[object]]] = []
    for n, statement in enumerate(statements):
        rows = list(catalog) if n == 0 and catalog is not None else run(fetch, statement, name)
        results.append(rows)
        if n == 0 and not readable(rows):  # no such column, or none this role may read
            break
    return reading_from(results)


def run(fetch: Callable[[str], Sequence[Sequence[object]]], statement: str, name: ColumnName) -> list[Sequence[object]]:
    """``fetch(statement)``'s rows, or :class:`~seqid_orm.errors.ColumnReadError` naming the statement."""
    try:
        return list(fetch(statement))
    except Exception as exc:  # the driver's own error, whatever its class: typed, with it as the cause
        raise ColumnReadError(
            f"reading {name.label} before its first key failed: {type(exc).__name__}: {exc} (statement: {statement})"
        ) from exc


def readable(first: Sequence[Sequence[object]]) -> bool:
    """Whether the rows of the first statement let the key reads run: the column is there, and this
    role may read it (on PostgreSQL a refused statement aborts the transaction it is in)."""
    return bool(first) and bool(first[0][2])


def reading_from(results: Sequence[Sequence[Sequence[object]]]) -> ColumnReading:
    """A :class:`ColumnReading` from the rows each statement of :func:`reading_statements` returned
    (the key reads are not run where the first found no column: pass what was run)."""
    if not results or not results[0]:
        return ColumnReading(None)
    identity, declared, may_read, comment = results[0][0][:4]
    top = tuple(row[0] for row in results[1]) if len(results) > 1 else ()
    bottom = results[2][0][0] if len(results) > 2 and results[2] else None
    return ColumnReading(
        str(declared or ""), top, bottom, identity, None if comment is None else str(comment), bool(may_read)
    )


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


@dataclass(frozen=True)
class Form:
    """The form a key value was written in, as the driver returned it."""

    storage: Storage | None
    """The storage it is a UUID of (``None``: not a UUID in any form seqid writes)."""
    canonical: bool
    """Whether it is spelt as seqid writes that storage (lower-case, no braces): a look-up by seqid's
    form finds it."""
    words: str
    """How a message names it."""


_HEX36 = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX32 = re.compile(r"[0-9a-fA-F]{32}")
_FORMS = {
    Storage.NATIVE: "the database's UUID type",
    Storage.BINARY: "16 raw bytes",
    Storage.TEXT: "36-character text",
    Storage.HEX: "32 hex digits",
}


def value_form(value: object) -> Form:
    """The :class:`Form` of one key value as a driver returned it.

    >>> value_form("0190B1E2-5C3A-7B2D-8E4F-0A1B2C3D4E5F").words
    'upper-case 36-character text'
    >>> value_form("{0190b1e2-5c3a-7b2d-8e4f-0a1b2c3d4e5f}").canonical
    False
    """
    if isinstance(value, uuid.UUID):
        return Form(Storage.NATIVE, True, _FORMS[Storage.NATIVE])
    if isinstance(value, (bytes, bytearray, memoryview)):
        size = len(bytes(value))
        if size == 16:
            return Form(Storage.BINARY, True, _FORMS[Storage.BINARY])
        return Form(None, False, f"{size}-byte values, not UUIDs")
    if isinstance(value, str):
        for storage, shape in ((Storage.TEXT, _HEX36), (Storage.HEX, _HEX32)):
            if shape.fullmatch(value):
                if value == value.lower():
                    return Form(storage, True, _FORMS[storage])
                return Form(storage, False, f"upper-case {_FORMS[storage]}")
        low = value.lower()
        if len(value) == 38 and value[0] == "{" and value[-1] == "}" and _HEX36.fullmatch(value[1:-1]):
            return Form(Storage.TEXT, False, "36-character text in braces")
        if low.startswith("urn:uuid:") and _HEX36.fullmatch(value[9:]):
            return Form(Storage.TEXT, False, "urn:uuid: text")
        return Form(None, False, f"text of {len(value)} characters that is not a UUID")
    return Form(None, False, f"{type(value).__name__} values, not UUIDs")


def _forms(where: Target, reading: ColumnReading) -> tuple[set[Storage | None], list[Form]]:
    """The storages the column holds, and the forms found that a look-up by seqid's form would miss.

    The values say, where there are some to read: their length, hyphens, case and braces (SQLite
    keeps any value in any column, and a ``text`` column any length).  A native UUID column's values
    are the database's own type whatever the driver hands back (MariaDB's come as text); with no
    value to read (an empty column, a role without SELECT) the declared type says."""
    declared = None if reading.declared is None else declared_storage(reading.declared)
    values = [v for v in (*reading.top, reading.bottom) if v is not None]
    if declared is Storage.NATIVE and where.rules.TYPED_COLUMNS:
        return {Storage.NATIVE}, []
    if values:
        forms = [value_form(v) for v in values]
        odd = [f for f in forms if not f.canonical]
        return {f.storage for f in forms}, list({f.words: f for f in odd}.values())
    return ({declared} if declared is not None else set()), []


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
    keys' width, the record's where the column has one (:attr:`ColumnReading.record`), else
    :meth:`Target.above_for` of the keys read.
    """
    storages, odd = _forms(where, reading)
    declared = f" (declared {reading.declared})" if reading.declared else ""
    wrong = sorted((s for s in storages if s is not where.storage), key=lambda s: "" if s is None else s.value)
    writes = f"this column type writes {where.storage.value} ({_FORMS[where.storage]}) on {where.vendor}"
    if None in wrong:
        what = ", ".join(f.words for f in odd if f.storage is None)
        raise StorageMismatchError(
            f"{label}{declared} holds {what}: {writes}, and a column of other values cannot take seqid's keys "
            "beside them. Give the key a column of its own (add_seqid_column / BackfillSeqUUID)."
        )
    if wrong:
        holds = " and ".join(f"{s.value} ({_FORMS[s]})" for s in wrong if s is not None)
        found = next(s for s in wrong if s is not None)
        raise StorageMismatchError(
            f"{label}{declared} holds {holds}, but {writes}: new rows would be stored in a second form beside "
            f"the old ones, and a look-up of an old key would find nothing. {fix(found)}"
        )
    if odd:
        what = " and ".join(f.words for f in odd)
        raise StorageMismatchError(
            f"{label}{declared} holds {what} (as another application wrote them), but {writes} in lower case "
            "without braces: a look-up of an old key in that form would find nothing, and new rows would be "
            f"spelt another way than the old ones. Rewrite the old keys in seqid's form first (for example "
            f"UPDATE ... SET key = lower(key)), then use the column."
        )
    record = reading.record
    if record is not None:
        return where.adopted(record if where.rules.INNER_SPLITS_HALF else 0)
    return where.adopted(where.above_for(uuids_of(reading.top), now_ms))


def uuids_of(values: Sequence[object]) -> list[uuid.UUID]:
    """The values that are UUIDs in some driver's form, as ``uuid.UUID``."""
    return [u for u in map(as_uuid, values) if u is not None]


Rows = Sequence[Sequence[object]]


@dataclass
class _Judged:
    target: Target
    record: int | None
    read_at: float


@dataclass(frozen=True)
class Kept:
    """A column's target as one connection resolved it, which its adapter uses for every row without
    asking again while the monotonic clock is below ``until`` (``inf``: judged from a record, which
    changes only by another adoption; else when the judgement is read again, :data:`RECHECK_SECONDS`),
    with the function making its next key.  The adapter keeps it in the connection's ``seen`` under its
    own key for the column (a SQLAlchemy ``Column``, a Django field), so a row costs one look-up, not
    the 14 calls that resolve a name, and drops it with ``seen`` (DDL, a ``search_path`` change)."""

    target: Target
    until: float
    make: Callable[[], uuid.UUID]
    translate: object = None  # SQLAlchemy's schema_translate_map it was resolved under


def _keep(seen: MutableMapping[Any, Any], key: object, judged: _Judged, translate: object) -> Target:
    """``judged``'s target, left in ``seen`` as :class:`Kept` under the adapter's ``key`` where it gives one."""
    if key is not None:
        until = float("inf") if judged.record is not None else judged.read_at
        seen[key] = Kept(judged.target, until, judged.target.generator.id_function, translate)
    return judged.target


class LiveColumns:
    """What this process knows of the live key columns of one database (one SQLAlchemy engine, one
    Django alias).

    Per *real* table (the catalog's identity of what a name resolves to) and column, the judged
    :class:`~seqid_orm.vendors.Target`, read once; per connection, a map from the names used on it to
    real tables, which the adapter keeps with the connection (``seen``) and clears where the
    connection's ``search_path`` or schema changes.  So a tenant's table is never judged by another
    tenant's rows, and a row pays two dictionary look-ups.

    A judgement made without a record (a column swapped without its migration) is checked against
    the catalog again after :data:`RECHECK_SECONDS`, so a record written since is followed; one made
    from a record is kept (a record changes only by another adoption); an empty column without a
    record is not judged for good at all (its first keys say more).
    """

    def __init__(self) -> None:
        self._judged: dict[tuple[object, str, str, Target], _Judged] = {}
        self._warned: set[tuple[object, str, str]] = set()

    def target(
        self,
        where: Target,
        name: ColumnName,
        fetch: Callable[[str], Rows],
        seen: MutableMapping[Any, Any],
        fix: Callable[[Storage], str],
        key: object = None,
        translate: object = None,
    ) -> Target:
        """The target of ``name`` on the connection ``fetch`` runs statements on (see the class).

        Raises :class:`~seqid_orm.errors.StorageMismatchError` for a column whose values are not what the
        type writes, and :class:`~seqid_orm.errors.ColumnReadError` for a read that failed.  A column
        whose table is not there yet is judged by the type alone, and read again next time.  With ``key``,
        a judgement kept is also left in ``seen`` as :class:`Kept` under ``key``, for the adapter's rows.
        """
        known = seen.get(name)
        if known is not None:
            judged = self._judged.get((known, name.table, name.column, where))
            if judged is not None and (judged.record is not None or time.monotonic() < judged.read_at):
                return _keep(seen, key, judged, translate)
        statements = reading_statements(where.vendor, name.table, name.column, name.schema)
        if not statements:
            return where
        catalog = run(fetch, statements[0], name)
        if not catalog:  # no such table or column (yet): judged by the type alone
            seen.pop(name, None)
            return where
        identity, comment = catalog[0][0], catalog[0][3]
        seen[name] = identity
        identified = (identity, name.table, name.column, where)  # PostgreSQL's oid; the schema's name elsewhere
        judged = self._judged.get(identified)
        record = record_of(None if comment is None else str(comment))
        if judged is None or judged.record != record:
            reading = read_column(where.vendor, name, fetch, catalog=catalog)
            target = judge(where, reading, label=name.label, fix=fix)
            if reading.record is None and reading.may_read and not reading.top:
                return target  # an empty column and no record: nothing to keep, read again next time
            judged = _Judged(target, reading.record, 0.0)
            if reading.record is None:
                self._say_guessed(identity, name, reading, target)
        judged.read_at = time.monotonic() + RECHECK_SECONDS
        self._judged[identified] = judged
        return _keep(seen, key, judged, translate)

    def _say_guessed(self, identity: object, name: ColumnName, reading: ColumnReading, target: Target) -> None:
        """Log, once per table and process, a column judged without a record where the record would
        matter: old keys to sort after, or keys this role cannot read."""
        if not target.rules.INNER_SPLITS_HALF or (identity, name.table, name.column) in self._warned:
            return
        if not target.above and reading.may_read:  # plain keys, as on a new table: nothing was guessed
            return
        self._warned.add((identity, name.table, name.column))
        seen = "its largest keys" if reading.may_read else "nothing: this role may not read its keys"
        log.warning(
            "%s has no adoption record: this process judged from %s and makes %s. Every process, role and "
            "tenant reads one decision once the migration records it: op.adopt_seqid_keys(%r, %r) (Alembic) or "
            "AdoptSeqUUID (Django), which makemigrations and autogenerate write for a swapped key.",
            name.label,
            seen,
            f"keys after {target.above} one bits" if target.above else "plain UUIDv7 keys",
            name.table,
            name.column,
        )

    def forget(self) -> None:
        """Forget every judgement: the next key reads again."""
        self._judged.clear()
        self._warned.clear()
