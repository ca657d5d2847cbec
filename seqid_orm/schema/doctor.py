"""``seqid doctor``: which tables of a database you already have suffer from their keys, and the fix.

The decisions live here once, as statements and pure judgement over what they return, and both
adapters drive them through an :class:`Executor` (SQLAlchemy's ``seqid doctor URL`` and Django's
``manage.py seqid_doctor``): the h11 shape, the I/O outside.

For each table's single-column primary key (and every other single-column unique key of a UUID
or integer type) the doctor reads a bounded sample, never the table: runs of keys in the
database's own ``ORDER BY`` order at the low end, the high end and at pivots between them, each an
index range read with ``LIMIT``.  From the sample, :func:`seqid_orm.ids.classify.classify` says
what the keys are; :func:`~seqid_orm.ids.classify.in_order_share` measures whether *this
database's* order of the column follows the keys' time; :func:`seqid_orm.vendors.target` says
which layout the column needs.  Row counts are the server's estimates (``pg_class``,
``information_schema.TABLES``), and PostgreSQL's index size is put beside the size of the same
index built in key order, so the cost of a random key shows as a ratio.

The adapters open the connection read-only before anything runs (:func:`session_statements`:
PostgreSQL and MariaDB/MySQL read-only transactions with a statement timeout; SQLite opened with
``mode=ro`` and ``PRAGMA query_only``).  Vendors: PostgreSQL, MariaDB, MySQL and SQLite; another
vendor is refused with a typed error naming them.

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors` and
this folder.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import json
import re
import textwrap
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..calls.retry import Again, Retry
from ..calls.steps import Steps, drive
from ..errors import DatabaseUnavailableError, InvalidArgumentError, UnknownLayoutError
from ..ids.adopted import expected_duplicates, leading_ones, recognise
from ..ids.classify import KINDS, as_uuid, classify, in_order_share
from ..ids.comb import comb_at
from ..ids.layout import Layout, sort_key
from ..vendors import (
    VENDORS,
    DoctorRules,
    KeyColumn,
    Storage,
    compare_order,
    quote_identifier,
    read_quote,
    rules_for,
    target,
)

__all__ = [
    "DOCTOR_VENDORS",
    "FAIL_ON",
    "Executor",
    "Finding",
    "KeyColumn",
    "StatementDeadline",
    "check_schemas",
    "examine",
    "failing",
    "render",
    "render_json",
    "session_statements",
]

#: The vendors the doctor reads a catalog of.
DOCTOR_VENDORS = tuple(v for v in VENDORS if rules_for(v).DOCTOR is not None)
#: What ``--fail-on`` takes: a kind (``adopted``: old random keys and new time-ordered ones), ``out-of-order``
#: (time-ordered keys the column does not keep in order), ``inside-old-keys`` (new keys landing among
#: old random ones where the engine splits those pages half), or ``widths-disagree`` (keys of two widths,
#: or adopted keys beside plain ones: processes that judged the column differently).
FAIL_ON = (*KINDS, "adopted", "out-of-order", "inside-old-keys", "widths-disagree")

_RUNS = 10  # the low end, the high end and 8 pivots between
_IN_ORDER = 0.9  # share of adjacent pairs in time order above which a column keeps its keys in order
_SKIP_TABLES = frozenset({"seqid_tickets", "seqid_worker_leases"})  # seqid's own counters and leases
_RECENT = _dt.timedelta(days=30)  # how far back the run over recent UUIDv7 keys starts
_SOME = 0.02  # of a column's sampled keys: enough of a second kind to be a part of its own
_REINDEX_FROM = 1.25  # an index this many times its key-order size: one REINDEX is worth its while
# what the drivers say of a table that is not there (PostgreSQL, MariaDB/MySQL, SQLite)
_MISSING = re.compile(r"does not exist|doesn't exist|no such table", re.IGNORECASE)


class Executor(Protocol):
    """How an adapter runs one read-only statement (``:name`` parameters; ``\\:`` is a colon) and
    returns its rows.  The statements here write no ``::`` (casts are ``CAST``): Django's executor
    reads ``:x`` as a parameter.

    A statement the database refuses (a table locked past the timeout, one the user may not read)
    raises :class:`~seqid_orm.errors.DatabaseUnavailableError`; :meth:`recover` then readies the
    connection for the next table (PostgreSQL ignores every statement of a failed transaction)."""

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]: ...

    def recover(self) -> None: ...


@dataclass(frozen=True)
class Finding:
    """What the doctor found for one key column (``--json`` prints these fields)."""

    table: str
    column: str
    primary: bool
    sql_type: str
    kind: str
    format: str | None
    in_order: bool | None
    in_order_share: float | None
    keys_layout: str | None
    needed_layout: str | None
    rows: int | None
    index_bytes: int | None
    ideal_index_bytes: int | None
    sampled: int
    advice: str
    references: str | None = None
    """The table whose key this column copies (its own foreign key): the fix belongs there."""
    new_keys: str | None = None
    """Of a column that holds random keys and time-ordered ones made since (kind ``adopted``): where
    the time-ordered ones land in the index, ``"after-old-keys"`` (at its right edge, as in a table of
    their own) or ``"among-old-keys"`` (inside the old keys' range)."""
    new_keys_format: str | None = None
    """The time-ordered keys' format there (``adopted``: seqid's keys after one bits; ``uuid7``)."""
    half_splits: bool | None = None
    """Whether the engine splits a full index page that is not its level's last 50/50 (PostgreSQL):
    keys landing among old ones then leave the pages they fill half empty."""
    record: int | None = None
    """The width of adopted keys the column's adoption recorded (``0``: plain keys), ``None``: no record."""
    widths: tuple[int, ...] = ()
    """The widths of the adopted keys sampled (``0`` for plain UUIDv7 keys beside them): more than one is
    processes that judged the column differently."""
    kept_above: int = 0
    """Old keys sampled above every new key: sentinels, or the far tail of the random keys, which stay on
    the index's rightmost page."""
    plan: str | None = None
    """Of an integer primary key: how it moves to seqid keys online (:mod:`seqid_orm.schema.rekey`), the
    tables, foreign keys and rows that touches, about how long, what each step locks, and what holds its keys
    without a foreign key; or why it cannot move online here."""

    @property
    def problem(self) -> str | None:
        """``random-uuid`` (new keys land all over the index), ``out-of-order``, or ``inside-old-keys``
        (time-ordered keys landing among old random ones, on an engine that splits those pages half),
        else ``None``."""
        if self.kind == "random-uuid":
            return self.kind
        if self.in_order is False:
            return "out-of-order"
        if self.new_keys == "among-old-keys" and self.half_splits:
            return "inside-old-keys"
        if len(self.widths) > 1 and self.half_splits:
            return "widths-disagree"
        return None

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return asdict(self)


def check_timeout(timeout_s: object) -> float:
    """The doctor's ``timeout`` (seconds per statement), or :class:`InvalidArgumentError` naming it:
    both adapters' doors ask here before they connect."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 3600:
        raise InvalidArgumentError(f"timeout must be seconds between 0 and 3600, got {timeout_s!r}")
    return float(timeout_s)


class StatementDeadline:
    """SQLite's per-statement deadline, which it lacks: ``sqlite3``'s progress handler asks
    :meth:`expired` every 10,000 virtual-machine steps and a true answer interrupts the statement
    (``OperationalError: interrupted``), and each read arms it with :meth:`start`.  A statement run
    before the first :meth:`start` is interrupted at once: every read of the doctor goes through an
    armed :class:`Executor`.  One object here, used by both adapters, so the deadline is decided once.

    See https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.set_progress_handler.
    """

    STEPS = 10_000  # virtual-machine steps between two asks: about a millisecond of work

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout = check_timeout(timeout_s)
        self._clock = clock
        self._deadline = 0.0

    def start(self) -> None:
        """Give the next statement ``timeout_s`` seconds from now."""
        self._deadline = self._clock() + self._timeout

    def expired(self) -> int:
        """The progress handler: non-zero interrupts the statement under way."""
        return int(self._clock() > self._deadline)

    def install(self, sqlite_connection: Any) -> None:
        """Set :meth:`expired` as ``sqlite_connection``'s progress handler."""
        sqlite_connection.set_progress_handler(self.expired, self.STEPS)

    @staticmethod
    def uninstall(sqlite_connection: Any) -> None:
        """Take the progress handler off again (a connection the caller goes on using)."""
        sqlite_connection.set_progress_handler(None, 0)


def session_statements(vendor: str, timeout_s: float) -> list[str]:
    """What to run first on the doctor's own connection (committed before the reads): read-only
    transactions and a statement timeout, so no read it makes can write or run away (the vendor's)."""
    return _rules(vendor).session_statements(check_timeout(timeout_s))


def _rules(vendor: str) -> DoctorRules:
    """The vendor's :class:`~seqid_orm.vendors.DoctorRules`, or the refusal naming the vendors the doctor reads."""
    rules = rules_for(vendor).DOCTOR
    if rules is None:
        raise _unsupported(vendor)
    return rules


def _unsupported(vendor: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"seqid doctor reads {', '.join(DOCTOR_VENDORS)}; not {vendor}")


# --- the catalog ---------------------------------------------------------------------------------


def _keyish(sql_type: str, primary: bool) -> bool:
    low = sql_type.lower()
    return primary or any(word in low for word in ("uuid", "int", "binary(16)", "char(32)", "char(36)"))


def _quote(vendor: str, name: str) -> str:
    """``name`` as an identifier in an :class:`Executor`'s statement: quoted as the vendor quotes, and each
    colon written ``\\:``, which the executors read as a colon, not a parameter (a table ``a :b``)."""
    return read_quote(quote_identifier(vendor, name))


# --- the sample -------------------------------------------------------------------------------


_PREFIX = 16  # characters of a text key a pivot is made of
_VERSION_BITS = (0xF << 76) | (0b11 << 62)  # a UUID's version nibble and variant bits


class _Digits:
    """How keys become numbers to interpolate pivots on, and pivots become keys again, decided once
    for the column from the keys at both ends: integers as they are, UUIDs by their 128 bits, text
    by its first sixteen characters as digits of the keys' own alphabet (the characters the lowest
    and highest keys use, in order).  ASCII codes as digits left most pivots of base32 text (ULID,
    bsv) in the gaps between '9' and 'A' or past 'Z', where no key is: with keys spread over two
    hours, 10 runs sampled 136 keys instead of 500.

    One representation for the whole column: a text column holding one UUID string below keys of
    many distinct characters would mix the two and make a pivot past 128 bits ("int is out of
    range"); a column of several SQLite storage classes (integers, reals, text, blobs) has no
    numbers at all, and is sampled at its two ends only."""

    def __init__(
        self, samples: list[object], order_of: Callable[[uuid.UUID], Sequence[int] | None] | None = None
    ) -> None:
        # A UUID type that compares its bytes in another order than their integer value (MariaDB's
        # swaps versions 1-5 group by group, not the others): the pivots are made in the order the
        # database compares, or its runs start where the integer order says and overlap (200-800
        # distinct keys of 1,000 asked).  ``order_of`` is the vendor's compare_order.
        self.order_of = order_of
        # each compare order the keys use, with a key of it (whose version and variant bits a pivot takes)
        self.orders: dict[tuple[int, ...], uuid.UUID] = {}
        for value in samples if order_of is not None else ():
            u = as_uuid(value)
            order = None if u is None or order_of is None else order_of(u)
            if u is not None and order is not None:
                self.orders.setdefault(tuple(order), u)
        chars = {ch for value in samples if isinstance(value, str) for ch in value[:_PREFIX]}
        self.alphabet = "".join(sorted(chars)) or " "
        self.kind: str | None = None
        if all(isinstance(v, int) and not isinstance(v, bool) for v in samples):
            self.kind = "int"
        elif all(as_uuid(v) is not None for v in samples):
            self.kind = "uuid"
        elif all(isinstance(v, str) for v in samples):
            self.kind = "text"

    def number(self, value: object) -> int | None:
        if self.kind == "int" and isinstance(value, int):
            return value
        if self.kind == "uuid":
            u = as_uuid(value)
            if u is None:
                return None
            order = self.order_of(u) if self.order_of is not None else None
            return u.int if order is None else int.from_bytes(sort_key(u, order), "big")
        if self.kind == "text" and isinstance(value, str):
            base, text = len(self.alphabet), value[:_PREFIX].ljust(_PREFIX, self.alphabet[0])
            number = 0
            for ch in text:
                number = number * base + self._rank(ch)
            return number
        return None

    def _in_compared_order(self, n: int) -> uuid.UUID:
        """The UUID whose bytes, read in the database's compare order, are ``n``: of the orders the
        column's keys use, the one the result itself is compared in (MariaDB decides by the
        value's version); the integer itself where no order fits."""
        wanted = n.to_bytes(16, "big")
        for order, key in self.orders.items():
            raw = bytearray(16)
            for k, position in enumerate(order):
                raw[position] = wanted[k]
            # the version and variant bits of a key compared in this order (MariaDB decides by them)
            u = uuid.UUID(int=(int.from_bytes(raw, "big") & ~_VERSION_BITS) | (key.int & _VERSION_BITS))
            if self.order_of is not None and tuple(self.order_of(u) or ()) == order:
                return u
        return uuid.UUID(int=n)

    def _rank(self, ch: str) -> int:
        return min(bisect.bisect_left(self.alphabet, ch), len(self.alphabet) - 1)

    def like(self, sample: object, n: int) -> object:
        """``n`` as a parameter of the same shape as ``sample``: a pivot."""
        if self.kind == "int":
            return n
        if self.kind == "text":
            base, out = len(self.alphabet), []
            for _ in range(_PREFIX):
                n, digit = divmod(n, base)
                out.append(self.alphabet[digit])
            return "".join(reversed(out))
        return _in_form_of(sample, self._in_compared_order(n))


def _in_form_of(sample: object, u: uuid.UUID) -> object:
    """``u`` as a parameter of ``sample``'s form: the object, 16 bytes, or 36- or 32-character text."""
    if isinstance(sample, uuid.UUID):
        return u
    if isinstance(sample, (bytes, bytearray, memoryview)):
        return u.bytes
    text = str(u) if len(str(sample)) == 36 else u.hex
    return text.upper() if str(sample).isupper() else text


def _sample(
    ex: Executor, vendor: str, column: KeyColumn, size: int, version: tuple[int, ...] | None = None
) -> list[list[object]]:
    table, col = _quote(vendor, column.table), _quote(vendor, column.column)
    if column.schema is not None:
        table = f"{_quote(vendor, column.schema)}.{table}"
    per_run = max(10, size // _RUNS)
    base = f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL"
    head = [r[0] for r in ex.fetch(f"{base} ORDER BY {col} LIMIT {per_run}", {})]
    if not head:
        return []
    tail = [r[0] for r in ex.fetch(f"{base} ORDER BY {col} DESC LIMIT {per_run}", {})][::-1]
    if not tail:  # emptied between the two reads (dropped and made again, its rows not yet in): no sample
        return []
    runs = [head, tail]
    native = column.sql_type.lower() == "uuid"  # a UUID type: compared as the vendor compares it
    digits = _Digits([*head, *tail], (lambda u: compare_order(vendor, version, Storage.NATIVE, u)) if native else None)
    low, high = digits.number(head[0]), digits.number(tail[-1])
    if low is not None and high is not None and high - low > 2 * per_run:
        for k in range(1, _RUNS - 1):
            pivot = digits.like(head[0], low + (high - low) * k // (_RUNS - 1))
            rows = ex.fetch(f"{base} AND {col} >= :pivot ORDER BY {col} LIMIT {per_run}", {"pivot": pivot})
            runs.append([r[0] for r in rows])
    if digits.kind == "uuid":
        # the band a UUIDv7 made in the last month sorts in: among random keys it is too narrow for the
        # pivots to meet (a millionth of the range for a day), and it is where keys adopted in place land
        recent = comb_at(_dt.datetime.now(_dt.timezone.utc) - _RECENT, Layout.TIME_FIRST, "min")
        pivot = _in_form_of(head[0], recent)
        rows = ex.fetch(f"{base} AND {col} >= :pivot ORDER BY {col} LIMIT {per_run}", {"pivot": pivot})
        runs.append([r[0] for r in rows])
        # below each band of adopted keys the high end shows, the keys just under it: a band of narrower
        # adopted keys (processes that judged the column differently) sorts there, too thin for a pivot
        narrowest = min(_widths(tail), default=0)
        for _ in range(3):
            if not narrowest:
                break
            bound = digits.like(head[0], ((1 << narrowest) - 1) << (128 - narrowest))
            rows = ex.fetch(f"{base} AND {col} < :bound ORDER BY {col} DESC LIMIT {per_run}", {"bound": bound})
            below = [r[0] for r in rows][::-1]
            runs.append(below)
            narrower = min(_widths(below), default=0)
            narrowest = narrower if 0 < narrower < narrowest else 0
    return runs


def _widths(values: Sequence[object]) -> set[int]:
    """The widths of the adopted keys among ``values``."""
    found = (recognise(u.int) for u in map(as_uuid, values) if u is not None)
    return {f.above for f in found if f is not None}


# --- the judgement ----------------------------------------------------------------------------


def _storage(sql_type: str, text_form: str | None, sample: object) -> Storage | None:
    low = sql_type.lower()
    if low == "uuid":
        return Storage.NATIVE
    if text_form == "hex":
        return Storage.HEX
    if text_form == "text":
        return Storage.TEXT
    if isinstance(sample, (bytes, bytearray, memoryview)):
        return Storage.BINARY
    return None


def _ideal_index_bytes(vendor: str, column: KeyColumn) -> int | None:
    """The column's index built in key order: what the catalog's reader knew, else the vendor's model of
    its B-tree (PostgreSQL's), else nothing to compare the index with."""
    if column.ideal_bytes is not None:
        return column.ideal_bytes
    return _rules(vendor).ideal_index_bytes(column)


_KEEP = (
    "Existing rows keep their ids; new keys append at the end of the index "
    "(REINDEX to compact what the random keys left)."
)


def _advice(vendor: str, finding: dict[str, Any], storage: Storage | None) -> str:
    """The one change for this column: for its primary key or, for a unique column that is not
    the key, the same default without ``primary_key``; and the migration it really runs.  A UUID
    kept as text (``char(32)``/``char(36)``) stays text in SQLAlchemy (``storage=``), while Django's
    field is a UUID column: changing a ``CharField`` to it alters the column's type, a table rewrite
    with each foreign key to it dropped and added again (it was once said to run no SQL)."""
    kind, in_order, needed = finding["kind"], finding["in_order"], finding["needed_layout"]
    column = finding["column"]
    parent = finding.get("references")
    if parent and (kind == "random-uuid" or in_order is False):
        return (
            f"{column} is a foreign key to {parent} (a multi-table child's pointer, or a one-to-one): its values "
            f"are {parent}'s keys, so change the key of {parent}, and this column follows; nothing to change here."
        )
    store = "" if storage in (None, Storage.NATIVE) else f'storage="{storage.value}"'
    if finding["primary"]:
        model = (
            f"SQLAlchemy: {column}: Mapped[uuid.UUID] = seq_uuid_pk({store}); "
            "Django: SeqUUIDField(primary_key=True, editable=False)"
        )
    else:  # a unique column beside the key: the key is not this one
        typed = f"SeqUUID({store})" if store else "SeqUUID()"
        model = (
            f"SQLAlchemy: {column}: Mapped[uuid.UUID] = mapped_column({typed}, unique=True, "
            "default=seq_uuid_default); Django: SeqUUIDField(unique=True, editable=False)"
        )
    if kind == "random-uuid":
        if storage in (None, Storage.NATIVE, Storage.BINARY):
            migration = (
                "Django writes one AlterField, no SQL on PostgreSQL and MariaDB, and seqid's makemigrations the "
                "AdoptSeqUUID beside it; Alembic's autogenerate (with seqid's env.py) op.adopt_seqid_keys, the "
                "column type staying: on PostgreSQL they decide once how new keys sort after the old ones and "
                "record it for every process"
            )
        elif finding["primary"] and rules_for(vendor).REKEY is not None:
            migration = (
                "seqid's rekey_expand / RekeyExpand, then rekey_contract / RekeyContract (autogenerate and "
                "makemigrations write them) make the column the uuid type online, with every foreign key to it, "
                "over two releases (the plan below); or keep the column as text and declare its storage"
            )
        else:
            migration = (
                "Alembic: none (the column stays text). Django: a CharField becoming SeqUUIDField changes the "
                "column's type, a rewrite of the table with each foreign key to it dropped and added again "
                "(sqlmigrate shows it): run it in a maintenance window, or keep the CharField with a default "
                "of your own returning seqid_orm.uuid7() as text"
            )
        return f"{model}. Migration: {migration}. {_KEEP}"
    if kind == "time-ordered" and in_order is False:
        where = finding["keys_layout"] or finding["format"]
        return (
            f"the keys carry their time where {vendor} does not compare first ({where}); {model} makes "
            f"them in the layout this column needs{f' ({needed})' if needed else ''}. {_KEEP}"
        )
    if kind == "text" and in_order is False:
        return (
            "the column's collation does not keep these ids in time order: "
            "give it a binary collation (SortableText does)."
        )
    if kind == "unknown":
        return "seqid cannot tell what these keys are; nothing to advise."
    return "fine: new keys append at the end of the index."


@dataclass(frozen=True)
class _Mixed:
    """A UUID column's sample that holds time-ordered keys seqid or a UUIDv7 generator made beside old
    random ones, or adopted keys beside plain ones (kind ``adopted``)."""

    new_keys: str
    new_format: str
    ms_of: Callable[[object], int | None]
    widths: tuple[int, ...]
    kept_above: int


def _new_key_ms(value: object) -> int | None:
    """The time of a time-ordered key seqid or a UUIDv7 generator made (``None`` for any other)."""
    u = as_uuid(value)
    if u is None:
        return None
    adopted = recognise(u.int)
    if adopted is not None:
        return adopted.decode(adopted.from_uuid_int(u.int))[0]
    if (u.int >> 76) & 0xF == 7 and (u.int >> 62) & 0b11 == 0b10:
        return u.int >> 80
    return None


def _mixed(
    vendor: str, version: tuple[int, ...] | None, storage: Storage | None, values: list[object]
) -> _Mixed | None:
    """Whether ``values`` (one sample, in any order) are old random keys and new time-ordered ones (or
    adopted keys and plain ones, with or without old keys), and where the new ones land in the database's
    order: after every old one but those that sort above even the widest adopted keys (sentinels, the far
    tail: they stay on the rightmost page), or among them."""
    if storage is None or not values:
        return None
    old: list[bytes] = []
    new: list[bytes] = []
    widths: set[int] = set()
    for value in {repr(v): v for v in values}.values():
        u = as_uuid(value)
        if u is None:
            return None
        order = compare_order(vendor, version, storage, u)
        if order is None:
            return None
        if _new_key_ms(value) is not None:
            new.append(sort_key(u, order))
            found = recognise(u.int)
            widths.add(0 if found is None else found.above)
        elif ((u.int >> 76) & 0xF == 4 and (u.int >> 62) & 0b11 == 0b10) or leading_ones(sort_key(u, order)) >= 16:
            old.append(sort_key(u, order))
    least = max(3, int(_SOME * (len(old) + len(new))))
    two_kinds = 0 in widths and len(widths) > 1 and len(new) >= least
    if not two_kinds and (len(old) < least or len(new) < least):
        return None
    widest = max(widths)
    above = [k for k in old if k > min(new)]
    kept = [k for k in above if widest and leading_ones(k) > widest]
    where = "after-old-keys" if len(above) == len(kept) else "among-old-keys"
    formats = {"uuid7" if w == 0 else "adopted" for w in widths}
    new_format = formats.pop() if len(formats) == 1 else "mixed"
    return _Mixed(where, new_format, _new_key_ms, tuple(sorted(widths)), len(kept))


def _adopted_advice(vendor: str, mixed: _Mixed, half_splits: bool, ratio: float | None, record: int | None) -> str:
    """What helps a column of old random keys and new time-ordered ones: nothing, one REINDEX, or the
    adoption's record, where processes judged the column differently."""
    recorded = f"recorded ({record} one bits)" if record else "recorded (plain keys)" if record == 0 else ""
    if half_splits and len(mixed.widths) > 1:
        kinds = " and ".join("plain UUIDv7" if w == 0 else f"after {w} one bits" for w in mixed.widths)
        return (
            f"keys {kinds} in one column: processes judged it differently (a table emptied under them, a role that "
            "could not read its keys, tenants that each saw their own rows), and the narrower keys land below the "
            "wider ones. "
            + (
                f"The column's record says {record} one bits: restart the processes that made the others."
                if record is not None
                else "Record the adoption, which keeps the widest so new keys sort after every one: "
                "op.adopt_seqid_keys(table, column) (Alembic) or AdoptSeqUUID (Django); every process then reads it."
            )
        )
    if mixed.new_keys == "after-old-keys":
        said = (
            "an adopted column: the old random keys stay where they are and new keys append after them, at the "
            "end of the index, as in a table of their own."
        )
        if mixed.kept_above:
            said += (
                f" {mixed.kept_above} old key(s) sort above the new ones (sentinels, or the far tail of the random "
                "keys): they stay on the index's rightmost page, which still fills as the right edge does."
            )
        if half_splits and mixed.widths and mixed.widths[-1]:
            width = mixed.widths[-1]
            duplicates = expected_duplicates(width, 10_000)
            said += (
                f" Keys after {width} one bits: {duplicates:.2g} duplicate keys a year expected at 10,000 inserts a "
                f"second ({expected_duplicates(width, 10_000, made_by='database'):.2g} for keys the database makes)."
            )
            if not recorded:
                said += (
                    " No record of the adoption: each process judges the keys it can read. Record it with "
                    "op.adopt_seqid_keys(table, column) (Alembic) or AdoptSeqUUID (Django)."
                )
            else:
                said += f" The adoption is {recorded}."
        if ratio is not None and ratio > _REINDEX_FROM:
            return (
                f"{said} The index is {ratio:.2f}x its size built in key order, which the old random keys left: "
                "REINDEX INDEX CONCURRENTLY compacts it once, and the new part stays full."
            )
        return f"{said} Nothing to do." if recorded or not half_splits or not mixed.widths[-1] else said
    if not half_splits:
        return (
            f"new keys land among the old random keys, which {vendor} handles well (it splits a page where the "
            "inserts go): nothing to do."
        )
    return (
        f"the new keys ({mixed.new_format}) land among the old random keys, and {vendor} splits a page that is not "
        "its level's last 50/50: the new part of the index grows half empty. Make them with seqid_orm's "
        "SeqUUIDField or seq_uuid_pk() and record the adoption once, in the swap's migration "
        "(op.adopt_seqid_keys(table, column), which autogenerate writes, or AdoptSeqUUID, which seqid's "
        "makemigrations writes): new keys then sort after the old ones (a database default: op.set_seqid_default, "
        "or db_default=DatabaseSeqUUID() set again by a migration); then REINDEX INDEX CONCURRENTLY once to "
        "compact what they left."
    )


def _judge(vendor: str, version: tuple[int, ...] | None, column: KeyColumn, runs: list[list[object]]) -> Finding:
    values = [v for run in runs for v in run]
    text_form = None
    if values and all(isinstance(v, str) for v in values):
        text_form = "text" if all(len(str(v)) == 36 for v in values) else "hex"
    kept_as = _storage(column.sql_type, text_form, values[0] if values else None)
    mixed = _mixed(vendor, version, kept_as, values)
    if mixed is not None and kept_as is not None:
        return _judge_mixed(vendor, version, column, runs, mixed, kept_as)
    found = classify(values)
    share, _pairs = in_order_share(runs, found.ms_of) if found.ms_of is not None else (None, 0)
    in_order = None if share is None else share >= _IN_ORDER
    storage = _storage(column.sql_type, found.text_form, values[0] if values else None)
    needed = None
    if found.kind in ("random-uuid", "time-ordered") and storage is not None:
        try:
            needed = target(vendor, version, storage).layout.value
        except (UnknownLayoutError, InvalidArgumentError):
            needed = None
    fields: dict[str, Any] = {
        "table": column.name,
        "column": column.column,
        "primary": column.primary,
        "sql_type": column.sql_type,
        "kind": found.kind,
        "format": found.format,
        "in_order": in_order,
        "in_order_share": None if share is None else round(share, 4),
        "keys_layout": found.layout,
        "needed_layout": needed,
        "rows": column.rows,
        "index_bytes": column.index_bytes,
        "ideal_index_bytes": _ideal_index_bytes(vendor, column),
        "sampled": len(set(map(repr, values))),
        "references": column.references,
        "record": column.record,
    }
    return Finding(**fields, advice=_advice(vendor, fields, storage))


def _judge_mixed(
    vendor: str,
    version: tuple[int, ...] | None,
    column: KeyColumn,
    runs: list[list[object]],
    mixed: _Mixed,
    storage: Storage,
) -> Finding:
    values = [v for run in runs for v in run]
    share, _pairs = in_order_share(runs, mixed.ms_of)
    ideal = _ideal_index_bytes(vendor, column)
    ratio = column.index_bytes / ideal if column.index_bytes and ideal else None
    half_splits = rules_for(vendor).INNER_SPLITS_HALF
    try:
        needed: str | None = target(vendor, version, storage).layout.value
    except (UnknownLayoutError, InvalidArgumentError):
        needed = None
    return Finding(
        table=column.name,
        column=column.column,
        primary=column.primary,
        sql_type=column.sql_type,
        kind="adopted",
        format=mixed.new_format,
        in_order=None if share is None else share >= _IN_ORDER,
        in_order_share=None if share is None else round(share, 4),
        keys_layout=Layout.TIME_FIRST.value,
        needed_layout=needed,
        rows=column.rows,
        index_bytes=column.index_bytes,
        ideal_index_bytes=ideal,
        sampled=len(set(map(repr, values))),
        advice=_adopted_advice(vendor, mixed, half_splits, ratio, column.record),
        references=column.references,
        new_keys=mixed.new_keys,
        new_keys_format=mixed.new_format,
        half_splits=half_splits,
        record=column.record,
        widths=mixed.widths,
        kept_above=mixed.kept_above,
    )


def check_schemas(schemas: object) -> tuple[str, ...] | None:
    """The doctor's ``schemas`` (PostgreSQL schema names to read; ``None``: every schema), or
    :class:`InvalidArgumentError` naming the problem: both adapters' doors ask here before they
    connect, and :func:`examine` refuses them on another vendor."""
    if schemas is None:
        return None
    if not isinstance(schemas, (list, tuple)) or not schemas or not all(isinstance(x, str) and x for x in schemas):
        raise InvalidArgumentError(f"schemas must be a list of schema names, got {schemas!r}")
    return tuple(schemas)


def examine(
    ex: Executor,
    vendor: str,
    server_version: tuple[int, ...] | None = None,
    *,
    sample: int = 1000,
    schemas: Sequence[str] | None = None,
) -> list[Finding]:
    """Every key column's :class:`Finding`, worst first (random keys, then keys out of order,
    then unknown ones; the larger table first), reading at most about ``sample`` keys per column.

    PostgreSQL: every schema but the system's (a table outside the current schema is named
    ``schema.table``), or only ``schemas``; a partitioned table once, by its parent."""
    rules = _rules(vendor)
    if isinstance(sample, bool) or not isinstance(sample, int) or not 20 <= sample <= 1_000_000:
        raise InvalidArgumentError(f"sample must be an int from 20 to 1,000,000, got {sample!r}")
    wanted = check_schemas(schemas)
    if wanted is not None and not rules.SCHEMAS:
        raise InvalidArgumentError(
            f"schemas are PostgreSQL's schemas and SQLite's attached databases; on {vendor} the doctor reads the "
            "database the URL names"
        )
    findings = []
    for column in _catalog(ex, rules):
        if wanted is not None and column.schema not in wanted:
            continue
        if column.table in _SKIP_TABLES or not _keyish(column.sql_type, column.primary):  # seqid's own, any schema
            continue
        runs = _sample_if_there(ex, vendor, column, sample, server_version)
        if isinstance(runs, DatabaseUnavailableError):  # one table it cannot read costs its own line
            findings.append(_unreadable(column, runs))
        elif runs is not None:
            findings.append(_judge(vendor, server_version, column, runs))
    findings = _with_plans(ex, vendor, server_version, findings)
    order = {"random-uuid": 0, "out-of-order": 1, "inside-old-keys": 1, "widths-disagree": 1, None: 2}
    return sorted(findings, key=lambda f: (order[f.problem], f.kind != "unknown", -(f.rows or 0), f.table, f.column))


def _with_plans(ex: Executor, vendor: str, version: tuple[int, ...] | None, findings: list[Finding]) -> list[Finding]:
    """``findings``, each primary key of the current schema that the rekey changes (integers; UUIDs kept as text
    where the vendor changes those) with its :attr:`Finding.plan`."""
    from dataclasses import replace

    from ..errors import MigrationRefusedError
    from . import rebuild, rekey

    rules = rules_for(vendor).REKEY
    rows = {f.table: f.rows for f in findings if f.primary}
    out = []
    for f in findings:
        kind = None if rules is None else rules.source_kind(f.sql_type)
        planned = f.kind == "integer-sequence" or (kind == "text" and f.kind in ("random-uuid", "time-ordered"))
        if not (f.primary and planned and "." not in f.table):
            out.append(f)
            continue
        if rules_for(vendor).REBUILD is not None and f.kind == "integer-sequence" and f.primary:
            try:
                refs = rebuild.followed(ex, vendor, f.table, f.column)
            except MigrationRefusedError as exc:
                out.append(replace(f, plan=f"not changed here: {exc}"))
                continue
            out.append(replace(f, plan=rebuild.describe(f.table, refs, rows)))
            continue
        try:
            where = target(vendor, version, Storage.NATIVE)
            plan = rekey.plan_for(ex, where, f.table, "uuid", read_every_row=False)
            untracked = ex.fetch(*plan.rules.untracked())
        except (MigrationRefusedError, InvalidArgumentError, UnknownLayoutError) as exc:
            out.append(replace(f, plan=f"not online here: {exc}"))
            continue
        except DatabaseUnavailableError as exc:
            ex.recover()
            out.append(replace(f, plan=f"not read: {exc}"))
            continue
        out.append(replace(f, plan=rekey.describe(plan, rows, [(str(t), str(c), str(k)) for t, c, k in untracked])))
    return out


def _sample_if_there(
    ex: Executor, vendor: str, column: KeyColumn, size: int, version: tuple[int, ...] | None
) -> list[list[object]] | DatabaseUnavailableError | None:
    """The column's sample; ``None`` where its table went since the catalog was read (a migration, a
    test, a temporary table: not there, so no finding); the error where the table is there and would not
    be read (locked, not granted).  A table dropped and made again under the same name between two reads
    is read again, a few times at most."""

    def attempt(left: float) -> Steps[list[list[object]] | DatabaseUnavailableError | None]:
        try:
            return _sample(ex, vendor, column, size, version)
        except DatabaseUnavailableError as exc:
            ex.recover()
            if not _exists(ex, vendor, column):
                return None
            if _MISSING.search(str(exc)):  # made again under its name meanwhile: read it again
                raise Again(exc) from None
            return exc  # locked, not granted: once is enough to say so
        yield  # a generator of no step: the policy's loop runs it

    try:
        sample: list[list[object]] | DatabaseUnavailableError | None = drive(TABLE_MADE_AGAIN.steps(attempt), None)
    except DatabaseUnavailableError as exc:  # made again at every try
        return exc
    return sample


#: A table's sample read again where the table was dropped and made again under its name between two reads.
TABLE_MADE_AGAIN = Retry(3, why="a table dropped and made again under its name while it was read")


#: A catalog read that failed is read once more: a schema changed by another session while it was read (a
#: table dropped between two of its look-ups) is a passing state, not the database.
CATALOG_CHANGED = Retry(2, why="a schema another session changed while the catalog was read")


def _catalog(ex: Executor, rules: DoctorRules) -> list[KeyColumn]:
    """The key columns (:data:`CATALOG_CHANGED`: read again once where the read fails)."""

    def attempt(left: float) -> Steps[list[KeyColumn]]:
        return rules.key_columns(ex.fetch, ex.recover)
        yield  # a generator of no step: the policy's loop runs it

    def again(exc: Exception) -> bool:
        if isinstance(exc, DatabaseUnavailableError):
            ex.recover()
            return True
        return False

    found: list[KeyColumn] = drive(CATALOG_CHANGED.steps(attempt, again), None)
    return found


def _exists(ex: Executor, vendor: str, column: KeyColumn) -> bool:
    """Whether ``column``'s table is still there (a failed read of a table dropped meanwhile is no finding)."""
    try:
        rows = ex.fetch(*_rules(vendor).exists(column.table, column.schema))
    except DatabaseUnavailableError:
        ex.recover()
        return True  # cannot tell: say what the read said
    return bool(rows and rows[0][0] is not None)


def _unreadable(column: KeyColumn, exc: DatabaseUnavailableError) -> Finding:
    """The finding for a column whose keys the database would not hand over (locked, not granted)."""
    return Finding(
        table=column.name,
        column=column.column,
        primary=column.primary,
        sql_type=column.sql_type,
        kind="unreadable",
        format=None,
        in_order=None,
        in_order_share=None,
        keys_layout=None,
        needed_layout=None,
        rows=column.rows,
        index_bytes=column.index_bytes,
        ideal_index_bytes=None,
        sampled=0,
        advice=f"not read: {exc}",
    )


def failing(findings: Sequence[Finding], fail_on: Sequence[str]) -> list[Finding]:
    """The findings that ``--fail-on`` names (kinds, ``out-of-order`` or ``inside-old-keys``)."""
    wrong = [f for f in fail_on if f not in FAIL_ON]
    if wrong:
        raise InvalidArgumentError(f"--fail-on takes {', '.join(FAIL_ON)}; not {', '.join(wrong)}")
    return [f for f in findings if f.kind in fail_on or f.problem in fail_on]


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    size, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


_WIDTH_OF_SCREEN = 80


def _count(n: int | None) -> str:
    """A row count in at most six characters: ``512``, ``20.0k``, ``10.0M``."""
    if n is None:
        return "-"
    for scale, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def render(findings: Sequence[Finding]) -> str:
    """One screen for a person, readable at 80 columns: a line per key column, worst first, each
    ``table.column`` whole; the empty tables in one line; then the advice for each problem,
    wrapped.  ``index`` is the key's index, ``xideal`` how many times the same index built in key
    order it is (PostgreSQL)."""
    if not findings:
        return "no single-column keys found"
    empty = [f for f in findings if f.kind == "unknown" and f.sampled == 0]
    shown = [f for f in findings if f not in empty]
    names = [f"{f.table}.{f.column}" for f in shown]
    fmt_width = max([len("format"), *(len(f.format or "-") for f in shown)])
    rest = 16 + fmt_width + 8 + 6 + 9 + 6 + 6  # the other columns and the spaces between
    # names wider than what 80 columns leave get a line of their own, whole, above their row
    width = max(len("table.column"), min(max(map(len, names), default=0), _WIDTH_OF_SCREEN - rest))
    lines = [
        f"{'table.column':<{width}} {'kind':<16} {'format':<{fmt_width}} {'in order':<8} "
        f"{'rows':>6} {'index':>9} {'xideal':>6}".rstrip()
    ]
    for name, f in zip(names, shown, strict=True):
        order = "-" if f.in_order is None else ("yes" if f.in_order else f"NO {f.in_order_share:.0%}")
        ratio = "-"
        if f.index_bytes and f.ideal_index_bytes:
            ratio = f"{f.index_bytes / f.ideal_index_bytes:.2f}"
        if len(name) > width:
            lines.append(name)
            name = ""
        lines.append(
            f"{name:<{width}} {f.kind:<16} {(f.format or '-'):<{fmt_width}} {order:<8} "
            f"{_count(f.rows):>6} {_size(f.index_bytes):>9} {ratio:>6}"
        )
    if empty:
        listed = ", ".join(f"{f.table}.{f.column}" for f in empty)
        lines.append(
            textwrap.fill(
                f"{len(empty)} empty table(s), nothing to judge: {listed}",
                _WIDTH_OF_SCREEN,
                subsequent_indent="  ",
                break_on_hyphens=False,
            )
        )
    planned = [f for f in shown if f.plan is not None]
    if planned:
        lines.append("")
        for f in planned:
            lines.append(
                textwrap.fill(
                    f"{f.table}.{f.column} (plan): {f.plan}",
                    _WIDTH_OF_SCREEN,
                    subsequent_indent="  ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    said = [f for f in shown if f.problem is not None or f.kind == "unreadable"]
    if said:
        lines.append("")
        for f in said:
            lines.append(
                textwrap.fill(
                    f"{f.table}.{f.column} ({f.problem or f.kind}): {f.advice}",
                    _WIDTH_OF_SCREEN,
                    subsequent_indent="  ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    return "\n".join(lines)


def render_json(findings: Sequence[Finding], errors: Sequence[BaseException] = ()) -> str:
    """``--json``: always one document, ``{"findings": [...], "errors": [...]}``: every
    :class:`Finding` field, and what stopped the run (``type``, ``message``) when it could not
    check (exit status 2), so a script reads one shape whatever happened.  A table it could not
    read is a finding of kind ``unreadable``, not an error: the rest was checked."""
    return json.dumps(
        {
            "findings": [f.as_dict() for f in findings],
            "errors": [{"type": type(e).__name__, "message": str(e)} for e in errors],
        },
        indent=2,
    )
