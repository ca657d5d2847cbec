"""PostgreSQL statements carry their own time-outs (``vendors.call_bounds``): ``SET LOCAL`` in the same
message as the statement, so they hold in a pooler's transaction mode, leak into no session, and
no transaction ever waits on the client.  Direct to the server here; through PgBouncer in
``tests/integrations/test_pgbouncer.py``."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")

from seqid_orm import TicketSequence  # noqa: E402
from seqid_orm.errors import StoreTimeoutError  # noqa: E402
from tests.conftest import POSTGRES_URL  # noqa: E402


def _waiting_on(conn: sa.Connection, name: str) -> int:
    """Sessions waiting for a lock in a statement naming sequence ``name`` (bound on the client, the
    statement's text holds the name)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE '%' || :n || '%' AND pid <> pg_backend_pid()"
    )
    return int(conn.execute(sa.text(query), {"n": name}).scalar_one())


@pytest.mark.parametrize("awaited", [False, True], ids=["sync", "awaited"])
def test_a_reservation_on_a_locked_row_ends_on_the_server_at_its_deadline(pg_engine, awaited):
    """Another transaction holds the ticket row: the call fails at its deadline, and its UPDATE no
    longer waits on the server (its own lock_timeout ended it), so no block is burned when the
    lock goes; the store's sessions keep their settings (nothing SET outlives the statement)."""
    name = f"bounds-{secrets.token_hex(4)}"
    seq = TicketSequence(name, POSTGRES_URL, block_size=10, timeout=1.0, double_buffer=False)
    draw = (lambda: asyncio.run(seq.anext_id())) if awaited else seq.next_id
    try:
        assert [draw() for _ in range(10)] == list(range(1, 11))
        with pg_engine.connect() as locker:
            locker.execute(sa.text("SELECT 1 FROM seqid_tickets WHERE name = :n FOR UPDATE"), {"n": name})
            began = time.monotonic()
            with pytest.raises(StoreTimeoutError):
                draw()
            refused = time.monotonic()
            assert refused - began < 1.0 + 1.5
            with pg_engine.connect() as watcher:
                while (waiting := _waiting_on(watcher, name)) and time.monotonic() < refused + 1.0:
                    time.sleep(0.02)
            assert waiting == 0
            locker.rollback()
        assert draw() == 11  # the refused reservation burned no block
        store = seq.servers.stores[0]
        with store.engine.connect() as conn:  # a connection of the store's own pool
            settings = conn.exec_driver_sql(
                "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"
            )
            assert settings.one() == ("0", "0")
    finally:
        seq.close()
        with pg_engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM seqid_tickets WHERE name = :n"), {"n": name})
