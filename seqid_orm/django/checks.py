"""System checks of the ``seqid_orm.django`` app about models seqid does not own (imports Django and
:mod:`seqid_orm.django.fields`).

``seqid.W004``: a primary key ``UUIDField`` filled by ``uuid.uuid4`` (or ``uuid.uuid1``), the key seqid
exists to replace.  Random keys land all over the primary key's B-tree: every insert touches a
random leaf page, so the index stops fitting in memory long before the table does, pages split
half empty, and PostgreSQL writes a full page image into the WAL for the first change of each page
after a checkpoint (see the README's measurements).  The checks of seqid's own fields
(``seqid.E001``-``E004``, ``W001``-``W003``) live beside those fields.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.core import checks
from django.db import models

from .fields import SeqUUIDField

__all__ = ["random_uuid_keys"]

_RANDOM = {uuid.uuid4: "uuid.uuid4", uuid.uuid1: "uuid.uuid1"}


def random_uuid_keys(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``seqid.W004`` for each model whose primary key is a ``UUIDField`` with a random default."""
    if app_configs is not None:
        return check_models(m for config in app_configs for m in config.get_models())
    return check_models(apps.get_models())


def check_models(found: Iterable[type[models.Model]]) -> list[checks.CheckMessage]:
    """:func:`random_uuid_keys` over the given models (tests pass models of an isolated registry)."""
    messages: list[checks.CheckMessage] = []
    for model in found:
        meta = model._meta
        pk = meta.pk
        if meta.proxy or meta.swapped or pk is None or pk.model is not model:
            continue  # a proxy or a child shares its parent's key: warned once, on the parent
        if not isinstance(pk, models.UUIDField) or isinstance(pk, SeqUUIDField):
            continue
        default = _RANDOM.get(pk.default)
        if default is None:
            continue
        messages.append(
            checks.Warning(
                f"{meta.label}.{pk.name} is a UUIDField primary key filled by {default}(): random keys "
                "scatter inserts over the whole primary-key index (page splits, an index that outgrows "
                "memory, more WAL).",
                hint=(
                    "Use seqid_orm.django.SeqUUIDField(primary_key=True, editable=False) instead: "
                    "makemigrations writes one AlterField, which runs no SQL on PostgreSQL and MariaDB "
                    "(SQLite copies the table, as for any change of a default); existing rows keep their "
                    "ids, new ones are time-ordered. Silence with SILENCED_SYSTEM_CHECKS = ['seqid.W004']."
                ),
                obj=pk,
                id="seqid.W004",
            )
        )
    return messages
