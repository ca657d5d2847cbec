"""What every vendor module says, and the pieces they share.

A vendor module (``postgresql.py``, ``mariadb.py``, ...) answers the same questions under the same
names, as GeoAlchemy2's ``dialects/`` modules do: :class:`VendorRules` lists them, and mypy checks
each module against it.  The modules state facts; :class:`~seqid_orm.vendors.Target` combines them
into the decisions for one connection and column.  Standard library and :mod:`seqid_orm.ids` only.
"""

from __future__ import annotations

import enum
import hashlib
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InvalidArgumentError, ServerDefaultUnavailableError, UnknownServerVersionError
from ..ids.layout import Layout, coerce_enum

Version = tuple[int, ...] | None
Quote = Callable[[str], str]


class Storage(str, enum.Enum):
    """How a column holds a UUID."""

    NATIVE = "native"
    """The engine's UUID type: PostgreSQL/CockroachDB ``UUID``, SQL Server ``UNIQUEIDENTIFIER``,
    MariaDB 10.7+ ``UUID``."""
    BINARY = "binary"
    """16 raw bytes in ``uuid.UUID.bytes`` order (``BINARY(16)``, ``BYTEA``, ``RAW(16)``, BLOB)."""
    TEXT = "text"
    """Canonical lower-case text with hyphens, ``CHAR(36)``."""
    HEX = "hex"
    """32 lower-case hex digits, ``CHAR(32)`` (Django's ``UUIDField`` off PostgreSQL/MariaDB)."""


def as_storage(value: object) -> Storage:
    """``value`` as a :class:`Storage` (a member or its string value)."""
    return coerce_enum(Storage, value, "storage")


@dataclass(frozen=True)
class TextColumnSpec:
    """How a text-id column is declared on one vendor (both adapters build their DDL from it)."""

    charset: str | None
    """A character set to declare (MySQL/MariaDB: ``ascii``, one byte per character)."""
    collation: str | None
    """A binary collation, so ids differing in case never compare equal (``None``: bytewise already)."""


@dataclass(frozen=True)
class ServerDefault:
    """The SQL expression a column default runs, and what it makes.

    ``sql`` is a bare expression; put it in parentheses where a DDL ``DEFAULT`` needs them
    (MariaDB, MySQL, SQLite).  ``uuid_version`` is the RFC 9562 version of the values
    (7, or 1 for MariaDB's ``UUID()``; SQL Server's ``NEWSEQUENTIALID()`` values are
    shuffled version-1 values).
    """

    sql: str
    uuid_version: int
    generator: str
    signature: str = ""
    """A piece of ``sql`` that survives the server's rewriting of a stored default and the
    truncation of nested parentheses in reflection (MariaDB turns ``lower(`` into ``lcase(``):
    what :func:`seqid_orm.sqlalchemy.alembic.compare_server_default` looks for.  A shifted default's
    (:meth:`~seqid_orm.vendors.Target.shifted_default`) is the mark of its shift, which no default
    without one shows."""
    setup: tuple[str, ...] = ()
    """Statements to run before the default is set (``CREATE OR REPLACE FUNCTION`` of the function
    an adopted key's default calls on PostgreSQL); empty for a self-contained expression."""


@dataclass(frozen=True)
class ColumnRef:
    """A column to convert: the key itself, or a column of another table that references it."""

    table: str
    column: str
    nullable: bool


