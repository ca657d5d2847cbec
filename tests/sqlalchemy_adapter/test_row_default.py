"""seq_uuid_default per statement: many-row statements reserve their ids in one batch.

The batch must change nothing a user can see: every id distinct, rows in insertion order when
the database sorts them, across columns, threads and forked processes.
"""

from __future__ import annotations

import multiprocessing
import threading

import pytest

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy import insert, select  # noqa: E402
from sqlalchemy.dialects import mssql, postgresql  # noqa: E402

from seqid_orm.ids.layout import ORDER_SQLSERVER, sort_key  # noqa: E402
from seqid_orm.sqlalchemy import SeqUUID, seq_uuid_default  # noqa: E402
from seqid_orm.sqlalchemy.defaults import BATCH_FROM_ROWS  # noqa: E402


def _table(metadata, name):
    return sa.Table(
        name,
        metadata,
        sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default),
        sa.Column("ref", SeqUUID(storage="binary"), default=seq_uuid_default, nullable=False, unique=True),
        sa.Column("n", sa.Integer, nullable=False),
    )


def test_two_columns_of_a_many_row_statement_each_follow_the_insertion_order(engine, metadata, table_name):
    table = _table(metadata, table_name)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"n": i} for i in range(1_000)])
        conn.execute(insert(table), {"n": 1_000})  # one row: the generator itself, still later
        conn.execute(insert(table), [{"n": i} for i in range(1_001, 1_001 + BATCH_FROM_ROWS - 1)])  # below the batch
        by_id = conn.execute(select(table.c.n).order_by(table.c.id)).scalars().all()
        by_ref = conn.execute(select(table.c.n).order_by(table.c.ref)).scalars().all()
        ids = conn.execute(select(table.c.id)).scalars().all()
    expected = list(range(1_001 + BATCH_FROM_ROWS - 1))
    assert by_id == expected and by_ref == expected
    assert len(set(ids)) == len(expected)


def test_threads_inserting_many_row_statements_never_share_an_id(engine, metadata, table_name):
    table = _table(metadata, table_name)
    metadata.create_all(engine)
    errors: list[BaseException] = []
    threads_n, statements, rows = 6, 5, 200

    def work(t: int) -> None:
        try:
            for s in range(statements):
                with engine.begin() as conn:
                    base = (t * statements + s) * rows
                    conn.execute(insert(table), [{"n": base + i} for i in range(rows)])
        except BaseException as exc:  # reported below, with the thread's failure
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    with engine.connect() as conn:
        ns = conn.execute(select(table.c.n).order_by(table.c.id)).scalars().all()
        distinct = conn.execute(select(sa.func.count(sa.distinct(table.c.id)))).scalar_one()
    assert distinct == len(ns) == threads_n * statements * rows
    # each statement's rows sit together, in insertion order: its ids were reserved as one run
    for start in range(0, len(ns), rows):
        run = ns[start : start + rows]
        assert run == list(range(run[0], run[0] + rows))


def _child_inserts(url: str, table_name: str, first: int, rows: int) -> None:
    engine = sa.create_engine(url)
    table = _table(sa.MetaData(), table_name)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"n": first + i} for i in range(rows)])
    engine.dispose()


def test_forked_processes_reserve_distinct_batches(engine, metadata, table_name):
    table = _table(metadata, table_name)
    metadata.create_all(engine)
    with engine.begin() as conn:  # the parent has made ids (and reserved a batch) before forking
        conn.execute(insert(table), [{"n": -1 - i} for i in range(100)])
    url = engine.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_child_inserts, args=(url, table_name, p * 1_000, 500)) for p in range(4)]
    for c in children:
        c.start()
    for c in children:
        c.join(60)
    assert [c.exitcode for c in children] == [0, 0, 0, 0]
    with engine.connect() as conn:
        assert conn.execute(select(sa.func.count(sa.distinct(table.c.id)))).scalar_one() == 2_100
        assert conn.execute(select(sa.func.count(sa.distinct(table.c.ref)))).scalar_one() == 2_100


class _Context:
    """What SQLAlchemy hands a column default: the dialect, the column, the statement's rows."""

    def __init__(self, dialect, column, rows):
        self.dialect = dialect
        self.current_column = column
        self.compiled_parameters = [{} for _ in range(rows)]


def _versioned(dialect, version):
    dialect.server_version_info = version
    return dialect


def test_more_rows_than_counted_get_fresh_ids_after_the_batch():
    dialect = _versioned(postgresql.dialect(), (15, 4))
    column = sa.Column("id", SeqUUID())
    context = _Context(dialect, column, 40)
    values = [seq_uuid_default(context) for _ in range(100)]  # 40 reserved, then 60 made one by one
    assert values == sorted(values) and len(set(values)) == 100


def test_a_batch_on_sql_server_is_ordered_by_its_comparator():
    dialect = _versioned(mssql.pyodbc.dialect(), (16, 0, 1000))
    column = sa.Column("id", SeqUUID())
    values = []
    for _ in range(5):
        context = _Context(dialect, column, 500)
        values += [seq_uuid_default(context) for _ in range(500)]
    keys = [sort_key(v, ORDER_SQLSERVER) for v in values]
    assert keys == sorted(keys) and len(set(keys)) == 2_500
