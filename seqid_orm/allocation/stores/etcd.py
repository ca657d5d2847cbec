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

Worker-id leases (:class:`EtcdLeaseStore`) use etcd's own leases for expiry, judged by the
cluster's leader (the store's clock, as the database's ``now`` is on a SQL store): a holder's key
``<prefix>/leases/<namespace>/w/<id>`` is attached to an etcd lease of ``ceil(ttl)`` seconds (etcd
counts whole seconds, and extends a lease past a leader change, never shortens it: the store lets
a newcomer in later, not sooner) that renewals keep alive; its high-water mark
``.../m/<id>`` stays when the lease ends, so the next holder waits for it exactly as on the
other stores.  A namespace is created with a key held by a lease of ``ttl + clock_tolerance``: while
it lives, every grant waits what is left of it (a namespace that is new may be one a restored
snapshot forgot).  The namespace records the cluster id it was created on; a snapshot restored into
a new cluster (``etcdctl snapshot restore`` makes a new cluster id) starts that wait again.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, etcd3gw and this package's
``base``, ``retry``.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ...calls.retry import LOST_TRANSACTION, MEMBERS, Again, Deadline, socket_share
from ...calls.steps import Call, Steps, call, drive
from ...errors import (
    AllocationError,
    BackendUnavailableError,
    InvalidArgumentError,
    StoreHistoryError,
    StoreTimeoutError,
)
from .base import (
    ETCD_SCHEMES,
    Grant,
    LeaseRow,
    TicketRow,
    check_name,
    grantable,
    hide_password,
    holder_of,
    last_value_limit,
    vanished,
)

try:
    from etcd3gw import exceptions as etcd_errors
    from etcd3gw.client import Etcd3Client
except ImportError as exc:  # say which extra brings it
    raise ImportError("etcd ticket servers need etcd3gw: pip install 'seqid-orm[etcd]'") from exc

__all__ = [
    "EtcdLeaseStore",
    "EtcdOptions",
    "EtcdTicketStore",
    "cluster_status",
    "etcd_options",
    "linearizable_revision",
    "parse_etcd_url",
]

_MEMBER_FAULTS = (
    etcd_errors.ConnectionFailedError,  # refused, reset; and HTTP 503: "leader changed", "no leader"
    etcd_errors.ConnectionTimeoutError,  # a member that stalls, or a partitioned one
    etcd_errors.InternalServerError,
)


_FORM = "etcd://[user:password@]host:port[,host:port...][/prefix][?tls=true&ca=PATH&cert=PATH&key=PATH]"


@dataclass(frozen=True)
class EtcdOptions:
    """What an etcd URL says: its members, the key prefix, TLS and the user to authenticate as."""

    members: tuple[tuple[str, int], ...]
    prefix: str = "seqid"
    tls: bool = False
    ca: str | None = None
    """A CA bundle to verify the members' certificates with (default: the system's)."""
    cert: str | None = None
    key: str | None = None
    """A client certificate and its key (etcd's ``--client-cert-auth``)."""
    user: str | None = None
    password: str = ""


