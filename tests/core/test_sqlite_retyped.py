"""The text of a table SQLite keeps, with some columns' types changed (:func:`seqid_orm.vendors.sqlite.retyped`,
the rebuild's edit): pure code, scripted input; each result is made by a real SQLite, which must accept it and
declare the columns as asked, every other rule kept."""

from __future__ import annotations

import sqlite3

import pytest

from seqid_orm.errors import InvalidArgumentError
from seqid_orm.vendors.sqlite import retyped


def _made(sql: str) -> dict[str, tuple[str, int, int]]:
    """Each column of the table ``sql`` makes: ``(declared type, not null, primary key)``, as SQLite reads it."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
    db.execute(sql)
    name = db.execute("SELECT name FROM sqlite_master WHERE name <> 'a' AND type = 'table'").fetchone()[0]
    return {r[1]: (r[2], r[3], r[5]) for r in db.execute(f'PRAGMA table_info("{name}")')}


CASES = [
    # an INTEGER key's AUTOINCREMENT goes (it is for a rowid alone) into a comment with the table's high-water
    # mark, NOT NULL comes (another type's key may be NULL)
    (
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n int)",
        {"id": "BLOB"},
        "id",
        'CREATE TABLE "new" (id BLOB PRIMARY KEY /* seqid: AUTOINCREMENT 0 */ NOT NULL, n int)',
    ),
    # made INTEGER again: the comment is the word again
    (
        "CREATE TABLE t (id BLOB PRIMARY KEY /* seqid: AUTOINCREMENT 7 */ NOT NULL, n int)",
        {"id": "INTEGER"},
        "id",
        'CREATE TABLE "new" (id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, n int)',
    ),
    # quoted names of every kind, a type of two words and a size, a comment, a default holding a comma
    (
        'CREATE TABLE "t" ("a id" bigint unsigned NOT NULL, [b] DECIMAL(10, 2) DEFAULT \'x,y\', `c` int /* c, d */)',
        {"a id": "CHAR(32)", "B": "BLOB"},
        None,
        'CREATE TABLE "new" ("a id" CHAR(32) NOT NULL, [b] BLOB DEFAULT \'x,y\', `c` int /* c, d */)',
    ),
    # a column without a type; table constraints and options as they were; a check whose text names the column
    (
        "CREATE TABLE t (a_id REFERENCES a (id) ON DELETE CASCADE, x int, CONSTRAINT k CHECK (a_id <> 'a_id, x'),"
        " PRIMARY KEY (x)) WITHOUT ROWID",
        {"a_id": "BLOB"},
        None,
        'CREATE TABLE "new" (a_id BLOB REFERENCES a (id) ON DELETE CASCADE, x int, CONSTRAINT k CHECK '
        "(a_id <> 'a_id, x'), PRIMARY KEY (x)) WITHOUT ROWID",
    ),
    # the key already NOT NULL: not said twice; a comment between the name and the type
    (
        "CREATE TABLE t (id -- the key\n bigint NOT NULL PRIMARY KEY, n text COLLATE NOCASE)",
        {"id": "BLOB"},
        "id",
        'CREATE TABLE "new" (id -- the key\n BLOB NOT NULL PRIMARY KEY, n text COLLATE NOCASE)',
    ),
]


@pytest.mark.parametrize(("create", "types", "key", "expected"), CASES)
def test_the_columns_get_their_types_and_the_rest_stays_as_written(create, types, key, expected):
    made = retyped(create, '"new"', types, key)
    assert made == expected
    columns = _made(made)
    for name, type_ in types.items():
        found = next(v for k, v in columns.items() if k.lower() == name.lower())
        assert found[0] == type_
        if key is not None and name == key:
            assert found[1] == 1 and found[2] == 1  # NOT NULL, the key


def test_a_column_the_text_does_not_define_is_refused():
    with pytest.raises(InvalidArgumentError, match="no column b_id"):
        retyped("CREATE TABLE t (a_id int)", '"new"', {"b_id": "BLOB"}, None)
