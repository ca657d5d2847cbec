"""Oracle (tested by compiling SQL: no server here).  ``RAW(16)`` compares its bytes first to last;
Oracle has no time-ordered UUID generator, so ids are made in Python."""

from __future__ import annotations

from ._base import (
    TextColumnSpec,
    bytewise_order,
    double_quoted,
    no_adopted_default,
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
    no_server_default,
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

NAME = "oracle"
DISTRIBUTED = False
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation=None)
BINARY_FALLBACK = True
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = True
quote_identifier = double_quoted
string_literal = standard_literal
qualified = qualify(quote_identifier)

has_native_uuid = no_native_uuid
compare_order = bytewise_order
server_default = no_server_default("Oracle has no time-ordered UUID generator; generate ids in Python")
convert_column = no_conversion(NAME)
sequential_functions, drop_sequential_functions = no_sequential_functions(NAME)


def binary_literal(raw: bytes, /) -> str:
    return f"HEXTORAW('{raw.hex().upper()}')"


adopted_default = no_adopted_default(NAME)
