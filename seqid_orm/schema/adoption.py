"""Adopting a key column: the decision its migration makes once, with the migration's view of the whole
column, and records in the schema for every process, role and tenant to read.

Why here and not in each process.  A process that guesses the width of a column's adopted keys
(:mod:`seqid_orm.ids.adopted`) from the rows it can see guesses differently from the next one: a role
with INSERT but no SELECT sees no key, row-level security shows each tenant its own rows, a schema per
tenant puts another table under the same name, a ``TRUNCATE`` or a drained queue table shows none,
sentinel keys above the others hide them.  The migration that swaps the key runs once per table, as
the table's owner, and sees the whole column; it decides the width from the column's row count and
its largest keys, and records it in the column's comment (``[seqid adopted=N]``), which every role
reads in the catalog without SELECT on the table, the same for every tenant and session, and which
``TRUNCATE`` keeps (:mod:`seqid_orm.schema.live` reads it).

:func:`adopt` is the decision and its record, as statements run by the adapter's ``fetch`` and
``execute`` (the migration's own connection): Alembic's ``op.adopt_seqid_keys`` and Django's
``AdoptSeqUUID`` both call it.  Only engines that split inner pages half get adopted keys
(PostgreSQL here; SQL Server and Oracle have no server here): elsewhere the column's values are checked
against the type's storage and nothing is recorded, since plain keys are right there whatever the rows.

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import EllipsisType

from ..errors import InvalidArgumentError
from ..ids.adopted import (
    ABOVE_CHOSEN_MAX,
    OUTLIER_BITS,
    first_regular,
    leading_ones,
    recognise,
    record_comment,
    without_record,
)
from ..ids.layout import sort_key
from ..vendors import Storage, Target, literal, qualified, quote_identifier
from .live import ColumnName, judge, read_column, run, uuids_of

__all__ = ["SAMPLE", "Adoption", "adopt", "records", "unrecord"]

log = logging.getLogger("seqid_orm")

#: How many of the largest keys the migration reads: past a few sentinels, to the random keys' tail.
SAMPLE = 64

#: Up to this many rows the migration counts them; beyond, the planner's estimate (``reltuples``) is
#: close enough for a width that moves one bit each time the table doubles.
COUNT_UP_TO = 1_000_000

Rows = Sequence[Sequence[object]]


@dataclass(frozen=True)
class Adoption:
    """What a migration decided for a column."""

    label: str
    above: int
    """The adopted keys' width recorded (``0``: plain keys)."""
    rows: int | None
    """How many keys the column held (counted, or the planner's estimate above :data:`COUNT_UP_TO`)."""
    kept_above: int
    """Old keys that sort after the new ones (sentinels, crafted keys, the far tail of a huge table),
    of the :data:`SAMPLE` largest read."""
    recorded: bool
    """Whether this migration wrote the record (``False``: there was one already, or the engine needs none)."""
    schema: str | None = None
    """The table's schema, quoted, where the function its database-made keys call was created."""

    def __str__(self) -> str:
        if not self.recorded and self.above == 0 and self.rows is None:
            return f"{self.label}: plain keys (the engine fills pages where inserts go); nothing to record"
        keys = f"keys after {self.above} one bits" if self.above else "plain UUIDv7 keys"
        kept = f"; {self.kept_above} old key(s) stay above them" if self.kept_above else ""
        done = "recorded" if self.recorded else "already recorded"
        return f"{self.label}: {keys} ({self.rows} rows{kept}), {done}"


