"""``python manage.py migrate``: Django's own, with the autodetector ``makemigrations`` uses, under the
migration lock.

Django 5.2 checks that both commands detect changes alike (``commands.E001``): ``migrate`` asks the
autodetector whether the models have changes no migration holds yet, and seqid's only adds the
adoption beside a swap (:mod:`seqid_orm.django.migrating`).

Several pods that deploy at once each run ``migrate``.  This one first takes the database's migration
lock (:class:`~seqid_orm.allocation.migration_lock.MigrationLock`, a lease on a row of
``seqid_migration_locks`` through a connection of its own, which holds through PgBouncer in transaction
pooling; SQLite: a lock on the database file), so the other pods wait, then find nothing left to apply.
Before each migration it checks it still holds it (a run frozen past the lock's ttl stops there).
``--skip-seqid-lock`` runs without it; ``--seqid-lock-wait SECONDS`` bounds the wait (by default: as
long as the holder lives), after which the command fails naming the holder.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django.core.management.commands import migrate
from django.db import connections

from ...migrating import SeqIDAutodetector


class Command(migrate.Command):
    autodetector = SeqIDAutodetector  # Django 5.2 and later read it
    _seqid_lock: Any = None

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--skip-seqid-lock",
            action="store_true",
            help="Run without seqid's migration lock (which lets several pods run migrate at once, one at a time).",
        )
        parser.add_argument(
            "--seqid-lock-wait",
            type=float,
            default=None,
            help="The longest to wait for another run's migration lock, in seconds (default: while it lives).",
        )

    def handle(self, *args: Any, **options: Any) -> Any:
        with self._lock(options["database"], options["skip_seqid_lock"], options["seqid_lock_wait"]) as lock:
            self._seqid_lock = lock
            try:
                return super().handle(*args, **options)
            finally:
                self._seqid_lock = None

    def check(self, *args: Any, **kwargs: Any) -> None:
        """Django's system checks, with ``seqid.E005`` (a column whose storage is not the field's) held back
        for a column this run converts (a ``ConvertUUIDStorage`` or a ``RekeyContract`` not applied yet): the
        check would otherwise stop the very migration that fixes what it reports."""
        from ...fields import CONVERTING

        token = CONVERTING.set(frozenset(_pending_conversions(kwargs.get("databases") or [])))
        try:
            super().check(*args, **kwargs)
        finally:
            CONVERTING.reset(token)

    def migration_progress_callback(self, action: str, migration: Any = None, fake: bool = False) -> None:
        if action in ("apply_start", "unapply_start") and self._seqid_lock is not None:
            self._seqid_lock.check()  # a run frozen past the lock's ttl stops before its next migration
        super().migration_progress_callback(action, migration, fake)

    @contextlib.contextmanager
    def _lock(self, alias: str, skip: bool, wait: float | None) -> Any:
        from ....allocation.migration_lock import NoLock, holder_here, locked

        if skip:
            yield NoLock()
            return
        with locked(connections[alias], "django-migrate", holder=holder_here("manage.py migrate"), wait=wait) as lock:
            yield lock


def _pending_conversions(aliases: list[str]) -> list[tuple[str, str, str]]:
    """``(alias, app_label.model, field)`` of every ``ConvertUUIDStorage``, and the key of every
    ``RekeyContract``, that ``migrate`` would apply on each of ``aliases`` (the plan to every app's latest
    migration)."""
    from django.apps import apps
    from django.db.migrations.executor import MigrationExecutor

    from ...operations import ConvertUUIDStorage, RekeyContract

    found = []
    for alias in aliases:
        executor = MigrationExecutor(connections[alias])
        for migration, backwards in executor.migration_plan(executor.loader.graph.leaf_nodes()):
            for op in [] if backwards else migration.operations:
                label = f"{migration.app_label}.{op.model_name.lower()}" if hasattr(op, "model_name") else ""
                if isinstance(op, ConvertUUIDStorage):
                    found.append((alias, label, op.field_name))
                elif isinstance(op, RekeyContract):  # the integer key becomes the model's SeqUUIDField
                    try:
                        model = apps.get_model(label)
                    except LookupError:  # no such model now (deleted by a later migration): no check reads it
                        continue
                    found.append((alias, label, model._meta.pk.name))
    return found
