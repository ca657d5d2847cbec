"""PostgreSQL (13 and later; 18 makes ``uuidv7()`` itself).

``uuid`` compares its 16 bytes first to last, as ``bytea`` and text do: time-first ids (UUIDv7) stay
in order in every storage.  Text ids need the ``"C"`` collation (the default follows the locale).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import uuid
from collections.abc import Callable, Sequence

from ..errors import ServerDefaultUnavailableError
from ..ids.adopted import record_of
from ..ids.layout import Layout
from ._base import (
    Bounded,
    ColumnRef,
    Companion,
    Fetch,
    InSchema,
    KeyColumn,
    Quote,
    Reference,
    ServerDefault,
    Step,
    Storage,
    Swap,
    SwappedIndex,
    TableFacts,
    TextColumnSpec,
    Version,
    always_native_uuid,
    bytewise_in_every_storage,
    double_quoted,
    format_version,
    key_width,
    qualify,
    row_params,
    standard_literal,
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
quote_identifier = double_quoted
string_literal = standard_literal
# what changing a column's type holds while it rewrites the table (a conversion's refusal says it)
TYPE_CHANGE_HOLDS = (
    "PostgreSQL's ALTER COLUMN ... TYPE holds ACCESS EXCLUSIVE, no read and no write, for the whole rewrite"
)
qualified = qualify(quote_identifier)

#: The column type each storage gets (as seqid's ``SeqUUID`` declares it), for conversions.
COLUMN_TYPES = {Storage.NATIVE: "uuid", Storage.BINARY: "bytea", Storage.TEXT: "char(36)", Storage.HEX: "char(32)"}

has_native_uuid = always_native_uuid
compare_order = bytewise_in_every_storage


# PostgreSQL 13-17's UUIDv7 from one clock reading: floor(epoch * 4096000) is the millisecond
# times 4096 plus the millisecond's fraction in 1/4096 (RFC 9562 §6.2, method 3), 60 bits.  Shifted left 4
# as a 64-bit string, the version '0111' is put between the millisecond's 48 bits and the fraction's 12
# (overlay ... for 0 inserts; the cast back to bit(64) drops the 4 zero bits pushed past the end), read as
# a bigint and sent as 8 bytes; then the last 8 bytes of a random UUIDv4 (the variant and 62 bits from the
# server's strong random source).  A column default cannot name a value twice, and the clock is read anew
# at every call (clock_timestamp() is volatile), so an expression that took the millisecond and the
# fraction from two readings mixed two milliseconds when one ended between them (47 of 300,000 rows of a
# bulk load sorted early inside their millisecond; 26 of 1,000,000 adopted keys carried a time 15 ms
# early).  The one reading was first written as hex text (to_hex, lpad, overlay of the version digit), which
# cost an insert 1.04-1.14x gen_random_uuid() (issue 73); as bits, the expression alone costs what the two
# readings' bytes did (1.75 us a row against 2.2 us as text, 1.1 us for gen_random_uuid(): PostgreSQL 15,
# SELECT count(expr) FROM generate_series(1, 1e6)), and a bytea column takes its bytes with no hex at all.
# date_part (float8) rather than extract (numeric, exact): cheaper per row, and a float8 holds the value
# exactly until 2039, then rounds the fraction to 2/4096 ms.
V7_CLOCK = "floor(date_part('epoch', clock_timestamp()) * 4096000)::bigint"
V7_BYTES = (
    f"int8send(overlay(({V7_CLOCK} << 4)::bit(64) placing B'0111' from 49 for 0)::bit(64)::bigint) "
    "|| substring(uuid_send(gen_random_uuid()) from 9)"
)
V7_HEX = f"encode({V7_BYTES}, 'hex')"


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


def _v7_expression(version: Version, hex32: str, shift_us: int) -> tuple[str, str]:
    """A UUIDv7 ``uuid`` expression for this version (from ``hex32``, its 32 hex digits, before 18),
    and the generator's name."""
    if version is None:
        raise unknown_version(NAME, "16")
    if version_at_least(version, (18,)):
        return (f"uuidv7({_interval(shift_us)})" if shift_us else "uuidv7()"), "uuidv7()"
    if version_at_least(version, (13,)):
        return f"({hex32})::uuid", "UUIDv7 expression"
    raise ServerDefaultUnavailableError(
        f"PostgreSQL {format_version(version)} has no built-in random source for a UUID "
        "default (gen_random_uuid() arrived in 13); generate ids in Python instead"
    )


def server_default(version: Version, storage: Storage, shift_us: int, /) -> ServerDefault:
    hex32 = _shifted(V7_HEX, shift_us)
    value, generator = _v7_expression(version, hex32, shift_us)
    built = generator != "uuidv7()"  # the bytes themselves, where a storage takes them without the uuid
    sql = {
        Storage.NATIVE: value,
        Storage.BINARY: _shifted(V7_BYTES, shift_us) if built else f"uuid_send({value})",
        Storage.TEXT: f"{value}::text",
        Storage.HEX: hex32 if built else f"replace({value}::text, '-', '')",
    }[storage]
    signature = _SHIFT_MARK if shift_us else "uuidv7(" if generator == "uuidv7()" else _CLOCK
    return ServerDefault(sql, 7, generator, signature)


#: The function an adopted key's default calls: the clock is read once, as its argument (a column
#: default cannot name a value twice, and an expression that read the clock at each of its four uses
#: mixed two milliseconds in 26 of 1,000,000 keys).  PL/pgSQL, not SQL: a SQL function that is not
#: inlined (its argument is volatile and used more than once) cost 11 us a row against 3.3 us.
ADOPTED_FUNCTION = "seqid_adopted_uuid"

# The bits of an adopted key (seqid_orm.ids.adopted, byte order) from t = the millisecond << 12 | its
# fraction in 1/4096 and r = random bits: two bigints, the one bits, the top of the time and the
# version 8 in the first, the rest of the time, the variant and the random bits in the second.  The
# fraction takes the 12 bits where Python-made keys count (RFC 9562 §6.2, method 3).  Negative
# literals: the one bits and the variant set each bigint's sign bit.
_ADOPTED_BITS = (
    "encode(int8send(-(1::bigint << (64 - above)) | ((t >> (above + 8)) << 16) | 32768 | ((t >> (above - 4)) & 4095)) "
    "|| int8send((-9223372036854775807 - 1) | ((t & ((1::bigint << (above - 4)) - 1)) << (66 - above)) "
    "| (r & ((1::bigint << (66 - above)) - 1))), 'hex')::uuid"
)