@dataclass(frozen=True)
class Bounded:
    """One DDL statement as a vendor runs it on a live table: with a short wait for its lock and no
    statement time-out, and without changing the session it runs on (a transaction pooler hands that
    session to other clients next).  ``statements`` run in order, in one transaction where
    ``in_transaction`` (PostgreSQL's ``SET LOCAL``, which ends with it); ``after`` runs whatever
    happened (a session setting put back where the engine has no per-statement form)."""

    statements: tuple[str, ...]
    in_transaction: bool = False
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One schema change of an online operation: ``statement`` run :class:`Bounded`, or, where
    ``concurrent``, alone outside any transaction with no time-out (PostgreSQL's concurrent index
    builds, which stop no reader or writer and wait for older transactions as long as they run)."""

    statement: str
    concurrent: bool = False
    more: tuple[str, ...] = ()
    """Statements run after ``statement`` on the same session, under the locks it took (MariaDB's ``LOCK
    TABLES``, then the changes it covers), not bounded again: they wait for nothing it does not hold."""
    after: tuple[str, ...] = ()
    """Statements run at the end whatever happened (``UNLOCK TABLES``)."""
    undo: str | None = None
    """What clears a concurrent step that failed half-way before it is tried again (the invalid index a
    cancelled ``CREATE INDEX CONCURRENTLY`` leaves), where it may be."""


@dataclass(frozen=True)
class TableFacts:
    """What an online operation reads of a live table before it changes anything."""

    column_present: bool = False
    not_null: bool = False
    index: str | None = None
    """``"valid"``, ``"invalid"`` (a concurrent build that did not finish) or ``None``."""
    constraint: bool = False
    """Whether the unique constraint over the index is there (PostgreSQL; elsewhere the index is it)."""
    partition_key: tuple[str, ...] | None = None
    """The columns a partitioned table is partitioned by; ``None`` for a plain table."""


class OnlineRules(Protocol):
    """How one vendor changes a live table while it is used (:mod:`seqid_orm.schema.online` asks,
    and writes no SQL of its own): the statements of each step, how one is bounded, the catalog reads
    that let a run killed anywhere go on, the casts a batch's keys need.  Statements take ``:name``
    parameters; names come quoted by :meth:`quote`, except where a catalog read takes them as values."""

    @property
    def LONG_STATEMENT_SETTINGS(self) -> tuple[str, ...]:
        """The session settings that would cut a ``concurrent`` step short (PostgreSQL's
        ``statement_timeout`` and ``lock_timeout``): read before the first change, and lifted for the
        step only on a session that is the operation's own."""

    @property
    def TRIGGERS_CAN_WAIT(self) -> bool:
        """Whether a backfill may keep the table's row triggers from firing (PostgreSQL's
        ``session_replication_role``, per transaction)."""

    def quote(self, name: str, /) -> str: ...

    def bounded(self, statement: str, lock_ms: int, /) -> Bounded:
        """``statement`` waiting at most ``lock_ms`` for its lock, with no statement time-out."""

    def fact_reads(self, table: str, column: str, index: str, /) -> dict[str, tuple[str, dict[str, object]]]:
        """The catalog reads of :class:`TableFacts`, each a statement and its parameters: ``column`` (a
        row ``(not_null,)`` where the column exists), ``index`` (``(valid,)``), ``constraint`` (a row
        where it exists), ``partition_key`` (a row per column of the key; none for a plain table)."""

    def estimate(self, table: str, /) -> tuple[str, dict[str, object]]:
        """The planner's row count of ``table`` (one row, one value; nothing or a negative value where it
        has none yet): a bound read in the catalog, never a scan."""

    def reads_every_row(self, table: str, /) -> tuple[str, dict[str, object]] | None:
        """A statement whose one value says whether this role reads every row of ``table`` (SELECT, and
        no row-level security hiding some), or ``None`` where the engine has no way to ask first."""

    def client_view(self) -> str:
        """A statement whose one row says how the server sees this session's client (its address and
        port, or the Unix socket it listens on), for :meth:`is_client`."""

    def is_client(self, ends: tuple[object, object], row: Sequence[object], /) -> bool:
        """Whether the socket whose ``(local, peer)`` ends are ``ends`` is the very client the server
        sees in ``row`` (:meth:`client_view`): no pooler or proxy between, so the session is this
        connection's own."""

    def may_alter(self, table: str, /) -> tuple[str, dict[str, object]] | None:
        """A statement whose one value says whether this role may alter ``table``, or ``None`` where the
        engine has no way to ask first (the first ``ALTER`` then says so, and nothing is left behind)."""

    def setting(self, name: str, /) -> str:
        """The statement reading the session setting ``name`` (one row, one text value)."""

    def set_session(self, name: str, value: str, /) -> str:
        """The statement setting ``name`` for the session (only ever on a session of the operation's own)."""

    def triggers_privilege(self) -> str:
        """A statement whose one value says whether this role may hold the triggers back."""

    def hold_triggers(self) -> str:
        """The statement, first in a batch's transaction, that keeps its row triggers from firing."""

    def add_column(self, table: str, column: str, column_type: str, /) -> str: ...

    def set_default(self, table: str, column: str, default_sql: str, /) -> str: ...

    def unique_steps(self, table: str, column: str, index: str, facts: TableFacts, /) -> list[Step]:
        """What is left to make ``column`` unique under ``index`` (an invalid build dropped first)."""

    def not_null_steps(
        self, table: str, column: str, column_type: str, check: str, default_sql: str | None, /
    ) -> list[Step]:
        """``column`` made ``NOT NULL`` without a long lock, keeping ``default_sql`` where given."""

    def drop_default(self, table: str, column: str, /) -> str: ...

    def drop_steps(self, table: str, column: str, index: str, facts: TableFacts, /) -> list[Step]:
        """Undo an online column: its unique index or constraint, then the column."""

    def text_type(self) -> str:
        """The type of the progress table's text column."""

    def key_cast(self, declared: str, /) -> str:
        """The type a batch's key of ``declared`` type is read back as (a cast's, with no collation)."""

    def param(self, storage: Storage, value: uuid.UUID, /) -> object:
        """``value`` as a parameter of a column of ``storage``."""

    def batch_update(
        self,
        table: str,
        column: str,
        keys: Sequence[str],
        key_casts: Sequence[str],
        column_type: str,
        rows: Sequence[Sequence[object]],
        values: Sequence[object],
        /,
    ) -> tuple[str, dict[str, object]]:
        """One statement writing ``values[r]`` into the row whose key is ``rows[r]``, each only where
        ``column`` is still ``NULL`` (``key_casts`` empty: the keys' types are not known)."""

    def key_compare(
        self, keys: Sequence[str], key_casts: Sequence[str], key: Sequence[object], op: str, name: str, /
    ) -> tuple[str, dict[str, object]]:
        """The condition ``(keys) op (key)`` of a keyset walk (``op``: ``>`` past a key, ``<=`` up to one),
        and its parameters, named ``name`` and the key column's position."""

    def key_at(self, storage: Storage, layout: Layout, stamp: str, /) -> str | None:
        """SQL of the key of the instant ``stamp`` (a timestamp column, a naive one read as UTC), in
        ``storage`` and ``layout``, made by the server from the row it writes, or ``None`` where the
        server cannot make it there (then Python makes the keys and each batch sends them)."""


@dataclass(frozen=True)
class Reference:
    """A foreign key to a table that is re-keyed, as the vendor's catalog describes it."""

    constraint: str
    table: str
    """The referencing table; an :class:`InSchema` where it is not in the current schema (the search path's
    first; MariaDB's current database), which every statement and read names with its schema."""
    column: str
    nullable: bool
    on_delete: str
    """``NO ACTION``, ``RESTRICT``, ``CASCADE``, ``SET NULL``, ``SET DEFAULT``."""
    on_update: str
    deferrable: str
    """What follows the constraint's actions: ``""``, ``DEFERRABLE INITIALLY IMMEDIATE``..."""
    column_type: str = ""
    """The referencing column's type as the catalog writes it."""
    pairs: tuple[tuple[str, str], ...] = ()
    """Every column of a composite foreign key, in its order: ``(referencing column, referenced column)``, one
    of them ``column`` with the re-keyed key (``()`` for a key of one column)."""
    match: str = ""
    """``MATCH FULL`` where a composite key is so declared (PostgreSQL), else ``""`` (``MATCH SIMPLE``)."""
    referenced_schema: str = ""
    """The re-keyed table's database where the referencing table is in another (MariaDB): there an unqualified
    ``REFERENCES`` names a table of the referencing table's database, so a foreign key made again names it."""

    def renamed(
        self, column: str, parent_column: str, quote: Callable[[str], str] = str
    ) -> tuple[tuple[str, str], ...]:
        """Every ``(column, referenced column)`` pair of the key, in its order, the re-keyed pair named ``column``
        and ``parent_column`` (the old names, or the new columns'; quoted already where the others are to be),
        the others as they are, passed through ``quote``."""
        if not self.pairs:
            return ((column, parent_column),)
        return tuple((column, parent_column) if c == self.column else (quote(c), quote(p)) for c, p in self.pairs)

    def listed(self, column: str, parent_column: str, quote: Callable[[str], str]) -> tuple[str, str]:
        """The key's columns and the columns they reference as a statement lists them (:meth:`renamed`)."""
        pairs = self.renamed(column, parent_column, quote)
        return ", ".join(c for c, _ in pairs), ", ".join(p for _, p in pairs)

    def others(self) -> tuple[tuple[str, str], ...]:
        """The pairs of a composite key but the re-keyed one: columns whose values stay as they are."""
        return tuple((c, p) for c, p in self.pairs if c != self.column)


