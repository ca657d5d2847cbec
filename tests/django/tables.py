"""A model's table for the length of a block: made on a database by the schema editor, dropped after;
and what a query's plan must show to read the primary key's index."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import connections


@contextlib.contextmanager
def table_of(model: Any, alias: str = "default") -> Iterator[Any]:
    """``model``'s table on database ``alias`` for the block (declare the model inside ``isolate_apps``)."""
    connection = connections[alias]
    with connection.schema_editor() as editor:
        editor.create_model(model)
    try:
        yield model
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(model)


def reads_the_primary_key(queryset: Any) -> str:
    """``queryset``'s plan (``explain()``) where it reads the primary key's index as a range: PostgreSQL's
    ``Index Scan`` on the ``pkey``, MariaDB's ``range`` on ``PRIMARY``, SQLite's search of the key;
    ``""`` where it does not (asserted by the caller, which then sees the plan in the failure)."""
    plan = str(queryset.explain())
    vendor = connections[queryset.db].vendor
    if vendor == "postgresql":
        found = "Index" in plan and "pkey" in plan
    elif vendor == "mysql":
        found = "PRIMARY" in plan and "range" in plan
    else:
        found = "PRIMARY KEY" in plan or "sqlite_autoindex" in plan
    return plan if found else ""