def adopted_functions(version: Version, schema: str | None) -> tuple[str, ...]:
    """The ``CREATE OR REPLACE FUNCTION`` statements of :data:`ADOPTED_FUNCTION` (in ``schema``, quoted,
    else the first of the ``search_path``): from a clock reading (13 and later), and, on 18, from a
    ``uuidv7()``, whose millisecond and fraction increase within a backend, so one connection's keys
    keep the order it made them in."""
    name = ADOPTED_FUNCTION if schema is None else f"{schema}.{ADOPTED_FUNCTION}"
    statements = [
        f"CREATE OR REPLACE FUNCTION {name}(above integer, at timestamptz) RETURNS uuid "
        "LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $seqid$\n"
        "DECLARE\n"
        "    t bigint := floor(date_part('epoch', at) * 4096000)::bigint;\n"
        "    r bigint := ('x' || encode(substring(uuid_send(gen_random_uuid()) from 9), 'hex'))::bit(64)::bigint;\n"
        f"BEGIN\n    RETURN {_ADOPTED_BITS};\nEND\n$seqid$"
    ]
    if version_at_least(version, (18,)):
        statements.append(
            f"CREATE OR REPLACE FUNCTION {name}(above integer, v7 uuid) RETURNS uuid "
            "LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $seqid$\n"
            "DECLARE\n"
            "    b bytea := uuid_send(v7);\n"
            "    hi bigint := ('x' || encode(substring(b from 1 for 8), 'hex'))::bit(64)::bigint;\n"
            "    t bigint := ((hi >> 16) << 12) | (hi & 4095);\n"
            "    r bigint := ('x' || encode(substring(b from 9), 'hex'))::bit(64)::bigint;\n"
            f"BEGIN\n    RETURN {_ADOPTED_BITS};\nEND\n$seqid$"
        )
    return tuple(statements)


def adopted_default(
    version: Version, storage: Storage, above: int, shift_us: int, schema: str | None, /
) -> ServerDefault:
    """The default of an adopted column: a call of :data:`ADOPTED_FUNCTION` (in ``schema``, quoted, else
    the ``search_path``'s) with one reading of the clock (a ``uuidv7()`` on 18), which
    :attr:`ServerDefault.setup` creates."""
    if version is None:
        raise unknown_version(NAME, "16")
    if not version_at_least(version, (13,)):
        raise ServerDefaultUnavailableError(
            f"PostgreSQL {format_version(version)} has no built-in random source for a UUID "
            "default (gen_random_uuid() arrived in 13); generate ids in Python instead"
        )
    if version_at_least(version, (18,)):
        clock = f"uuidv7({_interval(shift_us)})" if shift_us else "uuidv7()"
    else:
        clock = _shifted(_CLOCK, shift_us)
    function = ADOPTED_FUNCTION if schema is None else f"{schema}.{ADOPTED_FUNCTION}"
    value = f"{function}({above}, {clock})"
    sql = {
        Storage.NATIVE: value,
        Storage.BINARY: f"uuid_send({value})",
        Storage.TEXT: f"{value}::text",
        Storage.HEX: f"replace({value}::text, '-', '')",
    }[storage]
    signature = _SHIFT_MARK if shift_us else f"{ADOPTED_FUNCTION}("
    return ServerDefault(sql, 8, f"adopted key ({above} one bits)", signature, adopted_functions(version, schema))


#: Row-level security hides rows of the table ``c`` from the role ``r``: it is on, and the role is neither
#: superuser nor BYPASSRLS nor an owner the table spares (https://www.postgresql.org/docs/current/ddl-rowsecurity.html).
_ROWS_HIDDEN = (
    "c.relrowsecurity AND NOT (r.rolsuper OR r.rolbypassrls OR (c.relowner = r.oid AND NOT c.relforcerowsecurity))"
)
_TABLE_AND_ROLE = "FROM pg_class c JOIN pg_roles r ON r.rolname = current_user WHERE c.oid = {identity}"


def reads_every_row(identity: str, /) -> str:
    """Whether this role may read every row of the table whose oid ``identity`` gives: SELECT on it, and no
    row-level security that hides rows from it (what a count of its rows needs to be true)."""
    return f"SELECT has_table_privilege(c.oid, 'SELECT') AND NOT ({_ROWS_HIDDEN}) {_TABLE_AND_ROLE}".format(
        identity=identity
    )


def adoption_statements(table: str, column: str, /) -> dict[str, str]:
    """A migration's adoption of ``column`` of ``table`` (both quoted; :mod:`seqid_orm.schema.adoption`):
    whether row-level security hides rows from this role (on, and it is neither superuser nor
    BYPASSRLS nor an owner the table spares), the planner's row estimate and the table's schema, the
    rows counted (up to a bound), the largest keys, the largest below a bound, and the record."""
    return {
        "hidden": f"SELECT {_ROWS_HIDDEN} {_TABLE_AND_ROLE}",
        "estimate": (
            "SELECT GREATEST(c.reltuples, 0)::bigint, quote_ident(n.nspname) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = {identity}"
        ),
        "count": f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {column} IS NOT NULL LIMIT {{limit}}) s",
        "top": f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL ORDER BY {column} DESC LIMIT {{limit}}",
        "below": f"SELECT {column} FROM {table} WHERE {column} < {{bound}} ORDER BY {column} DESC LIMIT 1",
        "record": f"COMMENT ON COLUMN {table}.{column} IS {{comment}}",
    }


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


# --- changing a live table (seqid_orm.schema.online asks) ---------------------------------------------

_SCHEMA = re.compile(r'^("(?:[^"]|"")*")\.')


def _tree(swap: Swap) -> list[Swap]:
    """``swap`` and its heirs', theirs after, depth first."""
    return [swap, *(s for heir in swap.heirs for s in _tree(heir))]