@dataclass(frozen=True)
class Swapped:
    """One table of a re-keying's contract, its names quoted: the old key or foreign key ``column`` (constraint
    ``constraint``, type ``column_type``), the new ``new`` column beside it and its foreign key or unique index
    ``new_constraint``, the name ``kept`` the old column keeps, the triggers that keep ``new`` in step
    (``triggers``), and ``references``: the foreign key's :class:`Reference`, ``None`` for the re-keyed
    table itself."""

    table: str
    constraint: str
    column: str
    column_type: str
    new: str
    new_constraint: str
    kept: str
    triggers: tuple[str, str]
    nullable: bool
    references: Reference | None = None
    keyed: bool = False
    """Whether the child's foreign key is its primary key (Django's multi-table inheritance): its columns are
    swapped by its own table's :attr:`Swap.heirs` entry, and here only its foreign key and its kept column's
    ``NOT NULL`` (the new release writes no integer into it)."""
    check: str = ""
    """A keyed child's: the name of a ``CHECK (kept IS NOT NULL)`` by which the way back makes its key ``NOT
    NULL`` again without reading its rows under the swap's lock (where the vendor needs one)."""


@dataclass(frozen=True)
class Companion:
    """An index of a re-keyed table or of a child, other than its primary key, over a column whose keys change
    (a many-to-many table's unique pair, a one-to-one key's ``UNIQUE``, a foreign key's own index), as the
    vendor's catalog describes it: the change makes its copy over the new columns and swaps the two, so the
    rows the new release writes are held to it as the old ones were."""

    table: str
    name: str
    columns: tuple[str, ...]
    """In the index's order, as they are named now."""
    unique: bool
    constraint: bool
    """Whether a ``UNIQUE`` constraint owns the index (PostgreSQL; MariaDB's unique keys are indexes)."""
    plain: bool
    """Whether the copy can be made of its columns alone: a B-tree over whole columns, ascending, without an
    expression, a predicate, an included column, or another rule of uniqueness (deferred, ``NULLS NOT
    DISTINCT``)."""
    referenced: tuple[tuple[str, str], ...] = ()
    """The foreign keys ``(table, constraint)`` that reference its columns (Django's ``to_field``, a composite
    key's): the index cannot be dropped while such a key is there, so the contract swaps it only where each
    is a key the change moves to the copy (one that references the re-keyed key beside other columns)."""
    others: tuple[str, ...] = ()
    """Its columns whose keys another change under way is changing (a many-to-many table between two re-keyed
    tables): one copy holds both changes' new columns, and either contract swaps it (set by the planner, not
    read by the vendor)."""


@dataclass(frozen=True)
class SwappedIndex:
    """A :class:`Companion` in a re-keying's contract, its names quoted: ``name`` the old index's (the copy takes
    it), ``copy`` the copy's over the new columns, ``back`` the name of the index over the kept columns that
    the way back builds and gives the old name again."""

    table: str
    name: str
    copy: str
    back: str
    constraint: bool
    shared: bool = False
    """Whether another change under way holds the copy's name (:attr:`Companion.others`): the way back drops
    the index instead of giving it that name back; the other's copy is the one both changes need."""


@dataclass(frozen=True)
class Swap:
    """A re-keying's contract, as the vendor's statements take it: the ``parent`` (the re-keyed table: its
    old unique index ``old_unique`` on the kept key, the new key's database default ``default``, or ``None``)
    and each child's foreign key, the ``key`` expression of the old value made the new one (``{}`` stands for
    the column, as :meth:`RekeyRules.key_of` writes it), the ``indexes`` over changed columns, each swapped for
    its copy, and the ``heirs``: the same of each child keyed by its foreign key."""

    parent: Swapped
    children: tuple[Swapped, ...]
    old_unique: str
    default: str | None
    key: str
    indexes: tuple[SwappedIndex, ...] = ()
    heirs: tuple[Swap, ...] = ()
    """The contracts of the children whose primary key is their foreign key to this table (:attr:`Swapped.keyed`):
    each such table's key changes with this one's (its new key is the same function of the same integer), its
    own children following it; done before this table's (in its transaction where the vendor has one)."""
    late: bool = False
    """Whether the old key is made by the server after the rows' triggers (:meth:`RekeyRules.late_keys`: MariaDB's
    ``AUTO_INCREMENT``): kept as it is after the contract (old URLs), the new column nullable again after the
    way back.  Else the kept column is freed (``NULL``) and the old key made ``NOT NULL`` again by the way back."""

    def key_of(self, column: str) -> str:
        """SQL of the new key of ``column``'s value: :attr:`key` with the column in each of its ``{}``."""
        return self.key.replace("{}", column)


