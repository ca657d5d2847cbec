"""The database's own waits during one SQL store call (``vendors.call_bounds``), as a table: what each
vendor's connection is sent, from what the store's door says of it (one message, a session of its own)."""

from __future__ import annotations

import pytest

from seqid_orm.vendors import CallBounds, call_bounds

# (vendor, one_message, own_session) -> what bounds a call with 0.25 s left of a 2 s bound
TABLE = [
    (
        "postgresql",
        True,
        False,
        CallBounds(prefix="SET LOCAL lock_timeout = 250; SET LOCAL statement_timeout = 4000; "),
    ),
    ("postgresql", True, True, CallBounds(prefix="SET LOCAL lock_timeout = 250; SET LOCAL statement_timeout = 4000; ")),
    ("postgresql", False, True, CallBounds(before=("SET lock_timeout = 250; SET statement_timeout = 4000",))),
    ("postgresql", False, False, CallBounds()),  # asyncpg, pg8000 on a pool others share: nothing outlives a call
    ("mysql", False, True, CallBounds(before=("SET SESSION innodb_lock_wait_timeout = 1",))),
    ("mariadb", False, True, CallBounds(before=("SET SESSION innodb_lock_wait_timeout = 1",))),
    ("mysql", False, False, CallBounds()),  # an engine of the store's own set its bound at connect
    ("sqlite", False, False, CallBounds(before=("PRAGMA busy_timeout = 250",))),
    ("sqlite", False, True, CallBounds(before=("PRAGMA busy_timeout = 250",))),
    ("mssql", False, True, CallBounds()),
    ("oracle", False, False, CallBounds()),
]


@pytest.mark.parametrize(("engine_name", "one_message", "own_session", "expected"), TABLE)
def test_each_connection_gets_the_bounds_its_vendor_and_session_allow(engine_name, one_message, own_session, expected):
    assert call_bounds(engine_name, 0.25, 2.0, one_message=one_message, own_session=own_session) == expected


def test_the_lock_wait_is_what_is_left_and_the_statement_limit_stays_above_the_bound():
    """lock_timeout follows the deadline down (never 0: PostgreSQL reads 0 as no limit); statement_timeout
    is twice the store's bound whatever is left, never below the deadline (a cancelled commit that waits
    for a synchronous standby is reported committed); InnoDB's wait rounds up to whole seconds, never 0."""
    for left in (0.0, 0.0004, 0.3, 1.2, 2.0):
        prefix = call_bounds("postgresql", left, 2.0, one_message=True, own_session=False).prefix
        lock = int(prefix.split("lock_timeout = ")[1].split(";")[0])
        statement = int(prefix.split("statement_timeout = ")[1].split(";")[0])
        assert lock >= 1 and abs(lock - left * 1000) < 1 + 1e-9 and statement == 4000
        (innodb,) = call_bounds("mariadb", left, 2.0, one_message=False, own_session=True).before
        assert int(innodb.rsplit(" ", 1)[1]) == max(1, -(-left // 1))
