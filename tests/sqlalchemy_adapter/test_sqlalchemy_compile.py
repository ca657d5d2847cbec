"""Dialects with no server here (SQL Server, Oracle, CockroachDB): DDL, binds and literals compiled.

Ordering on SQL Server is checked with the reference comparator written from Microsoft's
SqlGuid rule (tests/core/test_comb.py); these tests check what would be sent to each server.
"""

from __future__ import annotations

import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite  # noqa: E402
from sqlalchemy.schema import CreateTable  # noqa: E402

from seqid_orm import Layout  # noqa: E402
from seqid_orm.ids.layout import ORDER_SQLSERVER, sort_key  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, SnowflakeID, SortableText, layout_for, seq_uuid_default  # noqa: E402


def cockroach_dialect():
    from sqlalchemy_cockroachdb.psycopg import CockroachDBDialect_psycopg

    return CockroachDBDialect_psycopg()


def versioned(dialect, version, **attrs):
    dialect.server_version_info = version
    for k, v in attrs.items():
        setattr(dialect, k, v)
    return dialect


def ddl(type_, dialect) -> str:
    table = sa.Table("t", sa.MetaData(), sa.Column("id", type_, primary_key=True))
    return " ".join(str(CreateTable(table).compile(dialect=dialect)).split())


@pytest.mark.parametrize(
    ("dialect", "storage", "column"),
    [
        (mssql.dialect(), None, "id UNIQUEIDENTIFIER NOT NULL"),
        (mssql.dialect(), "binary", "id BINARY(16) NOT NULL"),
        (mssql.dialect(), "text", "id CHAR(36) NOT NULL"),
        (oracle.dialect(), None, "id RAW(16) NOT NULL"),
        (oracle.dialect(), "hex", "id CHAR(32) NOT NULL"),
        (postgresql.dialect(), None, "id UUID NOT NULL"),
        (postgresql.dialect(), "binary", "id BYTEA NOT NULL"),
        (versioned(mysql.dialect(), (10, 11, 5), is_mariadb=True), None, "id UUID NOT NULL"),
        (versioned(mysql.dialect(), (10, 6, 0), is_mariadb=True), None, "id BINARY(16) NOT NULL"),
        (versioned(mysql.dialect(), (8, 0, 36)), None, "id BINARY(16) NOT NULL"),
        (sqlite.dialect(), None, "id BLOB NOT NULL"),
    ],
)
def test_ddl_per_dialect(dialect, storage, column):
    assert column in ddl(SeqUUID(storage=storage), dialect)


@pytest.mark.cockroachdb
def test_cockroachdb_ddl():
    assert "id UUID NOT NULL" in ddl(SeqUUID(), cockroach_dialect())


def test_native_storage_is_refused_where_there_is_no_uuid_type():
    with pytest.raises(ValueError, match="needs a UUID column type"):
        ddl(SeqUUID(storage="native"), oracle.dialect())
    with pytest.raises(ValueError, match="storage must be one of"):
        SeqUUID(storage="blob")
    with pytest.raises(ValueError, match="layout must be one of"):
        SeqUUID(layout="sideways")


