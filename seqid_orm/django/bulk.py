"""``bulk_insert``: model instances through the database's fastest path, keys in its own layout.

``bulk_create`` renders one multi-row ``INSERT`` per batch, with a placeholder and an adapted
parameter per value: on PostgreSQL that is most of a load's client time.  With psycopg 3 this sends
the same values (each field's ``pre_save`` and ``get_db_prep_save``, as ``bulk_create`` computes
them) through ``COPY ... FROM STDIN`` instead, in one transaction.  Everywhere else, and for what
``COPY`` cannot give back (keys the database assigns, values it computes), it is ``bulk_create``.

Either way, a ``SeqUUIDField`` key drawn at construction for another database's layout (the router
sent the model elsewhere, or ``using`` says so) is drawn again for the database written to, as
``save()`` does; ``bulk_create`` sends no ``pre_save`` signal and keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import connections, router, transaction
from django.db.models import Model

from ..errors import ArgumentTypeError, InvalidArgumentError
from .fields import SeqUUIDField, reissue_for_database

__all__ = ["bulk_insert"]

M = TypeVar("M", bound=Model)


def _copies(connection: Any) -> bool:
    """PostgreSQL through psycopg 3, whose cursors have ``copy`` (psycopg2's ``copy_expert`` takes a file)."""
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


def bulk_insert(objs: Iterable[M], *, using: str | None = None) -> list[M]:
    """Insert unsaved instances of one model; the instances, saved (``_state.db`` set, ``adding`` off).

    On PostgreSQL with psycopg 3 the rows go through ``COPY``; elsewhere, or when the database must
    assign a value (an ``AutoField`` key left ``None``, a ``db_default`` or an expression), through
    ``bulk_create``.  Each value is prepared as ``bulk_create`` prepares it (``pre_save``, then
    ``get_db_prep_save``), so a bad one raises the error a ``save()`` would: before any row is sent
    on the ``COPY`` path, at its batch on ``bulk_create``'s.  One transaction either way: a failure
    leaves none of these rows.  Like ``bulk_create`` it sends no signals and refuses multi-table
    inheritance.
    """
    listed = list(objs)
    if not listed:
        return listed
    not_model = next((o for o in listed if not isinstance(o, Model)), None)
    if not_model is not None:
        raise ArgumentTypeError(f"bulk_insert takes model instances, got a {type(not_model).__name__}")
    model = type(listed[0])
    other = next((o for o in listed if type(o) is not model), None)
    if other is not None:
        raise ArgumentTypeError(
            f"bulk_insert takes instances of one model, got {model.__name__} and {type(other).__name__}"
        )
    opts = model._meta.concrete_model._meta  # a proxy model's rows go to its concrete model's table
    if model._meta.parents:  # multi-table inheritance: rows in several tables, linked by keys
        raise InvalidArgumentError(
            f"{model.__name__} inherits from another table; bulk_insert, like bulk_create, cannot"
        )
    alias = using or router.db_for_write(model, instance=listed[0])
    connection = connections[alias]
    if any(isinstance(field, SeqUUIDField) for field in opts.concrete_fields):
        for obj in listed:  # keys drawn for another database's layout, drawn again for this one
            reissue_for_database(obj, alias)
    fields = [f for f in opts.concrete_fields if not getattr(f, "generated", False)]
    rows = _prepared(listed, fields, connection) if _copies(connection) else None
    if rows is None:  # not PostgreSQL with psycopg 3, or values only the database can give
        return model._base_manager.using(alias).bulk_create(listed)
    with transaction.atomic(using=alias, savepoint=False):
        _copy(connection, opts.db_table, [f.column for f in fields], rows)
    for obj in listed:
        obj._state.adding, obj._state.db = False, alias
    return listed


def _prepared(objs: list[Model], fields: list[Any], connection: Any) -> list[tuple[Any, ...]] | None:
    """Each instance's values as ``bulk_create`` would send them; ``None`` when ``COPY`` cannot carry
    them (the database assigns or computes some value, which ``COPY`` cannot return)."""
    pk = objs[0]._meta.pk
    if pk is not None and pk.db_returning and any(obj.pk is None for obj in objs):
        return None  # an AutoField key left to the database: bulk_create reads it back
    rows = []
    for obj in objs:
        row = []
        for field in fields:
            value = field.pre_save(obj, add=True)
            if hasattr(value, "resolve_expression"):  # F(), Now(), an unset db_default
                return None
            row.append(field.get_db_prep_save(value, connection))
        rows.append(tuple(row))
    return rows


def _copy(connection: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """``COPY`` in text form: psycopg writes each value as it would bind it, the server parses it by
    the column's type (binary form would need a dumper matching every column type)."""
    quote = connection.ops.quote_name
    sql = f"COPY {quote(table)} ({', '.join(map(quote, columns))}) FROM STDIN"
    with connection.cursor() as cursor, connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)
