"""TiDB (MySQL's protocol; told apart by its version string, ``8.0.11-TiDB-v7.5.0``; no server here).

Distributed, as CockroachDB: ids get the ``SHARDED`` layout in ``BINARY(16)``, and the database does
not make them (TiDB's own answer is ``AUTO_RANDOM``).
"""

from __future__ import annotations

from . import mysql
from ._base import (
    TextColumnSpec,
    backquoted,
    backslash_literal,
    bytewise_order,
    hex_literal,
    hot_spot_refusal,
    no_adopted_default,
    no_adoption_statements,
    no_column_catalog,
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
    qualify,
)

NAME = "tidb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN: TextColumnSpec = mysql.TEXT_ID_COLUMN
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP FOREIGN KEY"
INNER_SPLITS_HALF = False
quote_identifier = backquoted
string_literal = backslash_literal
TYPE_CHANGE_HOLDS = None  # no conversion seqid refuses by size
qualified = qualify(quote_identifier)
TYPED_COLUMNS = True
column_catalog = no_column_catalog
ONLINE = None  # seqid changes no table of it online
DOCTOR = None  # seqid doctor reads no catalog of it

has_native_uuid = no_native_uuid
compare_order = bytewise_order
binary_literal = hex_literal
server_default = hot_spot_refusal(NAME)
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)

adopted_default = no_adopted_default(NAME)
adoption_statements = no_adoption_statements