class RekeyRules(Protocol):
    """How one vendor changes a table's key (integers, or UUIDs kept as text) to a seqid key, with every
    foreign key to it (:mod:`seqid_orm.schema.rekey` asks, and writes no SQL of its own).  Statements take
    ``:name`` parameters; tables and columns are quoted by the caller unless a method says otherwise."""

    def primary_key(self, table: str, /) -> tuple[str, dict[str, object]]:
        """Rows ``(column, type)`` of ``table``'s primary key (``table`` unquoted), in key order."""

    def column_type(self, table: str, column: str, /) -> tuple[str, dict[str, object]]:
        """One row ``(type,)`` where ``column`` of ``table`` is there (both unquoted), as the catalog writes it."""

    def key_constraint(self, table: str, /) -> tuple[str, dict[str, object]]:
        """One row ``(name,)``: the name of ``table``'s primary key constraint (``table`` unquoted)."""

    def references(self, table: str, column: str, /) -> tuple[str, dict[str, object]]:
        """Rows of every foreign key that references ``column`` of ``table`` (unquoted; not the foreign keys the
        change itself adds, to its new column), read as :meth:`reference`."""

    def reference(self, row: Sequence[object], /) -> Reference:
        """One row of :meth:`references`."""

    def source_kind(self, sql_type: str, /) -> str | None:
        """What a key of ``sql_type`` (as :meth:`primary_key` reads it) holds: ``"integer"``, ``"text"`` (UUIDs
        kept as text), or ``None`` for another type, which is not changed."""

    def key_of(self, kind: str, function: str, column: str, /) -> str | None:
        """SQL of the new key of ``column``'s value (``NULL`` for ``NULL``) for a key of ``kind`` (``function``:
        :meth:`integer_function`'s, for integers); ``None`` where the server cannot make it, with
        :meth:`not_changed` saying why."""

    def not_changed(self, kind: str, /) -> str:
        """Why a key of ``kind`` is not changed online here (where :meth:`key_of` says ``None``)."""

    def integer_range(self, table: str, column: str, /) -> str:
        """``SELECT min(column), max(column)`` of the key."""

    def invalid_texts(self, table: str, column: str, /) -> str:
        """``SELECT count(*)`` of the rows whose ``column`` is not ``NULL`` and not a UUID's text (36 or 32
        hexadecimal characters): a key the change could not carry."""

    def integer_function(self, name: str, layout: Layout, storage: Storage, /) -> str | None:
        """The statement creating (or replacing) the function ``name(n)``: :func:`seqid_orm.ids.rekeyed.integer_key`
        made by the server; ``""`` where :meth:`key_of` writes it inline (nothing to create); ``None`` where the
        server cannot make that layout in that storage."""

    def late_keys(self, kind: str, /) -> bool:
        """Whether a row's new key cannot be made as the application inserts it (MariaDB's ``AUTO_INCREMENT``
        value comes after its ``BEFORE INSERT`` trigger): the table's new column then stays nullable through
        the expand step, its rows filled and the new foreign keys added by the contract step, once no code of
        the old release inserts."""

    def function_present(self, name: str, /) -> tuple[str, dict[str, object]]:
        """A read that returns a row where :meth:`integer_function`'s function ``name`` (unquoted) is there in the
        search path: another role may have made it, and only its owner may replace it."""

    def keep_in_step(
        self, table: str, source: str, target: str, expression: str, names: tuple[str, str], /
    ) -> list[str]:
        """The statements (each alone; run again, they replace what they made) that make the database set
        ``target`` to ``expression`` (SQL over the row's ``NEW`` values, made of ``source``'s) on every row the
        application inserts, or updates ``source`` of, from now on (where the vendor can tell: the backfill's
        own updates of ``target`` alone then pay for no trigger); ``names`` name what they make (quoted: a
        function and its trigger, or the insert and the update trigger)."""

    def drop_in_step(self, table: str, names: tuple[str, str], /) -> list[str]:
        """Undo :meth:`keep_in_step`."""

    def index_steps(self, table: str, column: str, index: str, state: str | None, unique: bool, /) -> list[Step]:
        """An index on ``column`` (``unique``: a unique one, no constraint over it) built without stopping
        writes (``state``: ``"valid"``, ``"invalid"`` after a killed build, ``None``)."""

    def index_state(self, table: str, index: str, /) -> tuple[str, dict[str, object]]:
        """A read of whether ``index`` (unquoted) on ``table`` (unquoted) is valid: one row ``(valid,)`` or none."""

    def companions(self, table: str, columns: Sequence[str], /) -> tuple[str, dict[str, object]]:
        """Rows of ``table``'s indexes but its primary key that hold any of ``columns`` (all unquoted), read as
        :meth:`companion`."""

    def companion(self, table: str, row: Sequence[object], /) -> Companion:
        """One row of :meth:`companions`."""

    def constraint_state(self, table: str, name: str, /) -> tuple[str, dict[str, object]]:
        """A read of whether the constraint ``name`` (unquoted) on ``table`` (unquoted) is there and validated:
        one row ``(validated,)`` or none."""

    def foreign_key_steps(
        self, reference: Reference, column: str, parent: str, parent_column: str, name: str, state: bool | None, /
    ) -> list[Step]:
        """The foreign key ``name`` from ``column`` to ``parent(parent_column)`` with ``reference``'s actions,
        added without a long lock, its rows checked without stopping writes; ``state``: ``None`` where it is
        not there, else whether it is validated."""

    def orphans(self, table: str, pairs: Sequence[tuple[str, str]], parent: str, /) -> str | None:
        """``SELECT count(*)`` of the rows of ``table`` whose columns ``pairs`` name (``(column, parent's
        column)``, quoted: a composite key's all) have no value ``NULL`` and no ``parent`` row of the same,
        where :meth:`foreign_key_steps` adds a foreign key the server did not check (``None`` where it did)."""

    def stale(self, column: str, expression: str, /) -> str | None:
        """SQL of whether a row's ``column`` is not ``expression`` (its key made of the old value), where the
        server can leave it so: its foreign key cascades fire no trigger (InnoDB's: "FOREIGN KEY Constraints"
        in MariaDB's docs), so a parent's delete that sets a child's old column ``NULL`` leaves the new one
        as it was until the new foreign key exists.  ``None`` where triggers see every write (PostgreSQL)."""

    def contract_steps(self, swap: Swap, /) -> list[Step]:
        """The contract: the new columns become the key and the foreign keys' columns, the old ones kept
        (nullable) under their kept names, the triggers gone; each step short, or online; the
        :attr:`Swap.heirs` with it."""

    def undo_contract_steps(self, swap: Swap, /) -> list[Step]:
        """:meth:`contract_steps` reversed: the old key and foreign keys again (checked without stopping
        writes), the new columns kept in step by their triggers again."""

    def unfilled(self, table: str, column: str, kept: str, /) -> str:
        """``SELECT`` of how many rows have a ``column`` but no value in ``kept`` (written since the contract)."""

    def fill(
        self,
        table: str,
        column: str,
        kept: str,
        kept_type: str,
        parent: str | None,
        parent_column: str,
        parent_kept: str,
        /,
    ) -> str:
        """The ``UPDATE`` that gives the rows written since the contract their old key in ``kept`` (of
        ``kept_type``): the re-keyed table's from its new key (``parent`` ``None``), a child's from its parent's
        kept key (``parent``'s ``parent_kept``, joined on ``parent_column``)."""

    def drop_foreign_key(self, table: str, name: str, /) -> str:
        """The foreign key ``name`` of ``table`` dropped, where it is there."""

    def drop_column(self, table: str, column: str, /) -> str:
        """``column`` of ``table`` dropped (its indexes with it), where it is there."""

    def drop_index(self, table: str, index: str, /) -> str:
        """``index`` of ``table`` dropped with the constraint that owns it, where it is there."""

    def untracked(self) -> tuple[str, dict[str, object]]:
        """Rows ``(table, column, type)`` of the columns that may hold a table's keys without a foreign key to
        it (generic relations: an object id beside a content type), which no change of a key follows."""


