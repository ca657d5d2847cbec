"""bulk_insert through mysqlclient writes its multi-row INSERT statements itself, a column at a time:
every kind of value must arrive exactly as the driver's own executemany would store it, in as many
statements as the size limit needs, in one transaction."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
from seqid_orm.errors import InvalidIDError  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, TicketID, bulk_insert  # noqa: E402
from seqid_orm.sqlalchemy import bulk as bulk_module  # noqa: E402

pytestmark = [pytest.mark.mysql, pytest.mark.mysqlclient]

AWKWARD = ["plain", "it's", 'say "hi"', "back\\slash", "100%s", "%(n)s", "émoji 🎉", "", "line\nbreak", "\x00nul"]
AWKWARD += ["'; DROP"]


@pytest.fixture
def engine():
    from tests.conftest import MYSQL_URL
    from tests.system import need

    need("mysqlclient")
    made = sa.create_engine(MYSQL_URL.replace("+pymysql", "+mysqldb"))
    yield made
    made.dispose()


def _twin_tables(engine, metadata, name):
    def table(suffix):
        return sa.Table(
            f"{name}_{suffix}",
            metadata,
            sa.Column("id", SeqUUID(), primary_key=True),
            sa.Column("ticket", TicketID()),
            sa.Column("text", sa.String(50)),  # None among them: the driver's literal, value by value
            sa.Column("note", sa.String(50)),  # all text: written by the driver's escaping over the column
            sa.Column("blob", sa.LargeBinary(20)),
            sa.Column("when", sa.DateTime()),
            sa.Column("price", sa.Numeric(10, 2)),
            sa.Column("flag", sa.Boolean()),
            sa.Column("ratio", sa.Float()),
            sa.Column("ref", SeqUUID(), nullable=True),
        )

    tables = table("bulk"), table("plain")
    metadata.create_all(engine)
    return tables


def _rows(n):
    return [
        {
            "ticket": 2**63 - 1 - i if i % 7 == 0 else i,
            "text": None if i % 13 == 0 else AWKWARD[i % len(AWKWARD)],
            "note": AWKWARD[i % len(AWKWARD)],
            "blob": bytes([i % 256, 0, 39, 92, 255]),  # a NUL, a quote, a backslash
            "when": dt.datetime(2026, 1, 1, 12, 0, i % 60, 123000),
            "price": decimal.Decimal(i % 1000) / 4,
            "flag": i % 2 == 0,
            "ratio": i / 3,
            "ref": uuid.UUID(int=i * 2**64 + 39) if i % 3 else None,
        }
        for i in range(n)
    ]


def _stored(conn, table):
    columns = [c for c in table.c if c.name != "id"]
    return conn.execute(sa.select(*columns).order_by(table.c.ticket)).all()


@pytest.mark.parametrize("sql_mode", ["", "NO_BACKSLASH_ESCAPES"])
def test_every_kind_of_value_arrives_as_executemany_stores_it(engine, metadata, table_name, sql_mode):
    loaded, plain = _twin_tables(engine, metadata, table_name)
    rows = _rows(3_000)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"SET SESSION sql_mode = CONCAT(@@sql_mode, ',{sql_mode}')" if sql_mode else "DO 0")
        keys = bulk_insert(conn, loaded, rows)
        conn.execute(sa.insert(plain), [{"id": k, **r} for k, r in zip(keys, rows, strict=True)])
    with engine.connect() as conn:
        assert _stored(conn, loaded) == _stored(conn, plain)
        assert conn.execute(sa.select(loaded.c.id).order_by(loaded.c.id)).scalars().all() == list(keys)
        texts = conn.execute(sa.select(loaded.c.text).order_by(loaded.c.ticket)).scalars().all()
        notes = conn.execute(sa.select(loaded.c.note).order_by(loaded.c.ticket)).scalars().all()
    assert set(texts) == set(AWKWARD) | {None} and set(notes) == set(AWKWARD)


def test_a_large_load_goes_in_several_statements_and_keeps_every_row(engine, metadata, table_name, monkeypatch):
    table = sa.Table(
        table_name, metadata, sa.Column("id", TicketID(), primary_key=True), sa.Column("text", sa.String(200))
    )
    metadata.create_all(engine)
    monkeypatch.setattr(bulk_module, "_STATEMENT_BYTES", 50_000)
    inserts = "SHOW SESSION STATUS LIKE 'Com_insert'"  # the server's count of INSERT statements
    with engine.begin() as conn:
        before = int(conn.exec_driver_sql(inserts).one()[1])
        bulk_insert(conn, table, [{"id": i, "text": "t" * 100} for i in range(1, 20_001)])
        sent = int(conn.exec_driver_sql(inserts).one()[1]) - before
    with engine.connect() as conn:
        assert conn.execute(sa.select(table.c.id).order_by(table.c.id)).scalars().all() == list(range(1, 20_001))
    assert sent >= 20_000 * 105 // 50_000  # ~105 bytes a row: under 500 rows a statement


def test_a_failing_statement_leaves_no_row_and_names_the_error(engine, metadata, table_name, monkeypatch):
    table = sa.Table(table_name, metadata, sa.Column("id", TicketID(), primary_key=True))
    metadata.create_all(engine)
    monkeypatch.setattr(bulk_module, "_STATEMENT_BYTES", 1_000)
    # the duplicate is in a later statement than the first rows
    with pytest.raises(sa.exc.IntegrityError, match="Duplicate entry '7'"), engine.begin() as conn:
        bulk_insert(conn, table, [{"id": i} for i in [*range(1, 2_000), 7]])
    with pytest.raises(InvalidIDError), engine.begin() as conn:  # checked before anything is sent
        bulk_insert(conn, table, [{"id": 5}, {"id": -1}])
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def test_keys_the_load_makes_for_a_uuid_column_are_read_back_as_made_in_order(engine, metadata, table_name):
    """The keys of a native uuid column go as their 16 bytes (X'...' literals, which MariaDB's uuid reads
    faster than the text): the server must read them back as the same UUIDs, in the order made."""
    table = sa.Table(
        table_name, metadata, sa.Column("id", SeqUUID(), primary_key=True), sa.Column("n", sa.Integer, nullable=False)
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        assert table.c.id.type.target(conn.dialect).storage.value == "native"  # MariaDB's uuid type
        keys = list(bulk_insert(conn, table, [{"n": n} for n in range(5_000)]))
    with engine.connect() as conn:
        rows = conn.execute(sa.select(table.c.id, table.c.n).order_by(table.c.id)).all()
    assert [r.n for r in rows] == list(range(5_000))
    assert [r.id for r in rows] == keys and all(isinstance(k, uuid.UUID) and k.version == 7 for k in keys)
