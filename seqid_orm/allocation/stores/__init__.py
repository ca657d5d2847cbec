"""Allocation backends: where ticket sequences (and worker leases) keep their shared state.

The core (:mod:`seqid_orm.allocation.tickets`) decides how values are used — segments, double buffering,
which server to ask, what to do when one fails; a backend only runs the atomic statements of one
server.  Backends are imported when a URL asks for them, so the core still needs nothing
outside the standard library:

================================  ==========================================  ================
target                            backend                                     extra
================================  ==========================================  ================
``postgresql+psycopg://...``,     :mod:`.sqlalchemy` (SQL Server and Oracle   ``sqlalchemy``
``mysql+pymysql://...``,          by the same Core statements)                and a driver
``sqlite:///file``, an ``Engine``
``redis://``, ``rediss://``,      :mod:`.redis`                               ``redis``
``unix://``, a ``redis.Redis``
``etcd://h:p[,h:p...][/prefix]``  :mod:`.etcd` (tickets and leases)           ``etcd``
a Django database alias           :mod:`.django` (``TicketField``)            ``django``
================================  ==========================================  ================

:func:`open_ticket_store`, :func:`open_lease_store` and :func:`open_lock_store` (the migration lock's rows,
on a SQLAlchemy ``Engine`` or a Django connection) are the one factory of every store: the core's
modules that decide (``servers.py``, ``grants.py``, ``renewal.py``) import the contracts of
:mod:`.base` and the steps of :mod:`seqid_orm.calls.steps`, never this package, which draws the drivers in.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids` and this package's
modules (the drivers' only when a store of that kind is opened).

What a store decides is written once, as :mod:`seqid_orm.calls.steps` (generators of statements): a thread runs
them on the synchronous driver, an event loop awaits them on the asynchronous one where the driver
has a twin (psycopg 3, aiomysql, ``redis.asyncio``), else in a worker thread (SQLite among them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import ArgumentTypeError
from ...ids.validate import check_bool, check_seconds
from .base import ETCD_SCHEMES, Deferred, LeaseStore, TicketRow, TicketStore, check_name, hide_password
from .urls import REDIS_SCHEMES, SQL_SCHEMES, backend_of, check_url, scheme_of

__all__ = [
    "ETCD_SCHEMES",
    "MAX_CONNECT_TIMEOUT",
    "REDIS_SCHEMES",
    "SQL_SCHEMES",
    "TicketRow",
    "TicketStore",
    "backend_of",
    "check_name",
    "check_store_options",
    "check_url",
    "defer",
    "hide_password",
    "open_lease_store",
    "open_ticket_store",
    "scheme_of",
]

MAX_CONNECT_TIMEOUT = 3600.0
_S = TypeVar("_S", TicketStore, LeaseStore)
_STORE_METHODS = ("allocate", "read", "create", "raise_to", "rows", "label", "after_fork", "close")


def check_store_options(
    connect_timeout: float, create_table: bool, accept_state_loss: bool, timeout: float
) -> tuple[float, float]:
    """A store's options checked (the time-outs as floats), before anything is imported or connected."""
    connect_timeout = check_seconds("connect_timeout", connect_timeout, 0.1, MAX_CONNECT_TIMEOUT)
    timeout = check_seconds("timeout", timeout, 0.1, MAX_CONNECT_TIMEOUT)
    check_bool("create_table", create_table)
    check_bool("accept_state_loss", accept_state_loss)
    return connect_timeout, timeout


def defer(target: object, what: str, open: Callable[[object], _S]) -> Deferred[_S]:
    """``target``'s store, held until the first call that needs it: a URL is checked now (scheme,
    port, options: what opening would refuse, with no driver imported) and opened by that call; an
    Engine, a client or a store is opened now (nothing to import).  ``open`` is one of the factories
    below, its options bound."""
    if isinstance(target, str):
        check_url(target, what)
        return Deferred(hide_password(target), lambda: open(target))
    store = open(target)
    return Deferred(store.label, opened=store)


def open_lease_store(
    target: object,
    *,
    connect_timeout: float = 5.0,
    create_table: bool = True,
    accept_state_loss: bool = False,
    timeout: float = 5.0,
) -> LeaseStore:
    """The lease store for ``target``: a SQLAlchemy, Redis or etcd URL, an ``Engine``, a ``redis.Redis`` or a store.

    ``accept_state_loss`` allows a Redis server that would lose the leases on a restart (see
    :class:`~seqid_orm.errors.VolatileStoreError`), as for ticket stores.
    """
    methods = ("acquire", "renew", "release", "leases", "label")
    store: LeaseStore = _open(target, "Lease", methods, None, connect_timeout, create_table, accept_state_loss, timeout)
    return store