def adopt(
    where: Target,
    name: ColumnName,
    fetch: Callable[[str], Rows],
    execute: Callable[[str], object],
    fix: Callable[[Storage], str],
    comment: str | EllipsisType | None = ...,
) -> Adoption:
    """Decide the adopted keys' width of ``name`` (a column whose type's target is ``where``) and record it.

    ``comment``: the column's own words beside the record (``None``: none), where the migration changes
    them too; by default the comment it has keeps its words.

    Refuses, with nothing written: a column that does not exist, one whose values are not what the type
    writes (:class:`~seqid_orm.errors.StorageMismatchError`, with ``fix``), a role that may not read
    every key (no SELECT, or row-level security that hides rows from it), all as typed errors.  A column
    that has a record keeps it.  Where the keys are adopted, the function their database-made keys
    call is created beside the table.  The statements are run by ``fetch`` (rows) and ``execute``.
    """
    reading = read_column(where.vendor, name, fetch)
    if reading.declared is None:
        raise InvalidArgumentError(f"{name.label}: no such column to adopt (is the table there, in this schema?)")
    if not reading.may_read:
        raise InvalidArgumentError(
            f"{name.label}: this role may not read the column's keys, so it cannot decide for them; run the "
            "migration as the table's owner"
        )
    judge(where, reading, label=name.label, fix=fix)  # the storage check every process makes
    table = qualified(where.vendor, name.table, name.schema)
    statements = where.rules.adoption_statements(table, quote_identifier(where.vendor, name.column))
    if not records(where):
        return Adoption(name.label, 0, None, 0, False)
    [(estimate, schema)] = run(fetch, statements["estimate"].format(identity=reading.identity), name)
    if reading.record is not None:
        return Adoption(name.label, reading.record, None, 0, False, str(schema))
    hidden = run(fetch, statements["hidden"].format(identity=reading.identity), name)
    if hidden and hidden[0][0]:
        raise InvalidArgumentError(
            f"{name.label}: row-level security hides rows from this role, so the keys it sees are not the "
            "column's; run the migration as a superuser or a role WITH BYPASSRLS (or as the table's owner "
            "where the table does not FORCE ROW LEVEL SECURITY)"
        )
    rows = int(estimate)  # type: ignore[call-overload]
    if rows <= COUNT_UP_TO:
        counted = run(fetch, statements["count"].format(limit=COUNT_UP_TO + 1), name)
        rows = int(counted[0][0])  # type: ignore[call-overload]
    order = where.adopted_layout.order
    top = uuids_of([row[0] for row in run(fetch, statements["top"].format(limit=SAMPLE), name)])
    if top and first_regular([sort_key(u, order) for u in top], rows) is None:
        # every key read is an outlier (more than SAMPLE sentinels): the largest below them decides
        below = run(fetch, statements["below"].format(bound=_outlier_bound(where, rows)), name)
        top = [*top, *uuids_of([row[0] for row in below])]
    above = max(where.above_for(top, rows=rows), _old_keys_need(where, name, fetch, statements, top, rows))
    kept = sum(1 for u in top if above and leading_ones(sort_key(u, order)) >= above)
    words = reading.comment if comment is ... else comment
    execute(statements["record"].format(comment=literal(where.vendor, record_comment(words, above))))
    if above:
        for statement in where.adopted(above).shifted_default(None, str(schema)).setup:
            execute(statement)
    done = Adoption(name.label, above, rows, kept, True, str(schema))
    log.info("seqid: %s", done)
    return done


#: The most keys the migration reads to find the old keys under the adopted keys of processes that ran the
#: swapped model before it (beyond, their width plus one bit: old keys of the same width may hide among them).
OLD_KEYS_UP_TO = 65_536


def records(where: Target) -> bool:
    """Whether an adoption on ``where``'s engine records a width (one that splits inner pages half and has
    a record to write, PostgreSQL here): the one rule :func:`adopt` and :func:`unrecord` read."""
    return where.rules.INNER_SPLITS_HALF and bool(where.rules.adoption_statements("t", "c"))


def unrecord(where: Target, name: ColumnName, fetch: Callable[[str], Rows], execute: Callable[[str], object]) -> bool:
    """Undo :func:`adopt`: the column's comment without the record (its own words kept), where one was
    written.  Whether it changed anything."""
    if not records(where):
        return False
    reading = read_column(where.vendor, name, fetch)
    if reading.record is None:
        return False
    rest = without_record(reading.comment)
    table = qualified(where.vendor, name.table, name.schema)
    record = where.rules.adoption_statements(table, quote_identifier(where.vendor, name.column))["record"]
    execute(record.format(comment="NULL" if rest is None else literal(where.vendor, rest)))
    return True


def _old_keys_need(
    where: Target,
    name: ColumnName,
    fetch: Callable[[str], Rows],
    statements: dict[str, str],
    top: list[uuid.UUID],
    rows: int,
) -> int:
    """The width the column's *old* keys need, where processes that ran the swapped model before this
    migration wrote adopted keys of the width they guessed from the rows they could see (16 where the old
    keys need 26: one old key would stay above every new key, for good).  Their keys are set aside (their
    format says which they are) and the old keys among the largest decide, read further down, up to
    :data:`OLD_KEYS_UP_TO` keys, while every key read is an adopted one; past that, their width plus one."""
    adopted = [u for u in top if recognise(u.int) is not None]
    if not adopted:
        return 0  # no key of a process's guess: where.above_for(top) judged the old keys themselves
    limit = SAMPLE
    while True:
        old = [u for u in top if recognise(u.int) is None]
        if old:
            return where.above_for(old, rows=rows)
        if limit >= OLD_KEYS_UP_TO or len(top) < limit:
            widest = max(found.above for u in adopted if (found := recognise(u.int)) is not None)
            return 0 if len(top) < limit else min(widest + 1, ABOVE_CHOSEN_MAX)
        limit *= 16
        top = uuids_of([row[0] for row in run(fetch, statements["top"].format(limit=limit), name)])


def _outlier_bound(where: Target, rows: int) -> str:
    """The smallest key with as many one bits as an outlier has (see :func:`seqid_orm.ids.adopted.first_regular`),
    as a literal of the column's storage (PostgreSQL's, where it compares the bytes in order)."""
    ones = min(128, max(rows, 1).bit_length() + OUTLIER_BITS)
    hex32 = (((1 << ones) - 1) << (128 - ones)).to_bytes(16, "big").hex()
    text = f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"
    return {
        Storage.NATIVE: f"'{text}'::uuid",
        Storage.BINARY: f"'\\x{hex32}'::bytea",
        Storage.TEXT: f"'{text}'",
        Storage.HEX: f"'{hex32}'",
    }[where.storage]