def _beside(table: str, index: str) -> str:
    """The quoted ``index`` named in the schema of ``table`` (quoted, with its schema where it has one): DROP
    INDEX and ALTER INDEX look an index up in the search path, where a table of another schema's is not;
    CREATE INDEX and USING INDEX take the bare name, and find it beside the table ("CREATE INDEX").

    >>> _beside('"a ""b"" c"."orders"', '"ix"'), _beside('"orders"', '"ix"')
    ('"a ""b"" c"."ix"', '"ix"')
    """
    schema = _SCHEMA.match(table)
    return f"{schema.group(1)}.{index}" if schema else index


_COLLATE = re.compile(r"\s+COLLATE\s+(\"[^\"]*\"|\S+)", re.IGNORECASE)


class Online:
    """PostgreSQL's online statements.  Every bound is ``SET LOCAL`` inside the statement's own
    transaction, never a session ``SET``: behind PgBouncer in transaction pooling a session setting
    stays on whichever server connection the pooler picked, and the application's next statements ran
    under it (PgBouncer's docs, "Feature matrix for pooling modes"; issue 73 measured 500 ms lock
    time-outs on 726-835 of the application's statements).  The concurrent index statements cannot run
    in a transaction block ("CREATE INDEX", Building Indexes Concurrently); they run with no time-out of
    their own, which a role's or database's ``statement_timeout`` would give them."""

    LONG_STATEMENT_SETTINGS = ("statement_timeout", "lock_timeout")
    TRIGGERS_CAN_WAIT = True

    def quote(self, name: str, /) -> str:
        return quote_identifier(name)

    def bounded(self, statement: str, lock_ms: int, /) -> Bounded:
        return Bounded(
            (f"SET LOCAL lock_timeout = {int(lock_ms)}", "SET LOCAL statement_timeout = 0", statement),
            in_transaction=True,
        )

    def fact_reads(self, table: str, column: str, index: str, /) -> dict[str, tuple[str, dict[str, object]]]:
        t: dict[str, object] = {"t": self.quote(table)}
        return {
            "column": (
                "SELECT attnotnull FROM pg_attribute WHERE attrelid = to_regclass(:t) AND attname = :c "
                "AND NOT attisdropped",
                {**t, "c": column},
            ),
            "index": (
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = to_regclass(:t) AND c.relname = :i",
                {**t, "i": index},
            ),
            "constraint": (
                "SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(:t) AND conname = :i",
                {**t, "i": index},
            ),
            "partition_key": (
                "SELECT a.attname FROM pg_partitioned_table p "
                "CROSS JOIN LATERAL unnest(p.partattrs) WITH ORDINALITY AS k(attnum, n) "
                "LEFT JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.attnum "
                "WHERE p.partrelid = to_regclass(:t) ORDER BY k.n",
                t,
            ),
        }

    def estimate(self, table: str, /) -> tuple[str, dict[str, object]]:
        # reltuples is -1 on a table never vacuumed or analyzed (14+), 0 before
        return "SELECT CAST(reltuples AS bigint) FROM pg_class WHERE oid = to_regclass(:t)", {"t": self.quote(table)}

    def reads_every_row(self, table: str, /) -> tuple[str, dict[str, object]] | None:
        return reads_every_row("to_regclass(:t)"), {"t": self.quote(table)}

    def may_alter(self, table: str, /) -> tuple[str, dict[str, object]] | None:
        # ALTER TABLE needs ownership: the owner, a member of the owning role, or a superuser (who has every role)
        return (
            "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = to_regclass(:t)",
            {"t": self.quote(table)},
        )

    def client_view(self) -> str:
        # pg_settings shows unix_socket_directories to pg_read_all_settings only (current_setting() raises)
        return (
            "SELECT host(inet_client_addr()), inet_client_port(), current_setting('port'), "
            "(SELECT setting FROM pg_settings WHERE name = 'unix_socket_directories')"
        )

    def is_client(self, ends: tuple[object, object], row: Sequence[object], /) -> bool:
        """Over TCP, the server's client address and port are this socket's own end (a pooler or a proxy
        connects from its own); over a Unix socket, this socket's peer is the server's own socket file."""
        local, peer = ends
        address, port, server_port, directories = row
        if isinstance(local, tuple):
            if address is None or port is None:
                return False
            try:
                mine, theirs = ipaddress.ip_address(str(local[0])), ipaddress.ip_address(str(address))
            except ValueError:
                return False
            mine = getattr(mine, "ipv4_mapped", None) or mine
            theirs = getattr(theirs, "ipv4_mapped", None) or theirs
            return mine == theirs and int(local[1]) == int(str(port))
        if isinstance(peer, str) and peer and address is None:
            name = f".s.PGSQL.{server_port}"
            if directories is None:  # a role that may not read where the server listens: its file's name
                return os.path.basename(peer) == name
            files = {os.path.normpath(f"{d.strip()}/{name}") for d in str(directories).split(",") if d.strip()}
            return os.path.normpath(peer) in files
        return False

    def setting(self, name: str, /) -> str:
        return f"SELECT current_setting('{name}')"

    def set_session(self, name: str, value: str, /) -> str:
        return f"SELECT set_config('{name}', '{value}', false)"

    def triggers_privilege(self) -> str:
        # PostgreSQL 15 lets a superuser GRANT SET ON PARAMETER; before, only a superuser may set it
        return (
            "SELECT CASE WHEN current_setting('server_version_num')::int >= 150000 "
            "THEN has_parameter_privilege('session_replication_role', 'SET') "
            "ELSE (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) END"
        )

    def hold_triggers(self) -> str:
        # "replica": ordinary triggers and rules do not fire (the docs' session_replication_role)
        return "SET LOCAL session_replication_role = replica"

    def add_column(self, table: str, column: str, column_type: str, /) -> str:
        return f"ALTER TABLE {table} ADD COLUMN {column} {column_type} NULL"

    def set_default(self, table: str, column: str, default_sql: str, /) -> str:
        return f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {default_sql}"

    def unique_steps(self, table: str, column: str, index: str, facts: TableFacts, /) -> list[Step]:
        steps = []
        if facts.index == "invalid":  # a killed or cancelled CREATE INDEX CONCURRENTLY
            steps.append(Step(f"DROP INDEX CONCURRENTLY IF EXISTS {_beside(table, index)}", concurrent=True))
        if facts.index != "valid":
            steps.append(
                Step(
                    f"CREATE UNIQUE INDEX CONCURRENTLY {index} ON {table} ({column})",
                    concurrent=True,
                    undo=f"DROP INDEX CONCURRENTLY IF EXISTS {_beside(table, index)}",
                )
            )
        if not facts.constraint:
            steps.append(Step(f"ALTER TABLE {table} ADD CONSTRAINT {index} UNIQUE USING INDEX {index}"))
        return steps

    def not_null_steps(
        self, table: str, column: str, column_type: str, check: str, default_sql: str | None, /
    ) -> list[Step]:
        # SET NOT NULL uses a valid CHECK (c IS NOT NULL) instead of scanning under its lock (12+);
        # VALIDATE takes SHARE UPDATE EXCLUSIVE: reads and writes go on ("ALTER TABLE", Notes)
        return [
            Step(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {check}"),
            Step(f"ALTER TABLE {table} ADD CONSTRAINT {check} CHECK ({column} IS NOT NULL) NOT VALID"),
            Step(f"ALTER TABLE {table} VALIDATE CONSTRAINT {check}"),
            Step(f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL"),
            Step(f"ALTER TABLE {table} DROP CONSTRAINT {check}"),
        ]

    def drop_default(self, table: str, column: str, /) -> str:
        return f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT"

    def drop_steps(self, table: str, column: str, index: str, facts: TableFacts, /) -> list[Step]:
        # the column's indexes go with it, a killed build's invalid one too
        return [
            Step(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {index}"),
            Step(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}"),
        ]

    def text_type(self) -> str:
        return "text"

    def key_cast(self, declared: str, /) -> str:
        # a key's collation belongs to its column, not to a cast of a parameter ('varchar(36) COLLATE
        # "en-x-icu"[]' is no type); the comparison takes the column's collation over the parameter's default
        return _COLLATE.sub("", declared)

    def param(self, storage: Storage, value: uuid.UUID, /) -> object:
        return {Storage.BINARY: value.bytes, Storage.HEX: value.hex, Storage.TEXT: str(value)}.get(storage, value)

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
        """``UPDATE ... FROM unnest(:k0, ..., :v)``: the batch as one array a column, the same text each
        batch (a ``VALUES`` list of the rows is thousands of parameters to bind, parse and plan each
        time: the backfill took 2.7x as long); that list stays for keys whose types are not known."""
        names = [*(f"k{i}" for i in range(len(keys))), "v"]
        if len(key_casts) == len(keys):
            arrays = [f"CAST(:k{i} AS {self.key_cast(cast)}[])" for i, cast in enumerate(key_casts)]
            arrays.append(f"CAST(:v AS {column_type}[])")
            params: dict[str, object] = {f"k{i}": [row[i] for row in rows] for i in range(len(keys))}
            params["v"] = list(values)
            source = f"unnest({', '.join(arrays)}) AS s({', '.join(names)})"
        else:
            listed = ", ".join(
                "(" + ", ".join([*(f":r{r}k{i}" for i in range(len(keys))), f"CAST(:r{r}v AS {column_type})"]) + ")"
                for r in range(len(rows))
            )
            params = row_params(rows, values)
            source = f"(VALUES {listed}) AS s({', '.join(names)})"
        where = " AND ".join(f"{table}.{key} = s.k{i}" for i, key in enumerate(keys))
        return f"UPDATE {table} SET {column} = s.v FROM {source} WHERE {where} AND {table}.{column} IS NULL", params

    def key_compare(
        self, keys: Sequence[str], key_casts: Sequence[str], key: Sequence[object], op: str, name: str, /
    ) -> tuple[str, dict[str, object]]:
        marks = []
        for i, value in enumerate(key):
            if isinstance(value, bytes):
                marks.append(f"decode(:{name}{i}, 'hex')")
            elif i < len(key_casts):  # PostgreSQL compares text with no other type: the key's own
                marks.append(f"CAST(:{name}{i} AS {self.key_cast(key_casts[i])})")
            else:
                marks.append(f":{name}{i}")
        params = {f"{name}{i}": (v.hex() if isinstance(v, bytes) else v) for i, v in enumerate(key)}
        return f"({', '.join(keys)}) {op} ({', '.join(marks)})", params

    def key_at(self, storage: Storage, layout: Layout, stamp: str, /) -> str | None:
        """The UUIDv7 expression of the server default (13 and later) with the stamp for the clock: its
        millisecond and its fraction of one, then the random bits.  ``date_part('epoch', ...)`` of a
        ``timestamp`` (no time zone) counts from 1970-01-01 as if it were UTC, as Python reads a naive one."""
        if layout is not Layout.TIME_FIRST:
            return None
        hex32 = V7_HEX.replace(_CLOCK, f"({stamp})")
        return {
            Storage.NATIVE: f"({hex32})::uuid",
            Storage.BINARY: V7_BYTES.replace(_CLOCK, f"({stamp})"),
            Storage.TEXT: f"({hex32})::uuid::text",
            Storage.HEX: hex32,
        }[storage]


ONLINE = Online()

# the foreign key actions of pg_constraint (confdeltype, confupdtype)
_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


class Rekey:
    """PostgreSQL's statements for changing a key (integers, or UUIDs kept as text) to a seqid key with every
    foreign key to it (:mod:`seqid_orm.schema.rekey`).  The database keeps the new columns in step for the
    application's writes with a row trigger per table (``BEFORE INSERT OR UPDATE OF`` the old column), whose
    key is a pure function of the old value (:func:`seqid_orm.ids.rekeyed.integer_key`, here an inlinable SQL
    function; a text's ``::uuid``), so a child's key never waits for its parent's; foreign keys are added ``NOT
    VALID`` and validated under ``SHARE UPDATE EXCLUSIVE`` (reads and writes go on: "ALTER TABLE", Notes);
    the contract is catalog changes in one short transaction."""

    def primary_key(self, table: str, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_index i "
            "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = to_regclass(:t) AND i.indisprimary ORDER BY k.n",
            {"t": quote_identifier(table)},
        )

    def column_type(self, table: str, column: str, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass(:t) "
            "AND attname = :c AND NOT attisdropped",
            {"t": quote_identifier(table), "c": column},
        )

    def key_constraint(self, table: str, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(:t) AND contype = 'p'",
            {"t": quote_identifier(table)},
        )

    def references(self, table: str, column: str, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT c.conname, cl.relname, a.attname, a.attnotnull, c.confdeltype, c.confupdtype, c.condeferrable, "
            # the child's schema where it is not the search path's first: its table is named with it
            "c.condeferred, n.nspname = current_schema(), "
            "format_type(a.atttypid, a.atttypmod), "
            # a composite key's every column, in its order, and what each references; the pair that holds the
            # key wherever it stands in the list
            "ARRAY(SELECT CAST(x.attname AS text) FROM unnest(c.conkey) WITH ORDINALITY AS u(n, o) "
            "JOIN pg_attribute x ON x.attrelid = c.conrelid AND x.attnum = u.n ORDER BY u.o), "
            "ARRAY(SELECT CAST(x.attname AS text) FROM unnest(c.confkey) WITH ORDINALITY AS u(n, o) "
            "JOIN pg_attribute x ON x.attrelid = c.confrelid AND x.attnum = u.n ORDER BY u.o), "
            "c.confmatchtype = 'f', CAST(n.nspname AS text) "
            "FROM pg_constraint c JOIN pg_class cl ON cl.oid = c.conrelid JOIN pg_class p ON p.oid = c.confrelid "
            "JOIN pg_namespace n ON n.oid = cl.relnamespace "
            "CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(own, ref) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.own "
            "JOIN pg_attribute r ON r.attrelid = c.confrelid AND r.attnum = k.ref "
            "WHERE c.contype = 'f' AND c.confrelid = to_regclass(:t) AND r.attname = :c ORDER BY cl.relname, c.conname",
            {"t": quote_identifier(table), "c": column},
        )

    def reference(self, row: Sequence[object], /) -> Reference:
        name, table, column, not_null, on_delete, on_update, deferrable, deferred, same, kind = row[:10]
        own, referenced, full, schema = row[10:]
        assert isinstance(own, list) and isinstance(referenced, list)
        defer = ""
        if deferrable:
            defer = "DEFERRABLE INITIALLY DEFERRED" if deferred else "DEFERRABLE INITIALLY IMMEDIATE"
        return Reference(
            constraint=str(name),
            # a table of another schema is named with it (a tenant's schema beside the shared one)
            table=str(table) if same else InSchema(str(schema), str(table)),
            column=str(column),
            nullable=not not_null,
            on_delete=_ACTIONS[str(on_delete)],
            on_update=_ACTIONS[str(on_update)],
            deferrable=defer,
            column_type=str(kind),
            pairs=tuple(zip(map(str, own), map(str, referenced), strict=True)) if len(own) > 1 else (),
            match="MATCH FULL" if full else "",
        )

    def source_kind(self, sql_type: str, /) -> str | None:
        if sql_type in ("smallint", "integer", "bigint"):
            return "integer"
        if sql_type == "text" or sql_type.startswith(("character(", "character varying")):
            return "text"
        return None

    def key_of(self, kind: str, function: str, column: str, /) -> str | None:
        # a text's cast takes 36 characters or 32 (and braces, upper case): uuid's input ("UUID Type")
        return f"{function}({column})" if kind == "integer" else f"({column})::uuid"

    def not_changed(self, kind: str, /) -> str:
        return f"PostgreSQL changes {kind} keys"  # never asked: key_of makes every kind's key

    def integer_range(self, table: str, column: str, /) -> str:
        return f"SELECT min({column}), max({column}) FROM {table}"

    def invalid_texts(self, table: str, column: str, /) -> str:
        return (
            f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL AND {column} !~* "
            "'^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'"
        )

    def integer_function(self, name: str, layout: Layout, storage: Storage, /) -> str | None:
        # ids/rekeyed.integer_key for TIME_FIRST compared bytewise: time 0, version 7, the integer's bits above
        # bit 62 in the 12 bits after the version, variant 10, its low 62 bits; a negative integer has none
        if layout is not Layout.TIME_FIRST or storage is not Storage.NATIVE:
            return None
        return (
            f"CREATE OR REPLACE FUNCTION {name}(n bigint) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
            "AS $$ SELECT CASE WHEN n >= 0 THEN ('00000000-0000-7' || lpad(to_hex(n >> 62), 3, '0') || '-' || "
            "lpad(to_hex(((n >> 48) & 16383) | 32768), 4, '0') || '-' || lpad(to_hex(n & 281474976710655), 12, '0')"
            ")::uuid END $$"
        )

    def late_keys(self, kind: str, /) -> bool:
        return False  # a BEFORE INSERT trigger sees the key its default made (a sequence's)

    def function_present(self, name: str, /) -> tuple[str, dict[str, object]]:
        return ("SELECT 1 WHERE to_regprocedure(:f) IS NOT NULL", {"f": f"{quote_identifier(name)}(bigint)"})

    def keep_in_step(
        self, table: str, source: str, target: str, expression: str, names: tuple[str, str], /
    ) -> list[str]:
        function = trigger = names[0]  # one trigger for both events, named as its function
        # the trigger made again in one statement, so one transaction: between a drop and a create apart, a row
        # written below a resumed backfill's cursor would keep no key (13 has no CREATE OR REPLACE TRIGGER).
        # UPDATE OF the source: an update that names it in its SET list, a foreign key's cascade included;
        # not the backfill's, which sets the target alone (a trigger on every update made the expand step
        # take 1.5x as long: "CREATE TRIGGER", column-specific triggers)
        return [
            f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN NEW.{target} := {expression}; RETURN NEW; END $$",
            f"DROP TRIGGER IF EXISTS {trigger} ON {table}; CREATE TRIGGER {trigger} BEFORE INSERT OR UPDATE OF "
            f"{source} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()",
        ]

    def drop_in_step(self, table: str, names: tuple[str, str], /) -> list[str]:
        return [f"DROP TRIGGER IF EXISTS {names[0]} ON {table}", f"DROP FUNCTION IF EXISTS {names[0]}()"]

    def index_steps(self, table: str, column: str, index: str, state: str | None, unique: bool, /) -> list[Step]:
        steps = []
        if state == "invalid":
            steps.append(Step(f"DROP INDEX CONCURRENTLY IF EXISTS {_beside(table, index)}", concurrent=True))
        if state != "valid":
            kind = "UNIQUE INDEX" if unique else "INDEX"
            steps.append(
                Step(
                    f"CREATE {kind} CONCURRENTLY {index} ON {table} ({column})",
                    concurrent=True,
                    undo=f"DROP INDEX CONCURRENTLY IF EXISTS {_beside(table, index)}",
                )
            )
        return steps

    def index_state(self, table: str, index: str, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(:t) AND c.relname = :i",
            {"t": quote_identifier(table), "i": index},
        )

    def companions(self, table: str, columns: Sequence[str], /) -> tuple[str, dict[str, object]]:
        # plain: what CREATE INDEX of the columns alone makes again ("pg_index": an expression's column is 0 in
        # indkey, indoption holds DESC and NULLS FIRST, indnkeyatts < indnatts where INCLUDE; 15's NULLS NOT
        # DISTINCT read through to_jsonb, which older servers' rows lack)
        names = ", ".join(f":c{n}" for n in range(len(columns)))
        return (
            "SELECT ic.relname, i.indisunique, EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid "
            "AND k.conrelid = i.indrelid AND k.contype = 'u'), "
            "ARRAY(SELECT CAST(a.attname AS text) FROM unnest(CAST(i.indkey AS int2[])) WITH ORDINALITY AS k(n, o) "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o), "
            "i.indexprs IS NULL AND i.indpred IS NULL AND i.indnkeyatts = i.indnatts AND m.amname = 'btree' "
            "AND i.indimmediate AND NOT 0 = ANY(CAST(i.indkey AS int2[])) AND 0 = ALL(CAST(i.indoption AS int2[])) "
            "AND NOT COALESCE(CAST(to_jsonb(i) ->> 'indnullsnotdistinct' AS boolean), false), "
            # the foreign keys that reference it (conindid: the referenced side's unique index)
            "ARRAY(SELECT ARRAY[CAST(fc.relname AS text), CAST(f.conname AS text)] FROM pg_constraint f "
            "JOIN pg_class fc ON fc.oid = f.conrelid WHERE f.contype = 'f' AND f.conindid = i.indexrelid "
            "ORDER BY 1) "
            "FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am m ON m.oid = ic.relam "
            "WHERE i.indrelid = to_regclass(:t) AND NOT i.indisprimary AND EXISTS (SELECT 1 FROM pg_attribute a "
            f"WHERE a.attrelid = i.indrelid AND a.attnum = ANY(CAST(i.indkey AS int2[])) AND a.attname IN ({names})) "
            "ORDER BY 1",
            {"t": quote_identifier(table), **{f"c{n}": c for n, c in enumerate(columns)}},
        )

    def companion(self, table: str, row: Sequence[object], /) -> Companion:
        name, unique, constraint, columns, plain, referenced = row
        assert isinstance(columns, list) and isinstance(referenced, list)
        listed = tuple(map(str, columns))
        keys = tuple((str(t), str(n)) for t, n in referenced)
        return Companion(table, str(name), listed, bool(unique), bool(constraint), bool(plain), keys)

    def constraint_state(self, table: str, name: str, /) -> tuple[str, dict[str, object]]:
        return (
            "SELECT convalidated FROM pg_constraint WHERE conrelid = to_regclass(:t) AND conname = :n",
            {"t": quote_identifier(table), "n": name},
        )

    def foreign_key_steps(
        self, reference: Reference, column: str, parent: str, parent_column: str, name: str, state: bool | None, /
    ) -> list[Step]:
        steps = []
        if state is None:
            steps.append(Step(self._add_foreign_key(reference, column, parent, parent_column, name)))
        if not state:
            steps.append(Step(f"ALTER TABLE {quote_identifier(reference.table)} VALIDATE CONSTRAINT {name}"))
        return steps

    def _add_foreign_key(self, reference: Reference, column: str, parent: str, parent_column: str, name: str) -> str:
        # NOT VALID: no scan under the lock; VALIDATE CONSTRAINT checks the rows under SHARE UPDATE EXCLUSIVE
        actions = f"ON DELETE {reference.on_delete} ON UPDATE {reference.on_update} {reference.deferrable}"
        own, referenced = reference.listed(column, parent_column, quote_identifier)
        match = f"{reference.match} " if reference.match else ""
        return (
            f"ALTER TABLE {quote_identifier(reference.table)} ADD CONSTRAINT {name} FOREIGN KEY ({own}) "
            f"REFERENCES {parent} ({referenced}) {match}{actions.strip()} NOT VALID"
        )

    def orphans(self, table: str, pairs: Sequence[tuple[str, str]], parent: str, /) -> str | None:
        return None  # VALIDATE CONSTRAINT checked every row

    def stale(self, column: str, expression: str, /) -> str | None:
        return None  # a foreign key's cascade is an UPDATE or DELETE of the child: its row triggers fire

    def contract_steps(self, swap: Swap, /) -> list[Step]:
        # one transaction (the bound's SET LOCAL, then each change), every change the catalog's
        return [Step("; ".join(self._contract(swap)))]

    def _contract(self, swap: Swap) -> list[str]:
        # the heirs' first (a keyed child's key moves as its own table's), then each child's (its old foreign
        # key holds the old key's index), then the table's; ADD PRIMARY KEY USING INDEX makes the unique index
        # built concurrently the key, with no scan (its column is NOT NULL already)
        out = [statement for heir in swap.heirs for statement in self._contract(heir)]
        for c in swap.children:
            out += self.drop_in_step(c.table, c.triggers)
            out.append(f"ALTER TABLE {c.table} DROP CONSTRAINT {c.constraint}")
            if c.keyed:  # its columns swapped as its table's key, above: its kept integer is the one to free
                out.append(f"ALTER TABLE {c.table} ALTER COLUMN {c.kept} DROP NOT NULL")
            else:
                out += [
                    f"ALTER TABLE {c.table} ALTER COLUMN {c.column} DROP NOT NULL",
                    f"ALTER TABLE {c.table} RENAME COLUMN {c.column} TO {c.kept}",
                    f"ALTER TABLE {c.table} RENAME COLUMN {c.new} TO {c.column}",
                ]
            out.append(f"ALTER TABLE {c.table} RENAME CONSTRAINT {c.new_constraint} TO {c.constraint}")
        p = swap.parent
        out += self.drop_in_step(p.table, p.triggers)
        # the old key keeps its unique index (built in the expand step) and its default: old URLs find rows
        out += [
            f"ALTER TABLE {p.table} DROP CONSTRAINT {p.constraint}",
            f"ALTER TABLE {p.table} RENAME COLUMN {p.column} TO {p.kept}",
            f"ALTER TABLE {p.table} RENAME COLUMN {p.new} TO {p.column}",
            f"ALTER TABLE {p.table} ADD CONSTRAINT {p.constraint} PRIMARY KEY USING INDEX {p.new_constraint}",
        ]
        if p.column_type not in ("smallint", "integer", "bigint"):  # a text key's old value is the new one's
            out.append(f"ALTER TABLE {p.table} ALTER COLUMN {p.kept} DROP NOT NULL")
        if swap.default is not None:
            out.append(f"ALTER TABLE {p.table} ALTER COLUMN {p.column} SET DEFAULT {swap.default}")
        for ix in swap.indexes:  # each old index dropped, its copy over the new columns given its name
            out += [self._drop(ix), self._named(ix.table, ix.copy, ix.name, ix.constraint)]
        return out

    def _drop(self, ix: SwappedIndex) -> str:
        return (
            f"ALTER TABLE {ix.table} DROP CONSTRAINT {ix.name}"
            if ix.constraint
            else f"DROP INDEX {_beside(ix.table, ix.name)}"
        )

    def _named(self, table: str, index: str, name: str, constraint: bool) -> str:
        """The index ``index`` named ``name``: a unique constraint made of it where one owned its original
        (ADD CONSTRAINT ... USING INDEX, which renames it: no scan), else renamed."""
        if constraint:
            return f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE USING INDEX {index}"
        return f"ALTER INDEX {_beside(table, index)} RENAME TO {name}"

    def undo_contract_steps(self, swap: Swap, /) -> list[Step]:
        # one transaction: every key swapped back (a table's children's foreign keys dropped before its key,
        # then its heirs'), then every old foreign key added again NOT VALID, each validated after it.  A keyed
        # child's kept key is proved NOT NULL by a CHECK validated before it (reads and writes going on), so
        # that its SET NOT NULL in the transaction, under the name it had (18 names it), reads no row
        keyed = [c for s in _tree(swap) for c in s.children if c.keyed]
        before = [
            Step(statement)
            for c in keyed
            for statement in (
                f"ALTER TABLE {c.table} DROP CONSTRAINT IF EXISTS {c.check}",
                f"ALTER TABLE {c.table} ADD CONSTRAINT {c.check} CHECK ({c.kept} IS NOT NULL) NOT VALID",
                f"ALTER TABLE {c.table} VALIDATE CONSTRAINT {c.check}",
            )
        ]
        gone = [f"ALTER TABLE {c.table} DROP CONSTRAINT {c.check}" for c in keyed]  # in it: none is left behind
        added, validate = self._undo_added(swap)
        return [*before, Step("; ".join([*self._undo_swapped(swap), *added, *gone])), *validate]

    def _undo_swapped(self, swap: Swap, heir: bool = False) -> list[str]:
        out = []
        for c in swap.children:
            out.append(f"ALTER TABLE {c.table} DROP CONSTRAINT {c.constraint}")
            if not c.keyed:  # a keyed child's columns swap back as its table's key, below
                out += [
                    f"ALTER TABLE {c.table} RENAME COLUMN {c.column} TO {c.new}",
                    f"ALTER TABLE {c.table} RENAME COLUMN {c.kept} TO {c.column}",
                ]
        p = swap.parent
        out += [
            f"ALTER TABLE {p.table} DROP CONSTRAINT {p.constraint}",
            f"ALTER TABLE {p.table} ALTER COLUMN {p.column} DROP DEFAULT",
            f"ALTER TABLE {p.table} RENAME COLUMN {p.column} TO {p.new}",
            f"ALTER TABLE {p.table} RENAME COLUMN {p.kept} TO {p.column}",
        ]
        if heir:  # its kept key was freed by the contract: NOT NULL again (its CHECK, above, spares the scan)
            out.append(f"ALTER TABLE {p.table} ALTER COLUMN {p.column} SET NOT NULL")
        out.append(f"ALTER TABLE {p.table} ADD CONSTRAINT {p.constraint} PRIMARY KEY USING INDEX {swap.old_unique}")
        for ix in swap.indexes:  # the copy back to its name, the index the way back built over the kept columns
            if ix.shared:  # another change's copy has the name, and is the one both need
                out.append(self._drop(ix))
            elif ix.constraint:
                out.append(f"ALTER TABLE {ix.table} RENAME CONSTRAINT {ix.name} TO {ix.copy}")
            else:
                out.append(f"ALTER INDEX {_beside(ix.table, ix.name)} RENAME TO {ix.copy}")
            out.append(self._named(ix.table, ix.back, ix.name, ix.constraint))
        return out + [statement for each in swap.heirs for statement in self._undo_swapped(each, heir=True)]

    def _undo_added(self, swap: Swap) -> tuple[list[str], list[Step]]:
        p = swap.parent
        out = self.keep_in_step(p.table, p.column, p.new, swap.key_of(f"NEW.{p.column}"), p.triggers)
        validate = []
        for c in swap.children:
            assert c.references is not None
            out.append(self._add_foreign_key(c.references, c.column, p.table, p.column, c.constraint))
            if not c.keyed:  # a keyed child's trigger is its table's key's, its heir's
                out += self.keep_in_step(c.table, c.column, c.new, swap.key_of(f"NEW.{c.column}"), c.triggers)
            validate.append(Step(f"ALTER TABLE {c.table} VALIDATE CONSTRAINT {c.constraint}"))
        for heir in swap.heirs:
            more, checks = self._undo_added(heir)
            out += more
            validate += checks
        return out, validate

    def unfilled(self, table: str, column: str, kept: str, /) -> str:
        return f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL AND {kept} IS NULL"

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
        if parent is None:  # the table's own old key: the new key's text
            text = f"replace({column}::text, '-', '')" if "(32)" in kept_type else f"{column}::text"
            return f"UPDATE {table} SET {kept} = {text} WHERE {kept} IS NULL"
        return (
            f"UPDATE {table} c SET {kept} = p.{parent_kept} FROM {parent} p "
            f"WHERE p.{parent_column} = c.{column} AND c.{kept} IS NULL"
        )

    def drop_foreign_key(self, table: str, name: str, /) -> str:
        return f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}"

    def drop_column(self, table: str, column: str, /) -> str:
        return f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}"

    def drop_index(self, table: str, index: str, /) -> str:
        return f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {index}; DROP INDEX IF EXISTS {_beside(table, index)}"

    def untracked(self) -> tuple[str, dict[str, object]]:
        # Django's generic relations (contenttypes' GenericForeignKey: an object id beside a content type, as
        # the admin log keeps one): a key held without a foreign key, which no catalog links to its table
        return (
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relkind IN ('r', 'p') "
            "AND c.relnamespace = ANY(current_schemas(false)::regnamespace[]) AND NOT a.attisdropped "
            "AND (a.attname IN ('object_id', 'object_pk') OR a.attname LIKE '%\\_object\\_id') "
            "AND EXISTS (SELECT 1 FROM pg_attribute t WHERE t.attrelid = c.oid AND t.attname LIKE '%content\\_type%' "
            "AND NOT t.attisdropped) ORDER BY 1, 2",
            {},
        )


