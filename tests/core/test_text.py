"""Sortable text ids: bsv and Crockford base32 round trips, order preservation, errors."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import InvalidIDError, base32, bsv
from seqid_orm.ids.text import (
    BSV_ALPHABET,
    BsvGenerator,
    bsv_parts,
    decode_base32,
    decode_bsv,
    encode_base32,
    encode_bsv,
)

UTC = dt.timezone.utc


def test_bsv_alphabet_is_in_ascii_order_and_matches_the_seed():
    assert list(BSV_ALPHABET) == sorted(BSV_ALPHABET)
    assert len(set(BSV_ALPHABET)) == 64
    # seed 004 maps base64's A, B, C, Z, a, z, 0, 9, +, / to $ - 0 N O n o x y z
    assert encode_bsv(bytes([0b00000000, 0b00010000, 0b10000011])) == "$-0" + BSV_ALPHABET[3]
    assert encode_bsv(b"\xff\xff\xff") == "zzzz"
    assert encode_bsv(b"\x00") == "$$!!"


@given(st.binary(min_size=0, max_size=40))
def test_bsv_round_trip(data):
    assert decode_bsv(encode_bsv(data)) == data


@given(st.binary(min_size=24, max_size=24), st.binary(min_size=24, max_size=24))
def test_bsv_text_order_equals_byte_order(a, b):
    assert (encode_bsv(a) < encode_bsv(b)) == (a < b)


@given(st.integers(0, 2**128 - 1))
def test_base32_round_trip(n):
    text = encode_base32(n)
    assert len(text) == 26
    assert decode_base32(text).int == n
    assert decode_base32(text.lower()).int == n


@given(st.integers(0, 2**128 - 1), st.integers(0, 2**128 - 1))
def test_base32_text_order_equals_value_order(a, b):
    assert (encode_base32(a) < encode_base32(b)) == (a < b)


@given(st.uuids())
def test_base32_agrees_with_python_ulid(u):
    ulid = pytest.importorskip("ulid")
    assert encode_base32(u) == str(ulid.ULID.from_uuid(u))


def test_bsv_ids_are_32_chars_strictly_increasing_and_carry_their_time():
    before = dt.datetime.now(UTC)
    values = [bsv() for _ in range(5000)]
    after = dt.datetime.now(UTC)
    assert all(len(v) == 32 for v in values)
    assert all(a < b for a, b in itertools.pairwise(values))
    stamp, rnd = bsv_parts(values[0])
    assert before - dt.timedelta(milliseconds=1) <= stamp <= after
    assert len(rnd) == 16


def test_bsv_clock_stepping_back_never_goes_backwards():
    ns = [1_700_000_000_000_000_000]
    gen = BsvGenerator(clock=lambda: ns[0])
    a = gen()
    ns[0] -= 10**9
    b = gen()
    assert b > a


def test_base32_ids_are_ulids_of_uuid7():
    values = [base32() for _ in range(1000)]
    assert values == sorted(values)
    assert all(decode_base32(v).version == 7 for v in values)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0" * 25, "26 characters"),
        ("8" + "0" * 25, "exceeds 128 bits"),
        ("0" * 25 + "U", "outside Crockford"),
        ("0" * 25 + "L", "outside Crockford"),
        ("0" * 25 + "-", "outside Crockford"),
    ],
)
def test_base32_rejects_bad_text(text, match):
    with pytest.raises(InvalidIDError, match=match):
        decode_base32(text)


def test_bad_input_types_and_text_are_refused():
    with pytest.raises(TypeError):
        decode_base32(123)
    with pytest.raises(TypeError):
        encode_base32("abc")
    with pytest.raises(InvalidIDError, match="16 bytes"):
        encode_base32(b"123")
    with pytest.raises(InvalidIDError, match="128-bit"):
        encode_base32(-1)
    with pytest.raises(InvalidIDError, match="outside its alphabet"):
        decode_bsv("+" * 32)
    with pytest.raises(InvalidIDError, match="multiple of 4"):
        decode_bsv("$$$")
    with pytest.raises(InvalidIDError, match="32 characters"):
        bsv_parts("$$$$")
    with pytest.raises(TypeError):
        encode_bsv("text")
    assert encode_base32(uuid.UUID(int=0)) == "0" * 26
