"""A table's key changed to a seqid key by rebuilding its tables, where no key changes online (SQLite).

SQLite changes a column's type only by making its table again (https://sqlite.org/lang_altertable.html#otheralter),
one writer at a time: the migration's own transaction is the maintenance window, so the two releases of
:mod:`seqid_orm.schema.rekey` have nothing to keep in step.  The expand step changes nothing there; the contract
step makes the key's table and every table that references it again with the new column types (Django's own
rebuild, its schema editor's, which makes each model's table of the model as Django's ``AlterField`` does there;
for Alembic, :func:`make_again`: each table of its own text with the columns' types edited, every constraint,
cascade, index and trigger kept — Alembic's batch mode reflects the tables, which loses each foreign key's
``ON DELETE`` on SQLite), then gives each row the key
:mod:`seqid_orm.ids.rekeyed` makes of its integer (``ORDER BY id`` means what it meant; below every new key), or
the UUID its text held, every foreign key's column the same one — all in one transaction, with the foreign keys
checked before it commits.  The way back reads each integer out of its key again
(:func:`~seqid_orm.ids.rekeyed.integer_of`): no old column is kept beside the key, so a row the new release
inserted, whose key carries no integer, is refused before any change.

This module decides what is read and refused, how a value becomes the other and what SQL makes a table again;
the adapters run it.

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..errors import InvalidArgumentError, MigrationRefusedError
from ..ids.layout import Layout
from ..ids.rekeyed import integer_key, integer_of
from ..vendors import RebuildRules, Storage, rules_for

__all__ = [
    "FUNCTION",
    "back",
    "converter",
    "describe",
    "followed",
    "forward",
    "make_again",
    "read",
    "references",
    "refuse",
    "refuse_orphans",
    "refuse_values",
    "rewrite",
    "stored",
]


class Reads(Protocol):
    def fetch(self, sql: str, params: dict[str, object], /) -> list[tuple[Any, ...]]: ...


class Writes(Reads, Protocol):
    def run(self, sql: str, params: dict[str, object], /) -> int: ...


#: The function each value is made the other by, which the adapter registers on its connection
#: (:func:`converter`) before :func:`rewrite` calls it.
FUNCTION = "seqid_rekey"


def _rules(vendor: str) -> RebuildRules:
    rules = rules_for(vendor).REBUILD
    if rules is None:
        raise InvalidArgumentError(f"{vendor} changes keys online, not by a rebuild of its tables")
    return rules


def references(io: Reads, vendor: str, table: str, column: str) -> list[tuple[str, str]]:
    """Every foreign key to ``table.column`` as the catalog has it (other apps' tables, many-to-many tables,
    ``table`` itself): ``(table, column)`` each; refused where one is of several columns."""
    found: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for child, number, source, target in io.fetch(_rules(vendor).REFERENCES, {"t": table}):
        if target is not None and str(target).lower() != column.lower():
            continue  # a foreign key to another column of the table
        found.setdefault((str(child), int(number)), []).append((str(child), str(source)))
    for (child, _), columns in found.items():
        if len(columns) > 1:
            raise MigrationRefusedError(
                f"{child} references {table} by a foreign key of several columns "
                f"({', '.join(c for _, c in columns)}): seqid changes keys of one column"
            )
    return [columns[0] for columns in found.values()]


def followed(io: Reads, vendor: str, table: str, column: str) -> list[tuple[str, str]]:
    """:func:`references`, and where one is its table's whole primary key (Django's multi-table inheritance: the
    child's key is its link to its parent's row) the foreign keys to it, its key changing with the parent's,
    theirs after, as deep as they go; each ``(table, column)`` once."""
    out: list[tuple[str, str]] = []
    rules = _rules(vendor)
    todo = [(table, column)]
    while todo:
        parent, key = todo.pop(0)
        for child, child_column in references(io, vendor, parent, key):
            if (child, child_column) in out or (child, child_column) == (table, column):
                continue
            out.append((child, child_column))
            if [str(c) for (c,) in io.fetch(rules.PRIMARY_KEY, {"t": child})] == [child_column]:
                todo.append((child, child_column))
    return out


def forward(kind: str, layout: Layout) -> Callable[[object], uuid.UUID]:
    """The new key of an old key's value (``kind``: ``"integer"`` or ``"text"``)."""
    if kind == "integer":
        return lambda value: integer_key(int(_text(value)), layout)
    return lambda value: uuid.UUID(_text(value))


