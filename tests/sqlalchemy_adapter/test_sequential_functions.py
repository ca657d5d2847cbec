"""The sequential-uuids functions in SQL: created by the Alembic operation, equal to the Python
functions (which equal the C extension) for the same inputs, usable as column defaults."""

from __future__ import annotations

import itertools
import secrets
import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from seqid_orm.errors import InvalidArgumentError  # noqa: E402
from seqid_orm.ids.prefixed import extension_prefix, prefix_of  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID  # noqa: E402
from seqid_orm.sqlalchemy.types import dialect_server_version, dialect_vendor  # noqa: E402
from seqid_orm.vendors import choose_prefix_layout  # noqa: E402
from tests.sqlalchemy_adapter import one_migration  # noqa: E402

MIGRATION = '''
"""functions"""
revision = "0001"
down_revision = None
from alembic import op
import seqid_orm.sqlalchemy.alembic


def upgrade():
    op.create_sequential_uuid_functions({storage!r})


def downgrade():
    op.drop_sequential_uuid_functions()
'''


def migrate(engine, tmp_path, direction: str, storage: str | None = None) -> None:
    one_migration.write(tmp_path, MIGRATION.format(storage=storage), "0001_functions.py")
    one_migration.migrate(engine, tmp_path, direction)


def test_sqlite_has_no_stored_functions_and_the_operation_says_so(sqlite_engine, tmp_path):
    with pytest.raises(InvalidArgumentError, match="PostgreSQL 13\\+ and MariaDB"):
        migrate(sqlite_engine, tmp_path, "up")
    with sqlite_engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))


@pytest.fixture(params=["pg_engine", "mysql_engine"])  # fixture names: the server markers follow them
def functions(request, tmp_path):
    """The functions created by the migration on each server that has stored functions, in a database
    of the test's own: functions are global to a database, and other runs may share the server."""
    server = request.getfixturevalue(request.param)
    name = f"seqid_fn_{secrets.token_hex(4)}"
    admin = sa.create_engine(server.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine = sa.create_engine(server.url.set(database=name))
    try:
        migrate(engine, tmp_path, "up")
        yield engine
        migrate(engine, tmp_path, "down")
        with engine.begin() as conn, pytest.raises(sa.exc.DBAPIError):  # dropped by the downgrade
            conn.execute(sa.text("SELECT uuid_time_nextval(60, 256)"))
    finally:
        engine.dispose()
        with admin.connect() as conn:
            force = " WITH (FORCE)" if server.dialect.name == "postgresql" else ""
            conn.execute(sa.text(f"DROP DATABASE {name}{force}"))
        admin.dispose()


def database_prefix(conn, vendor: str, value: int, block_size: int, block_count: int) -> uuid.UUID:
    if vendor == "postgresql":
        conn.execute(sa.text("DROP SEQUENCE IF EXISTS seqid_fn_seq"))
        conn.execute(sa.text(f"CREATE SEQUENCE seqid_fn_seq MINVALUE {-(2**62)} START {value}"))
        found = conn.execute(sa.text(f"SELECT uuid_sequence_nextval('seqid_fn_seq', {block_size}, {block_count})"))
    else:
        found = conn.execute(sa.text(f"SELECT uuid_sequence_nextval({value}, {block_size}, {block_count})"))
    return uuid.UUID(str(found.scalar()))


def test_the_sql_functions_give_the_python_prefixes(functions):
    engine = functions
    vendor = dialect_vendor(engine.dialect)
    layout = (
        "time_first"
        if vendor == "postgresql"
        else choose_prefix_layout(vendor, dialect_server_version(engine.dialect), "native")
    )
    with engine.begin() as conn:
        for block_size, block_count in itertools.product([1, 39, 100, 65536], [1, 100, 256, 65536, 2**24 + 1]):
            for value in (1, 2, 9985, -77, 2**40):
                made = database_prefix(conn, vendor, value, block_size, block_count)
                assert prefix_of(made, block_count, layout) == extension_prefix(value - 1, block_size, block_count)
                assert made.version == 4 and made.variant == uuid.RFC_4122
        with pytest.raises(sa.exc.DBAPIError, match="block size must be a positive integer"):
            database_prefix(conn, vendor, 1, 0, 10)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP SEQUENCE IF EXISTS seqid_fn_seq"))


def test_as_a_column_default_the_database_orders_rows_by_prefix(functions):
    """PostgreSQL: a server default; MariaDB (which refuses stored functions in DEFAULT): a SQL
    expression SQLAlchemy puts into each INSERT.  Either way ORDER BY id follows the counter."""
    engine = functions
    vendor = dialect_vendor(engine.dialect)
    table_name = f"t_{secrets.token_hex(4)}"
    seq = f"{table_name}_seq"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SEQUENCE {seq}"))
    try:
        if vendor == "postgresql":
            column = sa.Column(
                "id", SeqUUID(), primary_key=True, server_default=sa.text(f"uuid_sequence_nextval('{seq}', 10, 256)")
            )
        else:
            nextval = sa.func.nextval(sa.literal_column(seq))
            column = sa.Column(
                "id", SeqUUID(), primary_key=True, default=sa.func.uuid_sequence_nextval(nextval, 10, 256)
            )
        table = sa.Table(table_name, sa.MetaData(), column, sa.Column("n", sa.Integer))
        table.create(engine)
        with engine.begin() as conn:
            conn.execute(sa.insert(table), [{"n": i} for i in range(1000)])
            rows = conn.execute(sa.select(table.c.id, table.c.n).order_by(table.c.id)).all()
        layout = choose_prefix_layout(
            vendor, dialect_server_version(engine.dialect), SeqUUID().storage_for(engine.dialect)
        )
        prefixes = [prefix_of(r.id, 256, layout) for r in rows]
        assert prefixes == sorted(prefixes) and len(set(prefixes)) == 100  # values 1..1000, 10 per block
        assert sorted(r.n // 10 for r in rows) == [r.n // 10 for r in rows]  # blocks in counter order
        table.drop(engine)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table_name}"))
            conn.execute(sa.text(f"DROP SEQUENCE IF EXISTS {seq}"))
