"""A table's key — integers, or UUIDs kept as text — changed to a seqid key, with every foreign key that points
at it, while the application keeps reading and writing: expand, then contract, across two releases (pgroll's and
gh-ost's expand and contract, over the foreign-key graph their one-column tools leave to the user).

Every foreign key to the table is read from the catalog (:func:`plan`), not from the models: other apps'
tables, many-to-many tables, a table that references itself.  Each row's new key is made from its old value
alone, so a child's new column is the same function of its old one and the database makes both without a
look-up, in any order:

* an integer's key (:func:`seqid_orm.ids.rekeyed.integer_key`: time 0, then the integer) keeps the old
  ``ORDER BY id`` and sorts below every key made later (on MariaDB the key of a row the application inserts
  comes late: its ``AUTO_INCREMENT`` value is made after the trigger, so the contract step makes those,
  :attr:`Rekey.late`);
* a UUID kept as text (``char(36)``, ``char(32)``) becomes the same UUID in the type the database compares
  well (``uuid`` on PostgreSQL and MariaDB 10.7+).

**Expand** (:func:`expand`: release N's code, which writes the old keys, goes on meanwhile):

1. for integers, the function that makes a key of one, on the server;
2. the table's new column (:func:`~.online.add_column`: added without a rewrite, kept in step for the
   application's inserts and key changes by row triggers from then on, the old rows filled in committed,
   resumable batches, ``NOT NULL`` without a long lock), its unique index built without stopping writes, and a
   unique index on the old key, which stays unique after the swap (old URLs, other systems' references);
3. each child's new column likewise, ``NOT NULL`` where the old one is, and indexed; a copy over the new
   columns of every other index that holds a changed column (:attr:`Rekey.companions`; an index that holds
   the columns of two changes under way, a many-to-many table between two tables re-keyed together, has one
   copy over both's new columns, made by the second expand, swapped by the first contract, and given back to
   the other change by a way back);
4. each new foreign key, checked while reads and writes go on (PostgreSQL's ``NOT VALID`` then ``VALIDATE``;
   MariaDB's in-place add, then its rows counted for orphans) — where the keys come late (:attr:`Rekey.late`),
   in the contract step instead, after it keyed the rows inserted meanwhile.

**Contract** (:func:`contract`: with release N+1, once no process of release N writes): the vendor's short
steps (:meth:`~seqid_orm.vendors.RekeyRules.contract_steps`: PostgreSQL one transaction of catalog changes;
MariaDB an in-place rebuild that moves the primary key, then the names swapped under ``LOCK TABLES`` for
milliseconds): the triggers go, the new column becomes the primary key under the key's name, each child's
new column its foreign key's, each index's copy its name, the old columns kept as ``<column>_int`` (its
sequence or ``AUTO_INCREMENT`` with it) / ``<column>_text`` (nullable); an integer key's new rows get the
layout's database-made key by default.

Killed anywhere, each step is finished by running it again: every change looks first whether it is done.
The ways back: :func:`undo_expand` (the new columns, triggers, indexes and constraints dropped) and
:func:`undo_contract` (the swap reversed).

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import InvalidArgumentError, MigrationRefusedError
from ..ids.layout import Layout
from ..vendors import (
    Companion,
    OnlineRules,
    Reference,
    RekeyRules,
    Step,
    Storage,
    Swap,
    Swapped,
    SwappedIndex,
    Target,
    bounded_name,
    read_quote,
    rules_for,
)
from .online import (
    OnlineColumn,
    OnlineIO,
    _run_step,
    _say_to_stderr,
    add_column,
    forget,
    inspect,
    lifted_for,
    refill,
)

__all__ = [
    "INTEGER_FUNCTION",
    "ROWS_PER_SECOND",
    "Child",
    "Reads",
    "Rekey",
    "contract",
    "convert",
    "converted",
    "describe",
    "expand",
    "plan",
    "plan_for",
    "state",
    "undo_contract",
    "undo_expand",
]

#: The function that makes the key of an integer (one per schema, the same for every table).
INTEGER_FUNCTION = "seqid_integer_key"

#: What the old column is kept as after the contract, by the kind of key it held.
_KEPT = {"integer": "int", "text": "text"}


class Reads(Protocol):
    """What :func:`plan` needs of a connection: reads (an :class:`~.online.OnlineIO`, or the doctor's
    read-only :class:`~.doctor.Executor`)."""

    def fetch(self, sql: str, params: dict[str, object], /) -> list[tuple[Any, ...]]: ...


def _rules(vendor: str) -> RekeyRules:
    rules = rules_for(vendor).REKEY
    if rules is None:
        raise MigrationRefusedError(
            f"seqid does not change a table's key online on {vendor}: PostgreSQL and MariaDB 10.7+ do (integers and "
            "text), and SQLite's tables are made again by the contract step (seqid_orm.schema.rebuild); elsewhere "
            "change it in a maintenance window (docs/how-to/migrate.md, integer keys)"
        )
    return rules


def _new(column: str) -> str:
    return bounded_name("", column, "seqid")


def _halfway(key: str) -> tuple[str, ...]:
    """The names a keyed child's link is on while its key is swapped and its parent's not: the key's kept
    columns, and its new one."""
    return (*(bounded_name("", key, kept) for kept in _KEPT.values()), _new(key))


def _copy_name(index: str) -> str:
    return bounded_name("", index, "seqid")


def _triggers(table: str, column: str) -> tuple[str, str]:
    """The names of what keeps a table's new column in step: a function and its trigger, or two triggers."""
    return bounded_name("seqid_keep_", table, column), bounded_name("seqid_keepu_", table, column)


