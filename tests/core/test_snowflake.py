"""Snowflake ids: layout, decoding, sequence overflow, clock rollback, threads, forks."""

from __future__ import annotations

import datetime as dt
import os
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import Snowflake, timestamp_of
from seqid_orm.errors import ClockMovedBackwardsError, ForkedGeneratorError, GeneratorExhaustedError
from seqid_orm.ids.snowflake import TWITTER_EPOCH_MS

UTC = dt.timezone.utc


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms
        self.sleeps: list[float] = []

    def __call__(self) -> int:
        return self.ms * 1_000_000

    def sleep(self, seconds: float) -> None:
        # sleeping moves the fake clock on by a millisecond
        self.sleeps.append(seconds)
        self.ms += 1


def make(clock: Clock, **kw) -> Snowflake:
    return Snowflake(kw.pop("worker_id", 7), kw.pop("datacenter_id", 3), clock=clock, sleep=clock.sleep, **kw)


def test_twitter_layout_and_decoding():
    clock = Clock(TWITTER_EPOCH_MS + 123_456)
    gen = make(clock)
    first, second = gen.next_id(), gen.next_id()
    assert first == (123_456 << 22) | (3 << 17) | (7 << 12) | 0
    assert second == first + 1
    parts = gen.decode(second)
    assert (parts.datacenter_id, parts.worker_id, parts.sequence) == (3, 7, 1)
    assert parts.timestamp == dt.datetime.fromtimestamp((TWITTER_EPOCH_MS + 123_456) / 1000, UTC)
    assert timestamp_of(second) == parts.timestamp


def test_sequence_overflow_waits_for_the_next_millisecond_never_returns_none():
    clock = Clock(TWITTER_EPOCH_MS + 10)
    gen = make(clock, sequence_bits=2)
    ids = [gen.next_id() for _ in range(10)]
    assert None not in ids
    assert ids == sorted(ids) and len(set(ids)) == 10
    assert [gen.decode(i).sequence for i in ids[:5]] == [0, 1, 2, 3, 0]
    assert clock.sleeps, "the generator waited for the clock"


def test_clock_rollback_raises_by_default():
    clock = Clock(TWITTER_EPOCH_MS + 1000)
    gen = make(clock)
    gen.next_id()
    clock.ms -= 5
    with pytest.raises(ClockMovedBackwardsError, match="moved back by 5 ms"):
        gen.next_id()


def test_clock_rollback_within_tolerance_is_waited_out():
    clock = Clock(TWITTER_EPOCH_MS + 1000)
    gen = make(clock, rollback_tolerance_ms=10)
    a = gen.next_id()
    clock.ms -= 5
    b = gen.next_id()
    assert b > a
    assert gen.decode(b).timestamp >= gen.decode(a).timestamp
    clock.ms -= 50
    with pytest.raises(ClockMovedBackwardsError):
        gen.next_id()


def test_sonyflake_profile():
    clock = Clock(1_409_529_600_000 + 12_345)
    gen = Snowflake.sonyflake(machine_id=513, clock=clock, sleep=clock.sleep)
    value = gen.next_id()
    parts = gen.decode(value)
    assert parts.worker_id == 513 and parts.sequence == 0
    assert value >> 24 == 1234  # 10 ms units
    assert parts.timestamp == dt.datetime.fromtimestamp((1_409_529_600_000 + 12_340) / 1000, UTC)


def test_every_id_fits_a_signed_bigint_even_at_the_end_of_the_epoch():
    clock = Clock(TWITTER_EPOCH_MS + (1 << 41) - 1)
    gen = make(clock, worker_id=31, datacenter_id=31)
    value = gen.next_id()
    assert 0 < value < 2**63
    clock.ms += 2
    with pytest.raises(GeneratorExhaustedError):
        gen.next_id()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"worker_id": 32}, ValueError, "worker_id must be between 0 and 31"),
        ({"worker_id": -1}, ValueError, "worker_id"),
        ({"worker_id": "1"}, TypeError, "worker_id must be an int"),
        ({"worker_id": True}, TypeError, "worker_id must be an int"),
        ({"worker_id": 0, "datacenter_id": 32}, ValueError, "datacenter_id"),
        ({"worker_id": 0, "time_bits": 42, "sequence_bits": 12}, ValueError, "at most 63"),
        ({"worker_id": 0, "rollback_tolerance_ms": -1}, ValueError, "rollback_tolerance_ms"),
    ],
)
def test_bad_configuration_is_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        Snowflake(**kwargs)


def test_decode_rejects_bad_values():
    gen = Snowflake(0)
    with pytest.raises(TypeError):
        gen.decode("12")
    with pytest.raises(ValueError):
        gen.decode(-1)
    with pytest.raises(ValueError):
        gen.decode(2**63)


