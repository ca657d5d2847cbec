"""YugabyteDB (PostgreSQL's protocol; told apart by ``version()``, which names ``-YB-``; no server here).

Distributed, as CockroachDB: ids get the ``SHARDED`` layout, and the database does not make them.
"""

from __future__ import annotations

from ._base import (
    TextColumnSpec,
    always_native_uuid,
    bytewise_in_every_storage,
    double_quoted,
    hot_spot_refusal,
    no_adopted_default,
    no_adoption_statements,
    no_column_catalog,
    no_conversion,
    no_sequential_functions,
    qualify,
    standard_literal,
)
from .postgresql import binary_literal

NAME = "yugabytedb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
quote_identifier = double_quoted
string_literal = standard_literal
TYPE_CHANGE_HOLDS = None  # no conversion seqid refuses by size
qualified = qualify(quote_identifier)
TYPED_COLUMNS = True
column_catalog = no_column_catalog
ONLINE = None  # seqid changes no table of it online
DOCTOR = None  # seqid doctor reads no catalog of it

has_native_uuid = always_native_uuid
compare_order = bytewise_in_every_storage
server_default = hot_spot_refusal(NAME)
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)

__all__ = ["binary_literal"]

adopted_default = no_adopted_default(NAME)
adoption_statements = no_adoption_statements
