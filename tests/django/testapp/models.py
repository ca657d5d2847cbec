from __future__ import annotations

from django.db import models

from seqid_orm.django import SeqUUIDField, SnowflakeField, SortableTextField, TicketField


class Author(models.Model):
    id = SeqUUIDField(primary_key=True)
    name = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.name


class Tag(models.Model):
    id = SeqUUIDField(primary_key=True)
    name = models.CharField(max_length=50, unique=True)


class Book(models.Model):
    id = SeqUUIDField(primary_key=True)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    title = models.CharField(max_length=200)
    tags = models.ManyToManyField(Tag, related_name="books")


class Event(models.Model):
    id = SnowflakeField(primary_key=True)
    name = models.CharField(max_length=50)


class ShareCode(models.Model):
    code = SortableTextField(primary_key=True)
    book = models.ForeignKey(Book, on_delete=models.CASCADE, null=True)


class Ulid(models.Model):
    id = SortableTextField(primary_key=True, kind="base32")
    note = models.CharField(max_length=50, default="")


class LegacyRecord(models.Model):
    """Routed to the 'legacy' database in the multi-db settings.

    It prefers TIME_LAST: MariaDB's native UUID column honours that (it swaps those bits),
    PostgreSQL does not, so the two databases need different layouts for one model.
    """

    id = SeqUUIDField(primary_key=True, layout="time_last")
    label = models.CharField(max_length=50)


class Order(models.Model):
    """Keyed by a ticket sequence on the default database (the seqid app's table)."""

    id = TicketField("orders", primary_key=True, block_size=10)
    note = models.CharField(max_length=50, default="")


class Visit(models.Model):
    """A table that had rows before it adopted seqid (BackfillSeqUUID fills seq_id from created_at)."""

    created_at = models.DateTimeField(null=True)
    seq_id = SeqUUIDField(null=True, unique=True)


class Receipt(models.Model):
    """Keyed by ids the application sets itself (no default): the doctor must say so, not advise a
    default that would never be used."""

    id = models.UUIDField(primary_key=True)
