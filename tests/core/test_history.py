"""The store-history decisions, as pure functions (the SQL that feeds them is tested on real failovers
in tests/tickets/test_failover.py and tests/leases/test_lease_failover.py)."""

from __future__ import annotations

import pytest

from seqid_orm.allocation.stores.history import (
    StoreHistory,
    Verdict,
    durability_problem,
    judge,
    mariadb_durability_problem,
)

SYSTEM = 7711997394258974851


def history(timeline: int, synchronous: bool = False, system: int = SYSTEM, standbys: int = 0) -> StoreHistory:
    return StoreHistory(system, timeline, synchronous, standbys)


@pytest.mark.parametrize(
    ("recorded", "present", "verdict"),
    [
        (None, history(1), Verdict.RECORD),
        (history(1), history(1), Verdict.SAME),
        (history(1, synchronous=True), history(2, synchronous=True), Verdict.ACCEPT),  # a synchronous standby
        (history(1, synchronous=True), history(2), Verdict.ACCEPT),  # its writes were all confirmed before
        (history(1), history(2), Verdict.ROLLED_BACK),  # promoted after asynchronous writes
        (history(3, synchronous=True), history(2, synchronous=True), Verdict.ROLLED_BACK),  # an older backup
        (history(1, synchronous=True), history(1, synchronous=True, system=42), Verdict.ROLLED_BACK),  # another cluster
    ],
)
def test_judge(recorded, present, verdict):
    assert judge(recorded, present) is verdict


def test_only_asynchronous_standbys_are_a_durability_problem():
    assert durability_problem(history(1)) is None  # one server: WAL and fsync keep every commit
    assert durability_problem(history(1, synchronous=True)) is None
    problem = durability_problem(history(1, standbys=2))
    assert problem is not None and "2 standby(s)" in problem and "synchronous_standby_names" in problem


def test_a_system_identifier_above_a_signed_bigint_is_described_unsigned():
    assert f"system {2**64 - 1}" in history(1, system=-1).describe()


@pytest.mark.parametrize(
    ("replicas", "galera", "semi_sync", "wait_point", "refused"),
    [
        (0, False, False, "AFTER_COMMIT", None),  # one server
        (2, True, False, "AFTER_COMMIT", None),  # a Galera node: certified on every node before the commit
        (1, False, True, "AFTER_SYNC", None),  # lossless semi-synchronous
        (1, False, True, "after_sync", None),
        (1, False, False, "AFTER_SYNC", "rpl_semi_sync_master_enabled is off"),  # asynchronous, or fell back
        (3, False, True, "AFTER_COMMIT", "waits AFTER_COMMIT"),  # acknowledged before the replica has it
    ],
)
def test_mariadb_replicas_are_a_durability_problem_unless_lossless(replicas, galera, semi_sync, wait_point, refused):
    problem = mariadb_durability_problem(replicas, galera, semi_sync, wait_point)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem and f"{replicas} replica(s)" in problem