def open_ticket_store(
    target: object,
    *,
    connect_timeout: float = 5.0,
    create_table: bool = True,
    table_name: str | None = None,
    accept_state_loss: bool = False,
    timeout: float = 5.0,
) -> TicketStore:
    """The store for ``target``: a URL, a SQLAlchemy ``Engine``, a ``redis.Redis`` or a store.

    ``create_table`` and ``table_name`` apply to SQL stores only.  ``accept_state_loss`` accepts a
    server that can lose acknowledged writes (see :class:`~seqid_orm.errors.VolatileStoreError`).
    ``timeout`` bounds every call on the store (:class:`~seqid_orm.errors.StoreTimeoutError` past it).
    Bad arguments and an unknown scheme raise a typed error before anything is imported or connected.
    """
    store: TicketStore = _open(
        target, "Ticket", _STORE_METHODS, table_name, connect_timeout, create_table, accept_state_loss, timeout
    )
    return store


def _open(
    target: object,
    kind: str,
    methods: tuple[str, ...],
    table_name: str | None,
    connect_timeout: float,
    create_table: bool,
    accept_state_loss: bool,
    timeout: float,
) -> Any:
    """The ``kind`` store (``"Ticket"``, ``"Lease"``) for ``target``, its options checked first; its
    backend's module (and driver) imported only now.  A store object (one with ``methods``) is its own."""
    what = {"Ticket": "ticket server", "Lease": "lease store"}[kind]
    connect_timeout, timeout = check_store_options(connect_timeout, create_table, accept_state_loss, timeout)
    backend = backend_of(target, what)
    module: Any
    options: dict[str, Any] = {"connect_timeout": connect_timeout, "timeout": timeout}
    if backend == "redis":
        from . import redis as module

        options["accept_state_loss"] = accept_state_loss
    elif backend == "etcd":
        from . import etcd as module
    elif backend == "sql":
        from . import sqlalchemy as module

        options.update(create_table=create_table, accept_state_loss=accept_state_loss, table_name=table_name)
    elif all(hasattr(target, a) for a in methods):
        return target
    else:
        got = f"{type(target).__module__}.{type(target).__qualname__}"
        raise ArgumentTypeError(
            f"a {what} must be a URL, a SQLAlchemy Engine, a redis.Redis or a {kind.lower()} store, got {got}"
        )
    prefix = {"redis": "Redis", "etcd": "Etcd", "sql": "SQLAlchemy"}[backend]
    return getattr(module, f"{prefix}{kind}Store")(target, **options)


def lock_target(target: object) -> tuple[str, str | None]:
    """What the migration lock needs of the database ``target`` reaches (a SQLAlchemy ``Engine`` or
    ``Connection``, a Django database connection): its vendor (SQLAlchemy's dialect name, Django's
    vendor: ``mysql`` for MariaDB too) and, on SQLite, its file (``None`` for a database in memory)."""
    if hasattr(target, "settings_dict") and hasattr(target, "alias"):  # a Django connection
        vendor: str = target.vendor  # type: ignore[attr-defined]
        if vendor != "sqlite" or target.is_in_memory_db():  # type: ignore[attr-defined]
            return vendor, None
        return vendor, str(target.settings_dict["NAME"])
    engine = getattr(target, "engine", target)
    if hasattr(engine, "dialect") and hasattr(engine, "url"):
        name: str = engine.dialect.name
        path = engine.url.database if name == "sqlite" else None
        if not path or path == ":memory:" or path.startswith("file::memory:"):
            return name, None
        return name, str(path)
    got = f"{type(target).__module__}.{type(target).__qualname__}"
    raise ArgumentTypeError(f"the migration lock needs a SQLAlchemy Engine or a Django connection, got {got}")


def open_lock_store(target: object) -> Any:
    """The migration lock's store (:class:`~seqid_orm.allocation.migration_lock.LockStore`) on the database
    ``target`` reaches: connections of the engine's own for SQLAlchemy, a connection of its own to the same
    alias for Django (never the one the migrations run on); its module imported only now."""
    if hasattr(target, "settings_dict") and hasattr(target, "alias"):
        from .django import DjangoLockStore

        return DjangoLockStore(target.alias)
    from .sqlalchemy import SQLAlchemyLockStore

    lock_target(target)  # an Engine or a Connection, else a typed refusal
    engine: Any = getattr(target, "engine", target)
    return SQLAlchemyLockStore(engine)
