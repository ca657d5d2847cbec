"""SeqUUID and friends through the real ORM and Core on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy import ForeignKey, String, event, insert, select  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship  # noqa: E402

from seqid_orm import Snowflake, timestamp_of  # noqa: E402
from seqid_orm.sqlalchemy import (  # noqa: E402
    SeqUUID,
    SnowflakeID,
    assign_ids_on_init,
    layout_for,
    seq_uuid_default,
    seq_uuid_fk,
    seq_uuid_pk,
    snowflake_pk,
    sortable_text_pk,
)

STORAGES = [None, "binary", "text", "hex"]


def make_models(storage, suffix):
    class Base(DeclarativeBase):
        type_annotation_map = {uuid.UUID: SeqUUID(storage=storage)}

    class Author(Base):
        __tablename__ = f"author_{suffix}"
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage=storage)
        name: Mapped[str] = mapped_column(String(50))
        books: Mapped[list[Book]] = relationship(back_populates="author")

    class Book(Base):
        __tablename__ = f"book_{suffix}"
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage=storage)
        author_id: Mapped[uuid.UUID] = seq_uuid_fk(f"author_{suffix}.id", storage=storage)
        title: Mapped[str] = mapped_column(String(50))
        author: Mapped[Author] = relationship(back_populates="books")

    return Base, Author, Book


@pytest.fixture
def models(engine, table_name, request):
    storage = request.param if hasattr(request, "param") else None
    base, author, book = make_models(storage, table_name)
    base.metadata.create_all(engine)
    yield author, book
    base.metadata.drop_all(engine)


@pytest.mark.parametrize("models", STORAGES, indirect=True)
def test_unit_of_work_relationships_and_order(engine, models):
    Author, Book = models
    with Session(engine) as session:
        authors = []
        for i in range(30):
            author = Author(name=f"a{i}", books=[Book(title=f"b{i}-{j}") for j in range(3)])
            session.add(author)
            session.flush()
            authors.append(author)
        session.commit()
        made = [a.id for a in authors]
        assert all(isinstance(i, uuid.UUID) for i in made)
        assert session.scalars(select(Author.id).order_by(Author.id)).all() == made
        # FKs point at the right parents and come back as UUIDs
        session.expunge_all()
        for author in session.scalars(select(Author).order_by(Author.id)):
            assert [b.title for b in sorted(author.books, key=lambda b: b.title)] == [
                f"{author.name.replace('a', 'b')}-{j}" for j in range(3)
            ]
            assert all(b.author_id == author.id for b in author.books)
        # the ids carry the time they were made
        assert timestamp_of(made[0]) <= timestamp_of(made[-1])


@pytest.mark.parametrize("models", STORAGES, indirect=True)
def test_add_all_in_one_flush_keeps_generation_order(engine, models):
    Author, _ = models
    with Session(engine) as session:
        authors = [Author(name=f"n{i}") for i in range(500)]
        session.add_all(authors)
        session.commit()
        stored = session.scalars(select(Author.id).order_by(Author.id)).all()
        assert sorted(a.id for a in authors) == stored
        assert [a.name for a in session.scalars(select(Author).order_by(Author.id))] == [f"n{i}" for i in range(500)]


@pytest.mark.parametrize("models", [None, "text"], indirect=True)
def test_orm_bulk_insert_and_core_executemany(engine, models):
    Author, _ = models
    with Session(engine) as session:
        session.execute(insert(Author), [{"name": f"bulk{i}"} for i in range(2000)])
        session.commit()
        names = session.scalars(select(Author.name).order_by(Author.id)).all()
        assert names == [f"bulk{i}" for i in range(2000)]
    table = Author.__table__
    with engine.begin() as conn:
        conn.execute(insert(table), [{"name": f"core{i}"} for i in range(1000)])
        names = conn.execute(select(table.c.name).order_by(table.c.id)).scalars().all()
    assert names[2000:] == [f"core{i}" for i in range(1000)]


@pytest.mark.parametrize("models", [None], indirect=True)
def test_bulk_insert_keeps_insertmanyvalues_batching(engine, models):
    Author, _ = models
    statements = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT"):
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        with Session(engine) as session:
            session.add_all([Author(name=f"x{i}") for i in range(300)])
            session.commit()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert 1 <= len(statements) <= 3, f"{len(statements)} INSERT statements for 300 rows"


@pytest.mark.parametrize("models", [None], indirect=True)
def test_returning_gives_back_the_generated_ids(engine, models):
    Author, _ = models
    if not engine.dialect.insert_returning:
        pytest.skip(f"{engine.dialect.name} {engine.dialect.server_version_info} has no INSERT ... RETURNING")
    with Session(engine) as session:
        ids = session.scalars(insert(Author).returning(Author.id), [{"name": f"r{i}"} for i in range(50)]).all()
        session.commit()
        assert len(set(ids)) == 50
        assert session.scalars(select(Author.id).order_by(Author.id)).all() == sorted(
            ids, key=layout_for(engine.dialect, Author.__table__.c.id.type).sort_key
        )


@pytest.mark.parametrize("models", [None], indirect=True)
def test_bad_binds_raise_before_sql_and_leave_no_row(engine, models):
    Author, _ = models
    bad_values = [
        ("not-a-uuid", ValueError, "invalid UUID text"),
        (uuid.uuid4().hex, ValueError, "invalid UUID text"),  # 32 hex digits: refused, not guessed
        ("{" + str(uuid.uuid4()) + "}", ValueError, "invalid UUID text"),
        (12345, TypeError, "must be a uuid.UUID"),
        (uuid.uuid4().bytes, TypeError, "must be a uuid.UUID"),
    ]
    for value, error, match in bad_values:
        with Session(engine) as session:
            session.add(Author(id=value, name="bad"))
            with pytest.raises(sa.exc.StatementError, match=match) as info:
                session.commit()
            assert isinstance(info.value.orig, error)
    with Session(engine) as session:
        assert session.scalar(select(sa.func.count()).select_from(Author)) == 0


@pytest.mark.parametrize("models", [None, "text"], indirect=True)
def test_string_comparisons_and_explicit_ids(engine, models):
    Author, _ = models
    chosen = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    with Session(engine) as session:
        session.add(Author(id=chosen, name="explicit"))
        session.commit()
        assert session.scalar(select(Author.name).where(Author.id == str(chosen))) == "explicit"
        assert session.scalar(select(Author.name).where(Author.id == str(chosen).upper())) == "explicit"
        assert session.get(Author, chosen).name == "explicit"


@pytest.mark.parametrize("models", [None], indirect=True)
def test_assign_ids_on_init_gives_the_id_at_construction(engine, models):
    Author, _ = models
    listener = assign_ids_on_init(Author, engine)
    try:
        first = Author(name="early")
        assert isinstance(first.id, uuid.UUID)
        explicit = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
        assert Author(id=explicit, name="kept").id == explicit
        second = Author(name="later")
        with Session(engine) as session:
            session.add_all([second, first])  # added out of order on purpose
            session.commit()
            assert session.scalars(select(Author.name).order_by(Author.id)).all() == ["early", "later"]
    finally:
        event.remove(Author, "init", listener)
    assert Author(name="no listener").id is None


def test_snowflake_and_sortable_text_pks(engine, table_name):
    gen = Snowflake(worker_id=4)

    class Base(DeclarativeBase):
        pass

    class Event(Base):
        __tablename__ = f"ev_{table_name}"
        id: Mapped[int] = snowflake_pk(gen)
        name: Mapped[str] = mapped_column(String(20))

    class Doc(Base):
        __tablename__ = f"doc_{table_name}"
        id: Mapped[str] = sortable_text_pk("bsv")
        event_id: Mapped[int] = mapped_column(ForeignKey(Event.id))

    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            events = [Event(name=f"e{i}") for i in range(100)]
            session.add_all(events)
            session.flush()
            session.add_all([Doc(event_id=e.id) for e in events])
            session.commit()
            assert session.scalars(select(Event.name).order_by(Event.id)).all() == [f"e{i}" for i in range(100)]
            doc_events = session.scalars(select(Doc.event_id).order_by(Doc.id)).all()
            assert doc_events == [e.id for e in events]
            # the shared validator takes decimal text ("12", as a URL argument arrives) like
            # Django's integer fields do, and refuses anything else (seqid_orm.validate)
            with pytest.raises(sa.exc.StatementError, match="decimal digits only"):
                session.add(Event(id="12.0", name="bad"))
                session.flush()
    finally:
        Base.metadata.drop_all(engine)


def test_snowflake_pk_is_the_sqlite_rowid(sqlite_engine, table_name):
    # declared INTEGER on SQLite, so the id is the rowid: one B-tree, no second index on the key
    table = sa.Table(table_name, sa.MetaData(), sa.Column("id", SnowflakeID(), primary_key=True, autoincrement=False))
    table.create(sqlite_engine)
    gen = Snowflake(worker_id=5)
    try:
        with sqlite_engine.begin() as conn:
            conn.execute(insert(table), [{"id": gen.next_id()} for _ in range(50)])
            assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table_name} WHERE rowid = id")).scalar() == 50
            indexes = conn.execute(
                sa.text("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"), {"t": table_name}
            ).scalar()
            assert indexes == 0
    finally:
        table.drop(sqlite_engine)


def test_core_table_with_plain_default_callable(engine, metadata, table_name):
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", SeqUUID(), primary_key=True, default=seq_uuid_default),
        sa.Column("n", sa.Integer),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        for i in range(20):
            conn.execute(insert(table), {"n": i})
        conn.execute(insert(table), [{"n": i} for i in range(20, 200)])
        assert conn.execute(select(table.c.n).order_by(table.c.id)).scalars().all() == list(range(200))


@pytest.mark.parametrize("storage", STORAGES)
def test_literal_binds_find_the_row_on_the_live_server(engine, metadata, table_name, storage):
    table = sa.Table(table_name, metadata, sa.Column("id", SeqUUID(storage=storage), primary_key=True))
    metadata.create_all(engine)
    value = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    with engine.begin() as conn:
        conn.execute(insert(table), {"id": value})
        sql = str(select(table.c.id).where(table.c.id == value).compile(engine, compile_kwargs={"literal_binds": True}))
        assert conn.exec_driver_sql(sql.replace("%", "%%")).scalar() is not None, sql


def _forged_uuid(value: int) -> uuid.UUID:
    """A uuid.UUID built around __init__ (as the old base32 decoder did for 'ß'), int out of range."""
    forged = object.__new__(uuid.UUID)
    object.__setattr__(forged, "int", value)
    object.__setattr__(forged, "is_safe", uuid.SafeUUID.unknown)
    return forged


@pytest.mark.parametrize("storage", [None, "binary", "text", "hex"])
def test_a_uuid_with_an_out_of_range_int_is_refused_before_any_row_is_sent(engine, table_name, storage):
    """Autocommit executemany of 1,000 rows, the 500th forged: before the fix 499 rows stayed."""
    from seqid_orm import InvalidIDError, comb_batch

    table = sa.Table(table_name, sa.MetaData(), sa.Column("id", SeqUUID(storage=storage), primary_key=True))
    table.create(engine)
    try:
        rows = [{"id": u} for u in comb_batch(1000)]
        rows[499]["id"] = _forged_uuid(1 << 129)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            with pytest.raises(sa.exc.StatementError, match="128-bit") as info:
                conn.execute(insert(table), rows)
            assert isinstance(info.value.orig, InvalidIDError)
            assert conn.scalar(select(sa.func.count()).select_from(table)) == 0
    finally:
        table.drop(engine)


@pytest.mark.parametrize("bad", [12.9, True, -1, 2**63, "12.9", "-5", " 7", "1_0"])
def test_snowflake_binds_share_the_django_validator(engine, table_name, bad):
    from seqid_orm import SeqIDError

    table = sa.Table(table_name, sa.MetaData(), sa.Column("id", SnowflakeID(), primary_key=True, autoincrement=False))
    table.create(engine)
    try:
        with engine.begin() as conn:
            with pytest.raises(sa.exc.StatementError) as info:
                conn.execute(insert(table), [{"id": 1}, {"id": bad}])
            assert isinstance(info.value.orig, SeqIDError)
        with engine.begin() as conn:
            conn.execute(insert(table), [{"id": 1}, {"id": "2"}])  # decimal text, as a URL argument arrives
            assert conn.scalars(select(table.c.id).order_by(table.c.id)).all() == [1, 2]
    finally:
        table.drop(engine)
