"""``python manage.py migrate``: Django's own, with the autodetector ``makemigrations`` uses.

Django 5.2 checks that both commands detect changes alike (``commands.E001``): ``migrate`` asks the
autodetector whether the models have changes no migration holds yet, and seqid's only adds the
adoption beside a swap (:mod:`seqid_orm.django.migrating`).
"""

from __future__ import annotations

from django.core.management.commands import migrate

from ...migrating import SeqIDAutodetector


class Command(migrate.Command):
    autodetector = SeqIDAutodetector  # Django 5.2 and later read it
