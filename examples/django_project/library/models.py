"""What a user writes: no default=, no lambdas; the fields pick the layout of the database."""

from django.db import models

from seqid_orm.django import SeqUUIDField, SnowflakeField, SortableTextField


class Author(models.Model):
    id = SeqUUIDField(primary_key=True)  # obj.pk is known before save()
    name = models.CharField(max_length=100)

    def __str__(self):
        return self.name


class Book(models.Model):
    id = SeqUUIDField(primary_key=True)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    title = models.CharField(max_length=200)

    def __str__(self):
        return self.title


class Loan(models.Model):
    id = SnowflakeField(primary_key=True)  # worker id from settings.SEQID
    book = models.ForeignKey(Book, on_delete=models.CASCADE)
    share_code = SortableTextField(unique=True)  # binary collation chosen per database