def etcd_options(url: str) -> EtcdOptions:
    """The options of ``etcd://[user:password@]host:port[,host:port...][/prefix][?query]``.

    Query options: ``tls=true`` (HTTPS; implied by ``ca``, ``cert`` and ``key``), ``ca``, ``cert``
    and ``key`` (file paths, as etcdctl's ``--cacert``, ``--cert``, ``--key``); ``accept_state_loss``
    is accepted and means nothing here (etcd cannot lose an acknowledged write).  Anything else is
    refused, naming it, rather than ignored.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ETCD_SCHEMES:
        raise InvalidArgumentError(f"not an etcd URL: {hide_password(url)!r} ({_FORM})")
    rest, _, query = rest.partition("?")
    userinfo, at, rest = rest.rpartition("@")
    hosts, _, path = rest.partition("/")
    prefix = unquote(path).strip("/") or "seqid"
    members = []
    for part in hosts.split(","):
        host, colon, port = part.rpartition(":")
        if not colon:
            host, port = part, "2379"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgumentError(
                f"cannot use {hide_password(url)!r} as a store: {part!r} is not host:port ({_FORM})"
            )
        members.append((host.strip("[]"), int(port)))
    user, password = (unquote(x) for x in userinfo.partition(":")[::2]) if at else (None, "")
    found: dict[str, str] = {}
    for item in filter(None, query.split("&")):
        name, _, value = item.partition("=")
        if name not in ("tls", "ca", "cert", "key", "accept_state_loss"):
            raise InvalidArgumentError(
                f"unknown etcd URL option {name!r} in {hide_password(url)!r}: the options are tls, ca, cert and key"
            )
        found[name] = unquote(value)
    said = found.get("tls", "false").lower()
    if said not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise InvalidArgumentError(f"tls in an etcd URL must be true or false, got {said!r} ({hide_password(url)!r})")
    tls = said in ("1", "true", "yes", "on") or any(k in found for k in ("ca", "cert", "key"))
    if ("cert" in found) != ("key" in found):
        raise InvalidArgumentError(f"an etcd client certificate needs both cert= and key= ({hide_password(url)!r})")
    for option in ("ca", "cert", "key"):  # named now, not as requests' OSError at the first call
        if option in found and not os.path.isfile(found[option]):
            where = hide_password(url)
            raise InvalidArgumentError(f"{option}={found[option]} in an etcd URL is not a file ({where!r})")
    return EtcdOptions(
        tuple(members), prefix, tls, found.get("ca"), found.get("cert"), found.get("key"), user or None, password
    )


def parse_etcd_url(url: str) -> tuple[list[tuple[str, int]], str]:
    """``etcd://host:port[,host:port...][/prefix]`` as its members and its key prefix (``seqid``)."""
    options = etcd_options(url)
    return list(options.members), options.prefix


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode()


def _row(name: str, kv: dict[str, Any]) -> TicketRow:
    next_value, step, offset = (int(v) for v in _text(kv["value"]).split(":")[:3])
    return TicketRow(name, next_value, step, offset)


def _cluster_of(kv: dict[str, Any]) -> str:
    """The cluster id a counter was last written on ('' before seqid recorded it)."""
    parts = _text(kv["value"]).split(":")
    return parts[3] if len(parts) > 3 else ""


def _value(row: TicketRow, cluster_id: str) -> str:
    return _b64(f"{row.next_value}:{row.step}:{row.offset}:{cluster_id}")


def linearizable_revision(path: str, header: dict[str, Any]) -> int:
    """The cluster revision a reply's ``header`` vouches for, or 0 where it vouches for none.

    A key-value request (a range, a transaction) is linearizable: its header's revision is at least
    that of every write acknowledged before it, whichever member answers, so a lower one than this
    process saw means the cluster went back.  A lease request's header is not: etcd fills it with the
    answering member's own last applied revision after forwarding the request to the leader outside
    the log (etcd-io/etcd#5206, #13915), and a follower a few entries behind answered a lease's
    time-to-live at revision 13 after a transaction had answered 14 (seen in CI: a healthy cluster
    refused as "restored").  Lease replies are never compared.

    >>> linearizable_revision("/kv/txn", {"revision": "14"})
    14
    >>> linearizable_revision("/kv/lease/timetolive", {"revision": "13"})
    0
    """
    if path.startswith(("/lease/", "/kv/lease/")):
        return 0
    return int(header.get("revision", 0))


