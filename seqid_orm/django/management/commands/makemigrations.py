"""``python manage.py makemigrations``, which also writes the adoption of a swapped key.

Django's command, with :class:`~seqid_orm.django.migrating.SeqIDAutodetector`: an ``AlterField`` that
turns a field into a ``SeqUUIDField`` gets :class:`~seqid_orm.django.operations.AdoptSeqUUID` beside it,
and a ``SeqUUIDField`` added to a model with a table becomes the online
:class:`~seqid_orm.django.operations.AddSeqUUIDField` in a migration ``SeqIDMigrationWriter`` writes with
``atomic = False`` (:mod:`seqid_orm.django.migrating` says where and why).  Everything else is Django's own.
"""

from __future__ import annotations

from typing import Any

import django
from django.core.management.commands import makemigrations

from ...migrating import SeqIDAutodetector, SeqIDMigrationWriter


class Command(makemigrations.Command):
    autodetector = SeqIDAutodetector  # Django 5.2 and later read it

    def handle(self, *args: Any, **options: Any) -> Any:
        # the command builds the module's MigrationWriter (and before 5.2 its MigrationAutodetector) by
        # name: seqid's, for this run
        names = {"MigrationWriter": SeqIDMigrationWriter}
        if django.VERSION < (5, 2):
            names["MigrationAutodetector"] = SeqIDAutodetector
        originals = {name: getattr(makemigrations, name) for name in names}
        for name, value in names.items():
            setattr(makemigrations, name, value)
        try:
            return super().handle(*args, **options)
        finally:
            for name, value in originals.items():
                setattr(makemigrations, name, value)
