"""Time-ordered UUIDs made by the database itself: the SQL of a column default, per engine.

Why: a key generated in Python must travel with every row, and on a fast server that
per-row cost (building the ``uuid.UUID``, the driver escaping it) is most of what a
time-ordered key costs over a database-assigned ``BIGINT``.  A column default removes it:
the row is sent without a key, like an identity column, and the ORM reads the id back with
``RETURNING``.  What the database can run depends on its engine, version and column type, so
this module picks the generator the same way :mod:`seqid_orm.registry` picks layouts:

===================  ==========================  =============================================
engine               column                      generator
===================  ==========================  =============================================
PostgreSQL 18+       any                         ``uuidv7()``
PostgreSQL 13-17     any                         UUIDv7 built from ``clock_timestamp()`` and
                                                 ``gen_random_uuid()`` (12-bit sub-ms fraction)
MariaDB 11.7+        any                         ``UUID_v7()``
MariaDB 10.7-11.6    native ``UUID``             ``UUID()`` (version 1): MariaDB stores v1
                                                 values group-swapped, so they sort by time
MariaDB 10.10+,      ``BINARY(16)``, text        UUIDv7 built from ``SYSDATE(6)`` and
MySQL 8.0.13+                                    ``RANDOM_BYTES()``
SQLite               text (BLOB from 3.41)       UUIDv7 built from ``julianday('now')`` and
                                                 ``randomblob()`` (millisecond precision)
SQL Server           ``UNIQUEIDENTIFIER``        ``NEWSEQUENTIALID()``
===================  ==========================  =============================================

Anything else raises :class:`~seqid_orm.errors.ServerDefaultUnavailableError` naming the
reason (Oracle has no time-ordered generator; on CockroachDB a time-ordered key is a write
hot spot).  Values made by a database are ordered by its clock, not by this process's
monotonic counter: rows made in the same clock tick may interleave, which costs nothing
measurable in page fill (see docs/benchmarks.md).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..errors import ServerDefaultUnavailableError, UnknownServerVersionError
from ..ids.layout import ORDER_MARIADB_SWAPPED
from . import ServerVersion, Storage, as_storage, compare_order, format_version, has_native_uuid

__all__ = ["ServerDefault", "server_default"]


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
    what :func:`seqid_orm.sqlalchemy.alembic.compare_server_default` looks for."""


def _version_at_least(server_version: ServerVersion, minimum: tuple[int, ...]) -> bool:
    assert server_version is not None  # server_default() refuses an unknown version first
    return tuple(server_version[: len(minimum)]) >= minimum


#: Engines whose generator depends on the server version (the rest: on the engine alone).
_VERSIONED = ("postgresql", "mariadb", "mysql", "sqlite")


def _unknown_version(vendor: str) -> ServerDefaultUnavailableError:
    example = {"postgresql": "16", "mariadb": "mariadb-10.11.5", "mysql": "8.0.36", "sqlite": "3.45"}[vendor]
    return UnknownServerVersionError(
        f"the {vendor} server version is unknown (offline DDL, such as Alembic's --sql mode), and the SQL "
        f"of a database-made id depends on it (PostgreSQL 18 has uuidv7(), 13-17 need an expression; "
        f"MariaDB 11.7 has UUID_v7()...). Name the target server: `alembic -x seqid_server_version={example} "
        "upgrade head --sql` with seqid_orm.sqlalchemy.alembic.offline_server_version(context) in env.py's "
        "run_migrations_offline(), or set dialect.server_version_info"
    )


# (ms << 12 | 12-bit sub-ms fraction) in one clock reading, as 15 hex digits, with the version
# nibble '7' inserted after the 12 millisecond digits; then the variant and 62 random bits from
# the second half of a v4 UUID (the server's strong random source).  date_part (float8) rather
# than extract (numeric, exact): 15 % cheaper per row, and a float8 holds the value exactly
# until 2039, then rounds the fraction to 2/4096 ms.
_PG_V7_HEX = (
    "overlay(lpad(to_hex(floor(date_part('epoch', clock_timestamp()) * 4096000)::bigint), 15, '0') "
    "placing '7' from 13 for 0) || substr(encode(uuid_send(gen_random_uuid()), 'hex'), 17)"
)