class _Cluster:
    """The members of one etcd URL, called in turn within a deadline; the highest revision seen."""

    def __init__(self, target: str, *, connect_timeout: float, timeout: float) -> None:
        self.options = options = etcd_options(target)
        self.prefix = options.prefix
        self.label = hide_password(target)
        self.timeout = timeout
        per_try = max(0.1, min(connect_timeout, socket_share(timeout)))
        self._clients = [
            Etcd3Client(
                host=h,
                port=p,
                protocol="https" if options.tls else "http",
                ca_cert=options.ca,
                cert_cert=options.cert,
                cert_key=options.key,
                timeout=per_try,
                api_path="/v3/",
            )
            for h, p in options.members
        ]
        self._token: str | None = None  # etcd's auth token, when the URL names a user
        self._current = 0
        self._lock = threading.Lock()
        self._revision = 0  # the highest cluster revision a reply carried: it never goes back
        self._revision_from = ""  # the request and member that carried it (named in a refusal)
        self.cluster_id = ""
        """The id of the cluster that answered last (a snapshot restored starts a new one)."""

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``path`` on the first member that answers within the deadline (the store's
        bound on one call, or the caller's passed down): :data:`~seqid_orm.calls.retry.MEMBERS` owns the loop, a member
        that does not answer (refused, reset, stalled, "no leader") is left for the next one."""
        errors: list[str] = []
        tries = 0

        def once(left: float) -> dict[str, Any]:
            nonlocal tries
            tries += 1
            with self._lock:
                index = self._current
            client = self._clients[index]
            try:
                if self.options.user is not None and self._token is None:
                    self._authenticate(client)
                reply: dict[str, Any] = self.post(client, path, body)
            except _MEMBER_FAULTS as exc:
                errors.append(f"{client.host}:{client.port}: {type(exc).__name__}: {str(exc)[:200]}")
                with self._lock:
                    if self._current == index:
                        self._current = (index + 1) % len(self._clients)
                raise
            except etcd_errors.Etcd3Exception as exc:  # a request etcd refuses: no other member would take it
                refused = BackendUnavailableError(f"etcd {self.label} refused a request: {str(exc)[:500]}")
                if "invalid auth token" in str(exc) and self._token is not None and tries == 1:
                    self._token = None  # expired (etcd's --auth-token-ttl): authenticate again, once
                    raise Again(refused) from exc
                raise refused from exc
            self._check_revision(reply, path, f"{client.host}:{client.port}")
            return reply

        def out_of_time() -> StoreTimeoutError:
            tried = f"{tries} tries: " + "; ".join(errors[-3:])
            return StoreTimeoutError(f"etcd {self.label} did not answer within {self.timeout} s ({tried})")

        member_fault: Callable[[Exception], bool] = lambda exc: isinstance(exc, _MEMBER_FAULTS)  # noqa: E731
        replied: dict[str, Any] = drive(
            MEMBERS.steps(lambda left: call(once, left), member_fault, Deadline.within(self.timeout), out_of_time), None
        )
        return replied

    def post(self, client: Etcd3Client, path: str, body: dict[str, Any]) -> Any:
        """One request.  The URL's CA goes with each request, not only on the session: requests lets
        ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` override a session's ``verify`` (psf/requests#3829),
        and many machines set them."""
        extra = {"verify": self.options.ca} if self.options.ca else {}
        return client.post(client.get_url(path), json=body, **extra)

    def _authenticate(self, client: Etcd3Client) -> None:
        """Log in as the URL's user; the token goes with every later request to every member."""
        reply = self.post(client, "/auth/authenticate", {"name": self.options.user, "password": self.options.password})
        token = str(reply.get("token", ""))
        if not token:
            raise BackendUnavailableError(f"etcd {self.label} gave no token to user {self.options.user!r}")
        self._token = token
        for each in self._clients:
            each.session.headers["Authorization"] = token

    def _check_revision(self, reply: dict[str, Any], path: str, member: str) -> None:
        # a streamed reply (a lease keep-alive) carries its header inside "result"
        header = reply.get("header") or (reply.get("result") or {}).get("header") or {}
        if header.get("cluster_id"):
            self.cluster_id = str(header["cluster_id"])
        revision = linearizable_revision(path, header)
        if not revision:
            return
        with self._lock:
            if revision < self._revision:
                raise StoreHistoryError(
                    f"etcd {self.label} answers at revision {revision} ({path} on {member}) after this process "
                    f"saw revision {self._revision} ({self._revision_from}): the cluster went back (a snapshot "
                    "restored). Handing out its counters could repeat ids, so ticket sequences refuse it until "
                    "`seqid ticket repair` moves every counter above the largest id in use; then restart the "
                    "processes"
                )
            self._revision, self._revision_from = revision, f"{path} on {member}"

    def after_fork(self) -> None:
        # requests' pooled sockets are the parent's: new sessions, with the same TLS files and token
        for client in self._clients:
            old, client.session = client.session, type(client.session)()
            client.session.verify, client.session.cert = old.verify, old.cert
            client.session.headers.update(old.headers)

    def member_client(self, client_url: str, timeout: float) -> Etcd3Client:
        """A client of one member's own client URL, with this URL's TLS files and token."""
        host, _, port = client_url.partition("://")[2].rstrip("/").rpartition(":")
        one = Etcd3Client(
            host=host.strip("[]"),
            port=int(port),
            protocol="https" if self.options.tls else "http",
            ca_cert=self.options.ca,
            cert_cert=self.options.cert,
            cert_key=self.options.key,
            timeout=timeout,
            api_path="/v3/",
        )
        if self._token is not None:
            one.session.headers["Authorization"] = self._token
        return one

    def close(self) -> None:
        for client in self._clients:
            client.session.close()


class _Steps:
    """What the etcd stores share: the cluster's calls as :mod:`seqid_orm.calls.steps` (each store's decisions are
    step functions, run by :func:`~.steps.drive` on its :class:`_Cluster`, and fed scripted replies
    in ``tests/tickets/test_etcd_steps.py``), and the cluster id the replies carry."""

    cluster_id = ""
    """The id of the cluster that answered last (a snapshot restored starts a new one)."""

    def _post(self, path: str, body: dict[str, Any]) -> Steps[dict[str, Any]]:
        reply: dict[str, Any] = yield Call("call", (path, body))
        # a streamed reply (a lease keep-alive) carries its header inside "result"
        header = reply.get("header") or (reply.get("result") or {}).get("header") or {}
        if header.get("cluster_id"):
            self.cluster_id = str(header["cluster_id"])
        return reply

    def _range(self, key: str) -> Steps[dict[str, Any] | None]:
        """The key's record (linearizable), or ``None``."""
        kvs = (yield from self._post("/kv/range", {"key": _b64(key)})).get("kvs") or []
        return kvs[0] if kvs else None

    def _range_prefix(self, start: str) -> Steps[list[dict[str, Any]]]:
        """Every key that starts with ``start`` (one linearizable read)."""
        end = start[:-1] + chr(ord(start[-1]) + 1)
        found: list[dict[str, Any]] = (
            yield from self._post("/kv/range", {"key": _b64(start), "range_end": _b64(end)})
        ).get("kvs") or []
        return found

    def _txn(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]], failure: list[dict[str, Any]] | None = None
    ) -> Steps[dict[str, Any]]:
        body: dict[str, Any] = {"compare": compare, "success": success}
        if failure:
            body["failure"] = failure
        return (yield from self._post("/kv/txn", body))


class EtcdTicketStore(_Steps):
    """A ticket server on an etcd cluster: see the module docstring.  ``target``: an ``etcd://`` URL.

    ``timeout`` bounds every call (:class:`~seqid_orm.errors.StoreTimeoutError` past it), members
    tried in turn within it; ``connect_timeout`` bounds one try's connect.
    """

    def __init__(self, target: str, *, connect_timeout: float = 5.0, timeout: float = 5.0) -> None:
        self._cluster = _Cluster(target, connect_timeout=connect_timeout, timeout=timeout)
        self.prefix = self._cluster.prefix
        self.label = self._cluster.label
        self.timeout = timeout
        self._cached: dict[str, tuple[TicketRow, int]] = {}  # name -> (row, its mod_revision)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/tickets/{name}"

    # --- the TicketStore protocol --------------------------------------------------------

    def allocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        return drive(self.allocate_steps(name, count, step, offset, max_value, above), self._cluster)

    def allocate_steps(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> Steps[tuple[int, int]]:
        """:meth:`allocate` as steps: one transaction on the counter's ``mod_revision`` while this
        store wins (its last write's revision cached), the counter as it is now on a lost race."""
        key = self._key(name)
        limit = last_value_limit(max_value, step)
        cached = self._cached.get(name)
        if cached is None:
            kv = yield from self._range(key)
            if kv is None:
                raise vanished(name, self.label)
            self._check_cluster(name, kv)
            cached = (_row(name, kv), int(kv["mod_revision"]))
        changed = AllocationError(
            f"sequence {name!r} on {self.label} changed under {LOST_TRANSACTION.attempts} attempts to reserve values"
        )

        def reserve(left: float) -> Steps[tuple[int, int]]:
            nonlocal cached
            assert cached is not None
            row, revision = cached
            granted = grantable(row, self.label, count, step, offset, limit, above)
            moved = TicketRow(name, row.next_value + granted * step, step, offset)
            reply = yield from self._txn(
                [{"key": _b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": revision}],
                [{"request_put": {"key": _b64(key), "value": _value(moved, self.cluster_id)}}],
                [{"request_range": {"key": _b64(key)}}],
            )
            if reply.get("succeeded"):
                self._cached[name] = (moved, int(reply["header"]["revision"]))
                return row.next_value, granted
            # another client moved it first: its key as it is now came back in the same reply
            found = (reply.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
            if not found:
                self._cached.pop(name, None)
                raise vanished(name, self.label)
            self._check_cluster(name, found[0])
            cached = (_row(name, found[0]), int(found[0]["mod_revision"]))
            raise Again(changed)

        try:
            return (yield from LOST_TRANSACTION.steps(reserve))
        except AllocationError:
            self._cached.pop(name, None)
            raise

    def _check_cluster(self, name: str, kv: dict[str, Any]) -> None:
        """Refuse a counter written on another cluster: a snapshot restored into a new cluster (``etcdctl
        snapshot restore`` makes a new cluster id) holds counters as old as the snapshot, and a process
        started since has no revision of its own to see it by."""
        written = _cluster_of(kv)
        if written and self.cluster_id and written != self.cluster_id:
            raise StoreHistoryError(
                f"sequence {name!r} on etcd {self.label} was last written on cluster {written}, and cluster "
                f"{self.cluster_id} answers now: a snapshot was restored into a new cluster, and its counter "
                "may be older than ids in use. Move it above the largest id in use with `seqid ticket repair` "
                "(TicketSequence.repair()), which records this cluster"
            )

    def read(self, name: str) -> TicketRow | None:
        kv = drive(self._range(self._key(check_name(name))), self._cluster)
        return None if kv is None else _row(name, kv)

    def create(self, row: TicketRow) -> None:
        key = _b64(self._key(row.name))
        created = self._txn(
            [{"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": "0"}],
            [{"request_put": {"key": key, "value": _value(row, self.cluster_id)}}],
        )
        drive(created, self._cluster)

    def raise_to(self, row: TicketRow) -> TicketRow:
        return drive(self.raise_steps(row), self._cluster)

    def raise_steps(self, row: TicketRow) -> Steps[TicketRow]:
        """:meth:`raise_to` as steps: the counter raised (never lowered) and this cluster recorded."""
        key = _b64(self._key(row.name))

        def repair(left: float) -> Steps[TicketRow]:
            kv = yield from self._range(self._key(row.name))
            if kv is None:
                compare = {"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": "0"}
                stored = row
            else:
                stored = _row(row.name, kv)
                same_cluster = _cluster_of(kv) == self.cluster_id
                if (stored.step, stored.offset) != (row.step, row.offset) or (
                    stored.next_value >= row.next_value and same_cluster
                ):
                    return stored
                # raised (never lowered), and this cluster recorded: a repair after a restore
                stored = TicketRow(row.name, max(row.next_value, stored.next_value), row.step, row.offset)
                compare = {"key": key, "result": "EQUAL", "target": "MOD", "mod_revision": kv["mod_revision"]}
            reply = yield from self._txn(
                [compare], [{"request_put": {"key": key, "value": _value(stored, self.cluster_id)}}]
            )
            if not reply.get("succeeded"):
                changed = f"sequence {row.name!r} on {self.label} changed under every attempt to repair it"
                raise Again(AllocationError(changed))
            self._cached.pop(row.name, None)
            return stored

        return (yield from LOST_TRANSACTION.steps(repair))

    def rows(self) -> list[TicketRow]:
        start = f"{self.prefix}/tickets/"
        kvs = drive(self._range_prefix(start), self._cluster)
        return sorted((_row(_text(kv["key"])[len(start) :], kv) for kv in kvs), key=lambda r: r.name)

    def after_fork(self) -> None:
        self._cluster.after_fork()
        self._cached.clear()  # nothing cached from the parent

    def close(self) -> None:
        self._cluster.close()


_MARK_DIGITS = 16  # marks are zero-padded so that etcd's byte-wise comparison of values is numeric


def _mark_text(mark_ms: int) -> str:
    return f"{max(0, mark_ms):0{_MARK_DIGITS}d}"


def _seconds(ms: int) -> int:
    """An etcd lease TTL (whole seconds) no shorter than ``ms``."""
    return max(1, -(-ms // 1000))


class EtcdLeaseStore(_Steps):
    """Worker-id leases on an etcd cluster: see the module docstring.  ``target``: an ``etcd://`` URL.

    Implements :class:`~seqid_orm.allocation.stores.base.LeaseStore`; every call is bounded by
    ``timeout`` as on :class:`EtcdTicketStore`.  Its decisions are steps (``acquire_steps``,
    ``renew_steps``, ``release_steps``).
    """

    def __init__(self, target: str, *, connect_timeout: float = 5.0, timeout: float = 5.0) -> None:
        self._cluster = _Cluster(target, connect_timeout=connect_timeout, timeout=timeout)
        self.prefix = self._cluster.prefix
        self.label = self._cluster.label
        self._lock = threading.Lock()
        self._held: dict[tuple[str, int, str], str] = {}  # (namespace, worker id, token) -> etcd lease id

    def _ns(self, namespace: str) -> str:
        return f"{self.prefix}/leases/{namespace}/"

    def _grant(self, ttl_ms: int) -> Steps[str]:
        return str((yield from self._post("/lease/grant", {"TTL": _seconds(ttl_ms), "ID": 0}))["ID"])

    def _revoke(self, lease: str) -> Steps[None]:
        try:
            yield from self._post("/kv/lease/revoke", {"ID": lease})
        except Exception:  # expired already, or the cluster is away: it expires by itself
            return

    def _left_ms(self, lease: str) -> Steps[int]:
        """At most what is left of an etcd lease by the leader's clock (0 once it has ended).  etcd
        counts whole seconds, rounded down (and leaves out a 0): the upper bound, never the lower."""
        reply = yield from self._post("/kv/lease/timetolive", {"ID": lease})
        ttl = int(reply.get("TTL", 0))
        if ttl < 0:
            return 0
        return min(ttl + 1, int(reply.get("grantedTTL", ttl + 1))) * 1000

    def acquire(self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int) -> Grant | None:
        return drive(self.acquire_steps(namespace, token, max_workers, ttl_ms, quarantine_ms), self._cluster)

    def acquire_steps(
        self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int
    ) -> Steps[Grant | None]:
        """:meth:`acquire` as steps: an etcd lease granted, the namespace started where it is new (or
        from another cluster), a worker id taken in one transaction (read again on a lost race)."""
        ns = self._ns(namespace)
        lease = yield from self._grant(ttl_ms)
        changed = AllocationError(
            f"lease namespace {namespace!r} on {self.label} changed under {LOST_TRANSACTION.attempts} attempts"
        )

        def take(left: float) -> Steps[Grant | None]:
            found = {_text(kv["key"])[len(ns) :]: kv for kv in (yield from self._range_prefix(ns))}
            meta = found.get("meta")
            if meta is None or _text(meta["value"]) != self.cluster_id:
                # a new namespace, or one a restored snapshot brought into a new cluster: every
                # grant waits ttl + tolerance from now (a holder the cluster forgot may still stamp)
                yield from self._start_namespace(ns, meta, quarantine_ms)
                raise Again(changed)
            young = found.get("young")
            fresh = (yield from self._left_ms(young["lease"])) if young is not None and young.get("lease") else 0
            high = int(_text(found["high"]["value"])) if "high" in found else -1
            grant = yield from self._take(ns, found, token, lease, max_workers, high, ttl_ms, quarantine_ms, fresh)
            if grant is None:
                raise Again(changed)  # lost a race: read again
            if grant.worker_id < 0:
                yield from self._revoke(lease)
                return None
            with self._lock:
                self._held[(namespace, grant.worker_id, token)] = lease
            return grant

        try:
            return (yield from LOST_TRANSACTION.steps(take))
        except GeneratorExit:  # dropped unfinished: no more steps can run (the lease expires by itself)
            raise
        except BaseException:
            yield from self._revoke(lease)
            raise

    def _start_namespace(self, ns: str, meta: dict[str, Any] | None, quarantine_ms: int) -> Steps[None]:
        young = yield from self._grant(quarantine_ms)
        compare = (
            {"key": _b64(ns + "meta"), "result": "EQUAL", "target": "CREATE", "create_revision": "0"}
            if meta is None
            else {"key": _b64(ns + "meta"), "result": "EQUAL", "target": "MOD", "mod_revision": meta["mod_revision"]}
        )
        put = [
            {"request_put": {"key": _b64(ns + "meta"), "value": _b64(self.cluster_id)}},
            {"request_put": {"key": _b64(ns + "young"), "value": _b64("1"), "lease": young}},
        ]
        if meta is None:
            put.append({"request_put": {"key": _b64(ns + "high"), "value": _b64("-1")}})
        if not (yield from self._txn([compare], put)).get("succeeded"):
            yield from self._revoke(young)  # another process started it first

    def _take(
        self,
        ns: str,
        found: dict[str, dict[str, Any]],
        token: str,
        lease: str,
        max_workers: int,
        high: int,
        ttl_ms: int,
        quarantine_ms: int,
        fresh: int,
    ) -> Steps[Grant | None]:
        """One attempt: a ``Grant``, ``None`` after a lost race, or worker id -1 when all are held.
        Never-used worker ids first (no previous holder to wait for), lowest first."""
        holder = {"value": _b64(token), "lease": lease}
        if high + 1 < max_workers:
            wid = high + 1
            seen = found.get("high")
            reply = yield from self._txn(
                [
                    {"key": _b64(ns + "high"), "result": "EQUAL", "target": "CREATE", "create_revision": "0"}
                    if seen is None
                    else {
                        "key": _b64(ns + "high"),
                        "result": "EQUAL",
                        "target": "MOD",
                        "mod_revision": seen["mod_revision"],
                    },
                    {"key": _b64(f"{ns}w/{wid}"), "result": "EQUAL", "target": "CREATE", "create_revision": "0"},
                ],
                [
                    {"request_put": {"key": _b64(f"{ns}w/{wid}"), **holder}},
                    {"request_put": {"key": _b64(ns + "high"), "value": _b64(str(wid))}},
                    {"request_put": {"key": _b64(f"{ns}m/{wid}"), "value": _b64(_mark_text(0))}},
                ],
            )
            return Grant(wid, 0, fresh) if reply.get("succeeded") else None
        for wid in range(min(high, max_workers - 1) + 1):
            if f"w/{wid}" in found:
                continue
            mark = found.get(f"m/{wid}")
            mark_compare = (
                {"key": _b64(f"{ns}m/{wid}"), "result": "EQUAL", "target": "MOD", "mod_revision": mark["mod_revision"]}
                if mark is not None
                else {"key": _b64(f"{ns}m/{wid}"), "result": "EQUAL", "target": "CREATE", "create_revision": "0"}
            )
            put = [{"request_put": {"key": _b64(f"{ns}w/{wid}"), **holder}}]
            if mark is None:  # its record is gone (deleted by hand): a holder may be out there
                put.append({"request_put": {"key": _b64(f"{ns}m/{wid}"), "value": _b64(_mark_text(0))}})
            reply = yield from self._txn(
                [
                    {"key": _b64(f"{ns}w/{wid}"), "result": "EQUAL", "target": "CREATE", "create_revision": "0"},
                    mark_compare,
                ],
                put,
            )
            if not reply.get("succeeded"):
                return None
            if mark is None:
                return Grant(wid, 0, quarantine_ms)
            # a takeover: the record may be older than what a live holder confirmed (a restore), so wait one ttl
            return Grant(wid, int(_text(mark["value"])), max(fresh, ttl_ms))
        return Grant(-1, 0)

    def renew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        return drive(self.renew_steps(namespace, worker_id, token, ttl_ms, mark_ms), self._cluster)

    def renew_steps(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> Steps[bool]:
        """:meth:`renew` as steps: the etcd lease kept alive, then the mark raised while the key is ours."""
        with self._lock:
            lease = self._held.get((namespace, worker_id, token))
        if lease is None:
            return False
        reply = yield from self._post("/lease/keepalive", {"ID": lease})
        if int(reply.get("result", reply).get("TTL", 0)) <= 0:
            return False  # the etcd lease ended: the worker id is free for others now
        ns = self._ns(namespace)
        holder = {"key": _b64(f"{ns}w/{worker_id}"), "result": "EQUAL", "target": "VALUE", "value": _b64(token)}
        reply = yield from self._txn(
            [
                holder,
                {
                    "key": _b64(f"{ns}m/{worker_id}"),
                    "result": "LESS",
                    "target": "VALUE",
                    "value": _b64(_mark_text(mark_ms)),
                },
            ],
            [{"request_put": {"key": _b64(f"{ns}m/{worker_id}"), "value": _b64(_mark_text(mark_ms))}}],
            [{"request_range": {"key": _b64(f"{ns}w/{worker_id}")}}],
        )
        if reply.get("succeeded"):
            return True
        # the mark was already as high (still ours), or the key is another holder's or gone (lost)
        kvs = (reply.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
        return bool(kvs) and _text(kvs[0].get("value", "")) == token

    def release(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        drive(self.release_steps(namespace, worker_id, token, mark_ms), self._cluster)

    def release_steps(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> Steps[None]:
        """:meth:`release` as steps: the key deleted and the mark left, where the key is still ours."""
        with self._lock:
            lease = self._held.pop((namespace, worker_id, token), None)
        ns = self._ns(namespace)
        yield from self._txn(
            [{"key": _b64(f"{ns}w/{worker_id}"), "result": "EQUAL", "target": "VALUE", "value": _b64(token)}],
            [
                {"request_delete_range": {"key": _b64(f"{ns}w/{worker_id}")}},
                {"request_put": {"key": _b64(f"{ns}m/{worker_id}"), "value": _b64(_mark_text(mark_ms))}},
            ],
        )
        if lease is not None:
            yield from self._revoke(lease)

    def leases(self, namespace: str) -> list[LeaseRow]:
        ns = self._ns(namespace)
        found = {_text(kv["key"])[len(ns) :]: kv for kv in drive(self._range_prefix(ns), self._cluster)}
        marks = {int(k[2:]): int(_text(kv["value"])) for k, kv in found.items() if k.startswith("m/")}
        held = {
            int(k[2:]): drive(self._left_ms(kv["lease"]), self._cluster) if kv.get("lease") else 0
            for k, kv in found.items()
            if k.startswith("w/")
        }
        holders = {int(k[2:]): holder_of(_text(kv["value"])) for k, kv in found.items() if k.startswith("w/")}
        return [
            LeaseRow(namespace, w, w in held, held.get(w, 0), marks.get(w, 0), holders.get(w, ""))
            for w in sorted({*marks, *held})
        ]

    def namespaces(self) -> list[str]:
        root = f"{self.prefix}/leases/"
        return sorted(
            {_text(kv["key"])[len(root) :].split("/", 1)[0] for kv in drive(self._range_prefix(root), self._cluster)}
        )

    def after_fork(self) -> None:
        self._cluster.after_fork()
        with self._lock:
            self._held.clear()  # the parent's leases: the parent keeps renewing them

    def close(self) -> None:
        self._cluster.close()


def cluster_status(url: str, *, timeout: float = 5.0) -> dict[str, Any]:
    """What ``seqid probe etcd://...`` reports: the cluster's id, its members (asked one by one on
    their client URLs: answered or not, leader or not, version, raft term and index), the leader,
    and whether it is healthy (a majority answers and agrees on one leader)."""
    cluster = _Cluster(url, connect_timeout=min(timeout, 2.0), timeout=timeout)
    try:
        listed = cluster.call("/cluster/member/list", {}).get("members") or []
        members: list[dict[str, Any]] = []
        leaders: set[str] = set()
        for m in listed:
            entry: dict[str, Any] = {
                "name": m.get("name", ""),
                "id": str(m.get("ID", "")),
                "client_urls": m.get("clientURLs") or [],
            }
            for client_url in entry["client_urls"]:
                one = cluster.member_client(client_url, min(timeout, 2.0))
                try:
                    status = cluster.post(one, "/maintenance/status", {})
                except Exception as exc:  # a member down or partitioned is what this reports
                    entry.update(answered=False, error=f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                finally:
                    one.session.close()
                leader = str(status.get("leader", ""))
                leaders.add(leader)
                entry.update(
                    answered=True,
                    version=status.get("version", ""),
                    leader=leader == entry["id"],
                    raft_term=int(status.get("raftTerm", 0)),
                    raft_index=int(status.get("raftIndex", 0)),
                    db_size=int(status.get("dbSize", 0)),
                )
                entry.pop("error", None)
                break
            entry.setdefault("answered", False)
            members.append(entry)
        answered = [m for m in members if m["answered"]]
        leader_names = [m["name"] for m in members if m.get("leader")]
        return {
            "store": "etcd",
            "url": cluster.label,
            "cluster_id": cluster.cluster_id,
            "version": answered[0]["version"] if answered else "",
            "leader": leader_names[0] if leader_names else None,
            "healthy": len(answered) * 2 > len(members) and len(leaders) == 1 and "0" not in leaders,
            "members": members,
        }
    finally:
        cluster.close()
