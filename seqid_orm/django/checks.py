"""System checks of the ``seqid_orm.django`` app about models seqid does not own (imports Django and
:mod:`seqid_orm.django.fields`).

``seqid.W004``: a primary key filled by random UUIDs, the key seqid exists to replace: a
``UUIDField``, or a ``CharField`` holding UUID text, whose default is ``uuid.uuid4``, ``uuid.uuid1``
or a function of the project's that returns random UUIDs.  Random keys land all over the primary
key's B-tree: every insert touches a random leaf page, so the index stops fitting in memory long
before the table does, pages split half empty, and PostgreSQL writes a full page image into the WAL
for the first change of each page after a checkpoint (docs/benchmarks.md has the measurements).

``uuid.uuid1`` puts the low bits of its time first, so where the database compares a UUID from its
first byte (PostgreSQL, MariaDB, MySQL, SQLite, Oracle) its keys wrap every 429 seconds; SQL Server
compares the last six bytes first (the node, constant in one process) and then the time's high
bits, so there ``uuid1`` keys are in order and W004 is not raised for them.

A model of an installed package (site-packages) cannot be edited by its user: the warning says so
and names the setting that gives that app's keys time-ordered values without a migration,
``SEQID["SWAP_RANDOM_KEY_APPS"]`` (:mod:`.swap`), and the one that silences W004 for that app alone,
``SEQID["RANDOM_KEY_APPS"]``, rather than ``SILENCED_SYSTEM_CHECKS``, which would silence it for the
project's own models too.  The checks
of seqid's own fields (``seqid.E001``-``E005``, ``W001``-``W003``) live beside those fields.
"""

from __future__ import annotations

import sys
import types
import uuid
from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import connections, models, router

from ..ids.classify import as_uuid
from .fields import SeqUUIDField

__all__ = ["random_uuid_keys"]

_KNOWN = {uuid.uuid4: "uuid.uuid4", uuid.uuid1: "uuid.uuid1"}
_SETTING = "RANDOM_KEY_APPS"
_SWAP = "SWAP_RANDOM_KEY_APPS"  # seqid_orm.django.swap


def random_uuid_keys(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``seqid.W004`` for each model whose primary key is filled by random UUIDs."""
    if app_configs is not None:
        return check_models(m for config in app_configs for m in config.get_models())
    return check_models(apps.get_models())


def _random_default(default: object) -> str | None:
    """The name of ``default`` when it fills a key with random UUIDs, else ``None``.

    ``uuid.uuid4`` and ``uuid.uuid1`` are known by identity.  A plain function or lambda of the
    project's (``def new_id(): return uuid.uuid4().hex``) is called twice, as Django calls it for
    every new instance: two version-4 UUIDs, different, are random keys.  Anything else (a class, a
    bound method, a function that raises) is left alone: a check must not guess."""
    for known, name in _KNOWN.items():  # by identity: a default may be unhashable
        if default is known:
            return name
    if not isinstance(default, types.FunctionType):
        return None
    try:
        first, second = (as_uuid(default()) for _ in range(2))
    except Exception:  # a default that needs what a check does not have (a request, a database)
        return None
    if first is None or second is None or first == second or first.version != 4 or second.version != 4:
        return None
    return f"{default.__module__}.{default.__qualname__}"


def _installed_package(model: type[models.Model]) -> bool:
    """Whether ``model`` comes from an installed package (its user cannot edit it)."""
    path = getattr(sys.modules.get(model.__module__), "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path


def _vendor(model: type[models.Model]) -> str | None:
    """The vendor of the database ``model`` is written to (no connection is opened)."""
    try:
        return str(connections[router.db_for_write(model)].vendor)
    except Exception:  # a router or an alias that cannot answer at check time
        return None


def eligible_key(model: type[models.Model]) -> Any:
    """``model``'s primary key where random UUIDs fill it (W004's subject, and what
    ``SEQID["SWAP_RANDOM_KEY_APPS"]`` swaps), else ``None``."""
    meta = model._meta
    pk = meta.pk
    if meta.proxy or meta.swapped or pk is None or pk.model is not model:
        return None  # a proxy or a child shares its parent's key: warned once, on the parent
    if isinstance(pk, SeqUUIDField) or not isinstance(pk, (models.UUIDField, models.CharField)):
        return None
    default = _random_default(pk.default)
    if default is None or (default == "uuid.uuid1" and _vendor(model) == "microsoft"):
        return None
    return pk


def check_models(found: Iterable[type[models.Model]]) -> list[checks.CheckMessage]:
    """:func:`random_uuid_keys` over the given models (tests pass models of an isolated registry).
    The apps of ``SEQID["RANDOM_KEY_APPS"]`` (accepted) and ``SEQID["SWAP_RANDOM_KEY_APPS"]``
    (their keys made time-ordered, :mod:`.swap`) are left alone."""
    seqid = getattr(settings, "SEQID", {})
    allowed = {*seqid.get(_SETTING, ()), *seqid.get(_SWAP, ())}
    messages: list[checks.CheckMessage] = []
    for model in found:
        if model._meta.app_label in allowed:
            continue
        pk = eligible_key(model)
        if pk is not None:
            messages.append(_warning(model, pk, _random_default(pk.default) or ""))
    return messages


def _warning(model: type[models.Model], pk: Any, default: str) -> checks.Warning:
    meta = model._meta
    kind = "UUIDField" if isinstance(pk, models.UUIDField) else "CharField"
    why = (
        "random keys scatter inserts over the whole primary-key index (page splits, an index that outgrows "
        "memory, more WAL)"
        if default != "uuid.uuid1"
        else "uuid1 puts the low bits of its time first, so this database's index sees its keys wrap every "
        "429 seconds: inserts land all over the primary-key index"
    )
    silence = f'SEQID = {{"{_SETTING}": ["{meta.app_label}"]}} silences W004 for this app alone'
    if _installed_package(model):
        hint = (
            f"{meta.label} belongs to an installed package, which you cannot edit: "
            f'SEQID = {{"{_SWAP}": ["{meta.app_label}"]}} makes its new keys time-ordered with no migration '
            "(the field and its default stay as they are; read the app for keys it relies on being random "
            f"first), or ask its maintainers for a setting (django-simple-history has history_id_field), or {silence}."
        )
    else:
        change = (
            "makemigrations writes one AlterField, which runs no SQL on PostgreSQL and MariaDB (SQLite copies "
            "the table, as for any change of a default); existing rows keep their ids, new ones are time-ordered"
            if kind == "UUIDField"
            else "the column's type changes to uuid, a migration that rewrites the table and its foreign keys: "
            "run it as such"
        )
        hint = (
            f"Use seqid_orm.django.SeqUUIDField(primary_key=True, editable=False) instead: {change}. "
            f"Or {silence}; SILENCED_SYSTEM_CHECKS = ['seqid.W004'] silences it for every app."
        )
    return checks.Warning(
        f"{meta.label}.{pk.name} is a {kind} primary key filled by {default}(): {why}.",
        hint=hint,
        obj=pk,
        id="seqid.W004",
    )
