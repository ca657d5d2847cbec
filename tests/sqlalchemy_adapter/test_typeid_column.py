"""TypeID columns on each real database: TypeID text in Python, the UUID in the database, new keys in
the order made under ORDER BY, typed refusals before any SQL, and Alembic's autogenerate writing the
type so that its migration runs."""

from __future__ import annotations

import functools
import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
from seqid_orm import typeid  # noqa: E402
from seqid_orm.errors import InvalidArgumentError, InvalidIDError  # noqa: E402
from seqid_orm.ids.typeid import decode_typeid  # noqa: E402
from seqid_orm.sqlalchemy import TypeID  # noqa: E402


def _table(name, metadata):
    """A table keyed by TypeIDs of type ``cust``, in the column's default storage: every server here
    keeps UUIDv7 in order in its native UUID type (MariaDB since 10.11.5)."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", TypeID("cust"), primary_key=True, default=functools.partial(typeid, "cust")),
        sa.Column("n", sa.Integer, nullable=False),
    )


def test_typeid_keys_read_back_as_text_in_the_order_made(engine, metadata, table_name):
    table = _table(table_name, metadata)
    metadata.create_all(engine)
    with engine.begin() as conn:
        for start in range(0, 300, 100):  # three statements, as a service inserts over time
            conn.execute(table.insert(), [{"n": n} for n in range(start, start + 100)])
    with engine.connect() as conn:
        rows = conn.execute(sa.select(table.c.id, table.c.n).order_by(table.c.id)).all()
        assert [r.n for r in rows] == list(range(300))  # ORDER BY id, asked of the database
        first = rows[0].id
        assert isinstance(first, str) and first.startswith("cust_")
        assert decode_typeid(first, prefix="cust")[1].version == 7
        assert conn.execute(sa.select(table.c.n).where(table.c.id == first)).scalar_one() == 0
        raw = decode_typeid(first)[1]
        assert conn.execute(sa.select(table.c.n).where(table.c.id == raw)).scalar_one() == 0  # a uuid.UUID too
        with pytest.raises(sa.exc.StatementError) as refused:
            conn.execute(sa.select(table.c.n).where(table.c.id == "user" + first[4:]))
        assert isinstance(refused.value.orig, InvalidIDError)
        assert "type 'cust' was expected, got type 'user'" in str(refused.value.orig)


def test_a_bad_prefix_is_refused_when_the_column_is_declared():
    with pytest.raises(InvalidArgumentError, match="lowercase ASCII"):
        TypeID("Customer")


@pytest.mark.parametrize(("name", "version"), [("mssql", (16, 0)), ("mariadb", (10, 11, 4))])
def test_a_column_that_would_scatter_its_uuidv7_keys_is_refused_naming_binary_storage(name, version):
    """SQL Server's uniqueidentifier compares the last bytes first; MariaDB's UUID compared v7 values
    in its swapped order until 10.11.5: TypeID's UUIDv7 keys would land all over the index there."""
    from sqlalchemy.dialects import mssql, mysql

    from seqid_orm.errors import UnknownLayoutError

    dialect = mssql.dialect() if name == "mssql" else mysql.dialect(is_mariadb=True)
    dialect.server_version_info = version
    if name == "mariadb":
        dialect.is_mariadb = True
    with pytest.raises(UnknownLayoutError, match="storage='binary'"):
        TypeID("cust").bind_processor(dialect)
    assert TypeID("cust", storage="binary").bind_processor(dialect) is not None


def test_alembic_autogenerate_writes_the_type_and_its_migration_runs(engine, metadata, table_name):
    from alembic.autogenerate import produce_migrations, render_python_code
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import seqid_orm
    from seqid_orm.sqlalchemy.alembic import render_item

    table = _table(table_name, metadata)
    with engine.begin() as conn:
        # this table alone: autogenerate compares the whole database, and would drop every table
        # the other tests (running beside this one on the shared database) have made
        only_this = {"include_name": lambda name, type_, parent: type_ != "table" or name == table_name}
        context = MigrationContext.configure(conn, opts={"render_item": render_item, **only_this})
        code = render_python_code(produce_migrations(context, metadata).upgrade_ops, render_item=render_item)
        assert "seqid_orm.sqlalchemy.TypeID('cust')" in code, code
        assert "drop_table" not in code, code
        body = "\n".join(line[4:] for line in code.splitlines()[1:])  # the upgrade's statements
        exec(body, {"op": Operations(context), "sa": sa, "seqid_orm": seqid_orm})
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": typeid("cust"), "n": 1}])
        assert conn.execute(sa.select(table.c.id)).scalar_one().startswith("cust_")


def test_every_new_key_is_a_uuidv7_in_the_database(engine, metadata, table_name):
    table = _table(table_name, metadata)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"n": 1}])
    with engine.connect() as conn:  # the column as stored, read without the type
        stored = conn.exec_driver_sql(f"SELECT id FROM {table_name}").scalar_one()
    stored = uuid.UUID(bytes=bytes(stored)) if isinstance(stored, (bytes, memoryview)) else uuid.UUID(str(stored))
    assert stored.version == 7
