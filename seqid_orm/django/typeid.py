"""``TypeIDField``: keys that are TypeIDs of one type in Python, forms and JSON, UUIDs in the database.

A ``UUIDField`` underneath (the same column on every backend: ``uuid`` where the backend has one,
``char(32)`` elsewhere), whose Python value is the TypeID text (``cust_01h455vb4pex5vsknk084sn02q``).
It accepts what its text form allows, a ``uuid.UUID`` too, and refuses the rest as ``UUIDField``
refuses a bad UUID: a ``ValidationError`` with code ``invalid``, here naming the type expected.
New keys are TypeIDs of a :func:`~seqid_orm.uuid7`, as the specification requires.

System check ``seqid.E006`` (with ``manage.py check --database``, and before ``migrate``): a
database whose UUID column does not keep UUIDv7s in the order they are made (MariaDB's ``uuid``
before 10.11.5, which Django 5 and later create there, compares the time's low bits first), where
the keys would scatter over the primary key's index.  The SQLAlchemy ``TypeID`` refuses the same
column at its first statement.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django import forms
from django.core import checks, exceptions
from django.db import models
from django.utils.translation import gettext_lazy as _

from ..errors import InvalidIDError
from ..ids.comb import check_span, comb_at
from ..ids.layout import Layout
from ..ids.typeid import check_typeid_prefix, decode_typeid, encode_typeid, typeid
from ..vendors import Storage, Target
from .connection import field_target, storage_of
from .lookups import CreatedIn

__all__ = ["TypeIDField"]


class TypeIDField(models.UUIDField):
    """A TypeID of type ``prefix``, stored as its UUID; by default each new one a fresh TypeID."""

    default_error_messages = {"invalid": _("“%(value)s” is not a valid TypeID of type “%(prefix)s”.")}
    description = _("TypeID")

    def __init__(self, prefix: str, *args: Any, **kwargs: Any) -> None:
        self.prefix = check_typeid_prefix(prefix)  # now (InvalidArgumentError names the rule)
        kwargs.setdefault("default", functools.partial(typeid, prefix))
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        default = kwargs.get("default")
        if isinstance(default, functools.partial) and default.func is typeid and default.args == (self.prefix,):
            del kwargs["default"]
        return name, "seqid_orm.django.TypeIDField", [self.prefix, *args], kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self._check_databases(kwargs.get("databases") or [])]

    def _check_databases(self, databases: list[str]) -> list[checks.CheckMessage]:
        from django.db import connections

        found: list[checks.CheckMessage] = []
        for alias in databases:
            try:  # the server's version, where the check may use the database
                where = field_target(self, connections[alias])
            except Exception:  # a database not there yet: migrate will check again
                continue
            found.extend(self.check_target(alias, where))
        return found

    def check_target(self, alias: str, where: Target) -> list[checks.CheckMessage]:
        """``seqid.E006`` where ``where`` (this field's column on database ``alias``) would scatter the
        keys; a decision of the column's target alone, so it is tested for servers not at hand."""
        if where.server_version is None or where.keeps_in_order(Layout.TIME_FIRST):
            return []
        return [
            checks.Error(
                f"database {alias!r}: TypeID keys are UUIDv7, which {where} does not keep in the order they "
                "are made: they would land all over the primary key's index",
                hint="Upgrade MariaDB to 10.11.5 or later (its uuid type then compares a UUIDv7 by its time), or "
                "give the field a char(32) column (a subclass whose db_type() returns 'char(32)', as Django's "
                "release notes show for UUIDs on MariaDB).",
                obj=self,
                id="seqid.E006",
            )
        ]

    def time_bounds_for(self, alias: str, start: Any, end: Any) -> tuple[uuid.UUID, uuid.UUID]:
        """The keys between which rows made in ``[start, end)`` lie (``id__created_in``): the first
        UUIDv7 of each instant, the layout every TypeID has (a column that would not keep it is E006)."""
        low, high = (comb_at(when, Layout.TIME_FIRST, "min") for when in (start, end))
        check_span(start, end)
        return low, high

    def _invalid(self, value: object) -> exceptions.ValidationError:
        return exceptions.ValidationError(
            self.error_messages["invalid"], code="invalid", params={"value": value, "prefix": self.prefix}
        )

    def to_python(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, uuid.UUID):
            return encode_typeid(self.prefix, value)
        if isinstance(value, str):
            try:
                decode_typeid(value, prefix=self.prefix)
            except InvalidIDError:
                raise self._invalid(value) from None
            return value
        raise self._invalid(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> str | None:
        if value is None:
            return None
        found = value if isinstance(value, uuid.UUID) else super().to_python(value)
        return encode_typeid(self.prefix, found)

    def get_prep_value(self, value: Any) -> uuid.UUID | None:
        value = models.Field.get_prep_value(self, value)
        if value is None or isinstance(value, uuid.UUID):
            return value
        text = self.to_python(value)
        return None if text is None else decode_typeid(text, prefix=self.prefix)[1]

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        found = value if prepared else self.get_prep_value(value)
        if found is None:
            return None
        # the column's own form: a subclass may give it char(32) where the backend has a uuid type
        return found if storage_of(self, connection) is Storage.NATIVE else found.hex

    def formfield(self, **kwargs: Any) -> Any:
        length = len(self.prefix) + 27 if self.prefix else 26
        return models.Field.formfield(self, **{"form_class": forms.CharField, "max_length": length, **kwargs})


TypeIDField.register_lookup(CreatedIn)  # id__created_in=(start, end)
