"""SQLAlchemy column types whose storage follows the dialect of the connection.

:class:`SeqUUID` is always ``uuid.UUID`` in Python; in the database it is the engine's own
UUID type where there is one, 16 raw bytes where there is not, or text when asked.  Every
decision (storage, layout, literals, collations) is the dialect's :class:`~seqid_orm.vendors.Target`,
made once per dialect and column kind (:func:`dialect_target`); the types here only move values
in and out, refusing anything that is not a UUID before it reaches SQL.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, Literal

from sqlalchemy import types as sqltypes
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, UserDefinedType

from ..errors import ArgumentTypeError, UnknownLayoutError
from ..ids.layout import Layout, as_layout
from ..ids.text import BSV_LENGTH, check_text_id, text_id_kind
from ..ids.typeid import check_typeid_prefix, decode_typeid, encode_typeid
from ..ids.validate import BIGINT_MAX, coerce_int_id, coerce_uuid
from ..vendors import Storage, Target, as_storage, normalize_vendor, normalize_version, target


def dialect_vendor(dialect: Dialect) -> str:
    """The vendor name (:data:`seqid_orm.vendors.VENDORS`) of a SQLAlchemy dialect.

    TiDB shows in the MySQL dialect's parsed version (which keeps ``"TiDB"`` among its parts);
    YugabyteDB only in ``version()``, which :mod:`seqid_orm.sqlalchemy.defaults` reads once per
    engine at its first connection (``dialect.seqid_flavor``).
    """
    flavor = getattr(dialect, "seqid_flavor", None)
    if flavor:
        return str(flavor)
    parts = getattr(dialect, "server_version_info", None) or ()
    if dialect.name == "mysql" and any(isinstance(p, str) and "tidb" in p.lower() for p in parts):
        return "tidb"
    return normalize_vendor(dialect.name, is_mariadb=bool(getattr(dialect, "is_mariadb", False)))


def dialect_server_version(dialect: Dialect) -> tuple[int, ...] | None:
    """The server version the dialect saw on connect (``None`` before that, or offline)."""
    return normalize_version(getattr(dialect, "server_version_info", None))


def dialect_target(dialect: Dialect, storage: Storage | None = None, layout: Layout | None = None) -> Target:
    """The :class:`~seqid_orm.vendors.Target` of columns with this storage and layout on ``dialect``.

    Kept on the dialect (one per engine), keyed by the column's options, and made again only when
    the dialect's server version changes (from unknown to known at the first connection): a row
    that asks pays a dictionary look-up.
    """
    version = getattr(dialect, "server_version_info", None)
    known: dict[tuple[Storage | None, Layout | None], tuple[object, Target]] | None = dialect.__dict__.get(
        "seqid_targets"
    )
    if known is None:
        known = dialect.seqid_targets = {}  # type: ignore[attr-defined]
    hit = known.get((storage, layout))
    if hit is not None and hit[0] is version:
        return hit[1]
    made = target(dialect_vendor(dialect), version, storage, layout)
    known[(storage, layout)] = (version, made)
    return made


class _MariaDBUUID(UserDefinedType[uuid.UUID]):
    """MariaDB 10.7+ ``UUID`` column; the driver exchanges its text form."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "UUID"


def _binary_impl(vendor: str) -> sqltypes.TypeEngine[Any]:
    """The 16-byte column type: ``BYTEA``, ``RAW(16)``, a BLOB, else ``BINARY(16)``."""
    if vendor in ("postgresql", "cockroachdb"):
        return postgresql.BYTEA()
    if vendor == "oracle":
        return oracle.RAW(16)
    if vendor == "sqlite":
        return sqltypes.LargeBinary()
    return sqltypes.BINARY(16)


