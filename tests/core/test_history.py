"""The store-history decisions, as pure functions (the SQL that feeds them is tested on real failovers
in tests/tickets/test_failover.py and tests/leases/test_lease_failover.py)."""

from __future__ import annotations

import pytest

from seqid_orm.allocation.stores.history import (
    ReplicationPoint,
    StoreHistory,
    Verdict,
    durability_problem,
    judge,
    lacks_write,
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


# --- Redis: whether a primary holds the last write a store saw confirmed -------------------------

OLD, NEW = "9aa4b0643e063f0801c3cb0270220c6c4f3dd7f9", "f84aa1e18985583e8cccd6d538e0744dc97da5c4"
NONE = "0" * 40  # master_replid2 of a primary that was never a replica


def primary(replid: str = NEW, replid2: str = NONE, second_offset: int = -1) -> dict[str, object]:
    """``INFO replication`` of a primary, as redis-py parses it (replica lines left out)."""
    return {"role": "master", "master_replid": replid, "master_replid2": replid2, "second_repl_offset": second_offset}


@pytest.mark.parametrize(
    ("known", "info", "recorded", "lacking"),
    [
        (None, primary(), None, None),  # nothing confirmed yet: nothing to lose
        (ReplicationPoint(OLD, 58), primary(OLD), None, None),  # the same history goes on
        (ReplicationPoint(OLD, 58), primary(), 58, None),  # restarted (a new id), its data set counted as far
        (ReplicationPoint(OLD, 58), primary(), 90, None),  # ... and further
        (ReplicationPoint(OLD, 58), primary(NEW, OLD, 5000), 58, None),  # promoted with the write
        (ReplicationPoint(OLD, 58), primary(NEW, OLD, 40), 57, "was promoted from a replica that left"),
        (ReplicationPoint(OLD, 58), primary(NEW, OLD, 40), None, "was promoted from a replica that left"),
        (ReplicationPoint(OLD, 58), primary(), 57, "does not continue"),  # restored from a backup
        (ReplicationPoint(OLD, 58), primary(), None, "does not continue"),  # an old primary: never heard of OLD
        (ReplicationPoint(OLD, 58), primary(NEW, "e" * 40, 3), None, "does not continue"),  # another history
    ],
)
def test_lacks_write(known, info, recorded, lacking):
    why = lacks_write(known, info, recorded)
    assert (why is None) == (lacking is None)
    if lacking is not None:
        assert why.startswith(lacking) and OLD in why and "write 58 was confirmed" in why


def test_a_replication_id_redis_py_read_as_a_number_compares_as_itself():
    """redis-py's INFO parser makes an all-digit value an int; the store compares ``str()`` of it, so
    the same id read twice compares equal, and a promotion from it is still told."""
    digits = "1" * 40
    known = ReplicationPoint(digits, 100)
    assert lacks_write(known, {"master_replid": int(digits)}, None) is None
    why = lacks_write(known, primary(NEW, int(digits), 50), None)  # type: ignore[arg-type]
    assert why is not None and why.startswith("was promoted")


def test_the_history_docstring_examples_run():
    import doctest

    from seqid_orm.allocation.stores import history

    result = doctest.testmod(history)
    assert result.attempted >= 5 and result.failed == 0
