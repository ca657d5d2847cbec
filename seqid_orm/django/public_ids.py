"""Finding a row by its public (masked) id: the view side of :func:`seqid_orm.mask` for Django.

A view receives the public id (a URL segment, a JSON field); the database holds the real key.
:func:`get_by_public_id` unmasks it under each key (newest first, so keys can rotate), looks the
candidates up in one query and returns the row — a wrong key's candidate names no row, so a
lookup cannot return another row's data.  ``public_id_of`` is the other direction, for templates
and serializers.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import models, router

from ..ids.validate import coerce_uuid
from ..public.masking import MaskedLayout, mask, unmask_any

__all__ = ["get_by_public_id", "layout_of_field", "public_id_of"]


def _keys(keys: bytes | Sequence[bytes]) -> list[bytes]:
    return [keys] if isinstance(keys, (bytes, bytearray)) else list(keys)


def layout_of_field(model: type[models.Model], field_name: str = "pk") -> MaskedLayout:
    """The layout of the ids in ``model.field_name`` on the database the router reads it from."""
    field = model._meta.pk if field_name == "pk" else model._meta.get_field(field_name)
    alias = router.db_for_read(model) or "default"
    layout_for = getattr(field, "layout_for", None)
    if layout_for is None:
        return "prefixed"  # not a SeqUUIDField: a version-4 (wrapping-prefix) UUID
    result: MaskedLayout = layout_for(alias)
    return result


def public_id_of(instance: models.Model, keys: bytes | Sequence[bytes], field_name: str = "pk") -> uuid.UUID:
    """The public form of ``instance``'s key (masked with the newest key)."""
    value = instance.pk if field_name == "pk" else getattr(instance, field_name)
    return mask(value, _keys(keys)[0])


def get_by_public_id(
    queryset: models.QuerySet[Any] | type[models.Model],
    public: uuid.UUID | str,
    keys: bytes | Sequence[bytes],
    *,
    field_name: str = "pk",
) -> Any:
    """The row whose key ``public`` masks; ``Model.DoesNotExist`` when there is none.

    Bad text raises ``Model.DoesNotExist`` too (a public id in a URL is user input: a 404, not
    a 500).  With several keys every candidate is looked up in one query.
    """
    qs: Any = queryset._default_manager.all() if isinstance(queryset, type) else queryset  # type: ignore[attr-defined]
    model = qs.model
    try:
        candidates = unmask_any(coerce_uuid(public), _keys(keys), layout=layout_of_field(model, field_name))
    except ValueError:  # seqid's InvalidIDError and UnmaskError are ValueErrors
        candidates = []
    if not candidates:
        raise model.DoesNotExist(f"no {model.__name__} has the public id {public!r}")
    rows = list(qs.filter(**{f"{field_name}__in": candidates})[:2])
    if len(rows) != 1:  # two rows would take two keys' undetected collisions: refuse, never guess
        raise model.DoesNotExist(f"no single {model.__name__} has the public id {public!r}")
    return rows[0]
