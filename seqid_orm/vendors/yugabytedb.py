"""YugabyteDB (PostgreSQL's protocol; told apart by ``version()``, which names ``-YB-``; no server here).

Distributed, as CockroachDB: ids get the ``SHARDED`` layout, and the database does not make them.
"""

from __future__ import annotations

from ._base import (
    TextColumnSpec,
    always_native_uuid,
    bytewise_in_every_storage,
    hot_spot_refusal,
    no_adopted_default,
    no_adoption_statements,
    no_conversion,
    no_sequential_functions,
)
from .postgresql import binary_literal

NAME = "yugabytedb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
ONLINE = None  # seqid changes no table of it online

has_native_uuid = always_native_uuid
compare_order = bytewise_in_every_storage
server_default = hot_spot_refusal(NAME)
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)

__all__ = ["binary_literal"]

adopted_default = no_adopted_default(NAME)
adoption_statements = no_adoption_statements