class SeqUUID(TypeDecorator[uuid.UUID]):
    """A UUID primary-key type whose storage and layout fit the dialect in use.

    ``storage``: ``"native" | "binary" | "text" | "hex"`` or ``None`` for the dialect's best
    (native UUID type; else ``BINARY(16)``/``RAW(16)``/BLOB; else ``CHAR(36)``).
    ``layout``: force a :class:`~seqid_orm.Layout` for generated values (e.g. for offline
    Alembic ``--sql`` runs, where no server version is known); ``None`` lets the connection decide.
    """

    impl = sqltypes.CHAR(36)
    cache_ok = True

    def __init__(self, storage: Storage | str | None = None, layout: Layout | str | None = None) -> None:
        self.storage = None if storage is None else as_storage(storage)
        self.layout = None if layout is None else as_layout(layout)
        super().__init__()

    def __repr__(self) -> str:
        args = []
        if self.storage is not None:
            args.append(f"storage={self.storage.value!r}")
        if self.layout is not None:
            args.append(f"layout={self.layout.value!r}")
        return f"SeqUUID({', '.join(args)})"

    @property
    def python_type(self) -> type[uuid.UUID]:
        return uuid.UUID

    def target(self, dialect: Dialect) -> Target:
        """Where this column's ids go on ``dialect``: storage, layout and the rest (see :func:`dialect_target`)."""
        return dialect_target(dialect, self.storage, self.layout)

    def storage_for(self, dialect: Dialect) -> Storage:
        """The storage this column really has on ``dialect``."""
        return self.target(dialect).storage

    def load_dialect_impl(self, dialect: Dialect) -> sqltypes.TypeEngine[Any]:
        where = self.target(dialect)
        vendor, storage = where.vendor, where.storage
        if storage is Storage.NATIVE:
            if vendor == "mssql":
                return dialect.type_descriptor(mssql.UNIQUEIDENTIFIER(as_uuid=True))
            if vendor == "mariadb":
                return dialect.type_descriptor(_MariaDBUUID())
            return dialect.type_descriptor(postgresql.UUID(as_uuid=True))
        if storage is Storage.BINARY:
            return dialect.type_descriptor(_binary_impl(vendor))
        # not type_descriptor(): SQL Server's colspecs would turn CHAR into VARCHAR
        return sqltypes.CHAR(36 if storage is Storage.TEXT else 32)

    def _to_db(self, dialect: Dialect) -> Any:
        """The function turning a ``uuid.UUID`` into what the driver sends for this storage."""
        where = self.target(dialect)
        storage = where.storage
        if storage is Storage.NATIVE:
            if where.vendor != "mariadb":
                return None  # the driver adapts uuid.UUID itself
            # the form the live server and driver were seen to take (seqid_orm.sqlalchemy.defaults)
            return _MARIADB_BIND.get(getattr(dialect, "seqid_uuid_bind", "text"), str)
        if storage is Storage.BINARY:
            return _UUID_BYTES
        return str if storage is Storage.TEXT else _UUID_HEX

    def _ints_to_driver(self, dialect: Dialect) -> Callable[[list[int]], list[Any]] | None:
        """For :func:`~seqid_orm.sqlalchemy.bulk_insert`: many ids' ``UUID.int`` as the driver receives
        them, made in C without a ``uuid.UUID`` in between; ``None`` where the driver takes only a
        ``uuid.UUID`` (it adapts it itself) or its text."""
        to_db = self._to_db(dialect)
        impl = self.impl_instance.bind_processor(dialect)
        convert: Callable[[list[int]], list[Any]]
        if to_db is _UUID_BYTES:
            convert = uuid_int_bytes
        elif to_db is _UUID_HEX:  # UUID.hex: 32 lowercase hex digits

            def convert(ints: list[int]) -> list[Any]:
                return list(map("{:032x}".format, ints))

        else:
            return None
        return convert if impl is None else lambda ints: list(map(impl, convert(ints)))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        u = coerce_uuid(value)
        to_db = self._to_db(dialect)
        return u if to_db is None else to_db(u)

    def bind_processor(self, dialect: Dialect) -> Any:
        # Decided once per dialect (SQLAlchemy caches this), not per row: on bulk inserts the
        # per-row cost is then one type check and one conversion.
        to_db = self._to_db(dialect)
        impl_processor = self.impl_instance.bind_processor(dialect)
        UUID = uuid.UUID  # below: `value.int >> 128` is 0 only for 0 <= int < 2**128, a forged uuid.UUID is refused

        if to_db is None and impl_processor is None:  # PostgreSQL, SQL Server: the driver adapts uuid.UUID

            def process_native(value: Any) -> Any:
                if value.__class__ is UUID and not value.int >> 128:
                    return value
                return None if value is None else coerce_uuid(value)

            return process_native

        def process(value: Any) -> Any:
            if value is None:
                out = None
            else:
                u = value if value.__class__ is UUID and not value.int >> 128 else coerce_uuid(value)
                out = u if to_db is None else to_db(u)
            return impl_processor(out) if impl_processor is not None else out

        return process

    def process_result_value(self, value: Any, dialect: Dialect) -> uuid.UUID | None:
        if value is None or isinstance(value, uuid.UUID):
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return uuid.UUID(bytes=bytes(value))
        return uuid.UUID(str(value))

    def literal_processor(self, dialect: Dialect) -> Any:
        where = self.target(dialect)
        storage = where.storage
        cast = storage is Storage.NATIVE and where.vendor in ("postgresql", "cockroachdb", "yugabytedb")

        def process(value: Any) -> str:
            u = coerce_uuid(value)
            if storage is Storage.BINARY:
                return where.binary_literal(u.bytes)
            if storage is Storage.HEX:
                return f"'{u.hex}'"
            return f"'{u}'::UUID" if cast else f"'{u}'"

        return process

    def coerce_compared_value(self, op: Any, value: Any) -> Any:
        return self


