"""The single place that decides which layout keeps ids ordered on a given database.

Both ORM adapters call :func:`choose_layout` with what they know of the live connection:
the vendor, the server version and how the column stores the id (:class:`Storage`).  The
registry answers in two steps:

1. :func:`compare_order` — in which order does this engine compare the 16 bytes of *this*
   value?  The value matters: MariaDB's ``UUID`` type swaps some UUID versions and not others.
2. :func:`~seqid_orm.layout.layout_for_order` — which layout's time and counter come first
   in that order?

The live probe (:mod:`seqid_orm.sqlalchemy.probe`) measures step 1 on a real server instead of
looking it up, and the test suite checks that both agree.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ArgumentTypeError, InvalidArgumentError, UnknownLayoutError
from ..ids.comb import comb_at
from ..ids.layout import (
    ORDER_BYTES,
    ORDER_MARIADB_SWAPPED,
    ORDER_SQLSERVER,
    Layout,
    as_layout,
    candidates,
    coerce_enum,
    fits,
    layout_for_order,
)

ServerVersion = Sequence[int] | None


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


#: Binary collations per vendor, for text ids whose case matters; vendors missing here
#: (SQLite, Oracle) compare text bytewise by default.
BINARY_COLLATIONS = {
    "mysql": "ascii_bin",
    "mariadb": "ascii_bin",
    "tidb": "ascii_bin",
    "postgresql": "C",
    "cockroachdb": "C",
    "yugabytedb": "C",
    "mssql": "Latin1_General_BIN2",
}


@dataclass(frozen=True)
class TextColumnSpec:
    """How a text-id column is declared on one vendor (both adapters build their DDL from it)."""

    charset: str | None
    """A character set to declare (MySQL/MariaDB: ``ascii``, one byte per character)."""
    collation: str | None
    """A binary collation, so ids differing in case never compare equal (``None``: bytewise already)."""


def text_id_column(vendor: str) -> TextColumnSpec:
    """The column spec for sortable text ids on ``vendor``."""
    charset = "ascii" if vendor in ("mysql", "mariadb", "tidb") else None
    return TextColumnSpec(charset, BINARY_COLLATIONS.get(vendor))


def integer_key_is_rowid_type(vendor: str) -> bool:
    """Whether an integer primary key must be declared ``INTEGER`` (not ``BIGINT``) on ``vendor``.

    SQLite makes a primary key the table's rowid only when it is declared exactly ``INTEGER``
    (https://sqlite.org/lang_createtable.html#rowid); ``BIGINT`` adds a second B-tree.
    """
    return vendor == "sqlite"


#: Vendor names understood here (SQLAlchemy's dialect names; Django's are mapped onto them).
#: TiDB and YugabyteDB speak the MySQL and PostgreSQL protocols; the adapters tell them apart by
#: their version strings (:func:`distributed_flavor`).
VENDORS = ("postgresql", "cockroachdb", "yugabytedb", "mssql", "mariadb", "mysql", "tidb", "oracle", "sqlite")

#: Engines that spread a table over ranges by key: a strictly increasing key sends every insert to
#: the last range (a write hot spot), so they get the ``SHARDED`` layout unless told otherwise.
DISTRIBUTED = ("cockroachdb", "tidb", "yugabytedb")


def distributed_flavor(version_text: str) -> str | None:
    """``"tidb"`` or ``"yugabytedb"`` when a server's version string names one (``VERSION()`` of TiDB
    is like ``8.0.11-TiDB-v7.5.0``; YugabyteDB's ``version()`` like ``PostgreSQL 11.2-YB-2.20.1.0``)."""
    if "tidb" in version_text.lower():
        return "tidb"
    if "-YB-" in version_text:
        return "yugabytedb"
    return None


_DJANGO_VENDORS = {"microsoft": "mssql"}


def normalize_vendor(name: str, *, is_mariadb: bool = False) -> str:
    """Map a dialect or Django vendor name onto :data:`VENDORS` (unknown names pass through)."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"vendor name must be a str, got {type(name).__name__}")
    name = name.lower()
    if name == "mysql" and is_mariadb:
        return "mariadb"
    return _DJANGO_VENDORS.get(name, name)


def has_native_uuid(vendor: str, server_version: ServerVersion) -> bool:
    """Whether the engine has a UUID column type of its own."""
    if vendor in ("postgresql", "cockroachdb", "yugabytedb", "mssql"):
        return True
    if vendor == "mariadb":
        return server_version is None or tuple(server_version[:2]) >= (10, 7)
    return False


def default_storage(vendor: str, server_version: ServerVersion) -> Storage:
    """What a column gets when the user does not choose: native, else 16 bytes, else text."""
    if has_native_uuid(vendor, server_version):
        return Storage.NATIVE
    if vendor in ("mysql", "mariadb", "tidb", "oracle", "sqlite"):
        return Storage.BINARY
    return Storage.TEXT


# MariaDB stopped byte-swapping UUIDs of version >= 6 in these releases (MDEV-29959 and
# MDEV-31926); every series after 11.1 has it from the start.
_MARIADB_UUID_FIX: dict[tuple[int, ...], tuple[int, ...]] = {
    (10, 10): (10, 10, 6),
    (10, 11): (10, 11, 5),
    (11, 0): (11, 0, 3),
    (11, 1): (11, 1, 2),
}


def mariadb_swaps_selectively(server_version: ServerVersion) -> bool:
    """True if this MariaDB stores only UUID versions 1-5 swapped (else it swaps all)."""
    if server_version is None:
        return True  # assume a current server; offline users pass layout= explicitly
    version = tuple(server_version[:3]) + (0,) * (3 - len(server_version[:3]))
    fixed = _MARIADB_UUID_FIX.get(version[:2])
    if fixed is not None:
        return version >= fixed
    return version >= (11, 2, 0)


def _mariadb_native_order(value: uuid.UUID, server_version: ServerVersion) -> tuple[int, ...] | None:
    i = value.int
    version = (i >> 76) & 0xF
    variant_rfc = (i >> 62) & 0b11 == 0b10
    variant_bit = (i >> 63) & 1
    if not mariadb_swaps_selectively(server_version):
        return ORDER_MARIADB_SWAPPED
    if variant_rfc and version >= 8:
        return None  # refused by the server: "Incorrect uuid value"
    if variant_bit and 1 <= version <= 5:
        return ORDER_MARIADB_SWAPPED
    return ORDER_BYTES


def compare_order(
    vendor: str, server_version: ServerVersion, storage: Storage | str, value: uuid.UUID
) -> tuple[int, ...] | None:
    """The order in which the engine compares the bytes of values shaped like ``value``.

    ``None`` when the engine cannot store such a value in that storage, or nothing is known.
    Text and hex storage compare like the bytes: lower-case hex digits sort in the same order
    under every collation (digits before letters), and hyphens sit at fixed places.
    """
    storage = Storage(storage)
    if storage is not Storage.NATIVE:
        return ORDER_BYTES
    if vendor in ("postgresql", "cockroachdb", "yugabytedb"):
        return ORDER_BYTES
    if vendor == "mssql":
        return ORDER_SQLSERVER
    if vendor == "mariadb" and has_native_uuid(vendor, server_version):
        return _mariadb_native_order(value, server_version)
    return None


@functools.cache
def layout_sample(layout: Layout) -> uuid.UUID:
    """A value with the fixed bits of ``layout`` (what the probe and the registry reason on)."""
    return comb_at(_dt.datetime(2020, 1, 1, tzinfo=_dt.timezone.utc), layout, "min")


def normalize_version(server_version: Sequence[object] | None) -> tuple[int, ...] | None:
    """A driver's version tuple as integers only (MariaDB's carries the string ``"MariaDB"``)."""
    if not server_version:
        return None
    return tuple(v for v in server_version if isinstance(v, int) and not isinstance(v, bool))


def resolve_storage(vendor: str, server_version: ServerVersion, requested: Storage | str | None) -> Storage:
    """The storage a column really gets: the vendor's default, or the requested one if it exists there."""
    if requested is None:
        return default_storage(vendor, server_version)
    storage = as_storage(requested)
    if storage is Storage.NATIVE and not has_native_uuid(vendor, server_version):
        raise InvalidArgumentError(
            f"storage='native' needs a UUID column type, which {vendor} {format_version(server_version)} "
            "does not have; use 'binary' or 'text'"
        )
    return storage


