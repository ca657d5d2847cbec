"""Ticket sequences on a pg_auto_failover formation (Debian's pg_autoctl 2.0: a monitor and two
PostgreSQL 15 nodes, tests/servers/pgautofailover.py), clients on the libpq multi-host URL that
``pg_autoctl show uri`` gives.  Real worker processes draw ids through the formation's
own events; every id they print is counted, and a repeat is the one failure.

pg_auto_failover is synchronous by default (the primary's ``synchronous_standby_names`` names its
secondary), so a switchover, a restart or a failover loses no acknowledged write: the workers must
go on by themselves, without ``StoreHistoryError`` and without ``seqid ticket repair``.
"""

from __future__ import annotations

import secrets

import pytest

from tests import system
from tests.integrations.events import drawing, go_on_through

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

TIMEOUT = 2.0  # each reservation's deadline, seconds


def test_pg_auto_failover_loses_nothing_through_a_switchover_a_killed_postmaster_and_a_failover():
    system.need("pg_auto_failover")
    from tests.servers.pgautofailover import PgAutoFailover

    name = f"pgaf-{secrets.token_hex(4)}"
    with PgAutoFailover() as formation:
        options = {"block_size": 50, "timeout": TIMEOUT}  # no accept_state_loss: the secondary is synchronous
        alive = drawing([formation.url] * 3, name, options)
        try:
            events = [
                ("switchover", formation.switchover),
                ("kill -9 of the postmaster", formation.kill_postmaster),
                ("failover (kill -9 of the primary's pg_autoctl and postmaster)", formation.fail_over),
            ]
            go_on_through(alive, events, lambda: formation.wait_settled(120), formation.logs)
        finally:
            for w in alive:
                w.stop()