@dataclass(frozen=True)
class Child:
    """A foreign key to the re-keyed table, and the names of what the change makes for it."""

    reference: Reference
    keys: tuple[str, ...]
    """The child's primary key, by which its backfill walks it."""
    key_casts: tuple[str, ...]
    kind: str
    keyed: bool = False
    """Whether the foreign key is the child's primary key (Django's multi-table inheritance): the child's key
    changes with it, as one of the :attr:`Rekey.heirs`, which makes and swaps its new column."""

    @property
    def new_column(self) -> str:
        return _new(self.reference.column)

    @property
    def kept_as(self) -> str:
        """The old column's name after the swap."""
        return bounded_name("", self.reference.column, _KEPT[self.kind])

    @property
    def foreign_key(self) -> str:
        return bounded_name("fk_", self.reference.table, self.new_column)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The new foreign key's columns: the new column, and a composite key's others as they are."""
        return tuple(c for c, _ in self.reference.renamed(self.new_column, ""))

    @property
    def index(self) -> str:
        return bounded_name("ix_", self.reference.table, self.new_column)

    @property
    def triggers(self) -> tuple[str, str]:
        return _triggers(self.reference.table, self.reference.column)


@dataclass(frozen=True)
class Rekey:
    """What :func:`plan` read of a table whose key changes, and the names of what it makes."""

    vendor: str
    table: str
    column: str
    key_type: str
    kind: str
    """``"integer"`` or ``"text"`` (UUIDs kept as text)."""
    constraint: str
    """The primary key constraint's name (the new one takes it)."""
    children: tuple[Child, ...]
    storage: Storage
    layout: Layout
    default_sql: str | None
    """The new key's database default once contracted: the layout's database-made key for an integer key
    (below which every old key sorts); none for a text key, whose old keys are anywhere (a default that reads
    them: ``op.set_seqid_default``, ``AdoptSeqUUID``)."""
    new_type: str
    """The new columns' type (``uuid``)."""
    companions: tuple[Companion, ...] = ()
    """The other indexes over the changed columns (a many-to-many table's unique pair, a one-to-one key's
    ``UNIQUE``, a foreign key's own index): each copied over the new columns in the expand step and swapped
    for its copy in the contract step, under its name, so the new release's rows are held to it too."""
    heir: bool = False
    """Whether this table is one of another change's :attr:`heirs`: its key is written by the application (its
    parent row's), never made by the server, so its new keys are never late."""
    heirs: tuple[Rekey, ...] = ()
    """The changes of the children keyed by their foreign key (:attr:`Child.keyed`): each such table's own
    key, with its own children, changed in the same steps (after this table's in the expand step, in the
    same transaction before it in the contract).  Its new key is the same function of the same old value as
    this table's, so it is the parent's new key with no look-up; it gets no default of its own."""

    @property
    def rules(self) -> RekeyRules:
        return _rules(self.vendor)

    @property
    def late(self) -> bool:
        """Whether the table's new keys come late (:meth:`~seqid_orm.vendors.RekeyRules.late_keys`): its new column
        nullable until the contract step, which fills it and adds the new foreign keys.  Never a heir's, whose key
        the application writes (its parent row's)."""
        return self.rules.late_keys(self.kind) and not self.heir

    @property
    def rules_online(self) -> OnlineRules:
        online = rules_for(self.vendor).ONLINE
        assert online is not None  # a vendor that re-keys changes tables online
        return online

    def q(self, name: str) -> str:
        return rules_for(self.vendor).quote_identifier(name)

    def read_q(self, name: str) -> str:
        """``name`` quoted for a read's text, where a colon is no parameter."""
        return read_quote(self.q(name))

    @property
    def new_column(self) -> str:
        return _new(self.column)

    @property
    def kept_as(self) -> str:
        return bounded_name("", self.column, _KEPT[self.kind])

    @property
    def new_unique(self) -> str:
        return bounded_name("uq_", self.table, self.new_column)

    @property
    def old_unique(self) -> str:
        return bounded_name("uq_", self.table, self.kept_as)

    @property
    def triggers(self) -> tuple[str, str]:
        return _triggers(self.table, self.column)

    def moved(self) -> dict[str, dict[str, tuple[str, str]]]:
        """Each table's changed columns: its name now → ``(new column, kept name)``."""
        out = {self.table: {self.column: (self.new_column, self.kept_as)}}
        for c in self.children:
            if not c.keyed:  # its column is its own table's key: its heir's change moves its indexes
                out.setdefault(c.reference.table, {})[c.reference.column] = (c.new_column, c.kept_as)
        return out

    def tree(self) -> tuple[Rekey, ...]:
        """This change and its heirs', theirs after, depth first: every table whose key changes."""
        return (self, *(r for heir in self.heirs for r in heir.tree()))

    def copy_of(self, index: Companion) -> tuple[str, tuple[str, ...]]:
        """The name of ``index``'s copy over the new columns (another change's under way too: one copy holds
        both's), and its columns."""
        moved = self.moved()[index.table]
        return _copy_name(index.name), tuple(
            moved[c][0] if c in moved else _new(c) if c in index.others else c for c in index.columns
        )

    def others_copy(self, index: Companion) -> tuple[str, tuple[str, ...]]:
        """The copy of ``index`` that the other change under way over its columns (:attr:`Companion.others`)
        needs without this one: what :func:`undo_expand` leaves."""
        return _copy_name(index.name), tuple(_new(c) if c in index.others else c for c in index.columns)

    def back_of(self, index: Companion) -> tuple[str, tuple[str, ...]]:
        """The name of the index :func:`undo_contract` builds over the kept columns in ``index``'s place (named
        as the contracted table names its columns), and its columns."""
        moved = self.moved()[index.table]
        return bounded_name("", index.name, "back"), tuple(moved[c][1] if c in moved else c for c in index.columns)

    def covered(self, child: Child) -> bool:
        """Whether a companion's copy leads with ``child``'s new foreign key's columns, in its order, serving it
        as an index (InnoDB needs one so)."""
        ref, n = child.reference, len(child.key_columns)
        return any(i.table == ref.table and self.copy_of(i)[1][:n] == child.key_columns for i in self.companions)

    def key_of(self, column: str) -> str:
        """SQL of the new key of ``column``'s old value (``column`` as SQL: ``NEW."id"``)."""
        made = self.rules.key_of(self.kind, self.q(INTEGER_FUNCTION), column)
        assert made is not None  # plan() refused a kind the server cannot make keys of
        return made

    def column_of(
        self, table: str, column: str, new: str, keys: tuple[str, ...], casts: tuple[str, ...], *, nullable: bool
    ) -> OnlineColumn:
        """The online column ``new`` of ``table``, filled with the key of ``column``'s old value."""
        return OnlineColumn(
            vendor=self.vendor,
            table=table,
            column=new,
            keys=keys,
            column_type=self.new_type,
            default_sql=None,
            storage=self.storage,
            layout=self.layout,
            key_casts=casts,
            unique=False,
            nullable=nullable,
            key_sql=self.key_of(self.q(column)),
        )

    def parent(self) -> OnlineColumn:
        return self.column_of(
            self.table, self.column, self.new_column, (self.column,), (self.key_type,), nullable=self.late
        )

    def child(self, child: Child) -> OnlineColumn:
        ref = child.reference
        return self.column_of(
            ref.table, ref.column, child.new_column, child.keys, child.key_casts, nullable=ref.nullable
        )

    def swap(self) -> Swap:
        """The contract as the vendor's statements take it (names quoted)."""
        q = self.q
        parent = Swapped(
            table=q(self.table),
            constraint=q(self.constraint),
            column=q(self.column),
            column_type=self.key_type,
            new=q(self.new_column),
            new_constraint=q(self.new_unique),
            kept=q(self.kept_as),
            triggers=(q(self.triggers[0]), q(self.triggers[1])),
            nullable=False,
        )
        children = tuple(
            Swapped(
                table=q(c.reference.table),
                constraint=q(c.reference.constraint),
                column=q(c.reference.column),
                column_type=c.reference.column_type,
                new=q(c.new_column),
                new_constraint=q(c.foreign_key),
                kept=q(c.kept_as),
                triggers=(q(c.triggers[0]), q(c.triggers[1])),
                nullable=c.reference.nullable,
                references=c.reference,
                keyed=c.keyed,
                check=q(bounded_name("ck_", c.reference.table, f"{c.kept_as}_not_null")) if c.keyed else "",
            )
            for c in self.children
        )
        key = self.key_of("{}")
        indexes = tuple(
            SwappedIndex(
                q(i.table), q(i.name), q(self.copy_of(i)[0]), q(self.back_of(i)[0]), i.constraint, bool(i.others)
            )
            for i in self.companions
        )
        heirs = tuple(heir.swap() for heir in self.heirs)
        return Swap(parent, children, q(self.old_unique), self.default_sql, key, indexes, heirs, self.late)


