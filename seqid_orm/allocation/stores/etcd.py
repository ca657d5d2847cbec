"""Ticket sequences on etcd v3: a store that cannot roll back acknowledged writes by design.

A write etcd acknowledges was committed by a Raft majority, so the loss of any minority of members
(a crash, a wiped disk, a partition) loses none of it: the faults that make a replicated SQL or
Redis store go back (an asynchronous standby promoted, a replica without ``WAIT``) cannot happen.
What can still happen is an operator restoring a snapshot: the cluster's *revision* (a counter
every write moves on, carried in every reply's header) then goes back, and a store that saw a later
one refuses (:class:`~seqid_orm.errors.StoreHistoryError`).

The client is `etcd3gw <https://opendev.org/openstack/etcd3gw>`_ (OpenStack), which speaks etcd's
own v3 JSON gateway over HTTP: no gRPC build, no protobuf pins, one small dependency (requests).
The gRPC clients were weighed and left: ``etcd3`` (python-etcd3) has had no release since 2020 and
breaks with current protobuf; ``aetcd`` is async only.  Each member of the URL gets its own client;
a member that fails or stalls is left for the next within the call's deadline (an election, a
partitioned minority and a dead leader all look like that for a moment).

One key per sequence, ``<prefix>/tickets/<name>``, holding ``next_value:step:offset`` as text.  A
reservation is one transaction that compares the key's ``mod_revision`` with the one this store
last read and puts the moved counter; on a race the same transaction returns the key as it is
now, and the store tries again with that (one round trip per reservation while it wins).  A
missing key is refused, never created (as on every store); reads are linearizable (etcd's default
for ranges).  A transaction whose reply is lost may have been applied: its block is then never
used, which skips values and repeats none.

Only tickets live here so far; worker-id leases on etcd are the next step (issue 33).
"""

from __future__ import annotations

import base64
import secrets
import threading
import time
from typing import Any
from urllib.parse import unquote

from ...errors import (
    AllocationError,
    BackendUnavailableError,
    InvalidArgumentError,
    StoreHistoryError,
    StoreTimeoutError,
)
from .base import ETCD_SCHEMES, TicketRow, check_name, grantable, hide_password, last_value_limit, vanished

try:
    from etcd3gw import exceptions as etcd_errors
    from etcd3gw.client import Etcd3Client
except ImportError as exc:  # say which extra brings it
    raise ImportError("etcd ticket servers need etcd3gw: pip install 'seqid-orm[etcd]'") from exc

__all__ = ["EtcdTicketStore", "parse_etcd_url"]

_RACES = 32  # transactions lost to other clients before a reservation gives up


