"""seqid_orm: primary keys that are globally unique and land at the end of the index.

The core (this package's top-level modules) imports nothing outside the standard library.
The ORM adapters live in :mod:`seqid_orm.sqlalchemy` and :mod:`seqid_orm.django` and need
their extras.
"""

from __future__ import annotations

from .comb import CombGenerator, comb, comb_at, comb_batch, uuid7
from .decode import IdInfo, describe, timestamp_of
from .errors import (
    AllocationError,
    ArgumentTypeError,
    BackendMismatchError,
    BackendUnavailableError,
    ClockMovedBackwardsError,
    ForkedGeneratorError,
    GeneratorExhaustedError,
    InvalidArgumentError,
    InvalidIDError,
    LeaseLostError,
    LeaseUnavailableError,
    NoTimestampError,
    SeqIDError,
    ServerDefaultUnavailableError,
    UnknownLayoutError,
    UnknownServerVersionError,
)
from .layout import Layout, layout_for_order
from .leases import WorkerLease
from .masking import UnmaskError, mask, unmask, unmask_any
from .prefixed import prefix_of, uuid_sequence_nextval, uuid_time_nextval
from .snowflake import Snowflake, SnowflakeParts
from .text import base32, bsv, bsv_parts, decode_base32, decode_bsv, encode_base32, encode_bsv
from .tickets import TicketSequence
from .validate import coerce_int_id, coerce_uuid

__version__ = "0.1.0"

__all__ = [
    "AllocationError",
    "ArgumentTypeError",
    "BackendMismatchError",
    "BackendUnavailableError",
    "ClockMovedBackwardsError",
    "CombGenerator",
    "ForkedGeneratorError",
    "GeneratorExhaustedError",
    "IdInfo",
    "InvalidArgumentError",
    "InvalidIDError",
    "Layout",
    "LeaseLostError",
    "LeaseUnavailableError",
    "NoTimestampError",
    "SeqIDError",
    "ServerDefaultUnavailableError",
    "Snowflake",
    "SnowflakeParts",
    "TicketSequence",
    "UnknownLayoutError",
    "UnknownServerVersionError",
    "UnmaskError",
    "WorkerLease",
    "base32",
    "bsv",
    "bsv_parts",
    "coerce_int_id",
    "coerce_uuid",
    "comb",
    "comb_at",
    "comb_batch",
    "decode_base32",
    "decode_bsv",
    "describe",
    "encode_base32",
    "encode_bsv",
    "layout_for_order",
    "mask",
    "prefix_of",
    "timestamp_of",
    "unmask",
    "unmask_any",
    "uuid7",
    "uuid_sequence_nextval",
    "uuid_time_nextval",
]