def _primary_key(io: Reads, rules: RekeyRules, table: str) -> list[tuple[str, str]]:
    return [(str(c), str(t)) for c, t in io.fetch(*rules.primary_key(table))]


def _kept_type(io: Reads, rules: RekeyRules, table: str, column: str) -> tuple[str, str] | None:
    """``(kind, type)`` of the old key kept beside the new one after a contract (``<column>_int``, ``_text``)."""
    for kind, suffix in _KEPT.items():
        found = io.fetch(*rules.column_type(table, bounded_name("", column, suffix)))
        if found and rules.source_kind(str(found[0][0])) == kind:
            return kind, str(found[0][0])
    return None


def plan(
    io: Reads,
    vendor: str,
    table: str,
    *,
    storage: Storage,
    layout: Layout,
    default_sql: str | None,
    new_type: str,
    read_every_row: bool = True,
    _above: tuple[str, ...] = (),
) -> Rekey:
    """What changing ``table``'s key involves, read from the catalog: its key, every foreign key that references
    it, each child's own key.  Refused (:class:`~seqid_orm.errors.MigrationRefusedError`) before any change
    where the change cannot keep every row: a key of several columns or of another type, two foreign keys
    from one column, a child without a primary key, a negative integer, a text that is no UUID, a kind of key
    the server cannot keep in step.  A composite foreign key (the key beside a tenant's column) changes its one
    column; the others stay, and so does the parent's unique index it references, copied over the new key like
    every other index over it.  A child of another schema is named with it (:class:`~seqid_orm.vendors.InSchema`).
    A child keyed by its foreign key (multi-table inheritance) is planned as one of the :attr:`Rekey.heirs`
    (``_above``: the tables above it, whose key it cannot hold again)."""
    rules = _rules(vendor)
    key = _primary_key(io, rules, table)
    if not key:
        raise MigrationRefusedError(f"{table} has no primary key (or is not there): nothing to change")
    column, key_type = key[0]
    if len(key) == 1 and column.endswith("_seqid"):  # a contract stopped after it moved the key (MariaDB)
        found = io.fetch(*rules.column_type(table, column[: -len("_seqid")]))
        if found and rules.source_kind(str(found[0][0])):
            column, key_type = column[: -len("_seqid")], str(found[0][0])
    kind = rules.source_kind(key_type)
    kept = _kept_type(io, rules, table, column) if kind is None and len(key) == 1 else None
    contracted = kept is not None
    if kept is not None:  # the contract step ran: the old key is kept beside the new one
        kind, key_type = kept
    if len(key) != 1 or kind is None:
        shown = ", ".join(f"{c} {t}" for c, t in key)
        raise MigrationRefusedError(
            f"{table}'s primary key is ({shown}): only a key of one column of integers or of UUIDs kept as text changes"
        )
    if rules.key_of(kind, INTEGER_FUNCTION, column) is None:
        raise MigrationRefusedError(f"{table}.{column} is not changed online on {vendor}: {rules.not_changed(kind)}")
    if kind == "integer" and rules.integer_function(INTEGER_FUNCTION, layout, storage) is None:
        raise MigrationRefusedError(
            f"the server cannot make the keys of integers in layout {layout.value} stored as {storage.value}"
        )
    if kind == "text" and storage is not Storage.NATIVE:
        raise MigrationRefusedError(
            f"{table}.{column} holds UUIDs as text; seqid changes them to the database's own uuid type, which this "
            f"server has not (the keys would be stored as {storage.value}): keep the column, and declare its form"
        )
    children: list[Child] = []
    heirs: list[str] = []  # the children keyed by their foreign key, planned with their own children below
    for row in io.fetch(*rules.references(table, column)):
        ref = rules.reference(row)
        if sum(p == column for _, p in ref.pairs) > 1:
            raise MigrationRefusedError(
                f"{ref.table}'s foreign key {ref.constraint} to {table} references {column} more than once: seqid "
                "changes a key's one column; drop it, change the key, and make it again"
            )
        for own, theirs in ref.others():  # another change under way over one of its other columns
            for where, other in ((ref.table, own), (table, theirs)):
                if io.fetch(*rules.column_type(where, _new(other))):
                    raise MigrationRefusedError(
                        f"{ref.table}'s foreign key {ref.constraint} to {table} holds {where}.{other}, whose key "
                        "another change under way is changing: one foreign key cannot follow two changes; finish "
                        "that change (its contract step) first"
                    )
        if any(c.reference.table == ref.table and c.reference.column == ref.column for c in children):
            raise MigrationRefusedError(
                f"{ref.table}.{ref.column} has two foreign keys to {table} (one of them {ref.constraint}): its new "
                "column could follow only one; drop the other, change the key, and make it again"
            )
        child_key = _primary_key(io, rules, ref.table)
        if not child_key:
            raise MigrationRefusedError(
                f"{ref.table} (foreign key {ref.constraint} to {table}) has no primary key to walk its rows by"
            )
        if len(child_key) == 1 and not ref.pairs and ref.column in _halfway(child_key[0][0]):
            # a keyed child half way (MariaDB: a run killed between its own steps and this table's): its link is
            # on its key's kept column (contracting) or its new one (on the way back); it is its key's
            ref = replace(ref, column=child_key[0][0])
        keyed = [c for c, _ in child_key] == [ref.column] and not ref.pairs
        if keyed and ref.table not in (table, *_above):
            heirs.append(ref.table)
        elif ref.column in (c for c, _ in child_key):
            why = "a cycle of such keys" if keyed else "a key of several columns: a many-to-many table's pair"
            raise MigrationRefusedError(
                f"{ref.table}'s primary key holds its foreign key column {ref.column} to {table} ({why}): that key "
                "would change with it, and its own children's; seqid does not change such a key online"
            )
        if contracted:  # the old column is the kept one: its type, not the new column's
            found = io.fetch(*rules.column_type(ref.table, bounded_name("", ref.column, _KEPT[kind])))
            ref = replace(ref, column_type=str(found[0][0]) if found else ref.column_type)
        children.append(
            Child(ref, tuple(c for c, _ in child_key), tuple(t for _, t in child_key), kind, keyed=ref.table in heirs)
        )

    def q(name: str) -> str:  # a name in a read's text: a colon in it is no parameter
        return read_quote(rules_for(vendor).quote_identifier(name))

    old = q(bounded_name("", column, _KEPT[kind]) if contracted else column)
    if kind == "integer":
        [(low, _high)] = io.fetch(rules.integer_range(q(table), old), {})
        if low is not None and int(str(low)) < 0:
            raise MigrationRefusedError(f"{table}.{column} holds negative keys ({low}): they have no seqid key")
    elif not contracted and read_every_row:
        for where, col in ((table, column), *((c.reference.table, c.reference.column) for c in children)):
            [(bad,)] = io.fetch(rules.invalid_texts(q(where), q(col)), {})
            if int(str(bad)):
                raise MigrationRefusedError(
                    f"{where}.{col} holds {bad} values that are not a UUID's text: they would have no key; "
                    "correct or remove them first"
                )
    [(constraint,)] = io.fetch(*rules.key_constraint(table))
    rk = Rekey(
        vendor,
        table,
        column,
        key_type,
        kind,
        str(constraint),
        tuple(children),
        storage,
        layout,
        default_sql if kind == "integer" else None,
        new_type,
        heir=bool(_above),
    )
    rk = replace(rk, companions=_companions(io, rk))
    if not heirs:
        return rk
    made = tuple(
        plan(
            io,
            vendor,
            heir,
            storage=storage,
            layout=layout,
            default_sql=None,  # its key comes from its parent's row
            new_type=new_type,
            read_every_row=read_every_row,
            _above=(*_above, table),
        )
        for heir in heirs
    )
    return replace(rk, heirs=made)


