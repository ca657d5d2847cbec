"""A model's table for the length of a block: made on a database by the schema editor, dropped after."""

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
