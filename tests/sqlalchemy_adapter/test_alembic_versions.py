"""Migrations that travel between server versions: written on one, run on another, or offline.

The migration carries ``DatabaseSeqUUID`` and the SQL is chosen for the server it runs on.  The
tests marked ``pg18`` need PostgreSQL 18 beside 15 (``make test-pg18``): autogenerate on one,
upgrade the other.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")
from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402

from seqid_orm.errors import ServerDefaultUnavailableError, UnknownServerVersionError  # noqa: E402
from tests.conftest import PG18_URL, POSTGRES_URL  # noqa: E402
from tests.ordering import check_time_ordered  # noqa: E402
from tests.sqlalchemy_adapter.test_alembic import SCRIPT_MAKO  # noqa: E402

ENV_PY = """
from alembic import context
import sqlalchemy as sa
from seqid_orm.sqlalchemy import DatabaseSeqUUID, SeqUUID
from seqid_orm.sqlalchemy.alembic import compare_server_default, offline_server_version, render_item

metadata = sa.MetaData()
sa.Table(
    "{table}",
    metadata,
    sa.Column("id", SeqUUID(storage={storage!r}), primary_key=True, server_default=DatabaseSeqUUID({storage!r})),
    sa.Column("n", sa.Integer),
)
options = dict(
    target_metadata=metadata,
    render_item=render_item,
    compare_server_default=compare_server_default,
    include_name=lambda name, type_, parents: type_ != "table" or name == "{table}",
)
if context.is_offline_mode():
    context.configure(url=context.config.get_main_option("sqlalchemy.url"), literal_binds=True, **options)
    offline_server_version(context)
else:
    context.configure(connection=context.config.attributes["connection"], **options)
with context.begin_transaction():
    context.run_migrations()
"""


def project(tmp_path: Path, table: str, storage: str | None, url: str) -> Config:
    (tmp_path / "versions").mkdir(exist_ok=True)
    (tmp_path / "env.py").write_text(textwrap.dedent(ENV_PY.format(table=table, storage=storage)))
    (tmp_path / "script.py.mako").write_text(SCRIPT_MAKO)
    config = Config(output_buffer=io.StringIO())
    config.set_main_option("script_location", str(tmp_path))
    config.set_main_option("sqlalchemy.url", url)
    return config


def online(engine, config, fn, *args, **kw):
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        fn(config, *args, **kw)


def autogenerate(engine, config, message, keep: bool = True) -> str:
    online(engine, config, command.revision, message=message, autogenerate=True)
    versions = Path(config.get_main_option("script_location")) / "versions"
    path = next(p for p in versions.glob("*.py") if f'"""{message}"""' in p.read_text())
    text = path.read_text()
    if not keep:  # an inspection only: it must not become the head the next server lags behind
        path.unlink()
    return text


def offline_sql(config, version: str | None) -> str:
    config.output_buffer = io.StringIO()
    config.cmd_opts = type("Opts", (), {"x": [f"seqid_server_version={version}"] if version else []})()
    command.upgrade(config, "head", sql=True)
    return config.output_buffer.getvalue()


@contextlib.contextmanager
def cleanup(*engines, table):
    try:
        yield
    finally:
        for engine in engines:
            with engine.begin() as conn:
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
                conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))


def ids_made_by_the_database(engine, table: str, storage: str | None) -> list:
    """Five rows inserted one by one; (insertion number, id) as the database's ORDER BY id returns them."""
    from seqid_orm.sqlalchemy import SeqUUID

    t = sa.Table(table, sa.MetaData(), sa.Column("id", SeqUUID(storage=storage)), sa.Column("n", sa.Integer))
    with engine.begin() as conn:
        for i in range(5):
            conn.execute(sa.insert(t), {"n": i})
        return [tuple(r) for r in conn.execute(sa.select(t.c.n, t.c.id).order_by(t.c.id))]