def _companions(io: Reads, rk: Rekey) -> tuple[Companion, ...]:
    """The indexes over ``rk``'s changed columns but the ones the change makes, read from the catalog; refused
    where one cannot be made again of its columns (an expression's, a partial one)."""
    own = {rk.old_unique, rk.new_unique, *(c.index for c in rk.children)}
    # the foreign keys this change moves to an index's copy, or makes there: the only ones that may reference it
    moving = {(c.reference.table, n) for c in rk.children for n in (c.reference.constraint, c.foreign_key)}
    found = []
    for table, columns in rk.moved().items():
        indexes = [rk.rules.companion(table, row) for row in io.fetch(*rk.rules.companions(table, list(columns)))]
        # another change's copy of one of them (a many-to-many table between two re-keyed tables): that change
        # made it, and this one's copy, of the same name, holds both's new columns
        copies = {_copy_name(i.name) for i in indexes}
        for index in indexes:
            if index.name in own or index.name in copies:
                continue
            if not index.plain:
                raise MigrationRefusedError(
                    f"{table}'s index {index.name} holds {', '.join(columns)}, whose keys change, and is not made of "
                    "whole columns alone (an expression, a condition, an order, an included column, a deferred or "
                    "NULLS NOT DISTINCT rule): seqid cannot copy it; drop it before the expand step, and make it "
                    "on the new columns after the contract"
                )
            if set(index.referenced) - moving:  # a key this change neither moves to the copy nor makes
                raise MigrationRefusedError(
                    f"{table}'s index {index.name} holds {', '.join(c for c in index.columns if c in columns)}, "
                    "whose keys change, and a foreign key references its columns (Django's to_field): the "
                    "contract could not swap it for its copy while that key is there; drop that foreign key "
                    "first, and make it again after the contract"
                )
            others = tuple(
                c for c in index.columns if c not in columns and io.fetch(*rk.rules.column_type(table, _new(c)))
            )
            found.append(replace(index, others=others))
    return tuple(found)


