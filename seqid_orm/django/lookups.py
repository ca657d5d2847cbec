"""``id__created_in=(start, end)``: the rows made in a time range, as a range on the primary key.

The lookup of seqid's key fields (registered with each): ``low <= id < high``, the bounds the first
keys of ``start`` and of ``end`` as the field says (``time_bounds_for``): a
:class:`~seqid_orm.django.SeqUUIDField`'s in the layout its database keeps the column in, adopted
keys included; a :class:`~seqid_orm.django.TypeIDField`'s as UUIDv7s; a
:class:`~seqid_orm.django.SortableTextField`'s by its kind; a
:class:`~seqid_orm.django.SnowflakeField`'s by its generator's profile.

``id__created_in=(start, end, (interval_length, interval_count))`` asks a ``SeqUUIDField`` of
:func:`~seqid_orm.uuid_time_nextval` keys by their wrapping prefix
(:func:`~seqid_orm.ids.prefixed.time_prefix_bounds`: one or two ranges, both ends included, which
hold the keys of earlier laps of the prefix too).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.models import Lookup

from ..errors import ArgumentTypeError

__all__ = ["CreatedIn"]


class CreatedIn(Lookup):
    """``Order.objects.filter(id__created_in=(start, end))``: made in ``[start, end)``, aware datetimes."""

    lookup_name = "created_in"
    prepare_rhs = False  # a pair of datetimes, not a value of the field

    def get_prep_lookup(self) -> Any:
        rhs = self.rhs
        if (
            not isinstance(rhs, (tuple, list))
            or len(rhs) not in (2, 3)
            or not all(isinstance(when, dt.datetime) for when in rhs[:2])
        ):
            raise ArgumentTypeError(
                f"created_in takes (start, end), two datetimes, or (start, end, (interval_length, "
                f"interval_count)); got {rhs!r}"
            )
        return tuple(rhs)

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        field = self.lhs.output_field
        lhs, lhs_params = compiler.compile(self.lhs)
        if len(self.rhs) == 3:
            start, end, time_prefix = self.rhs
            bounds_for = getattr(field, "time_prefix_bounds_for", None)
            if bounds_for is None:
                raise ArgumentTypeError(f"a time prefix asks a SeqUUIDField of uuid_time_nextval keys, not {field!r}")
            ranges = bounds_for(connection.alias, start, end, time_prefix)
            if not ranges:
                raise EmptyResultSet  # Django's way to say no row can match
            params: list[Any] = []
            for pair in ranges:
                for bound in pair:
                    params += [*lhs_params, field.get_db_prep_value(bound, connection, prepared=False)]
            return " OR ".join(f"({lhs} >= %s AND {lhs} <= %s)" for _ in ranges), params
        start, end = self.rhs
        low, high = field.time_bounds_for(connection.alias, start, end)
        bounds = [field.get_db_prep_value(bound, connection, prepared=False) for bound in (low, high)]
        return f"{lhs} >= %s AND {lhs} < %s", [*lhs_params, bounds[0], *lhs_params, bounds[1]]
