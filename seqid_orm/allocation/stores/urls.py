"""Store URLs read with the standard library alone: which backend a URL names, a Sentinel URL, and what
can be checked of a URL before its driver is imported.

An object made with a URL (a :class:`~seqid_orm.allocation.tickets.TicketSequence`, a
:class:`~seqid_orm.allocation.leases.WorkerLease`) opens its store at its first call, off any event
loop (opening imports a driver and builds an engine or a client); :func:`check_url` refuses a
mistake in the URL where the object is made all the same, with the message opening would give.

May import: the standard library, :mod:`seqid_orm.errors` and this package's ``base``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from ...errors import InvalidArgumentError
from .base import ETCD_SCHEMES, hide_password, split_state_loss_option

__all__ = [
    "REDIS_SCHEMES",
    "SENTINEL_SCHEME",
    "SQL_SCHEMES",
    "SentinelURL",
    "backend_of",
    "check_url",
    "psycopg_typed_options",
    "scheme_of",
]

#: SQLAlchemy backend names a ticket server may use (the part of a URL before ``+driver``).
SQL_SCHEMES = ("postgresql", "mysql", "mariadb", "sqlite", "mssql", "oracle")
REDIS_SCHEMES = ("redis", "rediss", "unix")


def scheme_of(url: str) -> str:
    """The backend part of a URL's scheme (``postgresql`` for ``postgresql+psycopg://...``)."""
    head, sep, _ = url.partition("://")
    if not sep:
        head, sep, _ = url.partition(":")
    return head.split("+", 1)[0].lower() if sep else ""


def backend_of(target: object, what: str) -> str:
    """Which backend serves ``target``: ``"sql"`` (a SQLAlchemy URL or ``Engine``), ``"redis"``
    (a Redis URL or ``redis.Redis``), ``"etcd"`` (an etcd URL), or ``""`` (anything else: perhaps a
    store object itself).

    Nothing is imported or connected; a URL with an unknown scheme raises
    :class:`~seqid_orm.errors.InvalidArgumentError` naming ``what`` ("ticket server", ...).
    """
    if isinstance(target, str):
        scheme = scheme_of(target)
        if scheme in REDIS_SCHEMES:
            return "redis"
        if scheme in SQL_SCHEMES:
            return "sql"
        if scheme in ETCD_SCHEMES:
            return "etcd"
        sql = ", ".join(f"{s}://" for s in SQL_SCHEMES)
        redis = ", ".join(f"{s}://" for s in REDIS_SCHEMES)
        raise InvalidArgumentError(
            f"unknown {what} scheme {scheme or '(none)'!r} in {hide_password(target)!r}; "
            f"use a SQLAlchemy URL ({sql}, with an optional +driver), a Redis URL ({redis}) or an etcd URL (etcd://)"
        )
    kind = f"{type(target).__module__}.{type(target).__qualname__}"
    if kind.startswith("sqlalchemy.") and type(target).__name__ == "Engine":
        return "sql"
    if kind.startswith("redis.") and hasattr(target, "register_script"):
        return "redis"
    return ""


SENTINEL_SCHEME = "redis+sentinel"
_SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelURL:
    """A ``redis+sentinel://`` URL read: the Sentinels, the service whose primary to use, its
    database and credentials (the password is the primary's; ``sentinel_password`` the Sentinels')."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelURL:
        """Read ``redis+sentinel://[[user]:password@]host[:port][,...]/service[/db][?sentinel_password=]``.

        redis-py has no Sentinel URL of its own (``from_url`` refuses the scheme), so this is the
        one place one is read; every mistake is named, nothing is guessed."""
        head, sep, rest = url.partition("://")
        if not sep or head.lower() != SENTINEL_SCHEME:
            raise InvalidArgumentError(f"a Sentinel URL starts with {SENTINEL_SCHEME}://, got {hide_password(url)!r}")
        rest, _, query = rest.partition("?")
        netloc, _, path = rest.partition("/")
        userinfo, _, hosts = netloc.rpartition("@")
        username = password = None
        if userinfo:
            user, has_password, secret = userinfo.partition(":")
            username = unquote(user) or None
            password = unquote(secret) if has_password else None
        sentinels = tuple(_host_port(part, url) for part in hosts.split(","))
        names = [unquote(p) for p in path.split("/") if p]
        if not names or len(names) > 2:
            raise InvalidArgumentError(
                "a Sentinel URL names one service and optionally a database, "
                f"redis+sentinel://host:26379/mymaster/0, got {hide_password(url)!r}"
            )
        db = 0
        if len(names) == 2:
            if not names[1].isdigit():
                raise InvalidArgumentError(f"the database in a Sentinel URL is a number, got {names[1]!r}")
            db = int(names[1])
        sentinel_password = None
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key != "sentinel_password":
                raise InvalidArgumentError(
                    f"unknown option {key!r} in a Sentinel URL (it takes sentinel_password and accept_state_loss)"
                )
            sentinel_password = value
        return cls(sentinels, names[0], db, username, password, sentinel_password)


def _host_port(part: str, url: str) -> tuple[str, int]:
    host, port = part, ""
    if part.startswith("["):  # [::1]:26379
        host, _, after = part[1:].partition("]")
        port = after.removeprefix(":")
    elif ":" in part:
        host, _, port = part.rpartition(":")
    if not host or (port and not port.isdigit()) or not 0 < int(port or _SENTINEL_PORT) < 65536:
        raise InvalidArgumentError(f"cannot read Sentinel host {part!r} in {hide_password(url)!r} (host:port)")
    return host, int(port or _SENTINEL_PORT)


#: psycopg 3's connection options that a URL's query gives as text, and their types.  SQLAlchemy
#: passes a query's values to the driver as strings, and psycopg takes ``prepare_threshold="None"``
#: for a number: every statement then failed with a ``TypeError``.
_PSYCOPG_TYPED = {"prepare_threshold"}


def psycopg_typed_options(query: Mapping[str, str]) -> dict[str, int | None]:
    """The options of a psycopg URL's ``query`` that must not stay text, typed."""
    typed: dict[str, int | None] = {}
    for name in _PSYCOPG_TYPED & set(query):
        text = query[name].strip()
        if text.lower() in ("none", "null", ""):
            typed[name] = None
        elif text.isdigit():
            typed[name] = int(text)
        else:
            raise InvalidArgumentError(f"{name} in the URL must be a whole number or None, got {query[name]!r}")
    return typed


def check_url(url: str, what: str) -> str:
    """``url``'s backend (:func:`backend_of`), with what the standard library can check of it checked
    too: its ``accept_state_loss`` option, a port that is a number, a Sentinel URL, psycopg's typed
    options.  What only the driver knows (an unknown ``+driver``, its other options) is refused when
    the store opens."""
    backend = backend_of(url, what)
    if backend == "etcd":
        return backend
    if url.lower().startswith(SENTINEL_SCHEME + "://"):
        SentinelURL.parse(split_state_loss_option(url)[0])
        return backend
    split_state_loss_option(url)
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018  # raises for a port that is no number or out of range
    except ValueError as exc:
        raise InvalidArgumentError(f"cannot use {hide_password(url)!r} as a store: {exc}") from None
    head = url.partition("://")[0].lower()
    if head in ("postgresql+psycopg", "postgresql+psycopg_async"):
        psycopg_typed_options(dict(parse_qsl(parts.query, keep_blank_values=True)))
    return backend
