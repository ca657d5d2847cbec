"""A table's integer key changed to a seqid key, with every foreign key that points at it, while the
application keeps reading and writing: expand, then contract, across two releases (pgroll's and gh-ost's
expand and contract, over the foreign-key graph their one-column tools leave to the user).

Every foreign key to the table is read from the catalog (:func:`plan`), not from the models: other apps'
tables, many-to-many tables, a table that references itself.  Each row's new key is made from its integer
alone (:func:`seqid_orm.ids.rekeyed.integer_key`: time 0, then the integer), so the keys keep the old
``ORDER BY id`` and sort below every key made later, and a child's new column is the same function of its
old one: the database makes both without a look-up, in any order.

**Expand** (:func:`expand`: release N's code, which writes integers, goes on meanwhile):

1. the function that makes a key of an integer, on the server;
2. the parent's new column (:func:`~.online.add_column`: added without a rewrite, kept in step for the
   application's inserts and key changes by a row trigger from then on, the old rows filled in committed,
   resumable batches, ``NOT NULL`` without a long lock), then its unique index built concurrently, and a
   unique index on the old integer, which stays unique after the swap (old URLs, other systems' references);
3. each child's new column likewise, kept in step by its own trigger, filled, ``NOT NULL`` where the old
   one is, and indexed concurrently;
4. each new foreign key, ``NOT VALID``, then validated while reads and writes go on.

**Contract** (:func:`contract`: with release N+1, once no process of release N writes): one short
transaction of catalog changes (each lock waited for at most half a second, then tried again): the
triggers go, the old foreign keys are dropped, the old primary key becomes a unique constraint on the
integer (kept as ``<column>_int``), the new column becomes the primary key under the key's name, each
child's columns swap names the same way (its old integer column kept, nullable) and its new foreign key
takes the old one's name; new rows get the layout's database-made key by default.

Killed anywhere, each step is finished by running it again: every change looks first whether it is done.
The ways back: :func:`undo_expand` (the new columns, triggers, indexes and constraints dropped) and
:func:`undo_contract` (the swap reversed in one transaction).

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InvalidArgumentError, MigrationRefusedError
from ..ids.layout import Layout
from ..vendors import OnlineRules, Reference, RekeyRules, Step, Storage, Target, bounded_name, rules_for
from .online import OnlineColumn, OnlineIO, _run_step, _say_to_stderr, add_column, forget

__all__ = [
    "INTEGER_FUNCTION",
    "Child",
    "Rekey",
    "contract",
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

_INTEGER_TYPES = ("smallint", "integer", "bigint")


class Reads(Protocol):
    """What :func:`plan` needs of a connection: reads (an :class:`~.online.OnlineIO`, or the doctor's
    read-only :class:`~.doctor.Executor`)."""

    def fetch(self, sql: str, params: dict[str, object], /) -> list[tuple[Any, ...]]: ...


def _rules(vendor: str) -> RekeyRules:
    rules = rules_for(vendor).REKEY
    if rules is None:
        raise MigrationRefusedError(
            f"seqid does not change a table's integer key online on {vendor} (yet): PostgreSQL does; elsewhere "
            "change it in a maintenance window (docs/how-to/migrate.md, integer keys)"
        )
    return rules


def _new(column: str) -> str:
    return bounded_name("", column, "seqid")


@dataclass(frozen=True)
class Child:
    """A foreign key to the re-keyed table, and the names of what the change makes for it."""

    reference: Reference
    keys: tuple[str, ...]
    """The child's primary key, by which its backfill walks it."""
    key_casts: tuple[str, ...]

    @property
    def new_column(self) -> str:
        return _new(self.reference.column)

    @property
    def kept_as(self) -> str:
        """The old integer column's name after the swap."""
        return bounded_name("", self.reference.column, "int")

    @property
    def foreign_key(self) -> str:
        return bounded_name("fk_", self.reference.table, self.new_column)

    @property
    def index(self) -> str:
        return bounded_name("ix_", self.reference.table, self.new_column)

    @property
    def trigger(self) -> str:
        return bounded_name("seqid_keep_", self.reference.table, self.reference.column)


