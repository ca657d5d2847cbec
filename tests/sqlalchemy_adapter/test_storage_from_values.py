"""Storage judged by the values, on every database: a key column whose values are not what the swapped type
writes (hex in a ``text`` column, upper-case or braced text another application wrote) is refused before a
row is written or a look-up misses: ``session.get`` raises instead of answering ``None``, an insert raises,
and not one row of a second form is written.  Where the values are the type's form, the old rows are found.
"""

from __future__ import annotations

import uuid

import pytest

sa = pytest.importorskip("sqlalchemy")
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

from seqid_orm.errors import StorageMismatchError  # noqa: E402
from seqid_orm.sqlalchemy import seq_uuid_pk  # noqa: E402
from seqid_orm.sqlalchemy.columns import forget_columns  # noqa: E402

# (column type per vendor, how another program wrote the old keys, the storage= the swap declares, refusal)
TRAPS = {
    "hex in text, the default type": ("text", lambda u: u.hex, None, "holds hex"),
    "hex in varchar(255), the default type": ("varchar(255)", lambda u: u.hex, None, "holds hex"),
    "hex in text, storage=text": ("text", lambda u: u.hex, "text", "holds hex"),
    "text in text, storage=hex": ("text", str, "hex", "holds text"),
    "upper-case char(36)": ("char(36)", lambda u: str(u).upper(), "text", "upper-case 36-character text"),
    "upper-case CHAR(32)": ("char(32)", lambda u: u.hex.upper(), "hex", "upper-case 32 hex digits"),
    "braced text": ("varchar(38)", lambda u: "{" + str(u) + "}", "text", "in braces"),
}


def _model(table: str, storage: str | None):
    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = table
        id: Mapped[uuid.UUID] = seq_uuid_pk(storage=storage)
        note: Mapped[str] = mapped_column(sa.String(20))

    return Row


def _text_type(engine, declared: str) -> str:
    if engine.dialect.name == "mysql" and declared == "text":
        return "varchar(255)"  # MariaDB: a TEXT column cannot be a primary key without a prefix length
    return declared


@pytest.mark.parametrize("trap", list(TRAPS))
def test_a_column_of_another_form_is_refused_for_look_ups_and_inserts_with_nothing_written(engine, table_name, trap):
    declared, written, storage, refusal = TRAPS[trap]
    forget_columns(engine.dialect)
    old = [uuid.uuid4() for _ in range(50)]
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {table_name} (id {_text_type(engine, declared)} PRIMARY KEY, note varchar(20) NOT NULL)"
        )
        for u in old:
            conn.exec_driver_sql(f"INSERT INTO {table_name} VALUES ('{written(u)}', 'old')")
    Row = _model(table_name, storage)
    try:
        with Session(engine) as session, pytest.raises(StorageMismatchError, match=refusal):
            session.get(Row, old[0])  # answered None before: the row is there in another form
        forget_columns(engine.dialect)
        with Session(engine) as session:
            session.add(Row(note="new"))
            with pytest.raises(sa.exc.StatementError) as raised:
                session.commit()
        assert isinstance(raised.value.orig, StorageMismatchError)
        with engine.connect() as conn:
            notes = conn.exec_driver_sql(f"SELECT note, count(*) FROM {table_name} GROUP BY note").all()
        assert notes == [("old", 50)]  # not a row of a second form
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {table_name}")


def test_hex_keys_in_a_varchar_column_swapped_with_their_own_storage_are_found_and_joined(engine, table_name):
    """The legacy ``Column(String, default=lambda: uuid4().hex)``: declared ``storage="hex"``, the values decide
    (the declared length says nothing), the old rows are found and the new ones are written the same way."""
    forget_columns(engine.dialect)
    old = [uuid.uuid4() for _ in range(50)]
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table_name} (id varchar(255) PRIMARY KEY, note varchar(20) NOT NULL)")
        for u in old:
            conn.exec_driver_sql(f"INSERT INTO {table_name} VALUES ('{u.hex}', 'old')")
    Row = _model(table_name, "hex")
    try:
        with Session(engine) as session:
            assert all(session.get(Row, u).note == "old" for u in old)
            session.add_all(Row(note="new") for _ in range(10))
            session.commit()
        with engine.connect() as conn:
            lengths = conn.exec_driver_sql(f"SELECT DISTINCT length(id) FROM {table_name}").scalars().all()
        assert lengths == [32]
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {table_name}")
