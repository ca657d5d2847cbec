from django.core.management.base import BaseCommand
from django.db import connection

from library.models import Author, Book, Loan
from seqid_orm import timestamp_of


class Command(BaseCommand):
    help = "Create a few rows and show their ids as the database orders them."

    def handle(self, *args, **options):
        author = Author(name="Ursula K. Le Guin")
        self.stdout.write(f"id before save: {author.pk}")
        author.save()
        books = [Book.objects.create(author=author, title=t) for t in ("A Wizard of Earthsea", "The Dispossessed")]
        Loan.objects.create(book=books[0])
        layout = Author._meta.pk.layout_for("default")
        self.stdout.write(f"{connection.vendor}: layout {layout.value}")
        for book in Book.objects.order_by("pk"):
            self.stdout.write(f"  book {book.pk} made {timestamp_of(book.pk).isoformat()} {book.title}")
        for loan in Loan.objects.all():
            self.stdout.write(f"  loan {loan.pk} share code {loan.share_code}")