REKEY = Rekey()
REBUILD = None  # its keys change online (REKEY)


# --- what seqid doctor reads (seqid_orm.schema.doctor asks) ------------------------------------------

# Every schema but the system's, each table once: a partitioned table by its parent, whose rows and
# index bytes are its partitions' (pg_partition_tree, PostgreSQL 12+), never partition by partition.
_PG_KEYS = """
SELECT n.nspname = current_schema(), n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
       i.indisprimary,
       CAST(COALESCE(
         (SELECT SUM(GREATEST(pc.reltuples, COALESCE(ps.n_live_tup, 0), 0))
          FROM pg_partition_tree(c.oid) t JOIN pg_class pc ON pc.oid = t.relid
          LEFT JOIN pg_stat_user_tables ps ON ps.relid = pc.oid WHERE t.isleaf),
         GREATEST(c.reltuples, COALESCE(s.n_live_tup, 0), 0)) AS bigint),
       COALESCE((SELECT SUM(pg_relation_size(t.relid)) FROM pg_partition_tree(i.indexrelid) t),
                pg_relation_size(i.indexrelid)),
       (SELECT CAST(CAST(f.confrelid AS regclass) AS text) FROM pg_constraint f
        WHERE f.contype = 'f' AND f.conrelid = c.oid AND f.conkey = ARRAY[a.attnum] LIMIT 1),
       col_description(c.oid, a.attnum)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE i.indisunique AND i.indnatts = 1 AND i.indexprs IS NULL AND i.indpred IS NULL
  AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname <> 'information_schema' AND left(n.nspname, 3) <> 'pg_'
ORDER BY n.nspname <> current_schema(), n.nspname, c.relname, NOT i.indisprimary, a.attname
"""

