"""The sequential-uuids generators as SQL functions, for servers where no C extension can be installed.

Managed PostgreSQL services rarely allow ``CREATE EXTENSION sequential_uuids``.  These are ports of
its two functions with its signatures and its results (the prefix of
:func:`seqid_orm.prefixed.extension_prefix`, random bytes from the server, version 4 and the RFC
variant), created and dropped by a migration operation (Alembic ``op.create_sequential_uuid_functions()``,
Django ``CreateSequentialUUIDFunctions``):

* PostgreSQL 13+ (PL/pgSQL): ``uuid_sequence_nextval(regclass, int, int)`` and
  ``uuid_time_nextval(int, int)``, usable as column defaults (``DEFAULT uuid_sequence_nextval('s',
  65536, 65536)``).  Unlike the extension, the sequence function is declared ``PARALLEL UNSAFE``
  (it calls ``nextval``); block counts above 2**24, which crash the extension's arithmetic, work.
* MariaDB 10.10+ (stored functions): a function cannot call ``NEXTVAL`` on a sequence it is given
  by name (no dynamic SQL in functions), so ``uuid_sequence_nextval(value, block_size, block_count)``
  takes the value ``NEXTVAL(s)`` returned (and, like the extension, works from ``value - 1``);
  ``uuid_time_nextval(int, int)`` as on PostgreSQL.  They return the 36-character text, with the
  prefix where the target column compares first (the first bytes, or the last six for MariaDB's
  ``UUID`` type, which compares its last group first for version-4 values).  MariaDB refuses stored
  functions in a column ``DEFAULT`` (error 1901), so there they serve inserts and SQLAlchemy's
  client-side SQL defaults (``default=sa.func.uuid_time_nextval(60, 65536)``).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..ids.layout import Layout, as_layout

__all__ = ["FUNCTIONS", "create_statements", "drop_statements"]

#: The functions each vendor gets, as ``name(argument types)`` for ``DROP FUNCTION``.
FUNCTIONS = {
    "postgresql": (
        "uuid_sequence_nextval(regclass, integer, integer)",
        "uuid_time_nextval(integer, integer)",
        "seqid_sequential_uuid(bigint, integer, integer)",
    ),
    "mariadb": ("uuid_sequence_nextval", "uuid_time_nextval", "seqid_sequential_uuid"),
}

_PG_CORE = """
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

_PG_SEQUENCE = """
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

_PG_TIME = """
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

_MARIADB_CORE = """
CREATE OR REPLACE FUNCTION seqid_sequential_uuid(val BIGINT, block_size INT, block_count INT)
RETURNS CHAR(36) CHARACTER SET ascii NOT DETERMINISTIC NO SQL SQL SECURITY INVOKER
BEGIN
    DECLARE bits INT DEFAULT 1;
    DECLARE slots BIGINT DEFAULT 2;
    DECLARE nbytes INT;
    DECLARE prefix_count BIGINT;
    DECLARE rescaled BIGINT;
    DECLARE h CHAR(32) CHARACTER SET ascii;
    DECLARE p CHAR(12) CHARACTER SET ascii;
    IF block_size < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'block size must be a positive integer';
    END IF;
    IF block_count < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'number of blocks must be a positive integer';
    END IF;
    WHILE block_count > slots DO
        SET bits = bits + 1;
        SET slots = slots * 2;
    END WHILE;
    SET nbytes = (bits + 7) DIV 8;
    SET prefix_count = 1 << (8 * nbytes);
    SET rescaled = GREATEST(1, (CAST(block_size AS SIGNED) * block_count) DIV prefix_count);
    -- DIV truncates toward zero as C does; & takes the two's complement bits
    SET p = LPAD(HEX((val DIV rescaled) & (prefix_count - 1)), 2 * nbytes, '0');
    SET h = LOWER(HEX(RANDOM_BYTES(16)));
    SET h = {place};
    SET h = INSERT(h, 13, 1, '4');
    SET h = INSERT(h, 17, 1, LOWER(HEX((CONV(SUBSTR(h, 17, 1), 16, 10) & 3) | 8)));
    RETURN LOWER(CONCAT_WS('-', SUBSTR(h, 1, 8), SUBSTR(h, 9, 4), SUBSTR(h, 13, 4), SUBSTR(h, 17, 4),
                           SUBSTR(h, 21, 12)));
END
"""

# where the prefix goes in the 32 hex digits: first (bytes 0..), or leading the last six bytes (10..)
_MARIADB_PLACE = {
    Layout.TIME_FIRST: "CONCAT(p, SUBSTR(h, 2 * nbytes + 1))",
    Layout.TIME_LAST: "CONCAT(SUBSTR(h, 1, 20), p, SUBSTR(h, 21 + 2 * nbytes))",
}

_MARIADB_SEQUENCE = """
CREATE OR REPLACE FUNCTION uuid_sequence_nextval(val BIGINT, block_size INT, block_count INT)
RETURNS CHAR(36) CHARACTER SET ascii NOT DETERMINISTIC NO SQL SQL SECURITY INVOKER
RETURN seqid_sequential_uuid(val - 1, block_size, block_count)
"""

_MARIADB_TIME = """
CREATE OR REPLACE FUNCTION uuid_time_nextval(interval_length INT, interval_count INT)
RETURNS CHAR(36) CHARACTER SET ascii NOT DETERMINISTIC NO SQL SQL SECURITY INVOKER
BEGIN
    IF interval_length < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'length of interval must be a positive integer';
    END IF;
    IF interval_count < 1 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'number of intervals must be a positive integer';
    END IF;
    RETURN seqid_sequential_uuid(UNIX_TIMESTAMP(), interval_length, interval_count);
END
"""


def _vendor(vendor: str) -> str:
    if vendor in ("postgresql", "mariadb"):
        return vendor
    raise InvalidArgumentError(
        f"the sequential-uuids functions exist for PostgreSQL 13+ and MariaDB 10.10+, not {vendor!r} "
        "(generate the ids in Python with seqid_orm.uuid_sequence_nextval there)"
    )


def create_statements(vendor: str, layout: Layout | str = Layout.TIME_FIRST) -> list[str]:
    """The ``CREATE FUNCTION`` statements for ``vendor`` (one statement each: no delimiters needed).

    ``layout`` (MariaDB): ``time_first`` puts the prefix in the first bytes (``BINARY(16)``, text),
    ``time_last`` in the last six (MariaDB's ``UUID`` type); ask the registry
    (:func:`~seqid_orm.registry.choose_prefix_layout`) which one a column needs.
    """
    if _vendor(vendor) == "postgresql":
        return [_PG_CORE.strip(), _PG_SEQUENCE.strip(), _PG_TIME.strip()]
    lay = as_layout(layout)
    if lay not in _MARIADB_PLACE:
        raise InvalidArgumentError(f"the MariaDB functions place the prefix first or last, not {lay.value}")
    return [_MARIADB_CORE.format(place=_MARIADB_PLACE[lay]).strip(), _MARIADB_SEQUENCE.strip(), _MARIADB_TIME.strip()]


def drop_statements(vendor: str) -> list[str]:
    """The ``DROP FUNCTION`` statements undoing :func:`create_statements`."""
    return [f"DROP FUNCTION IF EXISTS {name}" for name in FUNCTIONS[_vendor(vendor)]]
