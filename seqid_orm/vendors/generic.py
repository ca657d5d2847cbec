"""Any other database: what is true of SQL in general, and no more.

Binary and text columns compare bytewise, there is no UUID type seqid knows, ids are stored as
canonical text (``CHAR(36)``) unless told otherwise, and the database makes no ids itself.
"""

from __future__ import annotations

from ._base import (
    TextColumnSpec,
    bytewise_order,
    double_quoted,
    hex_literal,
    no_adopted_default,
    no_adoption_statements,
    no_column_catalog,
    no_conversion,
    no_native_uuid,
    no_sequential_functions,
    no_server_default,
    qualify,
    standard_literal,
)

NAME = "generic"
DISTRIBUTED = False
ROWID_INTEGER_KEY = False
TEXT_ID_COLUMN = TextColumnSpec(charset=None, collation=None)
BINARY_FALLBACK = False
DROP_FOREIGN_KEY = "DROP CONSTRAINT"
INNER_SPLITS_HALF = False
quote_identifier = double_quoted
string_literal = standard_literal
TYPE_CHANGE_HOLDS = None  # no conversion seqid refuses by size
qualified = qualify(quote_identifier)
TYPED_COLUMNS = True
column_catalog = no_column_catalog
ONLINE = None  # seqid changes no table of it online
REKEY = None  # nor changes its keys online
REBUILD = None
DOCTOR = None  # seqid doctor reads no catalog of it

has_native_uuid = no_native_uuid
compare_order = bytewise_order
binary_literal = hex_literal
server_default = no_server_default(
    "no server-side UUID generator is known for this database (seqid knows PostgreSQL, MariaDB, MySQL, "
    "SQLite and SQL Server); generate ids in Python"
)
convert_column = no_conversion("this database")
sequential_functions, drop_sequential_functions = no_sequential_functions("this database")

adopted_default = no_adopted_default("this database")
adoption_statements = no_adoption_statements