def _postgresql(server_version: ServerVersion, storage: Storage) -> ServerDefault:
    if _version_at_least(server_version, (18,)):
        value, generator = "uuidv7()", "uuidv7()"
    elif _version_at_least(server_version, (13,)):
        value, generator = f"({_PG_V7_HEX})::uuid", "UUIDv7 expression"
    else:
        raise ServerDefaultUnavailableError(
            f"PostgreSQL {format_version(server_version)} has no built-in random source for a UUID "
            "default (gen_random_uuid() arrived in 13); generate ids in Python instead"
        )
    sql = {
        Storage.NATIVE: value,
        Storage.BINARY: f"uuid_send({value})",
        Storage.TEXT: f"{value}::text",
        Storage.HEX: f"replace({value}::text, '-', '')",
    }[storage]
    return ServerDefault(sql, 7, generator, "uuidv7(" if generator == "uuidv7()" else "clock_timestamp()")


# 32 upper-case hex digits of a UUIDv7: one SYSDATE(6) reading as (ms << 12 | fraction) with
# '7' inserted after the millisecond digits, a variant byte 0b10xxxxxx, 7 random bytes.
_MYSQL_V7_HEX = (
    "concat(insert(lpad(hex(floor(unix_timestamp(sysdate(6)) * 4096000)), 15, '0'), 13, 0, '7'), "
    "hex(ord(random_bytes(1)) & 63 | 128), hex(random_bytes(7)))"
)


def _hyphenate(hex32: str) -> str:
    """SQL turning 32 hex digits into the canonical lower-case 36-character text."""
    return f"lower(insert(insert(insert(insert({hex32}, 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-'))"


def _mysql_family(vendor: str, server_version: ServerVersion, storage: Storage) -> ServerDefault:
    name = "MariaDB" if vendor == "mariadb" else "MySQL"
    if vendor == "mariadb" and _version_at_least(server_version, (11, 7)):
        v7 = "uuid_v7()"
        sql = {
            Storage.NATIVE: v7,
            Storage.BINARY: f"unhex(replace({v7}, '-', ''))",
            Storage.TEXT: f"cast({v7} as char(36))",
            Storage.HEX: f"replace({v7}, '-', '')",
        }[storage]
        return ServerDefault(sql, 7, "UUID_v7()", "uuid_v7()")
    if storage is Storage.NATIVE:
        if not has_native_uuid(vendor, server_version):
            raise ServerDefaultUnavailableError(f"{name} {format_version(server_version)} has no UUID column type")
        # UUID() makes version-1 values; MariaDB compares those node first, then clock
        # sequence, then time_hi, time_mid, time_low: time order for one server's values.
        assert compare_order(vendor, server_version, storage, _V1_SAMPLE) == ORDER_MARIADB_SWAPPED
        return ServerDefault("uuid()", 1, "UUID()", "uuid()")
    minimum = (10, 10) if vendor == "mariadb" else (8, 0, 13)
    if not _version_at_least(server_version, minimum):
        raise ServerDefaultUnavailableError(
            f"{name} {format_version(server_version)} cannot make a UUID column default from a strong random "
            f"source (needs {name} {'.'.join(map(str, minimum))}+ for RANDOM_BYTES() in a default)"
        )
    sql = {
        Storage.BINARY: f"unhex({_MYSQL_V7_HEX})",
        Storage.TEXT: _hyphenate(_MYSQL_V7_HEX),
        Storage.HEX: f"lower({_MYSQL_V7_HEX})",
    }[storage]
    return ServerDefault(sql, 7, "UUIDv7 expression", "sysdate(6)")


