"""uuidv47 as the reference C header computes it: SipHash-2-4 against the vectors its tests.c checks
(the SipHash paper's, key 00..0f, messages 00..n-1), and façades the header itself made for the
v7 ids its tests.c crafts (key k0=0x0123456789abcdef, k1=0xfedcba9876543210), for its README's
example, and under the PostgreSQL extension's test key; then the round trip for any UUIDv7."""

from __future__ import annotations

import doctest
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import uuid7
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError
from seqid_orm.public import uuidv47 as uuidv47_module
from seqid_orm.public.uuidv47 import mask_uuidv47, siphash24, unmask_uuidv47

# tests.c: test_siphash_switch_and_vectors_subset, the outputs as little-endian bytes
SIPHASH_VECTORS = [
    "310e0edd47db6f72", "fd67dc93c539f874", "5a4fa9d909806c0d", "2d7efbd796666785", "b7877127e09427cf",
    "8da699cd64557618", "cee3fe586e46c9cb", "37d1018bf50002ab", "6224939a79f5f593", "b0e4a90bdf82009e",
    "f3b9dd94c5bb5d7a", "a7ad6b22462fb3f4", "fbe50e86bc8f1e75",
]  # fmt: skip
TESTS_C_KEY = (0x0123456789ABCDEF).to_bytes(8, "little") + (0xFEDCBA9876543210).to_bytes(8, "little")
PG_TEST_KEY = bytes.fromhex("00112233445566778899aabbccddeeff")  # SET uuid47.key in test_uuid47.sql

# Made by the reference header (uuidv47.h at 81ba63f) with a driver calling uuidv47_encode_v4facade
# on tests.c's craft_v7(ts = 0x100000 * i + 123, rand_a = 0x0AAA ^ 7i, rand_b = 0x0123456789ABCDEF ^
# 0x1111111111111111 * i), i = 0..15.
HEADER_FACADES = [
    ("00000000-007b-7aaa-8123-456789abcdef", "b108050e-46b6-4aaa-8123-456789abcdef"),
    ("00000010-007b-7aad-9032-547698badcfe", "bc75bd50-97ef-4aad-9032-547698badcfe"),
    ("00000020-007b-7aa4-a301-6745ab89efcd", "a3e09c87-bf85-4aa4-a301-6745ab89efcd"),
    ("00000030-007b-7abf-b210-7654ba98fedc", "4a643a79-6975-4abf-b210-7654ba98fedc"),
    ("00000040-007b-7ab6-8567-0123cdef89ab", "ba071f02-23bd-4ab6-8567-0123cdef89ab"),
    ("00000050-007b-7a89-9476-1032dcfe98ba", "b215242c-6fb1-4a89-9476-1032dcfe98ba"),
    ("00000060-007b-7a80-a745-2301efcdab89", "e8e788cf-ded6-4a80-a745-2301efcdab89"),
    ("00000070-007b-7a9b-b654-3210fedcba98", "3d4b88de-ece3-4a9b-b654-3210fedcba98"),
    ("00000080-007b-7a92-89ab-cdef01234567", "9d9bd354-51fe-4a92-89ab-cdef01234567"),
    ("00000090-007b-7a95-98ba-dcfe10325476", "f261fb3c-8b2e-4a95-98ba-dcfe10325476"),
    ("000000a0-007b-7aec-ab89-efcd23016745", "31c34e74-1771-4aec-ab89-efcd23016745"),
    ("000000b0-007b-7ae7-ba98-fedc32107654", "928f4297-9c9b-4ae7-ba98-fedc32107654"),
    ("000000c0-007b-7afe-8def-89ab45670123", "b8c1b1f0-8831-4afe-8def-89ab45670123"),
    ("000000d0-007b-7af1-9cfe-98ba54761032", "3994c161-2a72-4af1-9cfe-98ba54761032"),
    ("000000e0-007b-7ac8-afcd-ab8967452301", "fae6e510-f8b5-4ac8-afcd-ab8967452301"),
    ("000000f0-007b-7ac3-bedc-ba9876543210", "ce171cbd-d0f1-4ac3-bedc-ba9876543210"),
    ("00000000-0000-7000-8000-000000000000", "22d97126-9609-4000-8000-000000000000"),  # its README's
]
PG_KEY_FACADES = [
    ("01890a5d-ac96-774b-bcce-b302099a8057", "cf91d7da-5a8e-474b-bcce-b302099a8057"),
    ("019ab3c4-2e10-7f00-9abc-def012345678", "81bd66ac-54a1-4f00-9abc-def012345678"),
]


@pytest.mark.parametrize("length", range(len(SIPHASH_VECTORS)))
def test_siphash24_gives_the_reference_vectors(length):
    k0, k1 = 0x0706050403020100, 0x0F0E0D0C0B0A0908
    assert siphash24(bytes(range(length)), k0, k1) == int.from_bytes(bytes.fromhex(SIPHASH_VECTORS[length]), "little")


@pytest.mark.parametrize(("v7", "facade"), HEADER_FACADES)
def test_the_facades_the_c_header_makes(v7, facade):
    assert mask_uuidv47(uuid.UUID(v7), TESTS_C_KEY) == uuid.UUID(facade)
    assert unmask_uuidv47(facade, TESTS_C_KEY) == uuid.UUID(v7)


@pytest.mark.parametrize(("v7", "facade"), PG_KEY_FACADES)
def test_the_postgresql_extensions_key_reads_k0_then_k1_little_endian(v7, facade):
    assert mask_uuidv47(v7, PG_TEST_KEY) == uuid.UUID(facade)
    assert unmask_uuidv47(uuid.UUID(facade), PG_TEST_KEY) == uuid.UUID(v7)


@given(st.binary(min_size=16, max_size=16))
def test_any_uuidv7_goes_to_a_version_4_and_back(key):
    for value in (uuid7() for _ in range(20)):
        public = mask_uuidv47(value, key)
        assert public.version == 4 and public.variant == uuid.RFC_4122
        assert public.int & ((1 << 76) - 1) == value.int & ((1 << 76) - 1)  # the random bits, shown as stored
        assert unmask_uuidv47(public, key) == value
        wrong = bytes([key[0] ^ 1]) + key[1:]
        assert unmask_uuidv47(public, wrong) != value  # tests.c: a wrong key gives another id


def test_refusals_are_typed():
    with pytest.raises(InvalidIDError, match="version 7"):
        mask_uuidv47(uuid.uuid4(), TESTS_C_KEY)
    with pytest.raises(InvalidIDError, match="version 4"):
        unmask_uuidv47(uuid7(), TESTS_C_KEY)
    with pytest.raises(InvalidArgumentError, match="16 bytes"):
        mask_uuidv47(uuid7(), b"short")
    with pytest.raises(ArgumentTypeError, match="bytes"):
        mask_uuidv47(uuid7(), "00112233445566778899aabbccddeeff")  # type: ignore[arg-type]


def test_the_module_examples_run():
    result = doctest.testmod(uuidv47_module)
    assert result.attempted >= 4 and result.failed == 0
