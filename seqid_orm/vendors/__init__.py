"""The per-vendor rules, and the one place where a target's decisions are made.

How a database compares a UUID decides where the time must go, so every decision about a column
follows from four facts: the vendor, its server version, how the column stores the id
(:class:`Storage`) and the layout the user asked for, if any.  :func:`target` turns them into a
:class:`Target`, once per distinct combination (memoised), and every adapter reads its decisions
from that one object: the layout of Python-made ids, where a wrapping prefix goes, the column's
storage and text collation, the SQL of database-made ids, the sequential-uuids functions, storage
conversions and the comparison order the live probe checks.

The facts live in one module per vendor with the same names (:class:`~._base.VendorRules`, as
GeoAlchemy2's ``dialects/`` do): :mod:`.postgresql`, :mod:`.mariadb`, :mod:`.mysql`, :mod:`.sqlite`,
:mod:`.mssql`, :mod:`.oracle`, the distributed :mod:`.cockroachdb`, :mod:`.tidb`, :mod:`.yugabytedb`,
and :mod:`.generic` for any other.  :func:`rules_for` is the one function that picks the module.

May import the standard library, :mod:`seqid_orm.ids` and :mod:`seqid_orm.errors`; the adapters
describe their connection here and never decide on their own.
"""

from __future__ import annotations

import datetime as _dt
import functools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ArgumentTypeError, InvalidArgumentError, UnknownLayoutError
from ..ids.adopted import above_for as adopted_above_for
from ..ids.adopted import first_regular, recognise
from ..ids.comb import CombGenerator, check_span, comb_at, decode_comb, generator_for, layout_of
from ..ids.layout import Layout, as_layout, candidates, fits, layout_for_order, sort_key
from . import cockroachdb, generic, mariadb, mssql, mysql, oracle, postgresql, sqlite, tidb, yugabytedb
from ._base import (
    Bounded,
    CallBounds,
    ColumnRef,
    Companion,
    DoctorRules,
    InSchema,
    KeyColumn,
    OnlineRules,
    Quote,
    RebuildRules,
    Reference,
    RekeyRules,
    ServerDefault,
    Step,
    Storage,
    Swap,
    Swapped,
    SwappedIndex,
    TableFacts,
    TextColumnSpec,
    VendorRules,
    as_storage,
    bounded_name,
    call_bounds,
    format_version,
    is_conflict,
    is_lock_timeout,
    read_quote,
)

__all__ = [
    "VENDORS",
    "Bounded",
    "CallBounds",
    "ColumnRef",
    "Companion",
    "DoctorRules",
    "InSchema",
    "KeyColumn",
    "OnlineRules",
    "Quote",
    "RebuildRules",
    "Reference",
    "RekeyRules",
    "ServerDefault",
    "Step",
    "Storage",
    "Swap",
    "Swapped",
    "SwappedIndex",
    "TableFacts",
    "Target",
    "TextColumnSpec",
    "VendorRules",
    "as_storage",
    "bounded_name",
    "call_bounds",
    "check_shift",
    "choose_layout",
    "choose_prefix_layout",
    "compare_order",
    "default_storage",
    "distributed_flavor",
    "format_version",
    "is_conflict",
    "is_lock_timeout",
    "layout_sample",
    "literal",
    "normalize_vendor",
    "normalize_version",
    "qualified",
    "quote_identifier",
    "read_quote",
    "rules_for",
    "server_default",
    "target",
]

_RULES: dict[str, VendorRules] = {
    m.NAME: m for m in (postgresql, cockroachdb, yugabytedb, mssql, mariadb, mysql, tidb, oracle, sqlite)
}

VENDORS = tuple(_RULES)
"""Vendor names with rules of their own (SQLAlchemy's dialect names; MariaDB, TiDB and YugabyteDB apart)."""


def check_shift(shift: object) -> _dt.timedelta | None:
    """``shift`` as a database-made default's shift (:meth:`Target.shifted_default`): a ``timedelta``,
    ``None`` for none (so is a zero one); :class:`~seqid_orm.errors.ArgumentTypeError` otherwise.  The
    adapters' ``DatabaseSeqUUID(shift=)`` calls it when declared, the target again when compiled."""
    if shift is not None and not isinstance(shift, _dt.timedelta):
        raise ArgumentTypeError(f"shift must be a datetime.timedelta, got {type(shift).__name__}")
    return shift or None


def rules_for(vendor: str) -> VendorRules:
    """The rules module of a (normalised) vendor name; :mod:`.generic` for one seqid does not know."""
    return _RULES.get(vendor, generic)


