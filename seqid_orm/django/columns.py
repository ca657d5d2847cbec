"""A model's key column as seqid's allocation checks read it (imports Django only).

:class:`ModelFloor` serves a ticket sequence (its floors) and a leased Snowflake (its worker-id
check) alike, so ``TicketField`` and ``SnowflakeField`` share one way of reading their column.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["ModelFloor"]


class ModelFloor:
    """The keys a :class:`TicketField` or a ``SnowflakeField`` fills: its model's column, read through
    the Django ORM on the database the router writes the model to (a
    :class:`~seqid_orm.allocation.tickets.KeyFloor` and a :class:`~seqid_orm.ids.snowflake.KeyColumn`)."""

    def __init__(self, model: Any, field: Any) -> None:
        self.model = model
        self.attname = field.attname
        self.label = f"{model._meta.db_table}.{field.column}"

    def _queryset(self) -> Any:
        from django.db import router

        return self.model._base_manager.using(router.db_for_write(self.model))

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """A read on this thread's connection, closed after it where the read opened it: a
        sequence's prefetch or a lease's grant reads from a thread of seqid's own, whose Django
        connection nothing else closes (it kept a test database from being dropped); a request's
        thread, whose connection is open already, keeps it."""
        from django.db import connections, router

        conn = connections[router.db_for_write(self.model)]
        opened_here = conn.connection is None
        try:
            yield
        finally:
            if opened_here and not conn.in_atomic_block:
                conn.close()

    def largest(self) -> int | None:
        from django.db.models import Max

        with self._reading():
            found = self._queryset().aggregate(m=Max(self.attname))["m"]
        return None if found is None else int(found)

    def taken_in(self, first: int, last: int, step: int) -> int | None:
        from django.db.models import F, Max, Value
        from django.db.models.functions import Mod

        rows = self._queryset().filter(**{f"{self.attname}__gte": first, f"{self.attname}__lte": last})
        if step > 1:
            rows = rows.annotate(_seqid_r=Mod(F(self.attname) - Value(first), Value(step))).filter(_seqid_r=0)
        with self._reading():
            found = rows.aggregate(m=Max(self.attname))["m"]
        return None if found is None else int(found)

    def with_field(self, low: int, high: int, shift: int, mask: int, value: int) -> int | None:
        """A key in ``[low, high)`` whose ``(key >> shift) & mask`` is ``value`` (a Snowflake's worker-id
        check, :class:`~seqid_orm.ids.snowflake.KeyColumn`): an index range read, stopping at the first."""
        from django.db.models import F

        rows = (
            self._queryset()
            .filter(**{f"{self.attname}__gte": low, f"{self.attname}__lt": high})
            .alias(_seqid_field=F(self.attname).bitand(mask << shift))
            .filter(_seqid_field=value << shift)
            .order_by(self.attname)
            .values_list(self.attname, flat=True)[:1]
        )
        with self._reading():
            found = list(rows)
        return int(found[0]) if found else None
