"""The key kinds the benchmark compares, each a column type and a value source per dialect."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...errors import InvalidArgumentError
from ...ids.comb import CombGenerator
from ...ids.prefixed import uuid_sequence_nextval, uuid_time_nextval
from ...ids.snowflake import Snowflake
from ...ids.text import BsvGenerator
from ...sqlalchemy import DatabaseSeqUUID, SeqUUID, SnowflakeID, SortableText, TicketID, layout_for, seq_uuid_default

Batch = Callable[[int], list[Any]]


@dataclass
class KeyKind:
    """One contender: how its column is declared and how a batch of keys is made."""

    name: str
    description: str
    column: Callable[[Engine], sa.Column[Any]]
    make_batch: Callable[[Engine], Batch | None]  # None: the database (or the column default) makes the key
    key_bytes: int
    requires: str | None = None  # a module the kind needs, not installed with seqid
    database_made: bool = False  # the key is seqid's server default, which some databases cannot run
    bulk_made: bool = False  # bulk_insert makes the key itself (SeqUUID), as a user's bulk load would

    def available(self) -> bool:
        if self.requires is None:
            return True
        import importlib.util

        return importlib.util.find_spec(self.requires.split(".")[0]) is not None


def _uuid_column(engine: Engine) -> sa.Column[Any]:
    return sa.Column("id", SeqUUID(), primary_key=True)


def _db_uuid_column(engine: Engine) -> sa.Column[Any]:
    return sa.Column("id", SeqUUID(), primary_key=True, server_default=DatabaseSeqUUID())


def _default_uuid_column(engine: Engine) -> sa.Column[Any]:
    """seqid as users declare it (``seq_uuid_pk()``): SQLAlchemy calls the default for each row."""
    return sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default)


def _uuid_utils_column(engine: Engine) -> sa.Column[Any]:
    """The one-line alternative: SQLAlchemy's own ``Uuid`` with a UUIDv7 from uuid-utils (Rust)."""
    import uuid_utils.compat

    return sa.Column("id", sa.Uuid(), primary_key=True, default=uuid_utils.compat.uuid7)


def _bigint_column(engine: Engine) -> sa.Column[Any]:
    # SQLite makes only INTEGER PRIMARY KEY an alias of its rowid (its "identity")
    type_ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    return sa.Column("id", type_, primary_key=True, autoincrement=True)


def _uuid4(engine: Engine) -> Batch:
    return lambda n: [uuid.uuid4() for _ in range(n)]


def _comb(engine: Engine) -> Batch:
    gen = CombGenerator(layout_for(engine.dialect, SeqUUID()))
    return gen.batch


def _seq_prefix(engine: Engine) -> Batch:
    layout = SeqUUID().target(engine.dialect).prefix_layout
    counter = itertools.count(1)  # as a database sequence counts
    return lambda n: [uuid_sequence_nextval(next(counter), 65536, 65536, layout) for _ in range(n)]


def _time_prefix(engine: Engine) -> Batch:
    # 1-second intervals: with the extension's 60 s default a short run would sit under one prefix
    layout = SeqUUID().target(engine.dialect).prefix_layout
    return lambda n: [uuid_time_nextval(1, 65536, layout) for _ in range(n)]


def _snowflake(engine: Engine) -> Batch:
    gen = Snowflake(worker_id=1)
    return lambda n: [gen.next_id() for _ in range(n)]


def _ticket(engine: Engine) -> Batch:
    """A ticket sequence on the benchmark's own database, a fresh name per run: blocks of 10,000 that
    grow to 1,000,000 while a load draws them fast (Leaf's adaptive step, what the tickets how-to
    advises for loads; with fixed blocks of 10,000 a 300,000-row load spends 31 ms on round trips)."""
    import atexit
    import secrets

    from ...allocation.tickets import TicketSequence

    sequence = TicketSequence(
        f"bench_{secrets.token_hex(4)}",
        engine.url.render_as_string(hide_password=False),
        block_size=10_000,
        max_block_size=1_000_000,
    )
    atexit.register(sequence.close)
    return sequence.next_ids


def _bsv(engine: Engine) -> Batch:
    gen = BsvGenerator()
    return lambda n: [gen() for _ in range(n)]


KINDS: dict[str, KeyKind] = {
    k.name: k
    for k in (
        KeyKind("bigint", "BIGINT identity (database-assigned)", _bigint_column, lambda e: None, 8),
        KeyKind("uuid4", "random UUIDv4", _uuid_column, _uuid4, 16),
        KeyKind(
            "comb", "seqid time-ordered UUID, layout chosen for the database", _uuid_column, _comb, 16, bulk_made=True
        ),
        KeyKind(
            "comb-db",
            "seqid time-ordered UUID made by the database (DatabaseSeqUUID server default)",
            _db_uuid_column,
            lambda e: None,
            16,
            database_made=True,
        ),
        KeyKind(
            "comb-default",
            "seqid time-ordered UUID from the column default, as seq_uuid_pk() declares it (one call a row)",
            _default_uuid_column,
            lambda e: None,
            16,
        ),
        KeyKind(
            "sa-uuid7",
            "the alternative: sa.Uuid with default=uuid_utils.compat.uuid7 (one call a row)",
            _uuid_utils_column,
            lambda e: None,
            16,
            requires="uuid_utils",
        ),
        KeyKind(
            "seq-prefix",
            "seqid wrapping prefix from a sequence, as PostgreSQL's sequential-uuids extension (65536 ids a block)",
            _uuid_column,
            _seq_prefix,
            16,
        ),
        KeyKind(
            "time-prefix",
            "seqid wrapping prefix from the clock, as sequential-uuids' uuid_time_nextval (a new block each second)",
            _uuid_column,
            _time_prefix,
            16,
        ),
        KeyKind(
            "ticket",
            "seqid ticket sequence BIGINT (blocks of 10,000 growing to 1,000,000, from the same database)",
            lambda e: sa.Column("id", TicketID(), primary_key=True, autoincrement=False),
            _ticket,
            8,
        ),
        KeyKind(
            "snowflake",
            "seqid Snowflake BIGINT",
            lambda e: sa.Column("id", SnowflakeID(), primary_key=True, autoincrement=False),
            _snowflake,
            8,
        ),
        KeyKind(
            "bsv",
            "seqid sortable text (32 chars, binary collation)",
            lambda e: sa.Column("id", SortableText("bsv"), primary_key=True),
            _bsv,
            32,
        ),
    )
}


def check_kinds(kinds: Sequence[str]) -> None:
    """Refuse, before anything runs, key kinds that do not exist or whose module is not installed."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise InvalidArgumentError(f"unknown key kinds {unknown}; choose from {', '.join(KINDS)}")
    missing = [f"{k} needs {KINDS[k].requires}" for k in kinds if not KINDS[k].available()]
    if missing:
        raise InvalidArgumentError(f"{'; '.join(missing)} (pip install 'seqid-orm[bench]')")
