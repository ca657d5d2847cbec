"""``TicketField``: a BIGINT key drawn from a ticket sequence, known before ``save()``.

The sequence lives on a Django database alias (``using=``, default ``"default"``), through a
connection of its own (:class:`~seqid_orm.allocation.stores.django.DjangoTicketStore`), or on any ticket
server URL (``url=``: SQLAlchemy or Redis).  One :class:`~seqid_orm.allocation.tickets.TicketSequence`
serves every field and thread of the process that name the same sequence and server.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.core import checks

from ..allocation.stores import ETCD_SCHEMES, REDIS_SCHEMES, SQL_SCHEMES, check_name, hide_password, scheme_of
from ..allocation.stores.base import TicketStore
from ..allocation.tickets import TicketSequence
from ..errors import ArgumentTypeError, InvalidArgumentError
from .columns import ModelFloor
from .fields import IntegerKeyField

__all__ = ["TicketField", "close_ticket_sequences", "ticket_default", "ticket_sequence"]

_sequences: dict[tuple[str, str | None, str | None, int, bool, float], TicketSequence] = {}
_lock = threading.Lock()


def ticket_sequence(
    name: str,
    *,
    using: str | None = None,
    url: str | None = None,
    block_size: int = 1000,
    accept_state_loss: bool = False,
    timeout: float = 5.0,
) -> TicketSequence:
    """The process's sequence ``name`` on Django alias ``using`` (default ``"default"``) or on ``url``.

    Created on first use and shared by every caller naming the same sequence, server and block
    size.  ``accept_state_loss`` allows a Redis ``url`` without persistence.  ``timeout``: the
    longest one call waits on the server (a lock another transaction holds included), past which it
    raises :class:`~seqid_orm.errors.StoreTimeoutError`.
    """
    if using is not None and url is not None:
        raise InvalidArgumentError("give a ticket sequence either using= (a Django alias) or url=, not both")
    key = (name, using, url, block_size, accept_state_loss, timeout)
    sequence = _sequences.get(key)
    if sequence is None:
        with _lock:
            sequence = _sequences.get(key)
            if sequence is None:
                server: str | TicketStore
                if url is not None:
                    server = url
                else:
                    from ..allocation.stores.django import DjangoTicketStore

                    server = DjangoTicketStore(using or "default", timeout=timeout)
                sequence = _sequences[key] = TicketSequence(
                    name, server, block_size=block_size, accept_state_loss=accept_state_loss, timeout=timeout
                )
    return sequence


def close_ticket_sequences() -> None:
    """Close every sequence :func:`ticket_sequence` made in this process and forget them.

    Their connections are released (a test database can then be dropped) and unused values are
    lost.  Call it where the ticket table is emptied under a running process: Django's
    ``TransactionTestCase`` flushes every table after each test, and a sequence that finds its
    row gone refuses to start over (that would repeat ids), so close them in ``tearDown``.
    """
    with _lock:
        sequences = list(_sequences.values())
        _sequences.clear()
    for sequence in sequences:
        sequence.close()


def ticket_default() -> int:
    """Importable default of :class:`TicketField` (the field draws from its own sequence instead)."""
    raise ArgumentTypeError("ticket_default() is the marker default of TicketField; call field.new_value()")


class TicketField(IntegerKeyField):
    """A BIGINT filled from ticket sequence ``sequence`` when the instance is created.

    ``TicketField("orders", primary_key=True)`` draws from the ``seqid_tickets`` table of the
    ``"default"`` database (create it with the ``seqid_orm.django`` app's migration);
    ``using="tickets"`` names another alias, ``url="redis://..."`` another kind of server.
    ``block_size`` values are reserved per round trip; ``accept_state_loss=True`` allows a Redis
    ``url`` without persistence.  The sequence is bound to this field's column: a counter behind
    the keys already in the table is refused rather than handing them out again.
    """

    description = "Integer id from a ticket sequence"
    _what = "a TicketField value"

    def __init__(
        self,
        sequence: str,
        *args: Any,
        using: str | None = None,
        url: str | None = None,
        block_size: int = 1000,
        accept_state_loss: bool = False,
        **kwargs: Any,
    ) -> None:
        self.sequence_name = check_name(sequence)
        if not isinstance(accept_state_loss, bool):
            raise ArgumentTypeError(f"accept_state_loss must be a bool, got {type(accept_state_loss).__name__}")
        self.accept_state_loss = accept_state_loss
        if using is not None and url is not None:
            raise InvalidArgumentError("TicketField takes using= (a Django alias) or url=, not both")
        if url is not None:
            if not isinstance(url, str):
                raise ArgumentTypeError(f"url must be a str, got {type(url).__name__}")
            if scheme_of(url) not in (*SQL_SCHEMES, *REDIS_SCHEMES, *ETCD_SCHEMES):
                raise InvalidArgumentError(
                    f"TicketField url {hide_password(url)!r} names no known ticket server: use a SQLAlchemy URL "
                    "(postgresql+psycopg://, mysql+pymysql://, sqlite:///), redis:// or etcd://"
                )
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise InvalidArgumentError(f"block_size must be an int >= 1, got {block_size!r}")
        self.using = using
        self.url = url
        self.block_size = block_size
        kwargs.setdefault("default", ticket_default)
        super().__init__(*args, **kwargs)

    def sequence(self) -> TicketSequence:
        """The ticket sequence this field draws from (shared by the process), bound to this column."""
        sequence = ticket_sequence(
            self.sequence_name,
            using=self.using,
            url=self.url,
            block_size=self.block_size,
            accept_state_loss=self.accept_state_loss,
        )
        model = getattr(self, "model", None)
        if sequence is not getattr(self, "_bound_to", None) and model is not None and not model._meta.abstract:
            sequence.bind_floor(ModelFloor(model, self))  # once per sequence object, not per row
            self._bound_to = sequence
        return sequence

    def new_value(self) -> int:
        """A new id from the field's sequence."""
        return self.sequence().next_id()

    def get_default(self) -> Any:
        if self.default is ticket_default:
            return self.new_value()
        return super().get_default()

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        if kwargs.get("default") is ticket_default:
            del kwargs["default"]
        for attr, default in (("using", None), ("url", None), ("block_size", 1000), ("accept_state_loss", False)):
            if getattr(self, attr) != default:
                kwargs[attr] = getattr(self, attr)
        return name, "seqid_orm.django.TicketField", [self.sequence_name, *args], kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        found = list(super().check(**kwargs))
        if self.url is not None:
            return found
        alias = self.using or "default"
        if alias not in settings.DATABASES:
            found.append(
                checks.Error(
                    f"TicketField {self.sequence_name!r} draws from database {alias!r}, which is not in DATABASES",
                    obj=self,
                    id="seqid.E004",
                )
            )
        elif not _app_installed():
            found.append(
                checks.Warning(
                    "TicketField draws from the seqid_tickets table, which the seqid_orm.django app creates",
                    hint="Add 'seqid_orm.django' to INSTALLED_APPS and run migrate (or give url=).",
                    obj=self,
                    id="seqid.W002",
                )
            )
        return found


def _app_installed() -> bool:
    from django.apps import apps

    return apps.is_installed("seqid_orm.django")
