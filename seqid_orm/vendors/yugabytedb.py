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
    no_conversion,
    no_sequential_functions,
    qualify,
    standard_literal,
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

# its SQL takes PostgreSQL's bytea literal (it speaks PostgreSQL's wire protocol and dialect)
from .postgresql import binary_literal as binary_literal

NAME = "yugabytedb"
DISTRIBUTED = True
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation="C")
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
quote_identifier = double_quoted
string_literal = standard_literal
qualified = qualify(quote_identifier)

has_native_uuid = always_native_uuid
compare_order = bytewise_in_every_storage
server_default = hot_spot_refusal(NAME)
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)

__all__ = ["binary_literal"]

adopted_default = no_adopted_default(NAME)
