"""Pydantic v2 types for seqid's ids, validated exactly as the ORM types validate them.

Needs the ``pydantic`` extra; may import ``ids``, ``public`` and ``errors`` of the core.

``SeqUUID``: every UUID seqid makes (Pydantic's own ``UUID7`` refuses the ``time_last`` and
``time_first_le`` layouts, which are not version 7).  ``SnowflakeID``: a 64-bit integer key (a
Snowflake or a ticket id) that JSON carries as a *string*, because JavaScript's numbers lose
precision above 2**53.  ``SortableText``: bsv or base32 text.  ``public_id(key)``: a UUID key that
the outside world sees masked (:func:`seqid_orm.mask`).

Validation errors are Pydantic's ``ValidationError`` carrying seqid's message (a ``value_error``)::

    class Order(BaseModel):
        id: SnowflakeID
    Order(id=7).model_dump_json()  # '{"id":"7"}'

Needs the ``pydantic`` extra (Pydantic >= 2).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Annotated, Any

try:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
except ImportError as exc:  # say which extra brings it, not just "No module named pydantic"
    raise ImportError("seqid_orm.pydantic needs Pydantic 2: pip install 'seqid-orm[pydantic]'") from exc
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from .errors import InvalidArgumentError, InvalidIDError, SeqIDError
from .ids.layout import Layout, as_layout
from .ids.text import BASE32_LENGTH, BSV_ALPHABET, BSV_LENGTH, BSV_PAD, CROCKFORD_ALPHABET, check_text_id
from .ids.validate import BIGINT_MAX, coerce_int_id, coerce_uuid
from .public.masking import MaskedLayout, mask, unmask_any

__all__ = ["SeqUUID", "SnowflakeID", "SortableText", "public_id"]


def _as_pydantic_error(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Run ``check``; seqid's typed errors (some are TypeErrors) become Pydantic's ``value_error``."""

    def validate(value: Any) -> Any:
        try:
            return check(value)
        except SeqIDError as exc:
            raise PydanticCustomError("value_error", "Value error, {error}", {"error": str(exc)}) from None

    return validate


class _IdType:
    """An ``Annotated`` marker: a plain validator (``strict``: the core schema strict mode uses instead),
    a JSON serializer, a JSON schema."""

    def __init__(
        self,
        check: Callable[[Any], Any],
        to_json: Callable[[Any], Any],
        schema: dict[str, Any],
        strict: core_schema.CoreSchema | None = None,
    ) -> None:
        self.check, self.to_json, self.schema, self.strict = check, to_json, schema, strict

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        serialization = core_schema.plain_serializer_function_ser_schema(self.to_json, when_used="json")
        lax = core_schema.no_info_plain_validator_function(_as_pydantic_error(self.check))
        if self.strict is None:
            return core_schema.no_info_plain_validator_function(
                _as_pydantic_error(self.check), serialization=serialization
            )
        # strict mode in Python takes the strict schema; JSON keeps the lax one (its text is how the id travels)
        return core_schema.json_or_python_schema(
            json_schema=lax,
            python_schema=core_schema.lax_or_strict_schema(lax_schema=lax, strict_schema=self.strict),
            serialization=serialization,
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return dict(self.schema)


def _check_sortable(value: Any) -> str:
    if isinstance(value, str) and len(value) == BASE32_LENGTH:
        return check_text_id(value, "base32")
    return check_text_id(value, "bsv")


_BSV_PATTERN = "^[" + "".join("\\" + c if c in "$-" else c for c in BSV_ALPHABET) + "\\" + BSV_PAD + "]{32}$"


class _SeqUUIDType:
    """``SeqUUID``'s marker: Pydantic's own UUID schema, with a description in the JSON schema."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return handler(uuid.UUID)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = dict(handler(schema))
        found.setdefault("description", "a seqid time-ordered UUID")
        return found


SeqUUID = Annotated[uuid.UUID, _SeqUUIDType()]
"""A UUID primary key of any layout seqid makes, validated as Pydantic validates ``uuid.UUID``;
JSON: its canonical text."""

SnowflakeID = Annotated[
    int,
    _IdType(
        lambda v: coerce_int_id(v, "a Snowflake id"),
        str,
        {
            "type": "string",
            "pattern": "^[0-9]{1,19}$",
            "format": "int64",
            "description": f"a 64-bit id (0 to {BIGINT_MAX}) as decimal text: JSON numbers lose digits above 2**53",
        },
        strict=core_schema.int_schema(strict=True, ge=0, le=BIGINT_MAX),
    ),
]
"""A 64-bit integer key (Snowflake, ticket): an ``int`` in Python, a decimal string in JSON."""

SortableText = Annotated[
    str,
    _IdType(
        _check_sortable,
        str,
        {
            "anyOf": [
                {"type": "string", "pattern": _BSV_PATTERN, "description": "bsv: 32 characters, binary order"},
                {
                    "type": "string",
                    "pattern": f"^[{CROCKFORD_ALPHABET}{CROCKFORD_ALPHABET.lower()}]{{{BASE32_LENGTH}}}$",
                    "description": "Crockford base32, 26 characters",
                },
            ],
            "description": f"a seqid sortable text id ({BSV_LENGTH} or {BASE32_LENGTH} characters)",
        },
    ),
]
"""Sortable text: a 32-character bsv id or a 26-character base32 (ULID-form) id."""


def public_id(
    keys: bytes | Sequence[bytes], layout: MaskedLayout | str = Layout.TIME_FIRST
) -> Any:  # an Annotated type; Any so that it can stand in annotations
    """A UUID key the world sees masked: JSON and text in, the real key out; the real key in, JSON masked.

    ``keys``: the mask key, or several (newest first) while rotating: the newest masks, every
    one is tried to unmask.  ``layout``: the layout of the ids (as in :func:`seqid_orm.unmask`).
    A ``uuid.UUID`` given in Python is taken as the real key (a row read from the database); text
    (a URL, a JSON body) is the public form and is unmasked.
    """
    key_list = [keys] if isinstance(keys, (bytes, bytearray)) else list(keys)
    if not key_list:
        raise InvalidArgumentError("public_id() needs at least one key")
    for key in key_list:
        mask(uuid.UUID(int=(7 << 76) | (0b10 << 62)), key)  # refuse a bad key now, not per request
    lay: MaskedLayout = "prefixed" if layout == "prefixed" else as_layout(layout)

    def check(value: Any) -> uuid.UUID:
        if isinstance(value, uuid.UUID):
            return coerce_uuid(value)
        found = unmask_any(coerce_uuid(value), key_list, layout=lay)
        if len(found) == 1:
            return found[0]
        if not found:
            raise InvalidIDError(f"{value} is not a public id of these keys")
        # While keys rotate, a wrong key can pass unmask's checks (rarely): only a lookup can tell
        # which candidate is a row (the ORM helpers do it); guessing here could name another row.
        raise InvalidIDError(f"{value} is ambiguous under the rotating keys: look it up with seqid_orm.unmask_any()")

    return Annotated[
        uuid.UUID,
        _IdType(
            check,
            lambda value: str(mask(value, key_list[0])),
            {"type": "string", "format": "uuid", "description": "a public id (masked; reveals no time)"},
        ),
    ]
