"""Alembic through its command API: autogenerate renders seqid types that import and run."""

from __future__ import annotations

import contextlib
import textwrap
import uuid
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
alembic_command = pytest.importorskip("alembic.command")
from alembic.config import Config  # noqa: E402

from seqid_orm.sqlalchemy import SeqUUID  # noqa: E402

ENV_PY = """
from alembic import context
import sqlalchemy as sa
from seqid_orm.sqlalchemy import DatabaseSeqUUID, SeqUUID, SnowflakeID, SortableText
from seqid_orm.sqlalchemy.alembic import compare_server_default, render_item

metadata = sa.MetaData()
sa.Table(
    "{table}",
    metadata,
    sa.Column("id", SeqUUID(storage={storage!r}), primary_key=True{server_default}),
    sa.Column("flake", SnowflakeID()),
    sa.Column("code", SortableText("bsv")),
)

def include_name(name, type_, parent_names):
    # the test database is shared: compare only this test's table
    return type_ != "table" or name == "{table}"


connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_item=render_item,
    include_name=include_name,
    compare_server_default=compare_server_default,
)
with context.begin_transaction():
    context.run_migrations()
"""

SCRIPT_MAKO = '''"""${message}"""
revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None

from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

def upgrade():
    ${upgrades if upgrades else "pass"}


def downgrade():
    ${downgrades if downgrades else "pass"}
'''


@contextlib.contextmanager
def alembic_project(engine, tmp_path, table_name, storage, server_default=""):
    """An Alembic script directory for this test's table; drops what it created afterwards."""
    (tmp_path / "versions").mkdir()
    env = ENV_PY.format(table=table_name, storage=storage, server_default=server_default)
    (tmp_path / "env.py").write_text(textwrap.dedent(env))
    (tmp_path / "script.py.mako").write_text(SCRIPT_MAKO)
    config = Config()
    config.set_main_option("script_location", str(tmp_path))
    try:
        yield config
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table_name}"))
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))


def autogenerate(engine, config, message):
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        alembic_command.revision(config, message=message, autogenerate=True)
    return next(
        p
        for p in (Path(config.get_main_option("script_location")) / "versions").glob("*.py")
        if message in p.read_text()
    ).read_text()


def assert_second_autogenerate_is_empty(engine, config):
    second = autogenerate(engine, config, "again")
    for op in ("op.create_table", "op.add_column", "op.alter_column", "op.drop"):
        assert op not in second, second


@pytest.mark.parametrize("storage", [None, "binary", "text"])
def test_autogenerate_then_upgrade(engine, tmp_path, table_name, storage):
    with alembic_project(engine, tmp_path, table_name, storage) as config:
        script = autogenerate(engine, config, "create")
        expected = "SeqUUID()" if storage is None else f"SeqUUID(storage={storage!r})"
        assert f"seqid_orm.sqlalchemy.{expected}" in script
        assert "seqid_orm.sqlalchemy.SortableText(kind='bsv')" in script
        assert "seqid_orm.sqlalchemy.SnowflakeID()" in script
        assert "import seqid_orm.sqlalchemy" in script
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            alembic_command.upgrade(config, "head")
        table = sa.Table(table_name, sa.MetaData(), autoload_with=engine)
        assert "id" in table.c
        value = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
        typed = sa.Table(table_name, sa.MetaData(), sa.Column("id", SeqUUID(storage=storage), primary_key=True))
        with engine.begin() as conn:
            conn.execute(sa.insert(typed), {"id": value})
            assert conn.execute(sa.select(typed.c.id)).scalar_one() == value
        assert_second_autogenerate_is_empty(engine, config)


@pytest.mark.parametrize("storage", [None, "text"])
def test_database_made_ids_survive_autogenerate(engine, tmp_path, table_name, storage):
    """The migration carries DatabaseSeqUUID itself, not the SQL of the server autogenerate ran
    against: the SQL is chosen when it runs.  A second autogenerate, comparing server defaults with
    seqid's hook, finds nothing to do."""
    if engine.dialect.name == "sqlite" and storage is None:
        storage = "hex"  # SQLite < 3.41 cannot build a BLOB default (see test_server_default)
    server_default = f", server_default=DatabaseSeqUUID({storage!r})"
    with alembic_project(engine, tmp_path, table_name, storage, server_default) as config:
        script = autogenerate(engine, config, "create")
        expected = "DatabaseSeqUUID()" if storage is None else f"DatabaseSeqUUID(storage={storage!r})"
        assert f"server_default=seqid_orm.sqlalchemy.{expected}" in script
        assert "sa.text(" not in script and "import seqid_orm.sqlalchemy" in script
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            alembic_command.upgrade(config, "head")
        typed = sa.Table(
            table_name, sa.MetaData(), sa.Column("id", SeqUUID(storage=storage)), sa.Column("flake", sa.BigInteger)
        )
        with engine.begin() as conn:
            for i in range(20):
                conn.execute(sa.insert(typed), {"flake": i})
            rows = conn.execute(sa.select(typed.c.flake, typed.c.id).order_by(typed.c.id)).all()
        assert len({r.id for r in rows}) == 20
        from tests.ordering import check_time_ordered

        order = [(r.flake, r.id) for r in rows]  # exact but inside one ms (tests/ordering.py says where)
        check_time_ordered(engine.dialect.name, engine.dialect.server_version_info or (), order)
        assert_second_autogenerate_is_empty(engine, config)


SQLMODEL_ENV_PY = """
from alembic import context
from sqlmodel import SQLModel
from seqid_orm.sqlalchemy.alembic import render_item
from seqid_orm.sqlalchemy.sqlmodel import seq_uuid_field
import uuid


class Hero(SQLModel, table=True):
    __tablename__ = "{table}"
    __table_args__ = {{"extend_existing": True}}  # env.py runs twice in this test's one process
    id: uuid.UUID | None = seq_uuid_field()
    name: str


def include_name(name, type_, parent_names):
    return type_ != "table" or name == "{table}"


def include_object(object_, name, type_, reflected, compare_to):
    # SQLModel.metadata is one for the process: the Hero tables of this test's other runs are in it too
    return type_ != "table" or name == "{table}"


context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=SQLModel.metadata,
    render_item=render_item,
    include_name=include_name,
    include_object=include_object,
)
with context.begin_transaction():
    context.run_migrations()
"""


def test_a_sqlmodel_project_migrates_with_the_readmes_env_py(engine, tmp_path, table_name):
    """A str field renders as sqlmodel.sql.sqltypes.AutoString(): the migration imports sqlmodel (with
    stock Alembic the first upgrade fails with NameError: name 'sqlmodel' is not defined)."""
    pytest.importorskip("sqlmodel")
    with alembic_project(engine, tmp_path, table_name, None) as config:
        (tmp_path / "env.py").write_text(SQLMODEL_ENV_PY.format(table=table_name))
        script = autogenerate(engine, config, "create")
        assert "sqlmodel.sql.sqltypes.AutoString()" in script and "import sqlmodel" in script
        assert "import seqid_orm.sqlalchemy" in script
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            alembic_command.upgrade(config, "head")
        assert {"id", "name"} <= {c["name"] for c in sa.inspect(engine).get_columns(table_name)}
        assert f"op.create_table('{table_name}'" in script and script.count("op.create_table(") == 1