def test_threads_get_unique_increasing_ids():
    gen = Snowflake(1)
    out: dict[int, list[int]] = {}

    def work(i: int) -> None:
        out[i] = [gen.next_id() for _ in range(3000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [v for vs in out.values() for v in vs]
    assert len(set(everything)) == len(everything)
    assert all(vs == sorted(vs) for vs in out.values())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_refuses_to_share_the_worker_id():
    gen = Snowflake(5)
    gen.next_id()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            try:
                gen.next_id()
                os.write(write_fd, b"no error")
            except ForkedGeneratorError:
                fresh = Snowflake(6).next_id()
                os.write(write_fd, b"refused %d" % fresh)
        finally:
            os._exit(0)
    os.close(write_fd)
    answer = os.read(read_fd, 100).decode()
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert answer.startswith("refused "), answer
    assert gen.next_id() > 0  # the parent's generator still works


class _Reference:
    """A Snowflake as the algorithm reads, with no fast path: the clock divided into units at every
    call, the sequence counted within a unit, a full unit waited out (here: the clock moved on)."""

    def __init__(self, epoch_ms: int, unit_ms: int, shift: int, node: int, sequence_max: int) -> None:
        self.epoch_ms, self.unit_ms, self.shift, self.node, self.sequence_max = (
            epoch_ms,
            unit_ms,
            shift,
            node,
            sequence_max,
        )
        self.last, self.sequence = -1, 0

    def next(self, t_ns: int) -> int | None:
        now = (t_ns // 1_000_000 - self.epoch_ms) // self.unit_ms
        if now == self.last:
            if self.sequence == self.sequence_max:
                return None  # the generator waits for the next unit
            self.sequence += 1
        else:
            self.last, self.sequence = now, 0
        return (now << self.shift) | self.node | self.sequence


@given(
    steps=st.lists(
        st.sampled_from([0, 1, 999_999, 1_000_000, 1_000_001, 9_999_999, 10_000_000]) | st.integers(0, 3_000_000),
        min_size=1,
        max_size=300,
    ),
    sony=st.booleans(),
)
def test_the_same_ids_as_the_plain_algorithm_for_any_clock_moving_forward(steps, sony):
    """next_id's fast path (same unit: compare the raw reading with the unit's bounds, no division)
    gives exactly the ids of the plain algorithm, across unit edges to the nanosecond."""
    start = 1_700_000_000_000 * 1_000_000 - 1  # a nanosecond before a unit's edge: steps land on edges
    readings = [start + sum(steps[: i + 1]) for i in range(len(steps))]
    clock = iter(readings)
    current = [0]

    def read() -> int:
        return current[0]

    if sony:
        gen = Snowflake.sonyflake(machine_id=5, clock=read, sleep=lambda s: None)
        ref = _Reference(gen.epoch_ms, 10, gen._time_shift, gen._node, gen._sequence_max)
    else:
        gen = Snowflake(worker_id=3, datacenter_id=1, sequence_bits=2, clock=read, sleep=lambda s: None)
        ref = _Reference(gen.epoch_ms, 1, gen._time_shift, gen._node, gen._sequence_max)
    for reading in clock:
        current[0] = reading
        expected = ref.next(reading)
        if expected is None:  # a full unit: the generator sleeps until the clock moves; skip it
            continue
        assert gen.next_id() == expected


def test_a_backfill_gets_ids_of_its_own_times_in_its_order():
    gen = Snowflake(worker_id=9, sequence_bits=4)
    start = dt.datetime(2024, 2, 29, 12, tzinfo=UTC)
    whens = [start + dt.timedelta(milliseconds=ms) for ms in (0, 0, 0, 5, 5, 9)]
    made = [gen.at(when) for when in whens]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert [gen.decode(i).timestamp for i in made] == whens
    assert gen.decode(made[2]).sequence == 2 and gen.decode(made[3]).sequence == 0
    with pytest.raises(GeneratorExhaustedError, match="no later id fits"):
        for _ in range(16):
            gen.at(start + dt.timedelta(milliseconds=9))
    with pytest.raises(ValueError, match="outside this profile"):
        gen.at(dt.datetime(2000, 1, 1, tzinfo=UTC))  # before the Twitter epoch
    live = gen.next_id()  # the live sequence is its own
    assert gen.decode(live).timestamp > whens[-1]


def test_a_forked_child_backfills_nothing_with_its_parents_worker_id():
    gen = Snowflake(worker_id=10)
    when = dt.datetime(2024, 2, 29, 12, tzinfo=UTC)
    gen.at(when)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            gen.at(when)
            os.write(write, b"made")
        except ForkedGeneratorError:
            os.write(write, b"refused")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"refused"