_PAGE = 8192  # the block size of the default build
_LEAF_FILL = 0.9  # B-tree leaf pages filled by key-order inserts (btree fillfactor 90)


class Doctor:
    """PostgreSQL's catalog as ``seqid doctor`` reads it."""

    SCHEMAS = True

    def session_statements(self, timeout_s: float, /) -> list[str]:
        ms = max(1, math.ceil(timeout_s * 1000))
        return ["SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", f"SET statement_timeout = {ms}"]

    def key_columns(self, fetch: Fetch, recover: Callable[[], None], /) -> list[KeyColumn]:
        out = []
        for current, schema, table, column, sql_type, primary, rows, size, references, comment in fetch(_PG_KEYS, {}):
            if size is None or rows is None:  # dropped while the catalog was read: pg_relation_size() says NULL
                continue
            out.append(
                KeyColumn(
                    str(table),
                    str(column),
                    str(sql_type),
                    bool(primary),
                    int(rows),
                    int(size),
                    key_width(str(sql_type)),
                    schema=str(schema),
                    in_current_schema=bool(current),
                    references=None if references is None else str(references),
                    record=record_of(None if comment is None else str(comment)),
                )
            )
        return out

    def exists(self, table: str, schema: str | None, /) -> tuple[str, dict[str, object]]:
        name = quote_identifier(table)
        return "SELECT CAST(to_regclass(:name) AS text)", {
            "name": name if schema is None else f"{quote_identifier(schema)}.{name}"
        }

    def ideal_index_bytes(self, column: KeyColumn, /) -> int | None:
        """A B-tree over ``rows`` keys of ``key_width`` bytes built in key order: 8-byte tuple headers, keys
        aligned to 8, a 4-byte line pointer each, leaves filled to 90 %, plus the metapage."""
        if column.rows is None or column.key_width is None:
            return None
        per_tuple = 8 * math.ceil((8 + column.key_width) / 8) + 4
        per_leaf = int((_PAGE - 24 - 16) * _LEAF_FILL) // per_tuple
        leaves = max(1, math.ceil(column.rows / per_leaf))
        return (1 + leaves + math.ceil(leaves / per_leaf)) * _PAGE


DOCTOR = Doctor()


# --- a live key column read before its first key (seqid_orm.schema.live asks) -----------------------

TYPED_COLUMNS = True  # a declared uuid column holds uuids, whatever the driver hands back


def column_catalog(table: str, column: str, schema: str | None, /) -> str | None:
    """The catalog row of a key column: the real table the name resolves to under this connection's
    ``search_path`` (its oid), the declared type, whether this role may read it, its comment."""
    where = qualified(table, schema)
    return (
        "SELECT a.attrelid::bigint, format_type(a.atttypid, a.atttypmod), "
        "has_column_privilege(a.attrelid, a.attnum, 'SELECT'), col_description(a.attrelid, a.attnum) "
        f"FROM pg_attribute a WHERE a.attrelid = to_regclass({string_literal(where)}) "
        f"AND a.attname = {string_literal(column)} AND NOT a.attisdropped"
    )