@pytest.mark.parametrize(
    ("dialect", "storage", "expected"),
    [
        (mssql.dialect(), None, "'01890a5d-ac96-774b-bcce-b302099a8057'"),
        (mssql.dialect(), "binary", "0x01890A5DAC96774BBCCEB302099A8057"),
        (oracle.dialect(), None, "HEXTORAW('01890A5DAC96774BBCCEB302099A8057')"),
        (postgresql.dialect(), None, "'01890a5d-ac96-774b-bcce-b302099a8057'::UUID"),
        (postgresql.dialect(), "binary", "decode('01890a5dac96774bbcceb302099a8057', 'hex')"),
        (mysql.dialect(), None, "X'01890A5DAC96774BBCCEB302099A8057'"),
        (sqlite.dialect(), "hex", "'01890a5dac96774bbcceb302099a8057'"),
    ],
)
def test_literal_rendering(dialect, storage, expected):
    table = sa.Table("t", sa.MetaData(), sa.Column("id", SeqUUID(storage=storage)))
    stmt = sa.select(table).where(table.c.id == uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
    assert expected in str(stmt.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def test_sql_server_binds_send_a_guid_not_raw_bytes():
    value = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    for dialect in (mssql.pyodbc.dialect(), mssql.pymssql.dialect()):
        impl = SeqUUID().dialect_impl(dialect)
        processor = impl.bind_processor(dialect)
        sent = processor(impl.process_bind_param(value, dialect)) if processor else value
        # the driver gets the GUID itself (UUID or its text), whose text form SQL Server stores
        # as bytes_le; handing it .bytes would be re-read as bytes_le and scramble the layout
        assert str(sent) == str(value)


def test_sql_server_defaults_are_time_last_and_ordered_by_the_reference_comparator():
    dialect = versioned(mssql.pyodbc.dialect(), (16, 0, 1000))
    column_type = SeqUUID()
    assert layout_for(dialect, column_type) is Layout.TIME_LAST

    class Context:  # what SQLAlchemy hands a context-sensitive default
        def __init__(self):
            self.dialect = dialect
            self.current_column = sa.Column("id", column_type)

    values = [seq_uuid_default(Context()) for _ in range(3000)]
    keys = [sort_key(v, ORDER_SQLSERVER) for v in values]
    assert keys == sorted(keys) and len(set(keys)) == 3000


def test_offline_layout_override_is_used_without_a_server_version():
    dialect = mssql.dialect()  # offline: no server_version_info
    assert layout_for(dialect, SeqUUID(layout="time_first_le")) is Layout.TIME_FIRST_LE


def test_sortable_text_declares_a_binary_collation():
    assert "CHAR(32) CHARACTER SET ascii COLLATE ascii_bin" in ddl(SortableText(), mysql.dialect())
    assert 'CHAR(32) COLLATE "C"' in ddl(SortableText(), postgresql.dialect())
    assert "CHAR(26) COLLATE Latin1_General_BIN2" in ddl(SortableText("base32"), mssql.dialect())
    assert "CHAR(32) NOT NULL" in ddl(SortableText(), sqlite.dialect())
    assert "id NUMBER(19) NOT NULL" in ddl(SnowflakeID(), oracle.dialect())
    assert "id BIGINT NOT NULL" in ddl(SnowflakeID(), mssql.dialect())


def test_sortable_text_validates_binds():
    type_ = SortableText("base32")
    dialect = sqlite.dialect()
    assert type_.process_bind_param("01arz3ndektsv4rrffq69g5fav", dialect) == "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    with pytest.raises(ValueError, match="26 characters"):
        type_.process_bind_param("01ARZ", dialect)
    with pytest.raises(TypeError):
        type_.process_bind_param(5, dialect)
    with pytest.raises(ValueError, match="outside its alphabet"):
        SortableText().process_bind_param("+" * 32, dialect)


@pytest.mark.parametrize(
    "type_",
    [
        SeqUUID(),
        SeqUUID(storage="binary"),
        SeqUUID(storage="hex", layout="time_last"),
        SnowflakeID(),
        SortableText("base32"),
    ],
)
def test_repr_reproduces_the_constructor(type_):
    from seqid_orm.sqlalchemy import types as types_module

    assert repr(eval(repr(type_), vars(types_module))) == repr(type_)


def test_types_are_cacheable():
    assert SeqUUID(storage="binary")._static_cache_key == SeqUUID(storage="binary")._static_cache_key
    assert SeqUUID(storage="binary")._static_cache_key != SeqUUID(storage="text")._static_cache_key


def test_tidb_is_read_from_its_version_and_gets_the_sharded_layout():
    dialect = versioned(mysql.dialect(), (8, 0, 11, "TiDB", "v7", 5, 0))
    assert layout_for(dialect, SeqUUID()) is Layout.SHARDED
    assert "id BINARY(16) NOT NULL" in ddl(SeqUUID(), dialect)
    assert layout_for(dialect, SeqUUID(layout="time_first")) is Layout.TIME_FIRST  # an explicit choice wins


def test_yugabytedb_gets_the_sharded_layout_in_its_native_uuid():
    dialect = versioned(postgresql.dialect(), (11, 2))
    dialect.seqid_flavor = "yugabytedb"  # what the first connection reads from version()
    assert layout_for(dialect, SeqUUID()) is Layout.SHARDED
    assert "id UUID NOT NULL" in ddl(SeqUUID(), dialect)


def test_a_real_postgresql_is_not_taken_for_yugabytedb(pg_engine):
    with pg_engine.connect():
        pass
    assert pg_engine.dialect.seqid_flavor == ""
    assert layout_for(pg_engine.dialect, SeqUUID()) is Layout.TIME_FIRST


@pytest.mark.cockroachdb
def test_cockroachdb_gets_the_sharded_layout():
    assert layout_for(cockroach_dialect(), SeqUUID()) is Layout.SHARDED
