"""PostgreSQL (13 and later; 18 makes ``uuidv7()`` itself).

``uuid`` compares its 16 bytes first to last, as ``bytea`` and text do: time-first ids (UUIDv7) stay
in order in every storage.  Text ids need the ``"C"`` collation (the default follows the locale).
"""

from __future__ import annotations

from ..errors import ServerDefaultUnavailableError
from ..ids.layout import Layout
from ._base import (
    ColumnRef,
    Quote,
    ServerDefault,
    Storage,
    TextColumnSpec,
    Version,
    always_native_uuid,
    bytewise_in_every_storage,
    format_version,
    unknown_version,
    version_at_least,
)

NAME = "postgresql"
DISTRIBUTED = False
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = True

#: The column type each storage gets (as seqid's ``SeqUUID`` declares it), for conversions.
COLUMN_TYPES = {Storage.NATIVE: "uuid", Storage.BINARY: "bytea", Storage.TEXT: "char(36)", Storage.HEX: "char(32)"}

has_native_uuid = always_native_uuid
compare_order = bytewise_in_every_storage


# PostgreSQL 13-17's UUIDv7, built from bytes: 48 bits of milliseconds, the version 7 and a 12-bit
# sub-millisecond fraction (RFC 9562 §6.2, method 3) as one bigint sent as 8 bytes, then bytes 8-15
# of a random UUIDv4 (the variant and 62 bits from the server's strong random source).  The
# milliseconds and the fraction come from two clock readings (a column default cannot name one reading
# twice): when the two straddle a millisecond's end, the row sorts early inside its millisecond (47 of
# 300,000 rows in a bulk load; never a repeat, the 62 random bits see to that).  Against the text
# expression it replaced (one reading; to_hex, lpad, overlay, encode): 1,655 against 1,981 ns a row of
# expression, 1.69x against 1.83x BIGINT identity for a 300,000-row INSERT ... SELECT, the same index
# size (docs/benchmarks.md).  date_part (float8) rather than extract (numeric, exact): 15 % cheaper
# per row, and a float8 holds the value exactly until 2039, then rounds the fraction to 2/4096 ms.
V7_BYTES = (
    "int8send((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint << 16) | 28672 "
    "| (floor(date_part('epoch', clock_timestamp()) * 4096000)::bigint & 4095)) "
    "|| substring(uuid_send(gen_random_uuid()) from 9)"
)


_CLOCK = "clock_timestamp()"
_SHIFT_MARK = "::interval"  # how a stored default shows the literal of a shift ('-720:00:00'::interval)


def _interval(shift_us: int) -> str:
    """``shift_us`` microseconds as an interval literal: a count of microseconds, which PostgreSQL keeps
    as time (``-720:00:00``), not as days, so adding it moves the clock by exactly that much in any
    time zone, across a daylight-saving change too."""
    return f"interval '{shift_us} microseconds'"


def _shifted(sql: str, shift_us: int) -> str:
    """``sql`` with every reading of the clock moved by ``shift_us`` microseconds."""
    return sql.replace(_CLOCK, f"({_CLOCK} + {_interval(shift_us)})") if shift_us else sql


def _v7_expression(version: Version, raw: str, shift_us: int) -> tuple[str, str]:
    """A UUIDv7 ``uuid`` expression for this version (from ``raw``, the bytes expression, before 18),
    and the generator's name."""
    if version is None:
        raise unknown_version(NAME, "16")
    if version_at_least(version, (18,)):
        return (f"uuidv7({_interval(shift_us)})" if shift_us else "uuidv7()"), "uuidv7()"
    if version_at_least(version, (13,)):
        return f"encode({raw}, 'hex')::uuid", "UUIDv7 expression"
    raise ServerDefaultUnavailableError(
        f"PostgreSQL {format_version(version)} has no built-in random source for a UUID "
        "default (gen_random_uuid() arrived in 13); generate ids in Python instead"
    )


