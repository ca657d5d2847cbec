"""The optional Django app ``seqid_orm.django``: the tables of seqid's allocation backends.

Add ``"seqid_orm.django"`` to ``INSTALLED_APPS`` and run ``migrate`` to create the ticket table
that :class:`~seqid_orm.django.TicketField` (and SQLAlchemy processes sharing the database) draw
from, and to have ``manage.py check`` point at random UUID keys (``seqid.W004``).  The fields
themselves work without the app.
"""

from __future__ import annotations

from django.apps import AppConfig


class SeqIDConfig(AppConfig):
    name = "seqid_orm.django"
    label = "seqid"
    verbose_name = "seqid_orm"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        from .checks import random_uuid_keys
        from .swap import swap_random_keys

        # seqid.W004: the models whose keys seqid exists to replace (random UUIDField keys)
        checks.register(random_uuid_keys, checks.Tags.models)
        # SEQID["SWAP_RANDOM_KEY_APPS"]: those keys of apps the project cannot edit, time-ordered
        swap_random_keys()
        # Django REST framework, when installed: seqid's 64-bit keys travel as JSON strings
        # (seqid_orm.django.rest_framework explains why).
        try:
            import rest_framework  # noqa: F401
        except ImportError:
            return
        from .rest_framework import register

        register()