def parse_etcd_url(url: str) -> tuple[list[tuple[str, int]], str]:
    """``etcd://host:port[,host:port...][/prefix]`` as its members and its key prefix (``seqid``)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ETCD_SCHEMES:
        raise InvalidArgumentError(
            f"not an etcd URL: {hide_password(url)!r} (etcd://host:port[,host:port...][/prefix])"
        )
    hosts, _, path = rest.partition("/")
    prefix = unquote(path.partition("?")[0]).strip("/") or "seqid"
    members = []
    for part in hosts.split(","):
        host, colon, port = part.rpartition(":")
        if not colon:
            host, port = part, "2379"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgumentError(
                f"cannot use {hide_password(url)!r} as a store: {part!r} is not host:port "
                "(etcd://host:port[,host:port...][/prefix])"
            )
        members.append((host.strip("[]"), int(port)))
    return members, prefix


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode()


def _row(name: str, kv: dict[str, Any]) -> TicketRow:
    next_value, step, offset = (int(v) for v in _text(kv["value"]).split(":"))
    return TicketRow(name, next_value, step, offset)


def _value(row: TicketRow) -> str:
    return _b64(f"{row.next_value}:{row.step}:{row.offset}")


class EtcdTicketStore:
    """A ticket server on an etcd cluster: see the module docstring.  ``target``: an ``etcd://`` URL.

    ``timeout`` bounds every call (:class:`~seqid_orm.errors.StoreTimeoutError` past it), members
    tried in turn within it; ``connect_timeout`` bounds one try's connect.
    """

    def __init__(self, target: str, *, connect_timeout: float = 5.0, timeout: float = 5.0) -> None:
        members, self.prefix = parse_etcd_url(target)
        self.label = hide_password(target)
        self.timeout = timeout
        per_try = max(0.1, min(connect_timeout, timeout / 2))
        self._clients = [Etcd3Client(host=h, port=p, timeout=per_try, api_path="/v3/") for h, p in members]
        self._current = 0
        self._lock = threading.Lock()
        self._revision = 0  # the highest cluster revision a reply carried: it never goes back
        self._cached: dict[str, tuple[TicketRow, int]] = {}  # name -> (row, its mod_revision)

    # --- one call, on the first member that answers within the deadline -----------------

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        errors: list[str] = []
        tries = 0
        while True:
            with self._lock:
                index = self._current
            client = self._clients[index]
            try:
                reply: dict[str, Any] = client.post(client.get_url(path), json=body)
            except (
                etcd_errors.ConnectionFailedError,  # refused, reset; and HTTP 503: "leader changed", "no leader"
                etcd_errors.ConnectionTimeoutError,  # a member that stalls, or a partitioned one
                etcd_errors.InternalServerError,
            ) as exc:
                errors.append(f"{client.host}:{client.port}: {type(exc).__name__}: {str(exc)[:200]}")
            except etcd_errors.Etcd3Exception as exc:  # a request etcd refuses: no other member would take it
                raise BackendUnavailableError(f"etcd {self.label} refused a request: {str(exc)[:500]}") from exc
            else:
                self._check_revision(reply)
                return reply
            tries += 1
            with self._lock:
                if self._current == index:
                    self._current = (index + 1) % len(self._clients)
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreTimeoutError(
                    f"etcd {self.label} did not answer within {self.timeout} s ({tries} tries): "
                    + "; ".join(errors[-3:])
                )
            if tries % len(self._clients) == 0:  # every member refused: an election is under way
                time.sleep(min(left, 0.05 + secrets.randbelow(50) / 1000))

    def _check_revision(self, reply: dict[str, Any]) -> None:
        revision = int(reply.get("header", {}).get("revision", 0))
        with self._lock:
            if revision < self._revision:
                raise StoreHistoryError(
                    f"etcd {self.label} answers at revision {revision} after this process saw revision "
                    f"{self._revision}: the cluster went back (a snapshot restored). Handing out its counters "
                    "could repeat ids, so ticket sequences refuse it until `seqid ticket repair` moves every "
                    "counter above the largest id in use; then restart the processes"
                )
            self._revision = revision

    def _key(self, name: str) -> str:
        return f"{self.prefix}/tickets/{name}"

    def _range(self, key: str) -> dict[str, Any] | None:
        kvs = self._call("/kv/range", {"key": _b64(key)}).get("kvs") or []
        return kvs[0] if kvs else None

    # --- the TicketStore protocol --------------------------------------------------------

    def allocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        key = self._key(name)
        limit = last_value_limit(max_value, step)
        cached = self._cached.get(name)
        if cached is None:
            kv = self._range(key)
            if kv is None:
                raise vanished(name, self.label)
            cached = (_row(name, kv), int(kv["mod_revision"]))
        for _ in range(_RACES):
            row, revision = cached
            granted = grantable(row, self.label, count, step, offset, limit, above)
            moved = TicketRow(name, row.next_value + granted * step, step, offset)
            reply = self._call(
                "/kv/txn",
                {
                    "compare": [{"key": _b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": revision}],
                    "success": [{"request_put": {"key": _b64(key), "value": _value(moved)}}],
                    "failure": [{"request_range": {"key": _b64(key)}}],
                },
            )
            if reply.get("succeeded"):
                self._cached[name] = (moved, int(reply["header"]["revision"]))
                return row.next_value, granted
            # another client moved it first: its key as it is now came back in the same reply
            found = (reply.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
            if not found:
                self._cached.pop(name, None)
                raise vanished(name, self.label)
            cached = (_row(name, found[0]), int(found[0]["mod_revision"]))
        self._cached.pop(name, None)
        raise AllocationError(f"sequence {name!r} on {self.label} changed under {_RACES} attempts to reserve values")

    def read(self, name: str) -> TicketRow | None:
        kv = self._range(self._key(check_name(name)))
        return None if kv is None else _row(name, kv)

    def create(self, row: TicketRow) -> None:
        key = _b64(self._key(row.name))
        self._call(
            "/kv/txn",
            {
                "compare": [{"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": "0"}],
                "success": [{"request_put": {"key": key, "value": _value(row)}}],
            },
        )

    def raise_to(self, row: TicketRow) -> TicketRow:
        key = _b64(self._key(row.name))
        for _ in range(_RACES):
            kv = self._range(self._key(row.name))
            if kv is None:
                compare = {"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": "0"}
                stored = row
            else:
                stored = _row(row.name, kv)
                if (stored.step, stored.offset) != (row.step, row.offset) or stored.next_value >= row.next_value:
                    return stored
                stored = TicketRow(row.name, row.next_value, row.step, row.offset)
                compare = {"key": key, "result": "EQUAL", "target": "MOD", "mod_revision": kv["mod_revision"]}
            reply = self._call(
                "/kv/txn", {"compare": [compare], "success": [{"request_put": {"key": key, "value": _value(stored)}}]}
            )
            if reply.get("succeeded"):
                self._cached.pop(row.name, None)
                return stored
        raise AllocationError(f"sequence {row.name!r} on {self.label} changed under every attempt to repair it")

    def rows(self) -> list[TicketRow]:
        start = f"{self.prefix}/tickets/"
        end = start[:-1] + chr(ord(start[-1]) + 1)
        kvs = self._call("/kv/range", {"key": _b64(start), "range_end": _b64(end)}).get("kvs") or []
        return sorted((_row(_text(kv["key"])[len(start) :], kv) for kv in kvs), key=lambda r: r.name)

    def after_fork(self) -> None:
        # requests' pooled sockets are the parent's: new sessions, and nothing cached from there
        for client in self._clients:
            client.session = type(client.session)()
        self._cached.clear()

    def close(self) -> None:
        for client in self._clients:
            client.session.close()