@dataclass(frozen=True)
class KeyColumn:
    """One key column as a vendor's catalog describes it (what ``seqid doctor`` samples and judges)."""

    table: str
    column: str
    sql_type: str
    primary: bool
    rows: int | None = None
    index_bytes: int | None = None
    key_width: int | None = None  # bytes of one key in the index, where fixed (uuid 16, bigint 8)
    schema: str | None = None  # PostgreSQL's, SQLite's attached database: the table's schema
    in_current_schema: bool = True
    references: str | None = None  # the table whose key this column copies (a foreign key of its own)
    ideal_bytes: int | None = None  # the index built in key order, where the catalog's reader knows it
    record: int | None = None  # the width an adoption recorded in the column's comment (PostgreSQL)

    @property
    def name(self) -> str:
        """The table as the report names it: ``schema.table`` outside the current schema."""
        return self.table if self.in_current_schema or self.schema is None else f"{self.schema}.{self.table}"


Fetch = Callable[[str, dict[str, object]], list[tuple[Any, ...]]]
"""One read-only statement (``:name`` parameters; ``\\:`` is a colon) and its rows."""

#: Bytes of one key in an index, by its column type where that fixes it: PostgreSQL's names and
#: MariaDB's/MySQL's COLUMN_TYPE (read with its display width and ``unsigned`` left out).
_WIDTH = {"uuid": 16, "binary(16)": 16, "bigint": 8, "integer": 4, "int": 4, "mediumint": 3, "smallint": 2}


def key_width(sql_type: str) -> int | None:
    """Bytes of one key of ``sql_type`` in an index, where the type fixes it."""
    low = sql_type.lower()
    return _WIDTH.get(low) or _WIDTH.get(low.split("(")[0].split()[0]) if low else None


def read_quote(quoted: str) -> str:
    """A quoted identifier as a read of the doctor's writes it: each colon ``\\:``, which the executors read
    as a colon, not a parameter (a table ``a :b``)."""
    return quoted.replace(":", "\\:")


class DoctorRules(Protocol):
    """What ``seqid doctor`` (:mod:`seqid_orm.schema.doctor`) asks a vendor whose catalog it reads."""

    @property
    def SCHEMAS(self) -> bool:
        """Whether a report may be narrowed to schemas (PostgreSQL's, SQLite's attached databases)."""

    def session_statements(self, timeout_s: float, /) -> list[str]:
        """What runs first on the doctor's own connection: read-only transactions and a bound on each read."""

    def key_columns(self, fetch: Fetch, recover: Callable[[], None], /) -> list[KeyColumn]:
        """Every single-column unique key of the database, from its catalog (``recover`` readies the
        connection again after a read the database refused)."""

    def exists(self, table: str, schema: str | None, /) -> tuple[str, dict[str, object]]:
        """A statement whose one row's value is not ``NULL`` where ``table`` is there."""

    def ideal_index_bytes(self, column: KeyColumn, /) -> int | None:
        """The column's index built in key order, where the engine's B-tree is modelled here."""


class RebuildRules(Protocol):
    """How an engine that changes no key online (SQLite) reads what a rebuild of a key's tables involves
    (:mod:`seqid_orm.schema.rebuild` asks; the adapter's ORM makes the tables again)."""

    REFERENCES: str
    """Rows ``(table, foreign key number, column, referenced column or NULL for the key)`` of every foreign key
    to the table ``:t``."""
    FOREIGN_KEY_CHECK: str
    """Rows ``(table, row, referenced table, ...)`` of each of ``{table}``'s rows that points at no row."""
    TABLE: str
    """The one row ``(sql,)``: the table ``:t``'s ``CREATE TABLE`` as the engine keeps it."""
    BESIDE: str
    """Rows ``(sql,)``: what goes with the table ``:t`` when it is dropped and is made again of its text."""
    COLUMNS: str
    """Rows ``(name,)``: the table ``:t``'s stored columns, in order."""
    PRIMARY_KEY: str
    """Rows ``(name,)``: the columns of the table ``:t``'s primary key, in its order."""
    BEFORE: tuple[str, ...]
    """Statements before tables are made again (and ``AFTER``, after)."""
    AFTER: tuple[str, ...]

    def retyped(self, create: str, name: str, types: dict[str, str], key: str | None, high: int | None, /) -> str:
        """``create`` for a table ``name`` whose columns ``types`` have those types, ``key`` the key among them;
        ``high``: the table's high-water mark (:meth:`high_water`), kept where the key loses ``AUTOINCREMENT``."""

    def high_water(self, create: str, table: str, /) -> str | None:
        """The read of one row ``(mark,)``: the highest key ``table`` (of text ``create``) ever gave, where its key
        is ``AUTOINCREMENT``; else ``None``."""

    def high_water_again(self, create: str, table: str, /) -> list[str]:
        """Where ``create`` (the text before the rebuild) kept a mark of an ``AUTOINCREMENT`` its key gets back:
        the statements that give ``table`` that mark again."""


