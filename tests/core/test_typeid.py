"""TypeID against the specification's own conformance files (tests/vectors/typeid, as published):
every valid case decodes to its prefix and UUID and encodes back to the same text; every invalid
case is refused with seqid's typed error."""

from __future__ import annotations

import doctest
import json
import pathlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqid_orm import typeid
from seqid_orm.errors import ArgumentTypeError, InvalidArgumentError, InvalidIDError
from seqid_orm.ids import typeid as typeid_module
from seqid_orm.ids.typeid import decode_typeid, encode_typeid

SPEC = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "typeid"
VALID = json.loads((SPEC / "valid.json").read_text())
INVALID = json.loads((SPEC / "invalid.json").read_text())


def test_the_specification_files_are_the_published_ones():
    assert len(VALID) == 9 and len(INVALID) >= 19
    assert {"max-valid", "valid-uuidv7", "prefix-underscore"} <= {case["name"] for case in VALID}


@pytest.mark.parametrize("case", VALID, ids=[c["name"] for c in VALID])
def test_every_valid_case_decodes_and_encodes_back(case):
    expected = uuid.UUID(case["uuid"])
    assert decode_typeid(case["typeid"]) == (case["prefix"], expected)
    assert encode_typeid(case["prefix"], expected) == case["typeid"]


@pytest.mark.parametrize("case", INVALID, ids=[c["name"] for c in INVALID])
def test_every_invalid_case_is_refused(case):
    with pytest.raises(InvalidIDError, match="TypeID"):
        decode_typeid(case["typeid"])


def test_new_typeids_carry_increasing_uuidv7s_and_sort_as_made():
    made = [typeid("user") for _ in range(2_000)]
    assert all(t.startswith("user_") and len(t) == 31 for t in made)
    keys = [decode_typeid(t, prefix="user")[1] for t in made]
    assert all(k.version == 7 for k in keys)
    assert keys == sorted(keys) and made == sorted(made)  # the suffix sorts as its UUID


@given(st.uuids(), st.from_regex(r"([a-z]([a-z_]{0,61}[a-z])?)?", fullmatch=True))
def test_any_uuid_under_any_valid_prefix_goes_there_and_back(value, prefix):
    assert decode_typeid(encode_typeid(prefix, value), prefix=prefix) == (prefix, value)


def test_refusals_are_typed_and_name_the_problem():
    good = "user_01h455vb4pex5vsknk084sn02q"
    with pytest.raises(InvalidIDError, match="type 'order' was expected, got type 'user'"):
        decode_typeid(good, prefix="order")
    with pytest.raises(ArgumentTypeError, match="must be a str"):
        decode_typeid(uuid.uuid4())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="lowercase ASCII"):
        encode_typeid("User", uuid.uuid4())
    with pytest.raises(InvalidArgumentError, match="at most 63"):
        typeid("a" * 64)
    with pytest.raises(ArgumentTypeError, match=r"uuid\.UUID"):
        encode_typeid("user", "01890a5d-ac96-774b-bcce-b302099a8057")  # type: ignore[arg-type]


def test_the_module_examples_run():
    result = doctest.testmod(typeid_module)
    assert result.attempted >= 3 and result.failed == 0