def quote_identifier(vendor: str, name: str) -> str:
    """``name`` as a quoted identifier of ``vendor``'s SQL."""
    return rules_for(vendor).quote_identifier(name)


def literal(vendor: str, text: str) -> str:
    """``text`` as a string literal of ``vendor``'s SQL (MariaDB and MySQL read backslashes as escapes)."""
    return rules_for(vendor).string_literal(text)


def qualified(vendor: str, table: str, schema: str | None) -> str:
    """``schema.table`` (or ``table``) quoted for ``vendor``."""
    return rules_for(vendor).qualified(table, schema)


_ALIASES = {"microsoft": "mssql"}  # Django's vendor name of mssql-django


def normalize_vendor(name: str, *, is_mariadb: bool = False) -> str:
    """A dialect's or Django's vendor name as :data:`VENDORS` spells it (unknown names pass through)."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"vendor name must be a str, got {type(name).__name__}")
    name = name.lower()
    if name == "mysql" and is_mariadb:
        return "mariadb"
    return _ALIASES.get(name, name)


def distributed_flavor(version_text: str) -> str | None:
    """``"tidb"`` or ``"yugabytedb"`` when a server's version string names one (``VERSION()`` of TiDB
    is like ``8.0.11-TiDB-v7.5.0``; YugabyteDB's ``version()`` like ``PostgreSQL 11.2-YB-2.20.1.0``)."""
    if "tidb" in version_text.lower():
        return "tidb"
    if "-YB-" in version_text:
        return "yugabytedb"
    return None


def normalize_version(server_version: Sequence[object] | None) -> tuple[int, ...] | None:
    """A driver's version tuple as integers only (MariaDB's carries the string ``"MariaDB"``)."""
    if not server_version:
        return None
    return tuple(v for v in server_version if isinstance(v, int) and not isinstance(v, bool))


@functools.cache
def layout_sample(layout: Layout) -> uuid.UUID:
    """A value with the fixed bits of ``layout`` (what the probe and the decisions reason on)."""
    return comb_at(_dt.datetime(2020, 1, 1, tzinfo=_dt.timezone.utc), layout, "min")


_V4_SAMPLE = uuid.UUID(int=(0x4 << 76) | (0b10 << 62))  # the RFC v4 bits wrapping-prefix ids carry
_V8_SAMPLE = uuid.UUID(int=(0x8 << 76) | (0b10 << 62))  # the bits of adopted keys
_DAY_MS = 86_400_000