class VendorRules(Protocol):
    """The questions every vendor module answers (module-level names; mypy checks each module)."""

    NAME: str
    """The vendor's name (SQLAlchemy's dialect names; MariaDB, TiDB and YugabyteDB apart)."""
    DISTRIBUTED: bool
    """Whether the engine spreads a table over ranges by key: a strictly increasing key is then a
    write hot spot, so ids get the ``SHARDED`` layout unless told otherwise."""
    ROWID_INTEGER_KEY: bool
    """Whether an integer primary key must be declared exactly ``INTEGER`` to be the table's rowid."""
    TEXT_ID_COLUMN: TextColumnSpec
    """The character set and binary collation of a sortable-text id column."""
    BINARY_FALLBACK: bool
    """Whether a column without a native UUID type holds 16 bytes by default (else canonical text)."""
    DROP_FOREIGN_KEY: str
    """The ``ALTER TABLE`` clause that drops a foreign key constraint by name."""
    INNER_SPLITS_HALF: bool
    """Whether the engine's B-tree splits a full page that is not the last of its level 50/50
    (PostgreSQL, SQL Server, Oracle), rather than where the inserts were going (InnoDB) or by
    rebalancing siblings (SQLite).  Keys that increase but land before old keys then leave every
    page they fill half empty: a column that already holds keys gets adopted keys there
    (:mod:`seqid_orm.ids.adopted`), which sort after the old ones."""

    @property
    def DOCTOR(self) -> DoctorRules | None:
        """What ``seqid doctor`` reads of the engine's catalog (:class:`DoctorRules`); ``None`` where it reads none."""

    @property
    def ONLINE(self) -> OnlineRules | None:
        """How the engine changes a live table while it is used (:class:`OnlineRules`); ``None`` where seqid
        changes none online (SQLite's one writer and table copies, and the engines seqid has no server of)."""

    @property
    def REKEY(self) -> RekeyRules | None:
        """How the engine changes a table's integer key to a seqid key online (:class:`RekeyRules`); ``None``
        where seqid does not (yet) do that online."""

    @property
    def REBUILD(self) -> RebuildRules | None:
        """How a key's tables are made again where no key changes online (:class:`RebuildRules`: SQLite);
        ``None`` elsewhere."""

    def quote_identifier(self, name: str, /) -> str:
        """``name`` as a quoted identifier of the engine's SQL."""

    def string_literal(self, text: str, /) -> str:
        """``text`` as a string literal of the engine's SQL."""

    def qualified(self, table: str, schema: str | None, /) -> str:
        """``schema.table`` (or ``table``), quoted."""

    @property
    def TYPE_CHANGE_HOLDS(self) -> str | None:
        """What changing a column's type holds while the table is rewritten (a storage conversion's refusal
        names it); ``None`` where seqid refuses no conversion by its size."""

    TYPED_COLUMNS: bool
    """Whether a column's declared UUID type says what its values are (SQLite keeps any value anywhere)."""

    def column_catalog(self, table: str, column: str, schema: str | None, /) -> str | None:
        """The statement of a key column's catalog row (:mod:`seqid_orm.schema.live`: the real table, the
        declared type, whether this role may read the keys, the comment), or ``None`` where not read."""

    def has_native_uuid(self, version: Version, /) -> bool:
        """Whether this server version has a UUID column type of its own."""

    def compare_order(self, version: Version, storage: Storage, value: uuid.UUID, /) -> tuple[int, ...] | None:
        """The order in which the engine compares the bytes of values shaped like ``value``
        (positions of ``uuid.UUID.bytes``); ``None`` when it cannot store them there."""

    def server_default(self, version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
        """The column default that makes time-ordered UUIDs, or a typed refusal saying why not;
        ``shift_us`` microseconds added to the clock it reads (PostgreSQL 18's ``uuidv7(shift)``)."""

    def adopted_default(
        self, version: Version, storage: Storage, above: int, shift_us: int, schema: str | None, /
    ) -> ServerDefault:
        """The column default that makes adopted keys with ``above`` leading one bits (for a column
        that holds other keys, on an engine that splits inner pages half), or a typed refusal;
        ``schema`` (quoted) holds what it calls, where it calls something (else the ``search_path``)."""

    def adoption_statements(self, table: str, column: str, /) -> dict[str, str]:
        """The statements of a migration's adoption of a column (:mod:`seqid_orm.schema.adoption`),
        ``table`` and ``column`` quoted: empty where the engine records nothing."""

    def sequential_functions(self, prefix_layout: Layout, /) -> list[str]:
        """``CREATE FUNCTION`` statements of the sequential-uuids generators, or a typed refusal."""

    def drop_sequential_functions(self) -> list[str]:
        """The statements undoing :meth:`sequential_functions`."""

    def binary_literal(self, raw: bytes, /) -> str:
        """A 16-byte literal in this engine's SQL."""

    def convert_column(self, quote: Quote, ref: ColumnRef, source: Storage, target: Storage, /) -> list[str]:
        """Statements moving one UUID column from ``source`` to ``target`` storage, values kept."""


ORDER_BYTES = tuple(range(16))


def version_at_least(version: Version, minimum: tuple[int, ...]) -> bool:
    """Whether a known ``version`` is at least ``minimum`` (callers refuse an unknown one first)."""
    return version is not None and tuple(version[: len(minimum)]) >= minimum


def format_version(version: Sequence[int] | None) -> str:
    """A server version for messages."""
    return "(version unknown)" if version is None else ".".join(map(str, version))


def unknown_version(vendor: str, example: str) -> UnknownServerVersionError:
    """The refusal for SQL that depends on a server version nobody named (offline DDL)."""
    return UnknownServerVersionError(
        f"the {vendor} server version is unknown (offline DDL, such as Alembic's --sql mode), and the SQL "
        f"of a database-made id depends on it (PostgreSQL 18 has uuidv7(), 13-17 need an expression; "
        f"MariaDB 11.7 has UUID_v7()...). Name the target server: `alembic -x seqid_server_version={example} "
        "upgrade head --sql` with seqid_orm.sqlalchemy.alembic.offline_server_version(context) in env.py's "
        "run_migrations_offline(), or set dialect.server_version_info"
    )


# What vendors without a rule of their own answer; their modules import these names.


def bytewise_order(version: Version, storage: Storage, value: uuid.UUID) -> tuple[int, ...] | None:
    """Binary and text columns compare like the bytes (lower-case hex digits sort as the bytes do under
    every collation, and hyphens sit at fixed places); no native UUID type is known."""
    return None if storage is Storage.NATIVE else ORDER_BYTES


def seconds_literal(shift_us: int) -> str:
    """``shift_us`` microseconds as an exact decimal count of seconds with its sign (``-0.000001``), for
    the engines that move a clock reading by a number: no float, whose digits could round a shift."""
    seconds, micros = divmod(abs(shift_us), 1_000_000)
    return f"{'-' if shift_us < 0 else '+'}{seconds}.{micros:06d}"


def no_native_uuid(version: Version) -> bool:
    return False


def always_native_uuid(version: Version) -> bool:
    return True


def bytewise_in_every_storage(version: Version, storage: Storage, value: uuid.UUID) -> tuple[int, ...] | None:
    """A native ``uuid`` that compares its bytes first to last, as the other storages do (PostgreSQL and kin)."""
    return ORDER_BYTES


def hot_spot_refusal(vendor: str) -> Callable[[Version, Storage, int], ServerDefault]:
    """The ``server_default`` of a distributed engine, where a time-ordered key made by the database is a hot spot."""
    return no_server_default(
        f"on {vendor} a time-ordered key made by the database sends every insert to one range (a write "
        "hot spot); make ids in Python (seqid picks the sharded layout there) or use a hash-sharded index"
    )


def no_server_default(reason: str) -> Callable[[Version, Storage, int], ServerDefault]:
    """A ``server_default`` that refuses with ``reason``."""

    def server_default(version: Version, storage: Storage, shift_us: int) -> ServerDefault:
        raise ServerDefaultUnavailableError(reason)

    return server_default


def no_adopted_default(vendor: str) -> Callable[[Version, Storage, int, int, str | None], ServerDefault]:
    """An ``adopted_default`` that refuses: the engine makes no adopted keys itself."""

    def adopted_default(
        version: Version, storage: Storage, above: int, shift_us: int, schema: str | None
    ) -> ServerDefault:
        raise ServerDefaultUnavailableError(
            f"{vendor} cannot make the keys of a column that already holds other keys (which must sort after "
            "them); make them in Python (seq_uuid_pk(), SeqUUIDField())"
        )

    return adopted_default


def no_adoption_statements(table: str, column: str, /) -> dict[str, str]:
    """An ``adoption_statements`` of an engine whose adoption records nothing."""
    return {}


def no_sequential_functions(vendor: str) -> tuple[Callable[[Layout], list[str]], Callable[[], list[str]]]:
    """``sequential_functions`` and ``drop_sequential_functions`` for a vendor they are not written for:
    both refuse, naming it."""

    def refusal() -> InvalidArgumentError:
        return InvalidArgumentError(
            f"the sequential-uuids functions exist for PostgreSQL 13+ and MariaDB 10.10+, not {vendor!r} "
            "(generate the ids in Python with seqid_orm.uuid_sequence_nextval there)"
        )

    def sequential_functions(prefix_layout: Layout) -> list[str]:
        raise refusal()

    def drop_sequential_functions() -> list[str]:
        raise refusal()

    return sequential_functions, drop_sequential_functions


def no_conversion(vendor: str) -> Callable[[Quote, ColumnRef, Storage, Storage], list[str]]:
    """A ``convert_column`` that refuses: the conversion is written for PostgreSQL and MariaDB."""

    def convert_column(quote: Quote, ref: ColumnRef, source: Storage, target: Storage) -> list[str]:
        raise InvalidArgumentError(f"UUID storage conversion is written for PostgreSQL and MariaDB, not {vendor!r}")

    return convert_column


#: The longest name seqid gives an index, a constraint or a table: MariaDB refuses one over 64 characters
#: (error 1059), PostgreSQL cuts one at 63 bytes without a word (NAMEDATALEN - 1).
NAME_LIMIT = 60


def bounded_name(prefix: str, table: str, column: str) -> str:
    """``prefix + table + '_' + column``, or, past :data:`NAME_LIMIT` characters, a shorter name ending in
    a digest of the table's and column's names, the same every run (a long table name neither collides
    nor fails)."""
    name = f"{prefix}{table}_{column}"
    if len(name.encode()) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(f"{table}.{column}".encode()).hexdigest()[:12]
    return f"{prefix}{table[:36]}_{digest}"


class InSchema(str):
    """A table of another schema than the one a change's table is in (a tenant's schema whose foreign keys
    reference a shared table), named with its schema wherever a statement or a catalog read names it: the
    quoting functions below quote it as two identifiers, ``"schema"."table"``.  Its text, ``schema.table``,
    names it in messages, in a backfill's progress row and in the names seqid derives from it (an index's, a
    trigger's), so two tables of one name in two schemas never share one.  A ``str``, as SQLAlchemy's
    ``quoted_name`` is, so that a plan carries it wherever it carries a table's name."""

    schema: str
    name: str

    def __new__(cls, schema: str, name: str) -> InSchema:
        self = super().__new__(cls, f"{schema}.{name}")
        self.schema, self.name = schema, name
        return self

    def __reduce__(self) -> tuple[type[InSchema], tuple[str, str]]:
        return InSchema, (self.schema, self.name)


def double_quoted(name: str) -> str:
    """``name`` as the SQL standard quotes an identifier (PostgreSQL, SQLite, Oracle and the rest)."""
    if isinstance(name, InSchema):
        return f"{double_quoted(name.schema)}.{double_quoted(name.name)}"
    return '"' + name.replace('"', '""') + '"'


def backquoted(name: str) -> str:
    """``name`` as MySQL and MariaDB quote an identifier."""
    if isinstance(name, InSchema):
        return f"{backquoted(name.schema)}.{backquoted(name.name)}"
    return "`" + name.replace("`", "``") + "`"


def bracketed(name: str) -> str:
    """``name`` as SQL Server quotes an identifier."""
    return "[" + name.replace("]", "]]") + "]"


def standard_literal(text: str) -> str:
    """``text`` as the SQL standard's string literal."""
    return "'" + text.replace("'", "''") + "'"


def backslash_literal(text: str) -> str:
    """``text`` as a string literal where backslashes are escapes (MySQL's and MariaDB's default)."""
    return standard_literal(text.replace("\\", "\\\\"))


def qualify(quote: Quote) -> Callable[[str, str | None], str]:
    """A vendor's ``qualified``: ``schema.table`` (or ``table``), each quoted by ``quote``."""

    def qualified(table: str, schema: str | None) -> str:
        return quote(table) if schema is None else f"{quote(schema)}.{quote(table)}"

    return qualified


def no_column_catalog(table: str, column: str, schema: str | None, /) -> str | None:
    """A ``column_catalog`` of an engine whose catalog seqid does not read before a key."""
    return None


def row_params(rows: Sequence[Sequence[object]], values: Sequence[object]) -> dict[str, object]:
    """A batch's keys and values as one parameter each (``r{row}k{key}``, ``r{row}v``): the rows' list form
    of an online batch, for keys whose types are not known."""
    params: dict[str, object] = {f"r{r}k{i}": v for r, row in enumerate(rows) for i, v in enumerate(row)}
    params.update({f"r{r}v": v for r, v in enumerate(values)})
    return params


def hex_literal(raw: bytes) -> str:
    """``X'..'``: the SQL standard's binary literal (MySQL, MariaDB, SQLite, and the rest)."""
    return f"X'{raw.hex().upper()}'"


def is_lock_timeout(exc: BaseException) -> bool:
    """Whether a driver's error (or one wrapping it) says a statement gave up waiting for a lock:
    PostgreSQL's ``lock_not_available`` (SQLSTATE 55P03, ``lock_timeout``), MariaDB's and MySQL's 1205
    (``lock_wait_timeout``, ``innodb_lock_wait_timeout``), SQLite's busy wait ("database is locked").
    Read by the online DDL (try again) and by the SQL stores (the call's deadline is spent)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        code = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if code == "55P03":
            return True
        args = getattr(seen, "args", ())
        if args and args[0] == 1205:
            return True
        text = str(seen).lower()
        if "lock timeout" in text or "lock wait timeout" in text or "database is locked" in text:
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


def is_conflict(exc: BaseException) -> bool:
    """Whether a driver's error (or one wrapping it) says another transaction won: a deadlock, a
    serialization failure, a Galera certification conflict (MariaDB's and MySQL's 1213, and 1205;
    PostgreSQL's 40001 and 40P01).  The statement was rolled back and may be tried again; read by the
    SQL stores' executors (another node took the row: nothing was written) and their runner."""
    orig = getattr(exc, "orig", None) or getattr(exc, "__cause__", None) or exc
    args = getattr(orig, "args", ())
    if args and args[0] in (1213, 1205):
        return True
    return (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) in ("40001", "40P01")


@dataclass(frozen=True)
class CallBounds:
    """What bounds the database's own waits during one store call: ``prefix`` goes before each of its
    statements in the same message, ``before`` runs on the session before them."""

    prefix: str = ""
    before: tuple[str, ...] = ()


def call_bounds(
    vendor: str, left: float, timeout: float, *, one_message: bool, own_session: bool = False
) -> CallBounds:
    """The database's own waits for one store call with ``left`` seconds of a ``timeout`` bound, as the
    connection allows: ``one_message``, its driver sends several statements with their parameters in
    one message (client-side binding); ``own_session``, no other client ever uses its session.

    PostgreSQL: ``lock_timeout`` is what is left (a reservation waiting on a locked row gives up on the
    server too, instead of staying there and burning a block when the lock goes), ``statement_timeout``
    twice the bound, *above* the deadline, never below it: cancelling a commit that waits for a
    synchronous standby makes PostgreSQL report it committed, with only a warning, though the standby
    may lack it (the store's deadline shuts the connection instead, so the block is never used).  In
    one message as ``SET LOCAL``: one message of several statements is one transaction that the server
    runs to its end whatever the client does meanwhile, so the time-outs hold for that statement only
    and no transaction waits on the client (not one opened by an explicit ``BEGIN`` whose client, a
    task of a closed event loop, never sent its ``COMMIT`` and left the ticket row locked); a pooler in
    transaction mode keeps them.  Not libpq's ``options`` startup parameter (PgBouncer refuses it, or
    silently drops it where configured to ignore it), and a session ``SET`` only on a session of the
    store's own: on a pooled server connection it would outlive the call.  Else none (asyncpg and
    pg8000, which cannot send parameters with several statements, through a shared pool).  InnoDB's lock
    wait in whole seconds, on a session of the store's own (an engine of the store's sets its bound at
    connect).  SQLite's busy wait, always: a lock has no socket the deadline could shut."""
    lock_ms = max(1, math.ceil(left * 1000))
    if vendor == "postgresql":
        lock, statement = f"lock_timeout = {lock_ms}", f"statement_timeout = {max(1, math.ceil(2 * timeout * 1000))}"
        if one_message:
            return CallBounds(prefix=f"SET LOCAL {lock}; SET LOCAL {statement}; ")
        return CallBounds(before=(f"SET {lock}; SET {statement}",) if own_session else ())
    if vendor in ("mysql", "mariadb") and own_session:
        return CallBounds(before=(f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(left))}",))
    if vendor == "sqlite":
        return CallBounds(before=(f"PRAGMA busy_timeout = {lock_ms}",))
    return CallBounds()