def server_default(version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
    raw = _shifted(V7_BYTES, shift_us)
    value, generator = _v7_expression(version, raw, shift_us)
    built = generator != "uuidv7()"  # the bytes themselves, where a storage takes them without the uuid
    sql = {
        Storage.NATIVE: value,
        Storage.BINARY: raw if built else f"uuid_send({value})",
        Storage.TEXT: f"{value}::text",
        Storage.HEX: f"encode({raw}, 'hex')" if built else f"replace({value}::text, '-', '')",
    }[storage]
    signature = _SHIFT_MARK if shift_us else "uuidv7(" if generator == "uuidv7()" else _CLOCK
    return ServerDefault(sql, 7, generator, signature)


def _adopted_bytes(above: int) -> str:
    """The 16 bytes of an adopted key (:mod:`seqid_orm.ids.adopted`) with ``above`` leading one bits,
    as a ``bytea`` expression: the one bits, 44 bits of milliseconds, a 12-bit sub-millisecond
    fraction where Python-made keys count (RFC 9562 §6.2, method 3, as :data:`V7_BYTES`), then
    random bits from ``gen_random_uuid()`` (the server's strong random source), with the version 8
    and the RFC variant.  Two bigints: the one bits and the top of the time in the first (with the
    version), the rest of the time, the fraction and the random bits in the second (with the
    variant).  Negative literals: the one bits and the variant set each bigint's sign bit."""
    ms = "floor(date_part('epoch', clock_timestamp()) * 1000)::bigint"
    fraction = "(floor(date_part('epoch', clock_timestamp()) * 4096000)::bigint & 4095)"
    rnd = "('x' || right(replace(gen_random_uuid()::text, '-', ''), 16))::bit(64)::bigint"
    ones = -(1 << (64 - above))  # `above` one bits at the top of a bigint
    high = f"({ones}::bigint | (({ms} >> {above - 4}) << 16) | 32768 | (({ms} >> {above - 16}) & 4095))"
    low_ms = f"(({ms} & {(1 << (above - 16)) - 1}) << {78 - above})" if above > 16 else "0"
    low = (
        f"((-9223372036854775807 - 1) | {low_ms} | ({fraction} << {66 - above}) | ({rnd} & {(1 << (66 - above)) - 1}))"
    )
    return f"int8send{high} || int8send{low}"


def adopted_default(version: Version, storage: Storage, above: int, shift_us: int, /) -> ServerDefault:
    """The default of an adopted column: the same SQL from 13 on (``uuidv7()`` cannot put one bits first)."""
    if version is None:
        raise unknown_version(NAME, "16")
    if not version_at_least(version, (13,)):
        raise ServerDefaultUnavailableError(
            f"PostgreSQL {format_version(version)} has no built-in random source for a UUID "
            "default (gen_random_uuid() arrived in 13); generate ids in Python instead"
        )
    raw = _shifted(_adopted_bytes(above), shift_us)
    sql = {
        Storage.NATIVE: f"encode({raw}, 'hex')::uuid",
        Storage.BINARY: raw,
        Storage.TEXT: f"encode({raw}, 'hex')::uuid::text",
        Storage.HEX: f"encode({raw}, 'hex')",
    }[storage]
    return ServerDefault(sql, 8, f"adopted key ({above} one bits)", _SHIFT_MARK if shift_us else _CLOCK)


# The sequential-uuids extension's two functions in PL/pgSQL, for services where no C extension can be
# installed (its signatures and results; the sequence function is PARALLEL UNSAFE, as it calls nextval).
_CORE = """
CREATE OR REPLACE FUNCTION seqid_sequential_uuid(value bigint, block_size integer, block_count integer)
RETURNS uuid LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
    bits integer := 1;
    slots bigint := 2;
    nbytes integer;
    prefix_count bigint;
    rescaled bigint;
    prefix bigint;
BEGIN
    IF block_size < 1 THEN
        RAISE EXCEPTION 'block size must be a positive integer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF block_count < 1 THEN
        RAISE EXCEPTION 'number of blocks must be a positive integer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the fewest bits (at least one) for block_count blocks, rounded up to whole bytes
    WHILE block_count > slots LOOP
        bits := bits + 1;
        slots := slots * 2;
    END LOOP;
    nbytes := (bits + 7) / 8;
    prefix_count := 1::bigint << (8 * nbytes);
    -- rescale the block size so the prefix runs through its whole range before it wraps
    rescaled := greatest(1, (block_size::bigint * block_count) / prefix_count);
    prefix := (value / rescaled) & (prefix_count - 1);  -- bigint division truncates, as C's
    -- gen_random_uuid() already carries version 4 and the RFC variant in bytes 6 and 8
    RETURN encode(
        decode(lpad(to_hex(prefix), 2 * nbytes, '0'), 'hex')
        || substring(uuid_send(gen_random_uuid()) FROM nbytes + 1),
        'hex'
    )::uuid;
END $$
"""

_SEQUENCE = """
CREATE OR REPLACE FUNCTION uuid_sequence_nextval(seq regclass, block_size integer DEFAULT 65536,
                                                 block_count integer DEFAULT 65536)
RETURNS uuid LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
BEGIN
    -- checked again by the core function, but here before nextval(): a refused call uses no value
    IF block_size < 1 THEN
        RAISE EXCEPTION 'block size must be a positive integer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF block_count < 1 THEN
        RAISE EXCEPTION 'number of blocks must be a positive integer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN seqid_sequential_uuid(nextval(seq) - 1, block_size, block_count);
END $$
"""

_TIME = """
CREATE OR REPLACE FUNCTION uuid_time_nextval(interval_length integer DEFAULT 60,
                                             interval_count integer DEFAULT 65536)
RETURNS uuid LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
BEGIN
    -- the extension's own words for intervals (the core function would speak of blocks)
    IF interval_length < 1 THEN
        RAISE EXCEPTION 'length of interval must be a positive integer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF interval_count < 1 THEN
        RAISE EXCEPTION 'number of intervals must be a positive integer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN seqid_sequential_uuid(floor(extract(epoch FROM clock_timestamp()))::bigint,
                                 interval_length, interval_count);
END $$
"""

_FUNCTIONS = (
    "uuid_sequence_nextval(regclass, integer, integer)",
    "uuid_time_nextval(integer, integer)",
    "seqid_sequential_uuid(bigint, integer, integer)",
)


def sequential_functions(prefix_layout: Layout, /) -> list[str]:
    """The three functions; the prefix always leads (``uuid`` compares its first bytes first)."""
    return [_CORE.strip(), _SEQUENCE.strip(), _TIME.strip()]


def drop_sequential_functions() -> list[str]:
    return [f"DROP FUNCTION IF EXISTS {name}" for name in _FUNCTIONS]


def binary_literal(raw: bytes, /) -> str:
    return f"decode('{raw.hex()}', 'hex')"  # no backslash: compilers escape those


def _pg_text(column: str, storage: Storage) -> str:
    """PostgreSQL: the canonical lower-case text of ``column`` stored as ``storage``."""
    return {
        Storage.NATIVE: f"{column}::text",
        Storage.TEXT: f"lower({column})::uuid::text",
        Storage.HEX: f"lower({column})::uuid::text",
        Storage.BINARY: f"encode({column}, 'hex')::uuid::text",
    }[storage]


def _pg_from_text(text: str, storage: Storage) -> str:
    return {
        Storage.NATIVE: f"({text})::uuid",
        Storage.TEXT: text,
        Storage.HEX: f"replace({text}, '-', '')",
        Storage.BINARY: f"decode(replace({text}, '-', ''), 'hex')",
    }[storage]


def convert_column(quote: Quote, ref: ColumnRef, source: Storage, target: Storage, /) -> list[str]:
    """``ALTER COLUMN ... TYPE ... USING`` an expression through the canonical text, inside the
    migration's transaction (a failure leaves nothing half done)."""
    expr = _pg_from_text(_pg_text(quote(ref.column), source), target)
    return [f"ALTER TABLE {quote(ref.table)} ALTER COLUMN {quote(ref.column)} TYPE {COLUMN_TYPES[target]} USING {expr}"]