@dataclass(frozen=True)
class Rekey:
    """What :func:`plan` read of a table whose integer key changes, and the names of what it makes."""

    vendor: str
    table: str
    column: str
    key_type: str
    constraint: str
    """The primary key constraint's name (the new one takes it)."""
    children: tuple[Child, ...]
    storage: Storage
    layout: Layout
    default_sql: str
    """The layout's database-made key, the new key's default once contracted."""
    new_type: str
    """The new columns' type (``uuid``)."""

    @property
    def rules(self) -> RekeyRules:
        return _rules(self.vendor)

    @property
    def rules_online(self) -> OnlineRules:
        online = rules_for(self.vendor).ONLINE
        assert online is not None  # a vendor that re-keys changes tables online
        return online

    @property
    def new_column(self) -> str:
        return _new(self.column)

    @property
    def kept_as(self) -> str:
        return bounded_name("", self.column, "int")

    @property
    def new_unique(self) -> str:
        return bounded_name("uq_", self.table, self.new_column)

    @property
    def old_unique(self) -> str:
        return bounded_name("uq_", self.table, self.kept_as)

    @property
    def trigger(self) -> str:
        return bounded_name("seqid_keep_", self.table, self.column)

    def column_of(
        self, table: str, column: str, new: str, keys: tuple[str, ...], casts: tuple[str, ...], *, nullable: bool
    ) -> OnlineColumn:
        """The online column ``new`` of ``table``, filled with the key of ``column``'s integer."""
        q = rules_for(self.vendor).quote_identifier
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
            key_sql=self.rules.integer_key(q(INTEGER_FUNCTION), q(column)),
        )

    def parent(self) -> OnlineColumn:
        return self.column_of(
            self.table, self.column, self.new_column, (self.column,), (self.key_type,), nullable=False
        )

    def child(self, child: Child) -> OnlineColumn:
        ref = child.reference
        return self.column_of(
            ref.table, ref.column, child.new_column, child.keys, child.key_casts, nullable=ref.nullable
        )


def _primary_key(io: Reads, rules: RekeyRules, table: str) -> list[tuple[str, str]]:
    return [(str(c), str(t)) for c, t in io.fetch(*rules.primary_key(table))]


def plan(
    io: Reads,
    vendor: str,
    table: str,
    *,
    storage: Storage,
    layout: Layout,
    default_sql: str,
    new_type: str,
) -> Rekey:
    """What changing ``table``'s integer key involves, read from the catalog: its key, every foreign key that
    references it, each child's own key.  Refused (:class:`~seqid_orm.errors.MigrationRefusedError`) before any
    change where the change cannot keep every row: a key of several columns or not an integer, a composite
    foreign key, one from another schema, a child without a primary key, a negative integer key, a layout the
    server cannot make keys of."""
    rules = _rules(vendor)
    key = _primary_key(io, rules, table)
    if not key:
        raise MigrationRefusedError(f"{table} has no primary key (or is not there): nothing to change")
    column, key_type = key[0]
    contracted = key_type not in _INTEGER_TYPES and len(key) == 1
    if contracted:  # the contract step ran: the integer is kept beside the key
        kept = io.fetch(*rules.column_type(table, bounded_name("", column, "int")))
        contracted = bool(kept) and str(kept[0][0]) in _INTEGER_TYPES
        key_type = str(kept[0][0]) if contracted else key_type
    if len(key) != 1 or key_type not in _INTEGER_TYPES:
        shown = ", ".join(f"{c} {t}" for c, t in key)
        raise MigrationRefusedError(f"{table}'s primary key is ({shown}): only an integer key of one column changes")
    if rules.integer_function(INTEGER_FUNCTION, layout, storage) is None:
        raise MigrationRefusedError(
            f"the server cannot make the keys of integers in layout {layout.value} stored as {storage.value}"
        )
    children = []
    for row in io.fetch(*rules.references(table, column)):
        ref = rules.reference(row)
        if ref.columns != 1:
            raise MigrationRefusedError(
                f"{ref.table}'s foreign key {ref.constraint} to {table} has {ref.columns} columns: a composite "
                "foreign key is not changed by seqid; drop it, change the key, and make it again"
            )
        if not ref.same_schema:
            raise MigrationRefusedError(
                f"{ref.table}'s foreign key {ref.constraint} to {table} is from another schema: not changed by "
                "seqid yet; change that table's column with its own migration"
            )
        child_key = _primary_key(io, rules, ref.table)
        if not child_key:
            raise MigrationRefusedError(
                f"{ref.table} (foreign key {ref.constraint} to {table}) has no primary key to walk its rows by"
            )
        children.append(Child(ref, tuple(c for c, _ in child_key), tuple(t for _, t in child_key)))
    q = rules_for(vendor).quote_identifier
    [(low, _high)] = io.fetch(
        rules.integer_range(q(table), q(bounded_name("", column, "int") if contracted else column)), {}
    )
    if low is not None and int(str(low)) < 0:
        raise MigrationRefusedError(f"{table}.{column} holds negative keys ({low}): they have no seqid key")
    [(constraint,)] = io.fetch(*rules.key_constraint(table))
    return Rekey(
        vendor, table, column, key_type, str(constraint), tuple(children), storage, layout, default_sql, new_type
    )