# SQLite: 'now' is read once per statement step (so two readings agree) and has millisecond
# precision, so the 12 bits after the version nibble are random.
_SQLITE_MS = "cast((julianday('now') - 2440587.5) * 86400000 as integer)"
_SQLITE_VARIANT = "substr('89ab', 1 + (abs(random()) % 4), 1)"
_SQLITE_V7_HEX = (
    f"printf('%012x', {_SQLITE_MS}) || '7' || substr(hex(randomblob(2)), 1, 3) || "
    f"{_SQLITE_VARIANT} || substr(hex(randomblob(8)), 1, 15)"
)
_SQLITE_V7_TEXT = (
    f"printf('%08x-%04x-7', {_SQLITE_MS} / 65536, {_SQLITE_MS} % 65536) || "
    f"lower(substr(hex(randomblob(2)), 1, 3) || '-' || {_SQLITE_VARIANT} || "
    "substr(hex(randomblob(2)), 1, 3) || '-' || hex(randomblob(6)))"
)


def _sqlite(server_version: ServerVersion, storage: Storage) -> ServerDefault:
    if storage is Storage.BINARY:
        if not _version_at_least(server_version, (3, 41)):
            raise ServerDefaultUnavailableError(
                f"SQLite {format_version(server_version)} cannot build a BLOB default (unhex() arrived in 3.41); "
                "use text or hex storage, or generate ids in Python"
            )
        sql = f"unhex({_SQLITE_V7_HEX})"
    elif storage is Storage.TEXT:
        sql = _SQLITE_V7_TEXT
    elif storage is Storage.HEX:
        sql = f"lower({_SQLITE_V7_HEX})"
    else:
        raise ServerDefaultUnavailableError("SQLite has no UUID column type")
    return ServerDefault(sql, 7, "UUIDv7 expression", "randomblob(")


_V1_SAMPLE = uuid.UUID(int=(1 << 76) | (0b10 << 62))  # the version/variant bits of UUID() values


def server_default(vendor: str, server_version: ServerVersion, storage: Storage | str) -> ServerDefault:
    """The column default that makes time-ordered UUIDs on this engine, version and storage.

    ``vendor`` is a registry vendor name (see :func:`seqid_orm.registry.normalize_vendor`).
    Raises :class:`~seqid_orm.errors.ServerDefaultUnavailableError` when the engine cannot, and
    :class:`~seqid_orm.errors.UnknownServerVersionError` when ``server_version`` is ``None`` for an
    engine whose generator depends on it: a migration written offline must not guess (a default
    chosen for PostgreSQL 18 fails on 16).
    """
    storage = as_storage(storage)
    if server_version is None and vendor in _VERSIONED:
        raise _unknown_version(vendor)
    if vendor == "postgresql":
        return _postgresql(server_version, storage)
    if vendor in ("mariadb", "mysql"):
        return _mysql_family(vendor, server_version, storage)
    if vendor == "sqlite":
        return _sqlite(server_version, storage)
    if vendor == "mssql":
        if storage is not Storage.NATIVE:
            raise ServerDefaultUnavailableError(
                "SQL Server makes time-ordered UUIDs only for UNIQUEIDENTIFIER columns (NEWSEQUENTIALID())"
            )
        return ServerDefault("newsequentialid()", 1, "NEWSEQUENTIALID()", "newsequentialid()")
    if vendor in ("cockroachdb", "tidb", "yugabytedb"):
        raise ServerDefaultUnavailableError(
            f"on {vendor} a time-ordered key made by the database sends every insert to one range (a write "
            "hot spot); make ids in Python (seqid picks the sharded layout there) or use a hash-sharded index"
        )
    if vendor == "oracle":
        raise ServerDefaultUnavailableError("Oracle has no time-ordered UUID generator; generate ids in Python")
    raise ServerDefaultUnavailableError(f"no server-side UUID generator is known for {vendor!r}")
