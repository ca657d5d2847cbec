"""mask/unmask: round trips, no time leaked, no shared prefixes, distinct keys, typed refusals."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqid_orm
from seqid_orm import InvalidIDError, Layout, comb_at, comb_batch, timestamp_of, uuid_sequence_nextval
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, NoTimestampError
from seqid_orm.public.masking import UnmaskError, mask, unmask, unmask_any

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
keys = st.binary(min_size=16, max_size=100)
instants = st.datetimes(  # ids are made now or earlier: unmask refuses times past tomorrow
    min_value=dt.datetime(1971, 1, 1),
    max_value=dt.datetime.now().replace(microsecond=0),
    timezones=st.just(dt.timezone.utc),
)


@settings(max_examples=300)
@given(when=instants, layout=st.sampled_from(list(Layout)), key=keys)
def test_the_round_trip_gives_the_id_back_and_the_mask_is_a_uuid4_without_time(when, layout, key):
    value = comb_at(when, layout)
    public = mask(value, key)
    assert public.version == 4 and public.variant == uuid.RFC_4122
    assert unmask(public, key, layout=layout) == value
    assert unmask(str(public), key, layout=layout) == value  # the text form, as a URL carries it
    with pytest.raises(NoTimestampError):
        timestamp_of(public)


@given(value=st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i, version=4)), key=keys)
def test_wrapping_prefix_ids_round_trip_as_prefixed(value, key):
    assert unmask(mask(value, key), key, layout="prefixed") == value


def test_prefixed_ids_from_the_generator_round_trip():
    for n in range(1, 50):
        value = uuid_sequence_nextval(n)
        assert unmask(mask(value, KEY), KEY, layout="prefixed") == value


def _common_prefix_bits(a: uuid.UUID, b: uuid.UUID) -> int:
    return 128 - (a.int ^ b.int).bit_length()


def test_masks_of_consecutive_ids_share_no_longer_prefix_than_chance():
    ids = comb_batch(20_000)  # consecutive: the same millisecond, counters one apart
    assert all(_common_prefix_bits(a, b) >= 64 for a, b in itertools.pairwise(ids))  # what they leak
    masks = [mask(v, KEY) for v in ids]
    shared = [_common_prefix_bits(a, b) for a, b in itertools.pairwise(masks)]
    # Two random 128-bit values share k leading bits with probability 2**-k (the version nibble
    # and variant sit after bit 48, so they do not count): mean 1, and over 20,000 pairs the
    # longest run is about log2(20,000) ≈ 14 bits.
    assert sum(shared) / len(shared) < 1.2
    assert max(shared) < 32
    assert len(set(masks)) == len(ids)
    # and sorted masks do not follow creation order (a rank correlation near zero)
    order = sorted(range(len(masks)), key=lambda i: masks[i].int)
    n = len(order)
    rho = 1 - 6 * sum((rank - i) ** 2 for rank, i in enumerate(order)) / (n * (n * n - 1))
    assert abs(rho) < 0.05


@given(key=keys, other=keys)
def test_different_keys_give_different_masks(key, other):
    value = seqid_orm.uuid7()
    if key == other:
        assert mask(value, key) == mask(value, other)
    else:
        assert mask(value, key) != mask(value, other)


def _wrong_keys(count: int, tag: bytes) -> list[bytes]:
    """Keys nobody masked with, derived from a counter so the test is the same on every run
    (random keys made it a dice roll: a wrong key passes the time check about once in 160)."""
    return [hashlib.sha256(tag + i.to_bytes(4, "big")).digest() for i in range(count)]


def test_a_wrong_key_is_refused_nearly_always_and_never_silently_for_the_odd_bit_layouts():
    made = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    value = seqid_orm.comb_at(made, Layout.TIME_FIRST, bound="min")
    refused = 0
    for key in _wrong_keys(2_000, b"uuid7"):
        try:
            got = unmask(mask(value, KEY), key)
        except UnmaskError:
            refused += 1
        else:
            assert got != value
    # A random 48-bit time lies before tomorrow about once in 160: expect ~12 misses in 2,000.
    assert refused >= 1_960
    for layout in (Layout.TIME_LAST, Layout.TIME_FIRST_LE):  # the spare bit and the time: both checked
        value = seqid_orm.comb_at(made, layout, bound="min")  # fixed bits: the same run every time
        misses = 0
        for key in _wrong_keys(1_000, layout.value.encode()):
            try:
                unmask(mask(value, KEY), key, layout=layout)
                misses += 1
            except UnmaskError:
                pass
        assert misses <= 10  # both checks pass for about one wrong key in 320: ~3 in 1,000


def test_an_id_from_the_future_is_refused_as_the_sign_of_a_wrong_key():
    value = comb_at(dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=23))
    assert unmask(mask(value, KEY), KEY) == value
    later = comb_at(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2))
    with pytest.raises(UnmaskError, match="in the future"):
        unmask(mask(later, KEY), KEY)


def test_the_wrong_layout_is_refused():
    """Unmasked as another layout, an id decodes to a random time, which is refused as "in the
    future" unless it happens to fall before now: about 0.6 % of ids (now / 2**48 ms), so this
    asserts a rate over 1,000 ids (one id asserted alone failed that often) and that an id let
    through is never the original."""
    refused = 0
    for _ in range(1_000):
        value = seqid_orm.comb(Layout.TIME_LAST)
        try:
            wrong = unmask(mask(value, KEY), KEY, layout=Layout.TIME_FIRST_LE)
        except UnmaskError:
            refused += 1
        else:
            assert wrong != value
    assert refused >= 970


def test_unmask_any_finds_the_rotated_key():
    """Each key's candidate comes in the keys' order; a wrong key yields one only when unmask() cannot
    tell (about 0.6 % of ids: 126 in 20,000 measured), so the exact answer is [value] almost always.
    (It was asserted exact for one id, which failed that often.)"""
    exact = 0
    for _ in range(500):
        value = seqid_orm.uuid7()
        old = unmask_any(mask(value, OTHER), [KEY, OTHER])
        new = unmask_any(mask(value, KEY), [KEY, OTHER])
        assert old[-1] == value and len(old) <= 2  # the right key's candidate, after a wrong key's, if any
        assert new[0] == value and len(new) <= 2
        exact += old == [value] and new == [value]
    assert exact >= 475  # the wrong key's candidate is rare


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: mask(seqid_orm.uuid7(), b"short"), InvalidArgumentError, "at least 16 bytes"),
        (lambda: mask(seqid_orm.uuid7(), "a text key of 32 characters ...."), ArgumentTypeError, "bytes"),
        (lambda: mask(uuid.uuid1(), KEY), InvalidIDError, "mask\\(\\) takes"),
        (lambda: mask("not a uuid", KEY), InvalidIDError, "UUID"),
        (lambda: mask(12, KEY), ArgumentTypeError, "uuid.UUID"),
        (lambda: unmask(seqid_orm.uuid7(), KEY), UnmaskError, "not a masked id"),
        (lambda: unmask(uuid.uuid4(), KEY, layout="nope"), InvalidArgumentError, "layout"),
    ],
)
def test_bad_input_raises_a_typed_error_that_names_it(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_the_mask_is_stable_for_a_key_across_processes():
    """A fixed vector: the public id of a row must not change between releases (or links break)."""
    value = uuid.UUID("017f22e2-79b0-7cc3-98c4-dc0c0c07398f")  # RFC 9562 appendix A.6
    assert mask(value, KEY) == mask(value, bytes(KEY))
    assert str(mask(value, KEY)) == MASK_OF_RFC_VECTOR


MASK_OF_RFC_VECTOR = "854c08ca-fc48-43aa-b780-03fcfa50baa8"  # computed once with the first release of mask()