@dataclass(frozen=True)
class Target:
    """Where ids are going: one vendor, server version, column storage and preferred layout.

    Made by :func:`target` (never directly), once per distinct combination; the adapters keep it
    per connection and column, so no row pays for a decision.  The capability flags are the
    vendor's facts; the decisions are computed when first asked and kept.  A decision that cannot
    be made (no layout fits, no server-side generator) raises its typed error when asked, so a
    target can still say its storage and column where, say, the database makes no ids.
    """

    vendor: str
    server_version: tuple[int, ...] | None
    storage: Storage
    preferred: Layout | None = None
    above: int = 0
    """The leading one bits of the keys of a column that already held other keys (an *adopted*
    column, :mod:`seqid_orm.ids.adopted`): ``0`` for a column whose new keys append at the end
    anyway.  Decided from the column's keys by :meth:`above_for`."""
    rules: VendorRules = field(init=False, repr=False, compare=False)
    native_uuid: bool = field(init=False, repr=False, compare=False)
    """The engine has a UUID column type of its own (SQLAlchemy's ``supports_native_uuid``)."""
    distributed: bool = field(init=False, repr=False, compare=False)
    """The engine spreads a table over key ranges: ids get the ``SHARDED`` layout unless told otherwise."""
    rowid_integer_key: bool = field(init=False, repr=False, compare=False)
    """An integer primary key must be declared exactly ``INTEGER`` to be the table's rowid (SQLite)."""
    text_id_column: TextColumnSpec = field(init=False, repr=False, compare=False)
    """The character set and binary collation of a sortable-text id column."""

    def __post_init__(self) -> None:
        rules = rules_for(self.vendor)
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "native_uuid", rules.has_native_uuid(self.server_version))
        object.__setattr__(self, "distributed", rules.DISTRIBUTED)
        object.__setattr__(self, "rowid_integer_key", rules.ROWID_INTEGER_KEY)
        object.__setattr__(self, "text_id_column", rules.TEXT_ID_COLUMN)

    def __str__(self) -> str:
        adopted = f", keys after {self.above} one bits" if self.above else ""
        return f"{self.vendor} {format_version(self.server_version)} with {self.storage.value} storage{adopted}"

    def order_for(self, value: uuid.UUID) -> tuple[int, ...] | None:
        """The order in which the engine compares the bytes of values shaped like ``value``
        (``uuid.UUID.bytes`` positions, most significant first); ``None`` where it cannot store them
        (see :func:`compare_order`)."""
        return self.rules.compare_order(self.server_version, self.storage, value)

    @functools.cached_property
    def layout(self) -> Layout:
        """The layout whose Python-made ids the engine keeps in generation order (:func:`choose_layout`).

        With no server version known (offline DDL) an explicit layout is trusted, since nothing
        can be checked.
        """
        if self.server_version is None and self.preferred is not None:
            return self.preferred
        return choose_layout(self.vendor, self.server_version, self.storage, preferred=self.preferred)

    def keeps_in_order(self, layout: Layout) -> bool:
        """Whether this column keeps ids of ``layout`` in the order they are made: what a key whose
        layout is fixed by a specification rather than chosen here (TypeID's UUIDv7) must ask before
        its first row, since a column that compares its bytes elsewhere scatters them over the index
        (MariaDB's ``UUID`` before 10.11.5, SQL Server's ``UNIQUEIDENTIFIER``)."""
        order = self.order_for(layout_sample(layout))
        return order is not None and fits(layout, order)

    @functools.cached_property
    def generator(self) -> CombGenerator:
        """The process's shared generator for :attr:`layout` (the one ``seqid_orm.comb`` uses), or
        for the adopted keys of :attr:`above` one bits."""
        if self.above:
            return generator_for(self.adopted_layout, self.above)
        return generator_for(self.layout)

    @functools.cached_property
    def adopted_layout(self) -> Layout:
        """The layout whose engine order the adopted keys follow here: ``TIME_FIRST`` where the column
        compares a version-8 value's bytes first to last, ``TIME_LAST`` where it compares them as SQL
        Server does.  Raises :class:`~seqid_orm.errors.UnknownLayoutError` for any other order."""
        order = self.order_for(_V8_SAMPLE)
        for layout in (Layout.TIME_FIRST, Layout.TIME_LAST):
            if order == layout.order:
                return layout
        raise UnknownLayoutError(f"no adopted keys are made for the order {self} compares version-8 values in")

    def time_bounds(self, start: _dt.datetime, end: _dt.datetime) -> tuple[uuid.UUID, uuid.UUID]:
        """``(low, high)``: the keys this column holds for ids made in ``[start, end)`` lie at or above
        ``low`` and below ``high`` in the engine's own order, so ``low <= key < high`` is a range on
        the primary key's index instead of a second index on a timestamp.  The bounds are the first
        id any seqid generator can make in each millisecond (:func:`~seqid_orm.comb_at` with
        ``bound="min"``) in this column's layout: its adopted keys' where it has adopted keys."""
        layout = self.adopted_layout if self.above else self.layout
        low, high = comb_at(start, layout, "min", above=self.above), comb_at(end, layout, "min", above=self.above)
        check_span(start, end)  # (both checked as aware datetimes by comb_at first)
        return low, high

    def above_for(self, top: Sequence[uuid.UUID], now_ms: int | None = None, rows: int | None = None) -> int:
        """The :attr:`above` of this column, from its largest keys as the database orders them
        (``ORDER BY key DESC``, largest first), and, where known, how many keys it holds: what the
        migration that adopts a column decides (and records), and what a process that finds no record
        judges from the keys it can read.

        ``0`` on an engine that keeps plain keys growing anyway (:attr:`VendorRules.INNER_SPLITS_HALF`
        false: InnoDB, SQLite, the distributed engines), for an empty column, and where a key made
        now (at ``now_ms``) would sort after the largest key that is not an outlier (a sentinel such
        as the Max UUID stays above); the widest of the adopted keys among ``top`` where there are
        some, so that keys made later sort after every one already made; else what
        :func:`seqid_orm.ids.adopted.above_for` makes of the keys.
        """
        if not self.rules.INNER_SPLITS_HALF or not top:
            return 0
        try:
            layout = self.adopted_layout
        except UnknownLayoutError:
            return 0
        formats = (recognise(key.int) for key in top)
        widths = [found.above for found in formats if found is not None and found.order == layout.order]
        if widths:
            return max(widths)
        order = self.order_for(top[0])
        if order is None:
            return 0
        compared = [sort_key(key, order) for key in top]
        first = first_regular(compared, rows)
        if first is not None:
            largest = top[first]
            when = time.time_ns() // 1_000_000 if now_ms is None else now_ms
            # a key of this column's own layout is not an old key, whatever clock made it (another
            # process's, running ahead by less than a day, must not flip this one to adopted keys)
            if layout_of(largest) is self.layout and decode_comb(largest, self.layout)[0] <= when + _DAY_MS:
                return 0
            fresh = comb_at(_dt.datetime.fromtimestamp(when / 1000, _dt.timezone.utc), self.layout, "min")
            fresh_order = self.order_for(fresh)
            if fresh_order is not None and sort_key(fresh, fresh_order) > compared[first]:
                return 0
        return adopted_above_for(compared, rows)

    def adopted(self, above: int) -> Target:
        """This target for a column whose keys get ``above`` leading one bits (``0``: plain keys)."""
        if above == self.above:
            return self
        return _target(self.vendor, self.server_version, self.storage, self.preferred, above)

    @functools.cached_property
    def prefix_layout(self) -> Layout:
        """Where a wrapping prefix (``uuid_sequence_nextval``, version-4 bits) goes on this column."""
        return choose_prefix_layout(self.vendor, self.server_version, self.storage)

    @functools.cached_property
    def server_default(self) -> ServerDefault:
        """The column default that makes time-ordered ids in the database (``DatabaseSeqUUID``).

        Raises :class:`~seqid_orm.errors.ServerDefaultUnavailableError` where the engine cannot
        (Oracle, the distributed engines, old versions), and
        :class:`~seqid_orm.errors.UnknownServerVersionError` where the SQL depends on a server
        version nobody named (offline DDL must not guess: PostgreSQL 18's default fails on 16).
        """
        if self.above:
            return self.rules.adopted_default(self.server_version, self.storage, self.above, 0, None)
        return self.rules.server_default(self.server_version, self.storage, 0)

    def shifted_default(self, shift: _dt.timedelta | None, schema: str | None = None) -> ServerDefault:
        """:attr:`server_default` with the clock it reads moved by ``shift``, as PostgreSQL 18's
        ``uuidv7(shift)`` and Django 6.1's ``UUID7(shift)`` move theirs: keys that sort as if made
        ``shift`` later (earlier, for a negative one), for a table of historic rows or a copy whose
        keys must not tell when a row came.

        ``shift`` is a :class:`datetime.timedelta` (:class:`~seqid_orm.errors.ArgumentTypeError`
        otherwise), checked now against the keys' range, as :func:`~seqid_orm.comb_at` checks a time
        (:class:`~seqid_orm.errors.InvalidArgumentError` for one before 1970 or past what the keys
        hold); a default that cannot take one (SQL Server's ``NEWSEQUENTIALID()``, MariaDB's
        ``UUID()``) raises :class:`~seqid_orm.errors.ServerDefaultUnavailableError`.  ``None`` (or a
        zero shift) is :attr:`server_default`, so that callers holding an optional shift ask once.
        ``schema`` (quoted): where the function an adopted key's default calls is (PostgreSQL), for a
        table outside the ``search_path``.
        """
        shift = check_shift(shift)
        if shift is None and schema is None:
            return self.server_default
        if shift is None:
            shift = _dt.timedelta(0)
        shift_us = shift // _dt.timedelta(microseconds=1)  # exact: a timedelta counts microseconds
        if not shift_us and not self.above:
            return self.server_default
        try:
            shifted_now = _dt.datetime.now(_dt.timezone.utc) + shift
        except OverflowError:
            raise InvalidArgumentError(f"shift={shift!r} moves the clock outside any datetime") from None
        layout = self.adopted_layout if self.above else self.layout
        comb_at(shifted_now, layout, "min", above=self.above)  # refuses a time the keys cannot hold
        if self.above:
            return self.rules.adopted_default(self.server_version, self.storage, self.above, shift_us, schema)
        return self.rules.server_default(self.server_version, self.storage, shift_us)

    def sequential_functions(self) -> list[str]:
        """The ``CREATE FUNCTION`` statements of the sequential-uuids generators, for columns of this
        storage (MariaDB places the prefix where the column compares first); one statement each."""
        return self.rules.sequential_functions(self.prefix_layout)

    def drop_sequential_functions(self) -> list[str]:
        """The statements undoing :meth:`sequential_functions`."""
        return self.rules.drop_sequential_functions()

    def binary_literal(self, raw: bytes) -> str:
        """16 bytes as a literal of this engine's SQL."""
        return self.rules.binary_literal(raw)