@pytest.mark.parametrize(
    ("url", "versions"),
    [
        ("postgresql+psycopg://u@h/db", {"16": "clock_timestamp()", "18": "uuidv7()", "12": None}),
        (
            "mysql+pymysql://u@h/db",
            {"mariadb-10.7.8": "uuid()", "mariadb-11.7.2": "uuid_v7()", "8.0.36": "sysdate(6)", "8.0.12": None},
        ),
        ("sqlite:///unused.db", {"3.45": "randomblob(", "3.40": "randomblob("}),
    ],
)
def test_offline_sql_takes_the_target_version_or_says_how_to_give_it(tmp_path, table_name, url, versions):
    """--sql knows no server: without a version the default cannot be written; with one, it is
    the SQL of that version (storage: the dialect's default)."""
    storage = "text" if url.startswith("sqlite") else None
    config = project(tmp_path, table_name, storage, url)
    (tmp_path / "versions" / "0001_t.py").write_text(
        textwrap.dedent(
            f'''
            """t"""
            revision = "0001"
            down_revision = None
            from alembic import op
            import sqlalchemy as sa
            import seqid_orm.sqlalchemy

            def upgrade():
                op.create_table(
                    "{table_name}",
                    sa.Column("id", seqid_orm.sqlalchemy.SeqUUID(storage={storage!r}), primary_key=True,
                              server_default=seqid_orm.sqlalchemy.DatabaseSeqUUID({storage!r})),
                    sa.Column("n", sa.Integer()),
                )

            def downgrade():
                op.drop_table("{table_name}")
            '''
        )
    )
    with pytest.raises(UnknownServerVersionError, match="seqid_server_version"):
        offline_sql(config, None)
    for version, expected in versions.items():
        if expected is None:  # a version that cannot make the ids: refused, not guessed
            with pytest.raises(ServerDefaultUnavailableError, match=r"cannot|no built-in|needs"):
                offline_sql(config, version)
            continue
        assert expected in offline_sql(config, version).lower(), version


@pytest.mark.parametrize("storage", [None, "binary"])
def test_a_mariadb_migration_runs_with_its_storage_and_a_second_autogenerate_is_empty(
    mysql_engine, tmp_path, table_name, storage
):
    """MariaDB's native UUID (UUID(), version 1) and BINARY(16) (the UUIDv7 expression)."""
    url = mysql_engine.url.render_as_string(hide_password=False)
    config = project(tmp_path, table_name, storage, url)
    with cleanup(mysql_engine, table=table_name):
        script = autogenerate(mysql_engine, config, "create")
        assert "server_default=seqid_orm.sqlalchemy.DatabaseSeqUUID(" in script and "sa.text(" not in script
        online(mysql_engine, config, command.upgrade, "head")
        ids = [u for _, u in ids_made_by_the_database(mysql_engine, table_name, storage)]
        assert len(set(ids)) == 5 and {u.version for u in ids} == ({1} if storage is None else {7})
        second = autogenerate(mysql_engine, config, "again")
        assert "op.alter_column" not in second and "op.create_table" not in second


@pytest.mark.pg18
@pytest.mark.parametrize("direction", ["written on 18, run on 15", "written on 15, run on 18"])
def test_a_migration_written_on_one_postgresql_runs_on_the_other(tmp_path, table_name, direction):
    pg15 = sa.create_engine(POSTGRES_URL)
    pg18 = sa.create_engine(PG18_URL)
    source, target = (pg18, pg15) if direction.startswith("written on 18") else (pg15, pg18)
    config = project(tmp_path, table_name, None, source.url.render_as_string(hide_password=False))
    with cleanup(pg15, pg18, table=table_name):
        script = autogenerate(source, config, "create")
        assert "DatabaseSeqUUID()" in script and "uuidv7" not in script and "clock_timestamp" not in script
        online(target, config, command.upgrade, "head")
        with target.connect() as conn:
            default = conn.execute(
                sa.text(
                    "SELECT column_default FROM information_schema.columns WHERE table_name = :t AND column_name = 'id'"
                ),
                {"t": table_name},
            ).scalar()
        major = target.dialect.server_version_info[0]
        assert ("uuidv7()" in default) == (major >= 18) and ("clock_timestamp()" in default) == (major < 18)
        rows = ids_made_by_the_database(target, table_name, None)
        assert len({u for _, u in rows}) == 5 and {u.version for _, u in rows} == {7}
        check_time_ordered("postgresql", target.dialect.server_version_info, rows)  # one server's clock
        online(source, config, command.upgrade, "head")  # and on the server it was written on
        for engine in (pg15, pg18):
            second = autogenerate(engine, config, f"again{engine.dialect.server_version_info[0]}", keep=False)
            assert "op.alter_column" not in second and "op.create_table" not in second, second
    pg15.dispose()
    pg18.dispose()
