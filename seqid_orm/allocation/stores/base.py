"""What every allocation backend shares: the table's shape, the store protocol, the SQL algorithm.

A ticket *store* is one ticket server: a SQL database (through SQLAlchemy or a Django
connection) or a Redis server.  It keeps one row per sequence name::

    seqid_tickets(name VARCHAR(64) PRIMARY KEY, next_value BIGINT, step BIGINT, value_offset BIGINT)

``next_value`` is the next value the server will hand out; every value it hands out is
congruent to ``value_offset`` modulo ``step``, so K servers with the same step and the offsets
1..K never overlap (Flickr's ticket servers, 2010, with ``auto_increment_increment``/``_offset``).
A reservation of ``count`` values moves ``next_value`` on by ``count * step`` in one atomic
statement on the store's own connection, outside any caller's transaction; the values
reserved are ``first, first + step, ..., first + (count - 1) * step``.

SQL stores run one vendor's statements (:class:`~.ticket_sql.TicketSQL`) and share :func:`~.ticket_sql.allocate_rows`,
which makes the decisions once (as :mod:`seqid_orm.calls.steps`, so a synchronous and an asynchronous
connection run the same code): refuse a missing row (a reservation never creates one: a
counter that vanished and came back at its start would hand out its ids again), refuse a row
whose step or offset contradicts the client's, and never move ``next_value`` past the largest
value allowed (a BIGINT, or a smaller ``max_value``).  Redis does the same in one Lua script.

Rows are created only by :meth:`TicketStore.create` (insert-if-absent, so sixteen processes
racing on a new name cannot get a stale value: the insert hands out nothing), which
:class:`~seqid_orm.allocation.tickets.TicketSequence` calls after checking every server of its list as a
set, and moved up only by :meth:`TicketStore.raise_to` (``seqid ticket repair``).

May import: the standard library, :mod:`seqid_orm.errors` and :mod:`seqid_orm.ids`.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ...errors import (
    AllocationError,
    ArgumentTypeError,
    BackendMismatchError,
    CounterRegressedError,
    GeneratorExhaustedError,
    InvalidArgumentError,
    InvalidIDError,
)
from ...ids.validate import BIGINT_MAX

__all__ = [
    "ETCD_SCHEMES",
    "LEASE_TABLE",
    "NAME_LENGTH",
    "TICKET_TABLE",
    "TOKEN_LENGTH",
    "Deferred",
    "Grant",
    "LeaseRow",
    "LeaseStore",
    "TicketRow",
    "TicketStore",
    "check_name",
    "grantable",
    "hide_password",
    "holder_of",
    "last_value_limit",
    "new_token",
    "regressed",
    "split_state_loss_option",
    "vanished",
]

_T = TypeVar("_T")

#: URL schemes of the etcd store (here, where both the package and the store module read it).
ETCD_SCHEMES = ("etcd",)
TICKET_TABLE = "seqid_tickets"
LEASE_TABLE = "seqid_worker_leases"
NAME_LENGTH = 64
TOKEN_LENGTH = 32

# Lower case only: a name is a key on every backend, and MySQL/MariaDB's default collations
# would make "Orders" and "orders" the same row while Redis and PostgreSQL keep them apart.
_NAME = re.compile(r"[a-z0-9][a-z0-9_.:-]{0,63}\Z")


def check_name(name: object, what: str = "sequence name") -> str:
    """``name`` if it is a valid sequence or namespace name; a typed error naming the rule otherwise."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"a {what} must be a str, got {type(name).__name__}")
    if _NAME.match(name) is None:
        raise InvalidIDError(
            f"invalid {what} {name!r}: 1 to {NAME_LENGTH} characters of a-z, 0-9, '_', '.', ':', '-', "
            "starting with a letter or digit (lower case, so every backend treats it alike)"
        )
    return name


_PASSWORD = re.compile(r"(://[^:/@]*:)[^/]*@")  # to the last @ of the authority: a password may hold an unescaped @


