"""The store-history decisions, as pure functions (the SQL that feeds them is tested on real failovers
in tests/tickets/test_failover.py and tests/leases/test_lease_failover.py)."""

from __future__ import annotations

import pytest

from seqid_orm.allocation.stores.history import (
    ReplicationPoint,
    StoreHistory,
    Verdict,
    durability_problem,
    fork_before,
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


# --- Redis: where a promoted primary left the history a store saw its last write confirmed in ------

OLD, NEW = "9aa4b0643e063f0801c3cb0270220c6c4f3dd7f9", "f84aa1e18985583e8cccd6d538e0744dc97da5c4"
NONE = "0" * 40  # master_replid2 of a primary that was never a replica


def promoted(replid2: str, second_offset: int, replid: str = NEW) -> dict[str, object]:
    """``INFO replication`` of a primary, as redis-py parses it (replica lines left out)."""
    return {"role": "master", "master_replid": replid, "master_replid2": replid2, "second_repl_offset": second_offset}


@pytest.mark.parametrize(
    ("known", "info", "fork"),
    [
        (None, promoted(OLD, 10), None),  # nothing confirmed yet: nothing to lose
        (ReplicationPoint(OLD, 58), promoted(NONE, -1, replid=OLD), None),  # the same primary
        (ReplicationPoint(OLD, 58), promoted(OLD, 59), 58),  # promoted with every byte up to the write's start
        (ReplicationPoint(OLD, 58), promoted(OLD, 40), 39),  # promoted well behind it
        (ReplicationPoint(OLD, 58), promoted(OLD, 60), None),  # had the write's first byte: not judged lost
        (ReplicationPoint(OLD, 58), promoted(OLD, 5000), None),  # had all of it
        (ReplicationPoint(OLD, 58), promoted(NONE, -1), None),  # a restart: a new id, nothing to compare
        (ReplicationPoint(OLD, 58), promoted("e" * 40, 3), None),  # promoted from another history
    ],
)
def test_fork_before(known, info, fork):
    assert fork_before(known, info) == fork


def test_a_replication_id_redis_py_read_as_a_number_compares_as_itself():
    """redis-py's INFO parser makes an all-digit value an int; the store keeps ``str()`` of it, so
    the same id read twice compares equal and a promotion from it is still found."""
    digits = "1" * 40
    known = ReplicationPoint(str(int(digits)), 100)
    assert fork_before(known, promoted(int(digits), 50)) == 49  # type: ignore[arg-type]
    assert fork_before(known, {"master_replid": int(digits)}) is None


def test_the_history_docstring_examples_run():
    import doctest

    from seqid_orm.allocation.stores import history

    result = doctest.testmod(history)
    assert result.attempted >= 5 and result.failed == 0