def _index_columns(io: Reads, rk: Rekey, table: str, name: str, near: tuple[str, ...]) -> tuple[str, ...] | None:
    """The columns of ``table``'s index ``name``, one of the indexes that hold a column of ``near``."""
    for row in io.fetch(*rk.rules.companions(table, list(near))):
        index = rk.rules.companion(table, row)
        if index.name == name:
            return index.columns
    return None


def plan_for(io: Reads, where: Target, table: str, new_type: str, *, read_every_row: bool = True) -> Rekey:
    """:func:`plan` for the keys of ``where`` (a column type's target on the connection: its layout, storage and
    database-made key), whose DDL type is ``new_type``: what both ORMs' operations call.  ``read_every_row``:
    whether a text key's values are all checked (a scan of each table; ``seqid doctor``, which reads no table
    whole, leaves it to the expand step)."""
    return plan(
        io,
        where.vendor,
        table,
        storage=where.storage,
        layout=where.layout,
        default_sql=where.server_default.sql,
        new_type=new_type,
        read_every_row=read_every_row,
    )


#: Rows a second the expand step wrote, all its tables together, in ``python -m benchmarks.rekey`` on the
#: project's two-core machine (6,000,000 rows, release N's writers beside it): what :func:`describe`'s estimate
#: assumes, so a slower or busier server takes longer.
ROWS_PER_SECOND = 100_000


def describe(rk: Rekey, rows: dict[str, int | None], untracked: list[tuple[str, str, str]]) -> str:
    """``seqid doctor``'s plan for ``rk`` (:attr:`~seqid_orm.schema.doctor.Finding.plan`): the operations, the
    tables and foreign keys, the rows (``rows``: the planner's estimate by table) and about how long the
    expand step takes, what each step locks, and the ``untracked`` columns ``(table, column, type)`` that may
    hold the keys without a foreign key."""
    every = rk.tree()  # with the tables keyed by their foreign key (multi-table inheritance) and their children
    children = [c for each in every for c in each.children]
    tables = list(dict.fromkeys([rk.table, *(c.reference.table for c in children)]))
    total = sum(rows.get(t) or 0 for t in tables)
    unknown = [t for t in tables if rows.get(t) is None]
    seconds = total / ROWS_PER_SECOND
    took = "under a minute" if seconds < 60 else f"about {round(seconds / 60)} min"

    def shown(ref: Reference) -> str:
        beside = ", ".join(c for c, _ in ref.others())
        return f"{ref.table}.{ref.column} ({f'with {beside}, ' if beside else ''}ON DELETE {ref.on_delete})"

    refs = ", ".join(shown(c.reference) + (" (its key, which changes with it)" if c.keyed else "") for c in children)
    copied = ", ".join(f"{i.table}.{i.name}" for each in every for i in each.companions)
    said = (
        f"change it to seqid keys online in two releases (docs/how-to/migrate.md, {rk.kind} keys): "
        f"rekey_expand / RekeyExpand, then rekey_contract / RekeyContract (autogenerate and makemigrations write "
        f"them). It touches {len(tables)} table(s) and {len(children)} foreign key(s)"
        f"{': ' + refs if refs else ''}"
        f"{'; indexes over those columns, copied then swapped: ' + copied if copied else ''}; about {total:,} rows"
        f"{' (no estimate for ' + ', '.join(unknown) + ')' if unknown else ''}, written once by the expand step "
        f"in {took} at {ROWS_PER_SECOND:,} rows/s. Expand locks: catalog changes (each waits at most "
        "0.5 s, then tries again), each batch's rows, nothing while its indexes build and its foreign "
        "keys are checked; contract: catalog changes on those tables (milliseconds); the old key "
        f"stays as {rk.kept_as}."
    )
    if rk.late:
        said += (
            " The rows inserted after the expand step get their keys, and the new foreign keys are added, in the "
            "contract step (the server makes the old key after the trigger that would make the new one)."
        )
    if untracked:
        listed = ", ".join(f"{t}.{c} ({k})" for t, c, k in untracked)
        said += (
            f" No foreign key follows these, which may hold its keys (generic relations): {listed}; map them "
            f"through {rk.kept_as} before you drop it."
        )
    return said


# --- what is there ---------------------------------------------------------------------------------------


def _index(io: Reads, rules: RekeyRules, table: str, index: str) -> str | None:
    found = io.fetch(*rules.index_state(table, index))
    return None if not found else ("valid" if found[0][0] else "invalid")


def _index_build(io: Reads, rk: Rekey, table: str, name: str, columns: tuple[str, ...], unique: bool) -> list[Step]:
    """The vendor's steps that build ``table``'s index ``name`` over ``columns`` while writes go on, from where
    it is (nothing once valid; an invalid one, a killed build's, dropped first)."""
    q = rk.q
    return rk.rules.index_steps(
        q(table), ", ".join(map(q, columns)), q(name), _index(io, rk.rules, table, name), unique
    )


def _constraint(io: Reads, rules: RekeyRules, table: str, name: str) -> bool | None:
    found = io.fetch(*rules.constraint_state(table, name))
    return None if not found else bool(found[0][0])


def _indexed(rk: Rekey, child: Child) -> bool:
    """Whether ``child``'s new foreign key gets an index of its own: not where a copy of an index leads with its
    columns, nor where they are its table's new key (its heir's unique index serves it)."""
    return not rk.covered(child) and not child.keyed