def hide_password(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages and logs."""
    return _PASSWORD.sub(r"\1***@", url)


_STATE_LOSS_OPTION = "accept_state_loss"


def split_state_loss_option(url: str) -> tuple[str, bool]:
    """``url`` without its ``accept_state_loss=true`` query option, and whether it was given.

    The option lets a configuration that is only a URL (an environment variable, a Django
    setting, the CLI) say what the keyword says; redis-py and the SQL drivers would refuse it as an
    unknown option.
    """
    base, sep, query = url.partition("?")
    if not sep:
        return url, False
    kept, given = [], False
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key != _STATE_LOSS_OPTION:
            kept.append(part)
        elif value.lower() in ("1", "true", "yes", "on"):
            given = True
        elif value.lower() not in ("0", "false", "no", "off"):
            raise InvalidArgumentError(f"{_STATE_LOSS_OPTION} in a Redis URL must be true or false, got {value!r}")
    return (base + "?" + "&".join(kept) if kept else base), given


@dataclass(frozen=True)
class TicketRow:
    """One sequence as a ticket server stores it."""

    name: str
    next_value: int
    step: int
    offset: int


class TicketStore(Protocol):
    """One ticket server.  Implementations must be safe to call from several threads.

    The contract on errors: a store turns its driver's errors into seqid's typed ones in one place
    (:class:`~seqid_orm.errors.BackendUnavailableError` for a server that did not answer or
    refused, :class:`~seqid_orm.errors.StoreTimeoutError` past the deadline), and a sequence fails
    over to its next server on those alone.  Any other exception is a bug and reaches the caller
    as itself, never read as a server that did not answer.
    """

    label: str
    """The server as messages name it (no password)."""

    def allocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        """Reserve up to ``count`` values of sequence ``name``; return ``(first, granted)``.

        ``granted`` is ``count`` unless fewer values are left before ``max_value``.  ``above`` is
        the highest value the caller has seen this server hand out: a counter at or below it went
        back (a restore, a failover), and the reservation is refused *without moving it*
        (:class:`~seqid_orm.errors.CounterRegressedError`), so refused callers cannot walk it up
        into the blocks other processes still use.  Raises
        :class:`~seqid_orm.errors.AllocationError` when the row does not exist (it is never
        created here), :class:`~seqid_orm.errors.GeneratorExhaustedError` when not one value is
        left, :class:`~seqid_orm.errors.BackendMismatchError` when the stored step or offset
        differ, and the backend's own errors when it cannot be reached (the caller treats those
        as "unavailable").
        """
        ...

    def read(self, name: str) -> TicketRow | None:
        """The stored row of ``name``, or ``None``."""
        ...

    def create(self, row: TicketRow) -> None:
        """Insert ``row`` unless a row of that name exists (never an error on a race)."""
        ...

    def raise_to(self, row: TicketRow) -> TicketRow:
        """Create ``row`` if absent, else move its ``next_value`` up to ``row.next_value`` (never
        down) where the step and offset match; return the stored row."""
        ...

    def rows(self) -> list[TicketRow]:
        """Every sequence this server holds, by name."""
        ...

    def after_fork(self) -> None:
        """Forget connections inherited from the parent process (without closing them)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def first_value(offset: int, step: int, start: int) -> int:
    """The smallest value ``>= start`` (and ``>= offset``) congruent to ``offset`` modulo ``step``."""
    start = max(start, offset)
    return start + (offset - start) % step


def last_value_limit(max_value: int, step: int) -> int:
    """The largest value a server may hand out: ``max_value``, and ``next_value`` (one step on)
    must still fit a signed BIGINT."""
    return min(max_value, BIGINT_MAX - step)


def vanished(name: str, label: str) -> AllocationError:
    """The error for a sequence whose stored counter disappeared after this process checked it."""
    return AllocationError(
        f"sequence {name!r} vanished from {label} after this process checked it (a truncated or flushed "
        "table, a deleted row, a Redis restart without persistence...); starting it over would hand out its "
        "ids again. Set its next_value above the largest id in use (`seqid ticket repair`), then restart "
        "the clients"
    )


def regressed(name: str, label: str, next_value: int, above: int) -> CounterRegressedError:
    """The error for a counter found at ``next_value`` by a process that saw it hand out ``above``."""
    return CounterRegressedError(
        f"sequence {name!r} on {label} would hand out {next_value} next although this process has seen it "
        f"hand out {above}: the counter went back (a restored backup, a failover to a replica that lagged, a "
        "deleted and re-created row); taking the block would repeat ids, so it was not taken and the counter "
        "was left where it is. Move it above the largest id in use (`seqid ticket repair`); this process "
        "refuses until then"
    )


def grantable(row: TicketRow, label: str, count: int, step: int, offset: int, limit: int, above: int | None) -> int:
    """How many of ``count`` values the stored ``row`` can hand out, or the typed refusal: a counter at
    or below ``above`` (it went back), a contradicting step or offset, no value left before ``limit``.

    The one judgement of a stored counter, for the stores that read it before they move it (a SQL
    store whose conditional ``UPDATE`` matched nothing, etcd before its transaction).
    """
    name = row.name
    if above is not None and row.next_value <= above:
        raise regressed(name, label, row.next_value, above)
    if (row.step, row.offset) != (step, offset):
        raise BackendMismatchError(
            f"sequence {name!r} on {label} is stored with step={row.step} offset={row.offset}, but this "
            f"client uses step={step} offset={offset}: clients must list the same servers in the same "
            "order (or pass the same step= and offsets=), else two servers hand out the same values"
        )
    left = (limit - row.next_value) // step + 1 if row.next_value <= limit else 0
    if left <= 0:
        raise GeneratorExhaustedError(
            f"sequence {name!r} on {label} is exhausted: its next value {row.next_value} is past "
            f"{limit} (the largest value allowed with step {step})"
        )
    return min(count, left)