def plan_for(io: Reads, where: Target, table: str, new_type: str) -> Rekey:
    """:func:`plan` for the keys of ``where`` (a column type's target on the connection: its layout, storage and
    database-made key), whose DDL type is ``new_type``: what both ORMs' operations call."""
    return plan(
        io,
        where.vendor,
        table,
        storage=where.storage,
        layout=where.layout,
        default_sql=where.server_default.sql,
        new_type=new_type,
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
    tables = [rk.table, *(c.reference.table for c in rk.children if c.reference.table != rk.table)]
    tables = list(dict.fromkeys(tables))
    total = sum(rows.get(t) or 0 for t in tables)
    unknown = [t for t in tables if rows.get(t) is None]
    seconds = total / ROWS_PER_SECOND
    took = "under a minute" if seconds < 60 else f"about {round(seconds / 60)} min"
    refs = ", ".join(
        f"{c.reference.table}.{c.reference.column} (ON DELETE {c.reference.on_delete})" for c in rk.children
    )
    said = (
        f"change it to seqid keys online in two releases (docs/how-to/migrate.md, integer keys): "
        f"rekey_expand / RekeyExpand, then rekey_contract / RekeyContract (autogenerate and makemigrations write "
        f"them). It touches {len(tables)} table(s) and {len(rk.children)} foreign key(s)"
        f"{': ' + refs if refs else ''}; about {total:,} rows"
        f"{' (no estimate for ' + ', '.join(unknown) + ')' if unknown else ''}, written once by the expand step "
        f"in {took} at {ROWS_PER_SECOND:,} rows/s. Expand locks: catalog changes (each waits at most "
        "0.5 s, then tries again), each batch's rows, nothing while its indexes build (CONCURRENTLY) and its foreign "
        "keys are validated; contract: one transaction of catalog changes on those tables (milliseconds); the "
        f"integer stays as {rk.kept_as}."
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


def _constraint(io: Reads, rules: RekeyRules, table: str, name: str) -> bool | None:
    found = io.fetch(*rules.constraint_state(table, name))
    return None if not found else bool(found[0][0])


def state(io: OnlineIO, rk: Rekey) -> str:
    """``"contracted"`` (the key is the seqid column), ``"expanded"`` (every new column, index and foreign
    key there and valid), ``"expanding"`` (begun) or ``"planned"``."""
    rules = rk.rules
    key = _primary_key(io, rules, rk.table)
    if key and key[0][0] == rk.column and key[0][1] not in _INTEGER_TYPES:
        return "contracted"
    parent = rk.parent()
    facts: list[str | bool | None] = [
        _index(io, rules, rk.table, rk.new_unique),
        _index(io, rules, rk.table, rk.old_unique),
    ]
    facts += [_constraint(io, rules, c.reference.table, c.foreign_key) for c in rk.children]
    if all(f in ("valid", True) for f in facts):
        return "expanded"
    column = io.fetch(*parent.rules.fact_reads(rk.table, rk.new_column, "")["column"])
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
) -> None:
    """The expand step (see the module docstring); run again after a kill, it goes on where it stopped, and
    finds nothing to do once done."""
    rules = rk.rules
    q = rules_for(rk.vendor).quote_identifier
    parent = rk.parent()
    function = rules.integer_function(q(INTEGER_FUNCTION), rk.layout, rk.storage)
    assert function is not None  # plan() refused a layout without one

    def run(step: Step) -> None:
        guard()
        _run_step(io, parent, step, sleep)

    run(Step(function))

    def keep(table: str, source: str, target: str, trigger: str) -> Callable[[], None]:
        def make() -> None:
            if io.fetch(*rules.trigger_present(table, trigger)):
                return
            for statement in rules.keep_in_step(
                q(table), q(source), q(target), q(INTEGER_FUNCTION), q(trigger), q(trigger)
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
        before_fill=keep(rk.table, rk.column, rk.new_column, rk.trigger),
    )
    for table, column, index in ((rk.table, rk.new_column, rk.new_unique), (rk.table, rk.column, rk.old_unique)):
        for step in rules.index_steps(q(table), q(column), q(index), _index(io, rules, table, index), True):
            run(step)
    for child in rk.children:
        ref = child.reference
        col = rk.child(child)
        add_column(
            io,
            col,
            batch_size=batch_size,
            say=say,
            sleep=sleep,
            guard=guard,
            before_fill=keep(ref.table, ref.column, child.new_column, child.trigger),
        )
        state_ = _index(io, rules, ref.table, child.index)
        for step in rules.index_steps(q(ref.table), q(child.new_column), q(child.index), state_, False):
            run(step)
    for child in rk.children:
        ref = child.reference
        present = _constraint(io, rules, ref.table, child.foreign_key)
        for step in rules.foreign_key_steps(
            ref, q(child.new_column), q(rk.table), q(rk.new_column), q(child.foreign_key), present
        ):
            run(step)
    say(f"seqid: {rk.table}.{rk.column}: expanded ({len(rk.children)} foreign keys); contract with the next release")


# --- contract --------------------------------------------------------------------------------------------


def _swap_statements(rk: Rekey) -> list[str]:
    """The contract's catalog changes, in an order each one's dependencies allow: each child's first (its old
    foreign key holds the old key's index), then the table's own."""
    q = rules_for(rk.vendor).quote_identifier
    rules = rk.rules
    out: list[str] = []
    for child in rk.children:
        ref = child.reference
        t = q(ref.table)
        out += rules.drop_in_step(t, q(child.trigger), q(child.trigger))
        out += rules.swap_child(
            t, q(ref.constraint), q(ref.column), q(child.kept_as), q(child.new_column), q(child.foreign_key)
        )
    parent = q(rk.table)
    out += rules.drop_in_step(parent, q(rk.trigger), q(rk.trigger))
    # the old key keeps its unique index (built in the expand step) and its default: old URLs still find rows
    out += rules.swap_parent(
        parent, q(rk.constraint), q(rk.column), q(rk.kept_as), q(rk.new_column), q(rk.new_unique), rk.default_sql
    )
    return out


def contract(
    io: OnlineIO,
    rk: Rekey,
    *,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[], None] = lambda: None,
) -> None:
    """The contract step (see the module docstring): one short transaction; nothing to do where it is done.
    Refused while the expand step is not finished."""
    now = state(io, rk)
    if now == "contracted":
        return
    if now != "expanded":
        raise MigrationRefusedError(
            f"{rk.table}.{rk.column}: the expand step is not finished ({now}): run it (again) first"
        )
    guard()
    _run_step(io, rk.parent(), rk.rules.swap(rk.table, _swap_statements(rk)), sleep)
    for child in (rk.parent(), *(rk.child(c) for c in rk.children)):
        forget(io, child)