def state(io: OnlineIO, rk: Rekey) -> str:
    """``"contracted"`` (the key is the seqid column under the key's name), ``"expanded"`` (every new column,
    index and foreign key there and valid), ``"expanding"`` (begun) or ``"planned"``."""
    rules = rk.rules
    key = _primary_key(io, rules, rk.table)
    if key and key[0][0] == rk.column and rules.source_kind(key[0][1]) is None:
        return "contracted"
    moved = bool(key) and key[0][0] == rk.new_column  # a contract stopped after it moved the key (MariaDB)
    facts: list[str | bool | None] = [
        "valid" if moved else _index(io, rules, rk.table, rk.new_unique),
        _index(io, rules, rk.table, rk.old_unique),
    ]
    if not rk.late:  # else the contract step adds them
        facts += [_constraint(io, rules, c.reference.table, c.foreign_key) for c in rk.children]
    facts += [_index(io, rules, i.table, rk.copy_of(i)[0]) for i in rk.companions]
    facts += [_index(io, rules, c.reference.table, c.index) for c in rk.children if _indexed(rk, c)]
    # a heir contracted, its parent not (a contract killed between them where it is no one transaction: MariaDB)
    heirs = all(state(io, heir) in ("expanded", "contracted") for heir in rk.heirs)
    if all(f in ("valid", True) for f in facts) and heirs:
        return "expanded"
    column = io.fetch(*rk.parent().rules.fact_reads(rk.table, rk.new_column, "")["column"])
    return "expanding" if column else "planned"


# --- expand ----------------------------------------------------------------------------------------------


def expand(
    io: OnlineIO,
    rk: Rekey,
    *,
    batch_size: int | None = None,
    say: Callable[[str], None] = _say_to_stderr,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[], None] = lambda: None,
    then: str = "contract with the next release",
) -> None:
    """The expand step (see the module docstring); run again after a kill, it goes on where it stopped, and
    finds nothing to do once done.  ``then``: what its last message says comes next."""
    rules, q = rk.rules, rk.q
    parent = rk.parent()
    lifted = _lifted(io, rk)
    for col in (parent, *(rk.child(c) for c in rk.children)):
        keys = inspect(io, col).partition_key
        if keys is not None:
            raise MigrationRefusedError(
                f"{col.table} is partitioned (by {', '.join(keys)}): a unique index on it must contain the partition "
                "key, and no index is built on it concurrently; seqid does not change its key online"
            )

    def run(step: Step) -> None:
        guard()
        _run_step(io, parent, step, sleep, lifted)

    if rk.kind == "integer" and not io.fetch(*rules.function_present(INTEGER_FUNCTION)):
        # made once a schema, by whichever role came first: only its owner may replace it, and it never changes
        function = rules.integer_function(q(INTEGER_FUNCTION), rk.layout, rk.storage)
        assert function is not None  # plan() refused a layout without one
        if function:  # "": made inline by key_of
            run(Step(function))

    def keep(table: str, source: str, target: str, names: tuple[str, str]) -> Callable[[], None]:
        def make() -> None:
            for statement in rules.keep_in_step(
                q(table), q(source), q(target), rk.key_of(f"NEW.{q(source)}"), (q(names[0]), q(names[1]))
            ):
                run(Step(statement))

        return make

    add_column(
        io,
        parent,
        batch_size=batch_size,
        say=say,
        sleep=sleep,
        guard=guard,
        before_fill=keep(rk.table, rk.column, rk.new_column, rk.triggers),
    )
    for column, index in ((rk.new_column, rk.new_unique), (rk.column, rk.old_unique)):
        for step in _index_build(io, rk, rk.table, index, (column,), True):
            run(step)
    for child in rk.children:
        ref = child.reference
        add_column(
            io,
            rk.child(child),
            batch_size=batch_size,
            say=say,
            sleep=sleep,
            guard=guard,
            before_fill=keep(ref.table, ref.column, child.new_column, child.triggers),
        )
    for companion in rk.companions:  # over the filled columns: a copy of a pair waits for both
        copy, columns = rk.copy_of(companion)
        if companion.others and _index_columns(io, rk, companion.table, copy, columns) not in (None, columns):
            # the other change's copy, without this one's column: made again over both's new columns (the
            # original holds the rows to it meanwhile)
            run(Step(rules.drop_index(q(companion.table), q(copy))))
        for step in _index_build(io, rk, companion.table, copy, columns, companion.unique):
            run(step)
    for child in rk.children:
        ref = child.reference
        if _indexed(rk, child):  # the new foreign key's own index, where no copy leads with its columns
            for step in _index_build(io, rk, ref.table, child.index, child.key_columns, False):
                run(step)
    if not rk.late:
        _foreign_keys(io, rk, run, say, guard)
    for heir in rk.heirs:  # its new column is filled (a child's above): its key's indexes, its own children
        expand(io, heir, batch_size=batch_size, say=say, sleep=sleep, guard=guard, then=f"as {rk.table}'s")
    say(f"seqid: {rk.table}.{rk.column}: expanded ({len(rk.children)} foreign keys); {then}")


def _foreign_keys(
    io: OnlineIO,
    rk: Rekey,
    run: Callable[[Step], None],
    say: Callable[[str], None],
    guard: Callable[[], None],
    done: Collection[str] = (),
) -> None:
    """Each child's new foreign key, added and checked without stopping writes; then its rows counted for
    orphans where the vendor's server did not check them.  Not a keyed child's whose table is ``done``
    (contracted: its key swapped, the key added and checked before)."""
    rules, q = rk.rules, rk.q
    for child in rk.children:
        ref = child.reference
        if child.keyed and ref.table in done:
            continue
        present = _constraint(io, rules, ref.table, child.foreign_key)
        for step in rules.foreign_key_steps(
            ref, q(child.new_column), q(rk.table), q(rk.new_column), q(child.foreign_key), present
        ):
            run(step)
        col = rk.child(child)
        stale = rules.stale(q(child.new_column), rk.key_of(q(ref.column)))
        # what the old foreign key's cascades changed since the trigger (its own keep the new column from now on):
        # only a cascade that sets the column can leave it stale; one that deletes takes the row with it
        sets = ref.on_delete in ("SET NULL", "SET DEFAULT") or ref.on_update not in ("NO ACTION", "RESTRICT")
        if stale is not None and sets:
            guard()
            fixed = refill(io, col, stale)
            if fixed:
                say(f"seqid: {ref.table}.{child.new_column}: {fixed:,} rows its cascades changed, set again")
        _no_orphans(io, rk, child, child.new_column, rk.new_column)


