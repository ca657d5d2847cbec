"""Django REST framework: 64-bit keys as JSON strings, public (masked) ids, a lookup for views.

JavaScript reads JSON numbers as doubles, exact only up to 2**53; a Snowflake id is above that
almost always (995 of 1,000 in a sample lost digits).  :class:`SnowflakeIDField` writes the id
as a string and reads either form, validating as the model field does.  With the ``seqid_orm.django``
app installed, every ``ModelSerializer`` maps seqid's integer keys (``SnowflakeField``,
``TicketField``) to it by itself; without the app, call :func:`register` once (for example in
your ``AppConfig.ready``).

:class:`PublicIdField` shows a UUID key masked (:func:`seqid_orm.mask`), and
:class:`PublicIdLookupMixin` lets a generic view find the row from the public id in its URL.
Needs ``djangorestframework``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import models
from django.http import Http404
from rest_framework import serializers

from ..errors import SeqIDError
from ..ids.validate import coerce_int_id, coerce_uuid
from ..public.masking import mask
from .fields import IntegerKeyField
from .public_ids import get_by_public_id

__all__ = ["PublicIdField", "PublicIdLookupMixin", "SnowflakeIDField", "register"]


class SnowflakeIDField(serializers.IntegerField):
    """A 64-bit integer key: a string in JSON, an ``int`` or its decimal text on the way in."""

    def to_representation(self, value: Any) -> str:
        return str(int(value))

    def to_internal_value(self, data: Any) -> int:
        try:
            return coerce_int_id(data, "an id")
        except SeqIDError as exc:
            raise serializers.ValidationError(str(exc), code="invalid") from None


def register() -> None:
    """Map seqid's integer key fields to :class:`SnowflakeIDField` in every ``ModelSerializer``."""
    serializers.ModelSerializer.serializer_field_mapping[IntegerKeyField] = SnowflakeIDField


class PublicIdField(serializers.Field):
    """A UUID key shown masked; a public id given in a request comes back as the real key.

    ``keys``: the mask key, or several (newest first) while rotating.  Accepted input is checked
    against the rows of the serializer's model (``model``, by default ``Meta.model``), so a
    public id from another key cannot name another row.
    """

    def __init__(self, keys: bytes | Sequence[bytes], *, model: Any = None, **kwargs: Any) -> None:
        self.keys = [keys] if isinstance(keys, (bytes, bytearray)) else list(keys)
        self.model = model
        for key in self.keys:  # a bad key fails when the serializer is declared, not per request
            mask(uuid.UUID(int=(7 << 76) | (0b10 << 62)), key)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str:
        if isinstance(value, models.Model):  # a relation (``author``) rather than its key
            value = value.pk
        return str(mask(value, self.keys[0]))

    def to_internal_value(self, data: Any) -> uuid.UUID:
        model = self.model or getattr(getattr(self.parent, "Meta", None), "model", None)
        if model is None:
            raise serializers.ValidationError("PublicIdField needs model= outside a ModelSerializer")
        try:
            coerce_uuid(data)
            row = get_by_public_id(model, data, self.keys)
        except (SeqIDError, model.DoesNotExist):
            raise serializers.ValidationError(f"{data!r} is not a public id of a {model.__name__}") from None
        return uuid.UUID(str(row.pk))


class PublicIdLookupMixin:
    """For generic views: the URL carries the public id (``lookup_url_kwarg``), not the key.

    Set ``public_id_keys`` on the view (newest first).  Unknown or malformed ids are a 404.
    """

    public_id_keys: Sequence[bytes] = ()
    lookup_url_kwarg: str | None = None
    lookup_field = "pk"

    def get_object(self) -> Any:
        view: Any = self
        url_kwarg = view.lookup_url_kwarg or view.lookup_field
        queryset = view.filter_queryset(view.get_queryset())
        try:
            obj = get_by_public_id(queryset, view.kwargs[url_kwarg], view.public_id_keys)
        except queryset.model.DoesNotExist:
            raise Http404(f"no {queryset.model.__name__} with this id") from None
        view.check_object_permissions(view.request, obj)
        return obj
