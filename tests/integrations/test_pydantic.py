"""seqid_orm.pydantic: the same acceptance as the ORM types, JSON that JavaScript reads exactly."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

import seqid_orm
from seqid_orm import Layout, SeqIDError, Snowflake, mask
from seqid_orm.errors import InvalidArgumentError
from seqid_orm.ids.validate import coerce_int_id
from seqid_orm.pydantic import SeqUUID, SnowflakeID, SortableText, public_id

KEY = bytes(range(16, 48))
OLD = bytes(range(48, 80))


class Order(BaseModel):
    id: SeqUUID
    snowflake: SnowflakeID
    code: SortableText | None = None


@pytest.mark.parametrize("layout", list(Layout))
def test_every_layout_seqid_makes_is_accepted(layout):
    value = seqid_orm.comb(layout)
    assert TypeAdapter(SeqUUID).validate_python(value) == value
    assert TypeAdapter(SeqUUID).validate_json(json.dumps(str(value))) == value
    if layout in (Layout.TIME_LAST, Layout.TIME_FIRST_LE):  # not version 7: Pydantic's UUID7 refuses them
        from pydantic import UUID7

        with pytest.raises(ValidationError):
            TypeAdapter(UUID7).validate_python(value)


def _orm_verdict(check, value):
    try:
        return ("ok", check(value))
    except SeqIDError:
        return ("refused", None)


def _pydantic_verdict(annotation, value, **options):
    try:
        return ("ok", TypeAdapter(annotation).validate_python(value, **options))
    except ValidationError as exc:
        return ("refused", [(e["type"], e["msg"]) for e in exc.errors()])


@given(
    st.one_of(
        st.text(max_size=40),
        st.uuids().map(str),
        st.uuids().map(lambda u: u.hex),
        st.uuids().map(lambda u: "{" + str(u) + "}"),
        st.uuids().map(lambda u: u.urn),
        st.uuids().map(lambda u: u.bytes),
        st.uuids(),
        st.integers(),
        st.binary(max_size=20),
        st.none(),
    ),
    st.booleans(),
)
def test_seq_uuid_is_a_drop_in_for_pydantics_uuid(value, strict):
    """The same answer as ``uuid.UUID`` for every input, lax and strict, with the same error types and messages."""
    assert _pydantic_verdict(SeqUUID, value, strict=strict) == _pydantic_verdict(uuid.UUID, value, strict=strict)


def test_seq_uuid_in_json_and_in_a_strict_model_as_pydantic_does():
    from pydantic import ConfigDict

    class Strict(BaseModel):
        model_config = ConfigDict(strict=True)
        id: SeqUUID

    value = seqid_orm.uuid7()
    with pytest.raises(ValidationError) as caught:
        Strict(id=str(value))
    assert caught.value.errors()[0]["type"] == "is_instance_of"
    assert Strict.model_validate_json(json.dumps({"id": str(value)})).id == value  # JSON has no UUID type
    with pytest.raises(ValidationError) as caught:
        TypeAdapter(SeqUUID).validate_python("zzz")
    assert caught.value.errors()[0]["type"] == "uuid_parsing"


@given(
    st.one_of(
        st.integers(-(2**64), 2**64),
        st.integers(0, 2**63 - 1).map(str),
        st.text(max_size=25),
        st.booleans(),
        st.floats(allow_nan=False),
    )
)
def test_snowflake_id_accepts_exactly_what_the_orm_type_accepts(value):
    verdict = _orm_verdict(lambda v: coerce_int_id(v, "a Snowflake id"), value)
    try:
        got = ("ok", TypeAdapter(SnowflakeID).validate_python(value))
    except ValidationError:
        got = ("refused", None)
    assert got == verdict


def test_snowflake_ids_travel_as_strings_so_javascript_keeps_every_digit():
    gen = Snowflake(worker_id=5)
    ids = [gen.next_id() for _ in range(1000)]
    assert sum(int(float(i)) != i for i in ids) > 900  # what a JavaScript number (a double) would make of them
    for i in ids[:50]:
        order = Order(id=seqid_orm.uuid7(), snowflake=i)
        body = json.loads(order.model_dump_json())
        assert body["snowflake"] == str(i)
        assert Order.model_validate_json(order.model_dump_json()) == order
        assert order.model_dump()["snowflake"] == i  # Python keeps the int


def test_snowflake_id_in_strict_mode_takes_an_int_and_its_json_text():
    from pydantic import ConfigDict

    class Strict(BaseModel):
        model_config = ConfigDict(strict=True)
        id: SnowflakeID

    assert Strict(id=7).id == 7 and Strict.model_validate_json('{"id": "7"}').id == 7
    for bad, kind in (("7", "int_type"), (True, "int_type"), (-1, "greater_than_equal"), (2**63, "less_than_equal")):
        with pytest.raises(ValidationError) as caught:
            Strict(id=bad)
        assert caught.value.errors()[0]["type"] == kind
    with pytest.raises(ValidationError):
        TypeAdapter(SnowflakeID).validate_python("7", strict=True)


def test_errors_carry_seqids_message_as_a_value_error():
    with pytest.raises(ValidationError) as caught:
        Order(id=seqid_orm.uuid7(), snowflake="x1")
    assert caught.value.errors()[0]["type"] == "value_error"
    with pytest.raises(ValidationError, match="between 0 and 2\\*\\*63-1"):
        Order(id=seqid_orm.uuid7(), snowflake=2**63)
    with pytest.raises(ValidationError, match="must be an int, got bool"):
        Order(id=seqid_orm.uuid7(), snowflake=True)
    with pytest.raises(ValidationError, match=r"UUID input should be a string, bytes or UUID object"):
        Order(id=12, snowflake=1)  # Pydantic's own words for uuid.UUID
    with pytest.raises(ValidationError, match="bsv id has 32 characters"):
        Order(id=seqid_orm.uuid7(), snowflake=1, code="short")


def test_sortable_text_of_both_kinds():
    b, c = seqid_orm.bsv(), seqid_orm.base32()
    assert TypeAdapter(SortableText).validate_python(b) == b
    assert TypeAdapter(SortableText).validate_python(c.lower()) == c  # Crockford is case-insensitive
    with pytest.raises(ValidationError):
        TypeAdapter(SortableText).validate_python(b[:-1] + "!")


def test_the_json_schema_says_what_travels():
    schema = Order.model_json_schema()
    props = schema["properties"]
    assert props["id"]["format"] == "uuid" and props["id"]["type"] == "string"
    assert props["snowflake"]["type"] == "string" and props["snowflake"]["pattern"] == "^[0-9]{1,19}$"
    import re

    bsv_pattern = props["code"]["anyOf"][0]["anyOf"][0]["pattern"]
    assert re.fullmatch(bsv_pattern, seqid_orm.bsv())
    crockford = props["code"]["anyOf"][0]["anyOf"][1]["pattern"]
    assert re.fullmatch(crockford, seqid_orm.base32())


def test_a_public_id_is_masked_in_json_and_unmasked_on_the_way_in():
    Public = public_id(KEY)

    class User(BaseModel):
        id: Public

    real = seqid_orm.uuid7()
    user = User(id=real)  # from the database: the real key
    body = json.loads(user.model_dump_json())
    assert body["id"] == str(mask(real, KEY)) and uuid.UUID(body["id"]).version == 4
    assert User.model_validate_json(user.model_dump_json()).id == real  # the public form comes back as the key
    assert user.model_dump()["id"] == real
    # Another key's mask is refused, as far as unmask() can tell: a wrong key passes its time check
    # when the random time it yields lies before now, about once in 160 (a loaded run met one).
    # So over 200 ids: refused with this message, or (rarely) taken, never anything else.
    refused = 0
    for _ in range(200):
        try:
            User.model_validate_json(json.dumps({"id": str(mask(seqid_orm.uuid7(), OLD))}))
        except ValidationError as exc:
            assert "not a public id" in str(exc)
            refused += 1
    assert refused >= 190  # expected about 199


def test_a_public_id_during_key_rotation_accepts_old_masks_and_writes_new_ones():
    Public = public_id([KEY, OLD])

    class User(BaseModel):
        id: Public

    # An old key's mask comes back as its key, unless the new key, tried first, passes unmask()'s
    # check too (about once in 160): then it is refused as ambiguous, never read as the wrong id.
    taken = 0
    for _ in range(200):
        real = seqid_orm.uuid7()
        try:
            assert User.model_validate_json(json.dumps({"id": str(mask(real, OLD))})).id == real
            taken += 1
        except ValidationError as exc:
            assert "ambiguous under the rotating keys" in str(exc)
        assert json.loads(User(id=real).model_dump_json())["id"] == str(mask(real, KEY))
    assert taken >= 190  # expected about 199


def test_public_id_refuses_bad_keys_when_declared():
    with pytest.raises(InvalidArgumentError, match="at least 16 bytes"):
        public_id(b"short")
    with pytest.raises(InvalidArgumentError, match="at least one key"):
        public_id([])