def _text(value: object) -> str:
    """An old value as the rebuilt column holds it: a number's or a UUID's text (as bytes where the new column is
    a ``BLOB``: its copy cast the value to one)."""
    return bytes(value).decode("ascii") if isinstance(value, bytes | bytearray | memoryview) else str(value)


def stored(storage: Storage, key: uuid.UUID) -> object:
    """``key`` as a column of ``storage`` holds it on an engine without a UUID type."""
    if storage is Storage.BINARY:
        return key.bytes
    return key.hex if storage is Storage.HEX else str(key)


def read(value: object) -> uuid.UUID:
    """A stored key (16 bytes, 32 hex digits or a UUID's text) as a UUID."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(str(value))


def back(kind: str, layout: Layout) -> Callable[[uuid.UUID], object]:
    """The old key's value of a new key: its integer (refused where it carries none), or its UUID's text."""
    if kind == "text":
        return str

    def integer(key: uuid.UUID) -> int:
        n = integer_of(key, layout)
        if n is None:
            raise InvalidArgumentError(f"{key} carries no integer: the new release made it")
        return n

    return integer


def converter(kind: str, layout: Layout, storage: Storage, *, forwards: bool) -> Callable[[object], object]:
    """What :data:`FUNCTION` does: forwards, an old value (as the rebuilt column holds it) made its key as
    ``storage`` stores it; back, a stored key made its old value."""
    make, old_value = forward(kind, layout), back(kind, layout)
    if forwards:
        return lambda value: stored(storage, make(value))
    return lambda value: old_value(read(value))


def refuse(
    io: Reads, vendor: str, columns: Sequence[tuple[str, str]], kind: str, layout: Layout, *, forwards: bool
) -> None:
    """Each of ``columns`` (``(table, column)``: the key and every foreign key to it) read, every value that has
    no counterpart refused (:func:`refuse_values`) before any change."""
    q = rules_for(vendor).quote_identifier
    for table, column in columns:
        found = io.fetch(f"SELECT DISTINCT {q(column)} FROM {q(table)} WHERE {q(column)} IS NOT NULL", {})
        refuse_values(kind, layout, f"{table}.{column}", [row[0] for row in found], forwards=forwards)


def rewrite(
    io: Writes, vendor: str, columns: Sequence[tuple[str, str]], remake: Callable[[], None], *, forwards: bool
) -> None:
    """The rebuild of ``columns``' tables (``remake``: the adapter's) with each value made the other by
    :data:`FUNCTION` around it — forwards after it (the old values, now the new columns' text, made keys), back
    before it (the integers first: a key's hex made an integer column's number by the copy would not be it) —
    then the foreign keys checked; in the adapter's transaction."""
    q = rules_for(vendor).quote_identifier

    def changed() -> None:
        for table, column in columns:
            io.run(f"UPDATE {q(table)} SET {q(column)} = {FUNCTION}({q(column)}) WHERE {q(column)} IS NOT NULL", {})

    if not forwards:
        changed()
    remake()
    if forwards:
        changed()
    refuse_orphans(io, vendor, [table for table, _ in columns])


def refuse_values(kind: str, layout: Layout, where: str, values: Sequence[object], *, forwards: bool) -> None:
    """Refused before any change where a value of ``where`` (``table.column``) has no counterpart: forwards a
    negative or non-integer key, a text that is no UUID; back a key that carries no integer."""
    if forwards:
        make = forward(kind, layout)
        bad = [v for v in values if not _made(make, v)]
        said = "are no non-negative integers" if kind == "integer" else "are not a UUID's text"
        if bad:
            raise MigrationRefusedError(
                f"{where}: {len(bad)} values {said} (the first: {bad[0]!r}): they would have no key; correct or "
                "remove them first"
            )
        return
    if kind != "integer":
        return
    lacking = [v for v in values if integer_of(read(v), layout) is None]
    if lacking:
        raise MigrationRefusedError(
            f"{where}: {len(lacking)} keys carry no integer (the new release made them; the first: "
            f"{read(lacking[0])}): delete those rows, or give them keys of integers "
            "(seqid_orm.ids.rekeyed.integer_key), before the way back"
        )


def _made(make: Callable[[object], uuid.UUID], value: object) -> bool:
    try:
        make(value)
    except (ValueError, TypeError, InvalidArgumentError):
        return False
    return True


def make_again(io: Writes, vendor: str, types: dict[str, dict[str, str]], key: tuple[str, str]) -> None:
    """Each table of ``types`` made again with its columns of those types (``{table: {column: type}}``), the
    rest as the engine keeps its text (every constraint and cascade, its indexes and triggers); ``key``
    ``(table, column)`` the primary key among them; nothing where ``types`` is empty.  SQLite's procedure
    (https://sqlite.org/lang_altertable.html#otheralter): a new table of the edited text, the rows copied as they
    are, the old table dropped, the new one given its name, its indexes and triggers made again — in the
    adapter's transaction, with the foreign keys off (the adapter's)."""
    if not types:
        return
    rules = _rules(vendor)
    q = rules_for(vendor).quote_identifier
    out = list(rules.BEFORE)
    for table, columns in types.items():
        [(create,)] = io.fetch(rules.TABLE, {"t": table})
        beside = [str(sql) for (sql,) in io.fetch(rules.BESIDE, {"t": table})]
        names = ", ".join(q(str(c)) for (c,) in io.fetch(rules.COLUMNS, {"t": table}))
        temp = q(f"seqid_new_{table}")
        read = rules.high_water(str(create), table)  # an AUTOINCREMENT's, which goes with the old table
        high = int(io.fetch(read, {})[0][0]) if read is not None else None
        out += [
            rules.retyped(str(create), temp, columns, key[1] if table == key[0] else None, high),
            f"INSERT INTO {temp} ({names}) SELECT {names} FROM {q(table)}",
            f"DROP TABLE {q(table)}",
            f"ALTER TABLE {temp} RENAME TO {q(table)}",
            *beside,
            *rules.high_water_again(str(create), table),
        ]
    for statement in [*out, *rules.AFTER]:
        io.run(statement, {})


def describe(table: str, refs: Sequence[tuple[str, str]], rows: dict[str, int | None]) -> str:
    """``seqid doctor``'s plan for ``table``'s key where the tables are made again: the tables, foreign keys and
    rows it touches, and what it holds."""
    tables = list(dict.fromkeys([table, *(t for t, _ in refs)]))
    total = sum(rows.get(t) or 0 for t in tables)
    listed = ", ".join(f"{t}.{c}" for t, c in refs)
    return (
        "change it to seqid keys by a rebuild of its tables (docs/how-to/migrate.md, SQLite): rekey_expand / "
        "RekeyExpand change nothing here, rekey_contract / RekeyContract make "
        f"{len(tables)} table(s) again with {len(refs)} foreign key(s){': ' + listed if listed else ''}, about "
        f"{total:,} rows, in one transaction that holds the database's one writer while it copies; no old key is "
        "kept (each key carries its integer)."
    )


def refuse_orphans(io: Reads, vendor: str, tables: Sequence[str]) -> None:
    """Each of ``tables``' foreign keys checked (in the rebuild's transaction, before it commits): refused where
    a row points at no row."""
    check = _rules(vendor).FOREIGN_KEY_CHECK
    for table in dict.fromkeys(tables):
        rows = io.fetch(check.format(table=rules_for(vendor).quote_identifier(table)), {})
        if rows:
            raise MigrationRefusedError(
                f"{table}: {len(rows)} rows point at no row of {rows[0][2]} after the rebuild (checks off while "
                "they were written?): correct them, then run the step again"
            )
