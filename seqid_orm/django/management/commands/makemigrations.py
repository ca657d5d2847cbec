"""``python manage.py makemigrations``, which also writes the adoption of a swapped key.

Django's command, with :class:`~seqid_orm.django.migrating.SeqIDAutodetector`: an ``AlterField`` that
turns a field into a ``SeqUUIDField`` gets :class:`~seqid_orm.django.operations.AdoptSeqUUID` beside it
(:mod:`seqid_orm.django.migrating` says where and why).  Everything else is Django's own.
"""

from __future__ import annotations

from typing import Any

import django
from django.core.management.commands import makemigrations

from ...migrating import SeqIDAutodetector


class Command(makemigrations.Command):
    autodetector = SeqIDAutodetector  # Django 5.2 and later read it

    def handle(self, *args: Any, **options: Any) -> Any:
        if django.VERSION >= (5, 2):
            return super().handle(*args, **options)
        # before 5.2 the command builds the module's MigrationAutodetector by name: that name, for this run
        original = makemigrations.MigrationAutodetector
        makemigrations.MigrationAutodetector = SeqIDAutodetector
        try:
            return super().handle(*args, **options)
        finally:
            makemigrations.MigrationAutodetector = original
