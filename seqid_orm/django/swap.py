"""``SEQID["SWAP_RANDOM_KEY_APPS"]``: time-ordered keys for the models of apps you cannot edit.

A third-party app's model (django-silk's ``Request``, django-q2's ``Task``) whose key is a
``UUIDField`` or ``CharField`` filled by ``uuid.uuid4`` is the key seqid exists to replace, but its
user cannot change the field in site-packages, and changing its ``default`` from the project makes
``makemigrations`` want a migration inside the package.  For each app named in this setting, seqid
leaves the field as it is (its ``default`` and ``deconstruct()``, so migrations see no change) and
replaces only what :meth:`~django.db.models.Field.get_default` returns: a time-ordered id in the
layout the model's database needs (:func:`~seqid_orm.django.connection.column_target`'s decision: the
app's table holds random keys, so where the engine splits inner pages half the new keys sort after
them), of the same type and text form as the default's own (a ``uuid.UUID``, 36 or 32 characters).

The field's default is the app's contract, and only its values change: every id is still a valid
UUID of the same form, version 7 (or seqid's layout for SQL Server and distributed SQL), which no
code can tell from a uuid4 by anything but its bits.  Opt in per app, after reading the app's code
for a place that relies on the randomness of its keys (a key used as a secret, say): those keys
would now carry their time.

May import Django and this folder's ``checks`` and ``connection``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connections, models, router

from ..vendors import Storage, Target
from .checks import eligible_key
from .connection import column_target, connection_target, field_target

__all__ = ["SETTING", "swap_random_keys"]

SETTING = "SWAP_RANDOM_KEY_APPS"


def swap_random_keys() -> list[str]:
    """Give every random key of the apps named in ``SEQID["SWAP_RANDOM_KEY_APPS"]`` time-ordered
    values (the app's ready() calls it once); the labels of the fields swapped."""
    wanted = set(getattr(settings, "SEQID", {}).get(SETTING, ()))
    swapped = []
    for model in apps.get_models():
        if model._meta.app_label not in wanted:
            continue
        pk = eligible_key(model)
        if pk is None:
            continue
        # Field.get_default() returns self._get_default(), a cached property holding the callable:
        # an instance attribute of the same name replaces it for this field alone
        pk.__dict__["_get_default"] = _time_ordered(model, pk, pk.default())
        swapped.append(f"{model._meta.label}.{pk.name}")
    return swapped


def _time_ordered(model: type[models.Model], field: Any, sample: object) -> Callable[[], object]:
    """A default of ``sample``'s type and form, time-ordered for the database ``model`` is written to."""
    as_text: Callable[[uuid.UUID], object]
    if isinstance(sample, str):
        storage = Storage.TEXT if len(sample) == 36 else Storage.HEX
        as_text = str if len(sample) == 36 else (lambda u: u.hex)
    else:
        storage = None
        as_text = lambda u: u  # noqa: E731
    written: dict[str, Target] = {}

    def new_id() -> object:
        alias = router.db_for_write(model)
        connection = connections[alias]
        where = written.get(alias)
        if where is None:
            # text keeps its own storage; a UUIDField's is its column type's, as for SeqUUIDField
            where = connection_target(connection, storage) if storage is not None else field_target(field, connection)
            written[alias] = where
        # and the column as its name resolves on this connection (its random keys: new ones must sort
        # after them where the engine needs it)
        return as_text(column_target(field, connection, where)[0].generator.id_function())

    return new_id