class TypeID(SeqUUID):
    """A UUID column whose values are TypeIDs of one type (``user_01h455vb4pex5vsknk084sn02q``).

    Python and JSON see the TypeID text; the database holds the UUID (``SeqUUID``'s storage), so keys
    are 16 bytes, compare as UUIDs and sort by time.  Binds take the TypeID text of this type (another
    type's, or text that is no TypeID, is refused with :class:`~seqid_orm.errors.InvalidIDError`
    before any SQL is sent) or a ``uuid.UUID``.  New keys (:func:`~seqid_orm.sqlalchemy.typeid_pk`)
    are UUIDv7, as the specification requires: where the column would not keep them in order (SQL
    Server's ``uniqueidentifier``, MariaDB's ``UUID`` before 10.10.6/10.11.5), its first statement is
    refused with :class:`~seqid_orm.errors.UnknownLayoutError` naming ``storage="binary"``, rather
    than scattering the keys over the index.
    """

    cache_ok = True

    def __init__(self, prefix: str, storage: Storage | str | None = None) -> None:
        self.prefix = check_typeid_prefix(prefix)  # now, with the specification's rules
        super().__init__(storage, Layout.TIME_FIRST)

    def __repr__(self) -> str:
        storage = "" if self.storage is None else f", storage={self.storage.value!r}"
        return f"TypeID({self.prefix!r}{storage})"

    @property
    def python_type(self) -> type[str]:  # type: ignore[override]
        return str

    def _as_uuid(self, value: Any) -> Any:
        if value is None or isinstance(value, uuid.UUID):
            return value
        if not isinstance(value, str):
            raise ArgumentTypeError(
                f"a TypeID({self.prefix!r}) value must be its text or a uuid.UUID, got {type(value).__name__}"
            )
        return decode_typeid(value, prefix=self.prefix)[1]

    def bind_processor(self, dialect: Dialect) -> Any:
        where = self.target(dialect)
        if where.server_version is not None and not where.keeps_in_order(Layout.TIME_FIRST):
            raise UnknownLayoutError(
                f"TypeID({self.prefix!r}) keys are UUIDv7, which {where} does not keep in order: "
                "declare it with storage='binary'"
            )
        uuid_process = super().bind_processor(dialect)
        as_uuid = self._as_uuid
        return lambda value: uuid_process(as_uuid(value))

    def literal_processor(self, dialect: Dialect) -> Any:
        uuid_literal = super().literal_processor(dialect)
        return lambda value: uuid_literal(self._as_uuid(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:  # type: ignore[override]
        found = super().process_result_value(value, dialect)
        return None if found is None else encode_typeid(self.prefix, found)


def uuid_int_bytes(ints: Iterable[int]) -> list[Any]:
    """Each ``UUID.int`` as the UUID's 16 bytes (``UUID.bytes``), made in C."""
    big: Literal["big"] = "big"
    return list(map(int.to_bytes, ints, repeat(16), repeat(big)))


_UUID_BYTES = operator.attrgetter("bytes")
_UUID_HEX = operator.attrgetter("hex")
_MARIADB_BIND = {"bytes": _UUID_BYTES, "hex": _UUID_HEX, "text": str}


class _IntegerKey(TypeDecorator[int]):
    """A signed BIGINT key; binds must be ints in ``[0, 2**63)`` (or their decimal text).

    On SQLite the column is declared ``INTEGER``: only that exact type makes a primary key the
    table's rowid, so the rows live in one B-tree ordered by the id instead of a rowid table plus
    a second index on ``BIGINT`` (SQLite stores both as 8-byte integers).
    """

    impl = sqltypes.BigInteger
    cache_ok = True
    _what = "an integer key value"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def load_dialect_impl(self, dialect: Dialect) -> sqltypes.TypeEngine[Any]:
        if dialect_target(dialect).rowid_integer_key:
            return dialect.type_descriptor(sqltypes.Integer())
        return super().load_dialect_impl(dialect)

    @property
    def python_type(self) -> type[int]:
        return int

    def process_bind_param(self, value: Any, dialect: Dialect) -> int | None:
        return None if value is None else coerce_int_id(value, self._what)

    def bind_many(self, values: list[Any]) -> list[Any] | None:
        """``values`` as the driver receives them, checked in C, when every one is an int in
        ``[0, 2**63)`` (a ticket block, Snowflake ids): then nothing is converted.  ``None`` where
        one is not (decimal text, ``None``, a bad value): the caller binds each value, and a bad one
        gets its typed error.  A bulk load's keys then cost what a BIGINT's do, not a Python call
        per row (the bind processor's)."""
        if values and set(map(type, values)) == {int} and min(values) >= 0 and max(values) <= BIGINT_MAX:
            return values
        return None


class SnowflakeID(_IntegerKey):
    """A BIGINT holding Snowflake ids (see :class:`_IntegerKey` for binds and SQLite)."""

    cache_ok = True  # SQLAlchemy reads it from each class's own namespace
    _what = "a SnowflakeID value"


class TicketID(_IntegerKey):
    """A BIGINT holding ids from a :class:`~seqid_orm.allocation.tickets.TicketSequence`."""

    cache_ok = True
    _what = "a TicketID value"


class SortableText(TypeDecorator[str]):
    """Text ids (``"bsv"`` or ``"base32"``) in a column with a binary collation.

    bsv mixes upper and lower case, so on MySQL/MariaDB's default case-insensitive collation
    two ids differing only in case would collide in a UNIQUE index and ``WHERE id = ...`` could
    match the wrong row; this type always declares the vendor's binary collation.  Binds are
    validated against the kind's length and alphabet; base32 is upper-cased (Crockford text is
    case-insensitive by definition).
    """

    impl = sqltypes.String(BSV_LENGTH)
    cache_ok = True

    def __init__(self, kind: str = "bsv") -> None:
        self.length, _ = text_id_kind(kind)
        self.kind = kind
        super().__init__()

    def __repr__(self) -> str:
        return f"SortableText(kind={self.kind!r})"

    @property
    def python_type(self) -> type[str]:
        return str

    def load_dialect_impl(self, dialect: Dialect) -> sqltypes.TypeEngine[Any]:
        spec = dialect_target(dialect).text_id_column
        if spec.charset is not None:
            return dialect.type_descriptor(mysql.CHAR(self.length, charset=spec.charset, collation=spec.collation))
        return dialect.type_descriptor(sqltypes.CHAR(self.length, collation=spec.collation))

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else check_text_id(value, self.kind)