# The decisions from the facts, as plain functions of a (normalised) vendor, version and storage:
# what a Target computes once and keeps, and what the tests check against tables.


def compare_order(
    vendor: str, server_version: tuple[int, ...] | None, storage: Storage | str, value: uuid.UUID
) -> tuple[int, ...] | None:
    """The order in which ``vendor`` compares the bytes of values shaped like ``value`` in ``storage``
    (``uuid.UUID.bytes`` positions, most significant first); ``None`` when it cannot store them there.

    The value matters: MariaDB's ``UUID`` type reverses some versions and not others.  The live
    probe (``seqid probe``) measures the same on a real server, and the tests check both agree.
    """
    return rules_for(vendor).compare_order(server_version, as_storage(storage), value)


def choose_layout(
    vendor: str, server_version: tuple[int, ...] | None, storage: Storage | str, *, preferred: Layout | None = None
) -> Layout:
    """The layout whose ids ``vendor`` keeps in generation order in ``storage``.

    Every layout is tried with values of its own bits (``preferred`` first, then ``TIME_FIRST``,
    ``TIME_LAST``, ``TIME_FIRST_LE``; ``SHARDED`` first on a distributed engine unless another is
    preferred); the first that the engine orders by its time wins.  Raises
    :class:`~seqid_orm.errors.UnknownLayoutError` when none fits.
    """
    if preferred is None and rules_for(vendor).DISTRIBUTED:
        preferred = Layout.SHARDED
    for layout in candidates(preferred):
        order = compare_order(vendor, server_version, storage, layout_sample(layout))
        if order is not None and fits(layout, order):
            return layout
    raise UnknownLayoutError(
        f"no known layout keeps ids ordered on {vendor} {format_version(server_version)} with "
        f"{as_storage(storage).value} storage; pass layout= explicitly or run seqid probe"
    )