# --- worker-id leases ----------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """A lease a store granted: the worker id, the previous holder's high-water mark, and how long
    the new holder must wait because the store may have lost a holder's record."""

    worker_id: int
    mark_ms: int
    """The last Unix millisecond the previous holder of this worker id may have used (0: none)."""
    wait_ms: int = 0
    """Milliseconds (by the store's clock) to wait before the first id.  One ttl for a takeover of
    an expired or released worker id: its record may be a copy put back under a live holder (a
    restore), who stamps up to one ttl past its last renewal whatever the record says.  One ttl
    plus the clock tolerance where the store has no record of the last holder and cannot rule one
    out (its state was lost, its history went back, or the namespace is new)."""


@dataclass(frozen=True)
class LeaseRow:
    """One worker id of a namespace as a store holds it (``seqid lease status``)."""

    namespace: str
    worker_id: int
    held: bool
    expires_in_ms: int
    mark_ms: int
    holder: str = ""
    """``pid@host`` of the process holding it (cut to 16 characters), when held and known."""


_TOKEN_RANDOM = 16  # hex digits of randomness at the start of a lease token (64 bits)
_HOST_CHARS = re.compile(r"[^A-Za-z0-9.-]")


def new_token() -> str:
    """A lease token: 64 random bits, then who holds it (``pid@host``), in the 32 characters the
    tables have always had.  The randomness fences holders apart; the rest is for ``seqid status``."""
    host = _HOST_CHARS.sub("", socket.gethostname())
    return (secrets.token_hex(_TOKEN_RANDOM // 2) + f"{os.getpid()}@{host}")[:TOKEN_LENGTH]


def holder_of(token: str) -> str:
    """The ``pid@host`` part of a token :func:`new_token` made (``""`` for any other token)."""
    tail = token[_TOKEN_RANDOM:]
    return tail if "@" in tail else ""


class LeaseStore(Protocol):
    """Where worker-id leases live.  Expiry is judged by the *store's* clock (the database's,
    Redis's), the one clock every node shares; implementations must be thread-safe."""

    label: str

    def acquire(self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int) -> Grant | None:
        """Take a free or expired worker id in ``range(max_workers)`` for ``token``; ``None`` if all are held.

        The store keeps a record per namespace: when it was first seen (``born``) and the highest
        worker id ever granted since; never-used ids are granted lowest first.  A worker id with
        no record of its own is then either new (above the highest) or lost (at or below it:
        its row was deleted).  ``Grant.wait_ms`` is ``quarantine_ms`` (one ttl plus the clock
        tolerance) for a lost one, and what is left of ``quarantine_ms`` since ``born`` for the
        others, since a namespace record that is new may be one the store lost.
        """
        ...

    def renew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        """Extend the lease if ``token`` still holds it, raising its mark to ``mark_ms``; ``False`` if lost."""
        ...

    def release(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        """Give the worker id back (if ``token`` holds it), leaving the mark for the next holder."""
        ...

    def namespaces(self) -> list[str]:
        """Every namespace the store holds leases or marks of (read-only: ``seqid status``)."""

    def leases(self, namespace: str) -> list[LeaseRow]:
        """Every worker id of ``namespace`` the store knows."""
        ...

    def after_fork(self) -> None: ...

    def close(self) -> None: ...


class _Store(Protocol):
    """What :class:`Deferred` reads of a store: both store protocols have it."""

    label: str

    def after_fork(self) -> None: ...


_S = TypeVar("_S", bound=_Store)


class Deferred(Generic[_S]):
    """A store known by its label until the first call that needs it opens it, once, whichever thread
    asks first (a URL: opening imports its driver and builds an engine or a client, 0.1-1.2 s, which
    must not happen on a running event loop); or one opened already (an object passed in).  Ticket
    sequences and worker leases both hold their stores so (:func:`~.defer`)."""

    def __init__(self, label: str, open: Callable[[], _S] | None = None, opened: _S | None = None) -> None:
        self.label = label
        self._open = open
        self.opened: _S | None = opened
        """The store, once opened (``None`` before: it holds no connection then)."""
        self._lock = threading.Lock()  # held while opening, never across a store's call

    def get(self) -> _S:
        """The store, opened now (in the calling thread) if it was not yet."""
        store = self.opened
        if store is None:
            with self._lock:
                store = self.opened
                if store is None:
                    assert self._open is not None
                    store = self.opened = self._open()
                    self.label = store.label  # the store's own spelling
        return store

    def after_fork(self) -> None:
        """In a forked child: a new lock (a parent's thread may have held this one at the fork), and the
        opened store's own reset (new connections)."""
        self._lock = threading.Lock()
        if self.opened is not None:
            self.opened.after_fork()