def _lifted(io: OnlineIO, rk: Rekey) -> dict[str, str]:
    """The role's time-outs a concurrent index build runs without (:func:`~.online.lifted_for`), or its refusal:
    asked before the first change of a step that builds indexes."""
    concurrent = any(s.concurrent for s in rk.rules.index_steps("t", "c", "i", None, True))
    return lifted_for(io, rk.parent(), "the indexes' concurrent builds") if concurrent else {}


def _no_orphans(io: OnlineIO, rk: Rekey, child: Child, column: str, parent_column: str) -> None:
    """Where the vendor added ``child``'s foreign key from ``column`` to ``parent_column`` (a composite one's
    other columns with them) and its server did not check it, its rows counted: none may lack a parent."""
    rq, table = rk.read_q, child.reference.table
    count = rk.rules.orphans(rq(table), child.reference.renamed(rq(column), rq(parent_column), rq), rq(rk.table))
    if count is None:
        return
    [(orphans,)] = io.fetch(count, {})
    if int(str(orphans)):
        raise MigrationRefusedError(
            f"{table}.{column}: {orphans} rows point at no row of {rk.table}, which a foreign key would refuse; "
            "the old column's foreign key did not hold them (checks turned off while they were written?): "
            "correct them, then run the step again"
        )


# --- contract --------------------------------------------------------------------------------------------


def contract(
    io: OnlineIO,
    rk: Rekey,
    *,
    say: Callable[[str], None] = _say_to_stderr,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[], None] = lambda: None,
) -> None:
    """The contract step (see the module docstring); nothing to do where it is done.  Refused while the expand
    step is not finished."""
    now = state(io, rk)
    if now == "contracted":
        return
    if now != "expanded":
        raise MigrationRefusedError(
            f"{rk.table}.{rk.column}: the expand step is not finished ({now}): run it (again) first"
        )
    # a heir contracted by a run killed before this table's steps (MariaDB): its link's new foreign key is there,
    # on its key's column now
    done = {heir.table for heir in rk.heirs if state(io, heir) == "contracted"}
    if rk.late:  # the rows release N inserted, keyed now that none is inserting; then the new foreign keys
        guard()
        parent = rk.parent()
        stale = rk.rules.stale(rk.q(rk.new_column), rk.key_of(rk.q(rk.column)))
        assert stale is not None  # a vendor whose keys come late says which rows lack theirs
        filled = refill(io, parent, stale)
        if filled:
            say(f"seqid: {rk.table}.{rk.new_column}: {filled:,} rows inserted since the expand step, keyed")

        def run(step: Step) -> None:
            guard()
            _run_step(io, parent, step, sleep)

        _foreign_keys(io, rk, run, say, guard, done)
    for step in rk.rules.contract_steps(_swap_of(io, rk, "contracted")):  # the heirs' in it
        guard()
        _run_step(io, rk.parent(), step, sleep)
    for each in rk.tree():
        for col in (each.parent(), *(each.child(c) for c in each.children)):
            forget(io, col)


def _swap_of(io: OnlineIO, rk: Rekey, done: str) -> Swap:
    """``rk``'s :class:`~seqid_orm.vendors.Swap` with the heirs whose state is not ``done`` yet: where a
    contract (or its way back) is no one transaction (MariaDB), a run killed after a heir's steps finds it done,
    and goes on with the rest."""
    swap = rk.swap()
    pending = tuple(_swap_of(io, heir, done) for heir in rk.heirs if state(io, heir) != done)
    return replace(swap, heirs=pending)