def choose_prefix_layout(vendor: str, server_version: tuple[int, ...] | None, storage: Storage | str) -> Layout:
    """Where the wrapping prefix of a sequence- or time-prefixed id (version-4 bits) goes on this engine."""
    order = compare_order(vendor, server_version, storage, _V4_SAMPLE)
    layout = layout_for_order(order) if order is not None else None
    if layout is None:
        raise UnknownLayoutError(
            f"no known prefix placement for {vendor} {format_version(server_version)} "
            f"with {as_storage(storage).value} storage"
        )
    return layout


def default_storage(vendor: str, server_version: tuple[int, ...] | None) -> Storage:
    """What a column gets when the user does not choose: the native type, else 16 bytes, else text."""
    rules = rules_for(vendor)
    if rules.has_native_uuid(server_version):
        return Storage.NATIVE
    return Storage.BINARY if rules.BINARY_FALLBACK else Storage.TEXT


def target(
    vendor: str,
    server_version: Sequence[object] | None = None,
    storage: Storage | str | None = None,
    layout: Layout | str | None = None,
    *,
    is_mariadb: bool = False,
) -> Target:
    """The :class:`Target` for a vendor name (as a dialect or Django gives it), the raw server version
    (``None``: unknown, as offline), the storage asked for (``None``: the vendor's best) and a preferred
    layout.  Memoised: the same combination returns the same object.

    Raises :class:`~seqid_orm.errors.InvalidArgumentError` for a storage the engine does not have
    (``native`` without a UUID type).
    """
    return _target(
        normalize_vendor(vendor, is_mariadb=is_mariadb),
        normalize_version(server_version),
        None if storage is None else as_storage(storage),
        None if layout is None else as_layout(layout),
    )


@functools.lru_cache(maxsize=1024)
def _target(
    vendor: str, version: tuple[int, ...] | None, storage: Storage | None, preferred: Layout | None, above: int = 0
) -> Target:
    if storage is None:
        storage = default_storage(vendor, version)
    elif storage is Storage.NATIVE and not rules_for(vendor).has_native_uuid(version):
        raise InvalidArgumentError(
            f"storage='native' needs a UUID column type, which {vendor} {format_version(version)} "
            "does not have; use 'binary' or 'text'"
        )
    return Target(vendor, version, storage, preferred, above)


def server_default(vendor: str, server_version: Sequence[object] | None, storage: Storage | str) -> ServerDefault:
    """The column default that makes time-ordered UUIDs on this engine, version and storage (what
    :attr:`Target.server_default` keeps), or the typed refusal saying why the engine cannot."""
    return rules_for(normalize_vendor(vendor)).server_default(normalize_version(server_version), as_storage(storage), 0)
