"""A Django application process for the adoption tests, driven line by line (one JSON answer a line).

    DJANGO_SETTINGS_MODULE=... python -m tests.django.adopting_worker APP.MODEL

* ``path SCHEMA``: ``SET search_path TO SCHEMA`` through Django's cursor;
* ``tenant-schema SCHEMA``: what django-tenants does: ``connection.schema_name = SCHEMA`` and the
  ``search_path`` set on the raw driver connection, where Django's execute wrappers do not see it;
* ``tenant NAME``: ``SET seqid.tenant = NAME`` (the row-level security policy of the tests reads it);
* ``insert N FIRST``: N rows through ``Model.objects.create`` (``n`` from FIRST), in one transaction;
  answers the widths of the keys made (``0``: plain UUIDv7);
* ``quit``.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    import django

    django.setup()
    from django.apps import apps
    from django.db import connection, transaction

    from seqid_orm import describe

    model = apps.get_model(sys.argv[1])
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        try:
            if words[0] == "path":
                with connection.cursor() as cursor:
                    cursor.execute(f"SET search_path TO {words[1]}")
                answer: dict[str, object] = {"ok": True}
            elif words[0] == "tenant-schema":
                connection.ensure_connection()
                connection.schema_name = words[1]
                raw = connection.connection.cursor()
                raw.execute(f"SET search_path TO {words[1]}")
                raw.close()
                answer = {"ok": True}
            elif words[0] == "tenant":
                with connection.cursor() as cursor:
                    cursor.execute(f"SET seqid.tenant = '{words[1]}'")
                answer = {"ok": True}
            else:
                count, first = int(words[1]), int(words[2])
                with transaction.atomic():
                    made = [model.objects.create(n=first + i, note="new").pk for i in range(count)]
                answer = {"widths": sorted({describe(u).parts.get("above", 0) for u in made})}
        except Exception as exc:  # the test reads the refusal's type and message
            answer = {"error": type(exc).__name__, "message": str(exc)[:500]}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