def undo_contract(io: OnlineIO, rk: Rekey, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """The way back from :func:`contract`, before the new release writes rows of its own: the old key and
    foreign keys again (checked while writes go on), the seqid columns kept in step by their triggers again;
    the seqid column's unique index is built again by :func:`expand`.  Refused where a row has no old value
    (the new release wrote it): fill those first, as the message says."""
    if state(io, rk) != "contracted":
        return
    q, rules = rk.q, rk.rules
    # a heir whose way back ran in a run killed before this table's (MariaDB): nothing of it to refuse or build
    undone = {heir.table for each in rk.tree() for heir in each.heirs if state(io, heir) != "contracted"}
    live = [each for each in rk.tree() if each.table not in undone]
    for each in live:  # a table's children before its heirs': a heir's kept key is what they are filled from
        _refuse_unfilled(io, each, undone)
    lifted = _lifted(io, rk) if any(each.companions for each in live) else {}
    for each in live:
        for index in each.companions:  # each index again over the kept columns, built while writes go on
            for step in _index_build(io, each, index.table, *each.back_of(index), index.unique):
                _run_step(io, rk.parent(), step, sleep, lifted)
    for step in rules.undo_contract_steps(_swap_of(io, rk, "expanded")):  # the heirs' in it
        _run_step(io, rk.parent(), step, sleep)
    if rk.late:  # as expanded: release N's inserts leave the new key NULL, which its children's would miss
        for child in rk.children:
            _run_step(
                io, rk.parent(), Step(rules.drop_foreign_key(q(child.reference.table), q(child.foreign_key))), sleep
            )
    for each in rk.tree():
        for child in each.children:
            ref = child.reference
            _no_orphans(io, each, child, ref.column, each.column)
            if not ref.nullable and not child.keyed and rk.vendor == "postgresql":
                # SET NOT NULL after a valid check: no scan (12+)
                check = bounded_name("ck_", ref.table, f"{ref.column}_not_null")
                for step in rk.rules_online.not_null_steps(
                    q(ref.table), q(ref.column), ref.column_type, q(check), None
                ):
                    _run_step(io, rk.parent(), step, sleep)


def _refuse_unfilled(io: OnlineIO, rk: Rekey, undone: Collection[str] = ()) -> None:
    """Refused where a row of ``rk``'s tables has no old value in its kept column (the new release wrote it),
    naming the ``UPDATE`` that fills them (the table's own, then each child's from its parent's kept key); not a
    keyed child's whose table's way back ran (``undone``: its old key is its key again)."""
    q, rules = rk.q, rk.rules
    missing_rows: list[tuple[str, str, str, str, str | None]] = []
    if rk.kind == "text":  # the table's own old key too: a text key's kept column is nullable after the contract
        missing_rows.append((rk.table, rk.column, rk.kept_as, rk.key_type, None))
    missing_rows += [
        (c.reference.table, c.reference.column, c.kept_as, c.reference.column_type, q(rk.table))
        for c in rk.children
        if not (c.keyed and c.reference.table in undone)
    ]
    for table, column, kept, kept_type, parent in missing_rows:
        [(missing,)] = io.fetch(rules.unfilled(rk.read_q(table), rk.read_q(column), rk.read_q(kept)), {})
        if int(str(missing)):
            fill = rules.fill(q(table), q(column), q(kept), kept_type, parent, q(rk.column), q(rk.kept_as))
            raise MigrationRefusedError(
                f"{table}: {missing} rows have no old key in {kept} (written since the contract step); "
                f"fill them first: {fill}"
            )


def undo_expand(io: OnlineIO, rk: Rekey, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """The way back from :func:`expand` (refused once contracted: :func:`undo_contract` first): the new foreign
    keys, the triggers, the new columns (their indexes with them), the old key's extra unique index."""
    if state(io, rk) == "contracted":
        raise InvalidArgumentError(f"{rk.table}.{rk.column} is contracted: undo the contract step first")
    q, rules = rk.q, rk.rules
    parent = rk.parent()
    if rk.heirs:  # every new foreign key of the tree first: each holds an index of a column that goes below
        for each in rk.tree():
            for child in each.children:
                _run_step(
                    io, parent, Step(rules.drop_foreign_key(q(child.reference.table), q(child.foreign_key))), sleep
                )
    for heir in rk.heirs:  # then the heirs': their new key's column is the keyed child's, which goes with them
        undo_expand(io, heir, sleep=sleep)
    # the new foreign keys, then the copies (MariaDB's foreign keys need them; where a column goes, it narrows
    # an index of several columns to the rest), then the columns
    statements = [rules.drop_foreign_key(q(c.reference.table), q(c.foreign_key)) for c in rk.children]
    statements += [rules.drop_index(q(i.table), q(rk.copy_of(i)[0])) for i in rk.companions]
    statements += [rules.drop_index(q(c.reference.table), q(c.index)) for c in rk.children if _indexed(rk, c)]
    for child in rk.children:
        t = q(child.reference.table)
        statements += rules.drop_in_step(t, (q(child.triggers[0]), q(child.triggers[1])))
        statements.append(rules.drop_column(t, q(child.new_column)))
    statements += rules.drop_in_step(q(rk.table), (q(rk.triggers[0]), q(rk.triggers[1])))
    statements.append(rules.drop_column(q(rk.table), q(rk.new_column)))
    statements.append(rules.drop_index(q(rk.table), q(rk.old_unique)))
    for statement in statements:
        _run_step(io, parent, Step(statement), sleep)
    shared = [i for i in rk.companions if i.others]
    lifted = _lifted(io, rk) if shared else {}
    for index in shared:  # the copy the other change under way needs, without this one's column
        for step in _index_build(io, rk, index.table, *rk.others_copy(index), index.unique):
            _run_step(io, parent, step, sleep, lifted)
    for col in (parent, *(rk.child(c) for c in rk.children)):
        forget(io, col)


# --- one release ---------------------------------------------------------------------------------------------


def convert(
    io: OnlineIO,
    rk: Rekey,
    *,
    batch_size: int | None = None,
    say: Callable[[str], None] = _say_to_stderr,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[], None] = lambda: None,
) -> None:
    """``convert_uuid_storage`` / ``ConvertUUIDStorage`` of a big table's key of UUIDs kept as text, online: the
    expand and contract steps back to back, then the kept text columns dropped.  One release does it: the
    values stay the same UUIDs, which code still writing them as text writes into the ``uuid`` column as well
    (PostgreSQL and MariaDB read a UUID's text as one); nothing needs the text kept.  Killed anywhere, it is
    finished by running it again."""
    if rk.kind != "text":
        raise InvalidArgumentError(f"{rk.table}.{rk.column} holds {rk.kind}s: a storage conversion is for UUIDs")
    if state(io, rk) != "contracted":
        expand(io, rk, batch_size=batch_size, say=say, sleep=sleep, guard=guard, then="the contract now")
        contract(io, rk, say=say, sleep=sleep, guard=guard)
    q, rules = rk.q, rk.rules
    # the children's first: the table's own kept text is what tells a run again that this step is not done
    # (:func:`converted` once it is gone)
    kept_columns = [(c.reference.table, c.kept_as) for each in rk.tree() for c in each.children if not c.keyed]
    for table, kept in (*kept_columns, *((each.table, each.kept_as) for each in reversed(rk.tree()))):
        guard()
        _run_step(io, rk.parent(), Step(rules.drop_column(q(table), q(kept))), sleep)
    say(f"seqid: {rk.table}.{rk.column}: converted online ({len(rk.children)} foreign keys)")


def converted(io: Reads, vendor: str, table: str) -> bool:
    """Whether :func:`convert` is done for ``table``: its key is of neither kind it changes, and no old key is
    kept beside it (a run again after a kill in its last statement finds nothing to do)."""
    rules = _rules(vendor)
    key = _primary_key(io, rules, table)
    if len(key) != 1 or rules.source_kind(key[0][1]) is not None:
        return False
    return _kept_type(io, rules, table, key[0][0]) is None