@functools.lru_cache(maxsize=1024)
def decide_layout(
    vendor: str,
    server_version: tuple[object, ...] | None,
    storage: Storage | str | None,
    preferred: Layout | None = None,
    is_mariadb: bool = False,
) -> Layout:
    """The decision every adapter asks for, memoised: the layout for this target.

    The adapters only describe their target — the vendor name as the driver or Django gives it,
    the raw server version, the storage asked for (``None``: the vendor's default) and the user's
    preferred layout — and this function does the rest once per distinct target: normalising,
    resolving the storage, and the rule for an unknown server version (an explicit layout is
    trusted, since nothing can be checked; otherwise the current server is assumed).
    """
    name = normalize_vendor(vendor, is_mariadb=is_mariadb)
    version = normalize_version(server_version)
    resolved = resolve_storage(name, version, storage)
    if version is None and preferred is not None:
        return as_layout(preferred)
    return choose_layout(name, version, resolved, preferred=preferred)


def choose_layout(
    vendor: str,
    server_version: ServerVersion,
    storage: Storage | str,
    *,
    preferred: Layout | None = None,
) -> Layout:
    """The layout whose ids the engine keeps in generation order.

    Every layout is tried with values of its own bits (``preferred`` first, then
    ``TIME_FIRST``, ``TIME_LAST``, ``TIME_FIRST_LE``); the first that the engine orders by its
    time wins.  On a distributed engine (:data:`DISTRIBUTED`) ``SHARDED`` is preferred unless
    the caller prefers another.  Raises :class:`~seqid_orm.errors.UnknownLayoutError` when none
    fits.  Adapters call the memoised :func:`decide_layout`.
    """
    if preferred is None and vendor in DISTRIBUTED:
        preferred = Layout.SHARDED
    for layout in candidates(preferred):
        order = compare_order(vendor, server_version, storage, layout_sample(layout))
        if order is not None and fits(layout, order):
            return layout
    raise UnknownLayoutError(
        f"no known layout keeps ids ordered on {vendor} {format_version(server_version)} with "
        f"{Storage(storage).value} storage; pass layout= explicitly or run seqid probe"
    )


def choose_prefix_layout(vendor: str, server_version: ServerVersion, storage: Storage | str) -> Layout:
    """Where the wrapping prefix of a sequence/time-prefixed id must go on this engine."""
    sample = uuid.UUID(int=(0x4 << 76) | (0b10 << 62))  # the RFC v4 bits those ids carry
    order = compare_order(vendor, server_version, storage, sample)
    layout = layout_for_order(order) if order is not None else None
    if layout is None:
        raise UnknownLayoutError(
            f"no known prefix placement for {vendor} {format_version(server_version)} "
            f"with {Storage(storage).value} storage"
        )
    return layout


def format_version(server_version: ServerVersion) -> str:
    """A server version for messages."""
    return "(version unknown)" if server_version is None else ".".join(map(str, server_version))