def undo_contract(io: OnlineIO, rk: Rekey, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """The way back from :func:`contract`, before the new release writes rows of its own: the integer key and
    the integer foreign keys again (``NOT VALID``, then validated while writes go on), the seqid columns
    kept in step by their triggers again; the primary key takes the old key's unique index, and the seqid
    column's unique index is built again by :func:`expand`.  Refused where a child row has no integer (the
    new release wrote it): fill those first, as the message says."""
    if state(io, rk) != "contracted":
        return
    q = rules_for(rk.vendor).quote_identifier
    rules = rk.rules
    parent, pk = q(rk.table), q(rk.constraint)
    for child in rk.children:
        ref = child.reference
        [(missing,)] = io.fetch(rules.unfilled(q(ref.table), q(ref.column), q(child.kept_as)), {})
        if int(str(missing)):
            raise MigrationRefusedError(
                f"{ref.table}: {missing} rows have no integer in {child.kept_as} (written since the contract step); "
                f"fill them first: UPDATE {ref.table} c SET {child.kept_as} = p.{rk.kept_as} FROM {rk.table} p "
                f"WHERE p.{rk.column} = c.{ref.column} AND c.{child.kept_as} IS NULL"
            )
    out = []
    for child in rk.children:
        ref = child.reference
        out += rules.unswap_child(q(ref.table), q(ref.constraint), q(ref.column), q(child.kept_as), q(child.new_column))
    out += rules.unswap_parent(parent, pk, q(rk.column), q(rk.kept_as), q(rk.new_column), q(rk.old_unique))
    out += rules.keep_in_step(parent, q(rk.column), q(rk.new_column), q(INTEGER_FUNCTION), q(rk.trigger), q(rk.trigger))
    for child in rk.children:
        ref = child.reference
        t = q(ref.table)
        out.append(rules.add_foreign_key(ref, q(ref.column), parent, q(rk.column), q(ref.constraint)))
        out += rules.keep_in_step(
            t, q(ref.column), q(child.new_column), q(INTEGER_FUNCTION), q(child.trigger), q(child.trigger)
        )
    _run_step(io, rk.parent(), rules.swap(rk.table, out), sleep)
    for child in rk.children:
        ref = child.reference
        for step in rules.foreign_key_steps(ref, q(ref.column), parent, q(rk.column), q(ref.constraint), False):
            _run_step(io, rk.parent(), step, sleep)
        if not ref.nullable:  # SET NOT NULL after a valid check: no scan under its lock (12+)
            check = bounded_name("ck_", ref.table, f"{ref.column}_not_null")
            for step in rk.rules_online.not_null_steps(q(ref.table), q(ref.column), rk.key_type, q(check), None):
                _run_step(io, rk.parent(), step, sleep)


def undo_expand(io: OnlineIO, rk: Rekey, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """The way back from :func:`expand` (refused once contracted: :func:`undo_contract` first): the new foreign
    keys, the triggers, the new columns (their indexes with them), the old key's extra unique index."""
    if state(io, rk) == "contracted":
        raise InvalidArgumentError(f"{rk.table}.{rk.column} is contracted: undo the contract step first")
    q = rules_for(rk.vendor).quote_identifier
    rules = rk.rules
    parent = rk.parent()
    statements: list[str] = []
    for child in rk.children:
        t = q(child.reference.table)
        statements.append(rules.drop_foreign_key(t, q(child.foreign_key)))
        statements += rules.drop_in_step(t, q(child.trigger), q(child.trigger))
        statements.append(rules.drop_column(t, q(child.new_column)))
    statements += rules.drop_in_step(q(rk.table), q(rk.trigger), q(rk.trigger))
    statements.append(rules.drop_column(q(rk.table), q(rk.new_column)))
    statements.append(rules.drop_index(q(rk.table), q(rk.old_unique)))
    for statement in statements:
        _run_step(io, parent, Step(statement), sleep)
    for col in (parent, *(rk.child(c) for c in rk.children)):
        forget(io, col)
