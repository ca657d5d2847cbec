"""An async view: the keys of three models made inside it, without blocking the event loop.

``acreate`` saves in a worker thread (Django's ``sync_to_async``), where each field's default
makes its key: a time-ordered UUID for ``Author`` and ``Book``, a Snowflake id for ``Loan`` from
the worker id this process leased (``SEQID['SNOWFLAKE']['lease']`` in the settings), so the
processes of ``uvicorn demo_site.asgi:application --workers 4`` never share one.
"""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import Author, Book, Loan


@csrf_exempt  # an API called by programs, not a form
@require_POST
async def lend(request: HttpRequest) -> JsonResponse:
    author = await Author.objects.acreate(name=request.POST.get("author", "anonymous"))
    book = await Book.objects.acreate(author=author, title=request.POST.get("title", "untitled"))
    loan = await Loan.objects.acreate(book=book)
    # a Snowflake id is a string in JSON: a JavaScript number would lose its last digits
    return JsonResponse({"author": str(author.pk), "book": str(book.pk), "loan": str(loan.pk)}, status=201)
