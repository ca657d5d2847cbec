"""``manage.py seqid_doctor``: :mod:`seqid_orm.schema.doctor` on a Django database alias.

The doctor runs on a connection of its own (a new ``DatabaseWrapper`` for the alias, closed at
the end), so the read-only session settings and the statement timeout never reach the project's
connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..allocation.stores.django import DjangoExecutor
from ..errors import DatabaseUnavailableError, InvalidArgumentError, SeqIDError
from ..schema.doctor import Finding, StatementDeadline, check_schemas, check_timeout, examine, session_statements
from .connection import server_version, vendor_of

__all__ = ["diagnose_alias"]


def diagnose_alias(
    alias: str = "default", *, sample: int = 1000, timeout: float = 5.0, schemas: Sequence[str] | None = None
) -> list[Finding]:
    """The doctor's findings for the database of ``alias``, worst first (``schemas``: PostgreSQL's
    schemas to read, every one but the system's by default).

    Raises :class:`~seqid_orm.errors.DatabaseUnavailableError` when it cannot be reached or a read
    outlives ``timeout`` seconds.
    """
    from django.db import DatabaseError, connections

    check_timeout(timeout)
    check_schemas(schemas)
    if alias not in connections.databases:
        known = ", ".join(sorted(connections.databases)) or "none"
        raise InvalidArgumentError(f"no database alias {alias!r} in settings.DATABASES (it has: {known})")
    conn = connections.create_connection(alias)
    try:
        vendor = vendor_of(conn)
        statements = session_statements(vendor, timeout)
        with conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        if not conn.get_autocommit():
            conn.commit()
        deadline = StatementDeadline(timeout)
        if vendor == "sqlite":
            deadline.install(conn.connection)  # a connection of its own, closed below
        reads = _Reads(conn, deadline.start)
        return _set_by_the_app(examine(reads, vendor, server_version(conn), sample=sample, schemas=schemas))
    except SeqIDError:
        raise
    except DatabaseError as exc:
        raise DatabaseUnavailableError(f"database {alias!r}: {type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


def _set_by_the_app(findings: list[Finding]) -> list[Finding]:
    """Findings whose column a model gives no default (in Python or in the database): the
    application sets those ids itself, so the advice to change a default would change nothing.
    Only Django can tell: from SQL alone such keys look like any random key."""
    from django.apps import apps
    from django.db.models.fields import NOT_PROVIDED

    owners: dict[tuple[str, str], tuple[Any, Any]] = {}
    for model in apps.get_models(include_auto_created=True):
        for field in model._meta.local_concrete_fields:
            owners.setdefault((model._meta.db_table, field.column), (model, field))
    out = []
    for finding in findings:
        model, field = owners.get((finding.table, finding.column), (None, None))
        if (
            finding.problem is not None
            and field is not None
            and not field.has_default()
            and getattr(field, "db_default", NOT_PROVIDED) is NOT_PROVIDED
        ):
            layout = finding.needed_layout
            call = "seqid_orm.uuid7()" if layout in (None, "time_first") else f'seqid_orm.comb("{layout}")'
            finding = replace(
                finding,
                advice=(
                    f"{model._meta.label}.{field.name} has no default: the application sets these ids itself, so "
                    f"there is no default to change. Where it makes them, call {call} instead; or give the field "
                    "SeqUUIDField's default and stop setting them. Existing rows keep their ids."
                ),
            )
        out.append(finding)
    return out


class _Reads(DjangoExecutor):
    """The doctor's reads on a Django connection: a statement the database refuses is
    :class:`DatabaseUnavailableError`, which costs that table's line only."""

    def __init__(self, conn: Any, before: Callable[[], object]) -> None:
        super().__init__(conn)
        self._before = before

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        from django.db import DatabaseError

        self._before()
        try:
            return super().fetch(sql, params)
        except DatabaseError as exc:
            raise DatabaseUnavailableError(f"{type(exc).__name__}: {exc}".strip()) from exc

    def recover(self) -> None:
        if not self.conn.get_autocommit():
            self.conn.rollback()
