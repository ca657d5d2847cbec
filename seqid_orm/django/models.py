"""Models of the ``seqid_orm.django`` app: the ticket table, in the shape SQLAlchemy and Alembic use.

:class:`~seqid_orm.allocation.stores.django.DjangoTicketStore` does not use this model (it runs its own
atomic SQL on its own connection); the model exists for the migration and the admin.
"""

from __future__ import annotations

from django.db import models

from ..allocation.stores.base import LEASE_TABLE, NAME_LENGTH, TICKET_TABLE, TOKEN_LENGTH


class TicketCounter(models.Model):
    """One ticket sequence on this database: the next value it hands out, its step and offset."""

    name = models.CharField(max_length=NAME_LENGTH, primary_key=True)
    next_value = models.BigIntegerField()
    step = models.BigIntegerField()
    value_offset = models.BigIntegerField()

    class Meta:
        db_table = TICKET_TABLE
        verbose_name = "ticket sequence"

    def __str__(self) -> str:
        return f"{self.name}: next {self.next_value} (step {self.step}, offset {self.value_offset})"


class WorkerLeaseRow(models.Model):
    """One worker id of a lease namespace: its holder's token, expiry and high-water mark.

    The SQLAlchemy table has the key (namespace, worker_id); Django 4.2 has no composite primary
    key, so this one adds an ``id`` and makes the pair unique.  seqid's statements never name the
    ``id``, so Django and SQLAlchemy processes share either table.
    """

    namespace = models.CharField(max_length=NAME_LENGTH)
    worker_id = models.IntegerField()
    token = models.CharField(max_length=TOKEN_LENGTH)
    expires_at = models.BigIntegerField()
    last_timestamp = models.BigIntegerField()

    class Meta:
        db_table = LEASE_TABLE
        verbose_name = "worker-id lease"
        constraints = [models.UniqueConstraint(fields=["namespace", "worker_id"], name="seqid_lease_unique")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.worker_id}"
