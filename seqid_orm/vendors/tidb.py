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
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
    qualify,
)

# what seqid neither reads nor changes on this engine: the answers of an engine it does not know
from .generic import DOCTOR as DOCTOR
from .generic import ONLINE as ONLINE
from .generic import REBUILD as REBUILD
from .generic import REKEY as REKEY
from .generic import TYPE_CHANGE_HOLDS as TYPE_CHANGE_HOLDS
from .generic import TYPED_COLUMNS as TYPED_COLUMNS
from .generic import adoption_statements as adoption_statements
from .generic import column_catalog as column_catalog

NAME = "tidb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN: TextColumnSpec = mysql.TEXT_ID_COLUMN
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP FOREIGN KEY"
INNER_SPLITS_HALF = False
quote_identifier = backquoted
string_literal = backslash_literal
qualified = qualify(quote_identifier)

has_native_uuid = no_native_uuid
compare_order = bytewise_order
binary_literal = hex_literal
server_default = hot_spot_refusal(NAME)
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)

adopted_default = no_adopted_default(NAME)
