"""seqid_orm: primary keys that are globally unique and land at the end of the index.

The folders show the roles, and what each may import (its docstring says more):

* :mod:`seqid_orm.ids` — id generators and codecs (UUIDv7/COMB layouts, Snowflake, wrapping
  prefixes, sortable text, TypeID), the key validator, reading ids back.  Standard library only.
* :mod:`seqid_orm.vendors` — the per-vendor rules: how each database compares a UUID, which
  storage and column it gets, the SQL a database-made id runs.  One :class:`~seqid_orm.vendors.Target`
  per connection and column carries every decision; the adapters read it.  Standard library only.
* :mod:`seqid_orm.allocation` — ticket sequences and leased worker ids, with their stores (which
  load SQLAlchemy, redis-py or Django only when opened).
* :mod:`seqid_orm.public` — public ids: a time-ordered key shown without its creation time.
* The adapters :mod:`seqid_orm.sqlalchemy` (with Alembic), :mod:`seqid_orm.django` and
  :mod:`seqid_orm.pydantic` need their extras and use only the public doors of the above.
* :mod:`seqid_orm.cli` — the ``seqid`` command.

Importing ``seqid_orm`` loads the standard library only.  Errors live in :mod:`seqid_orm.errors`;
the ones a caller usually catches are here too.
"""

from __future__ import annotations

from .allocation.leases import WorkerLease
from .allocation.tickets import TicketSequence
from .errors import AllocationError, InvalidIDError, SeqIDError, UnmaskError
from .ids.comb import CombGenerator, comb, comb_at, comb_batch, uuid7
from .ids.decode import IdInfo, describe, timestamp_of
from .ids.layout import Layout
from .ids.prefixed import uuid_sequence_nextval, uuid_time_nextval
from .ids.snowflake import Snowflake
from .ids.text import base32, bsv
from .ids.typeid import typeid
from .public.masking import mask, unmask, unmask_any

__version__ = "0.2.0"

__all__ = [
    "AllocationError",
    "CombGenerator",
    "IdInfo",
    "InvalidIDError",
    "Layout",
    "SeqIDError",
    "Snowflake",
    "TicketSequence",
    "UnmaskError",
    "WorkerLease",
    "base32",
    "bsv",
    "comb",
    "comb_at",
    "comb_batch",
    "describe",
    "mask",
    "timestamp_of",
    "typeid",
    "unmask",
    "unmask_any",
    "uuid7",
    "uuid_sequence_nextval",
    "uuid_time_nextval",
]
