"""Ticket server and worker-id leases on Redis, through redis-py.

One hash per sequence, ``seqid:tickets:<name>`` with the fields ``next_value``, ``step`` and
``offset``.  A reservation is one Lua script (one round trip, atomic on the server): check the
stored step and offset, ``HINCRBY next_value``, and return the new value *as text* — Redis
hands integers to Lua as doubles, which cannot hold a BIGINT above 2**53, while ``HGET``
returns the exact decimal string.  The script never creates a hash: a counter that *vanishes*
(a restart without persistence, eviction, ``FLUSHALL``) is refused rather than started over,
which would hand out its ids again; names are created only by :meth:`RedisTicketStore.create`.

Durability is Redis's: a counter is only as safe as ``appendonly yes`` with
``appendfsync always``.  With less, a crash loses the last increments and the counter comes
back lower, and a restart without persistence loses it entirely, so ids repeat.  A store
therefore refuses such a server (:class:`~seqid_orm.errors.VolatileStoreError`) unless the
caller passes ``accept_state_loss=True``.

Replication is asynchronous: a replica promoted after a failover (Sentinel, an operator's
``REPLICAOF NO ONE``) lacks the writes it had not received, and ids the primary acknowledged come
back.  So every write goes out with ``WAIT`` in the same round trip (``WAIT`` counts the replicas
that received *this connection's* writes, https://redis.io/docs/latest/commands/wait/), for every
replica this store has seen the primary serve (``ROLE``, sent in the same round trip, so a replica
that attaches later is waited for from then on, and one that drops away is still waited for; the
data set records that number, ``seqid:replication``, so a store started later waits for as many): a
write not confirmed within the deadline is refused with
:class:`~seqid_orm.errors.StoreTimeoutError` and its values are never handed out, so whichever
replica is promoted holds every value, mark and grant the clients used.  The price: while a
replica is away, writes are refused.

Leases (:class:`RedisLeaseStore`): one key per worker id, ``seqid:lease:{<namespace>}:<id>``, set
with ``SET NX PX`` to the holder's random token, so Redis's clock expires it; renewal and release
are scripts that act only when the key still holds the caller's token.  The high-water marks live
in a hash without expiry, ``seqid:lease-marks:{<namespace>}``, so they outlive the leases.  The
braces make every key of a namespace one Redis Cluster hash slot.

Sentinel: ``redis+sentinel://[:password@]host[:port][,host[:port]...]/service[/db]`` (port 26379
by default; ``?sentinel_password=`` for Sentinels that ask for one) reaches the primary of
``service`` through redis-py's Sentinel client, which asks the Sentinels again after a failover;
the ``WAIT`` above is what makes the promoted replica safe.

What a primary lacks is known only to the processes that saw it confirmed (a record in the data set
cannot witness its own loss), and Redis's replication id cannot say it alone (every restart begins a
new one).  So every write counts itself in the data set under the primary's replication id (a script
sent right after it, :data:`_RECORD_WRITE`, confirmed by the same ``WAIT``), every store remembers
its last confirmed write as that pair, and a primary whose data set counted less under that id
(:func:`~.history.lacks_write`: a replica promoted before the write reached it, an old primary still
serving beside its successor, with a replica of its own or not, a node restored from a backup) is
refused with :class:`~seqid_orm.errors.StoreHistoryError`; a restarted one counted as far and goes
on.  The store then marks the data set for every process: each ticket counter refuses (``lost``)
until ``seqid ticket repair`` moves it above the ids in use, and each lease namespace counts as new,
so its next holders wait the quarantine.  The replica count above refuses an old primary restarted
alone even to a process that saw none of it.

May import: the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.calls`, redis-py and this package's
``base``, ``history`` and ``urls``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any, TypeVar

from ...calls.retry import NEW_REPLICA, OVERFLOW, Again, Deadline, redis_wait_ms, socket_share
from ...calls.steps import Call, PerLoop, Steps, adrive, drive
from ...errors import (
    ArgumentTypeError,
    BackendMismatchError,
    BackendUnavailableError,
    GeneratorExhaustedError,
    InvalidArgumentError,
    StoreHistoryError,
    StoreTimeoutError,
    VolatileStoreError,
)
from .base import (
    Grant,
    LeaseRow,
    TicketRow,
    hide_password,
    holder_of,
    last_value_limit,
    regressed,
    split_state_loss_option,
    vanished,
)
from .history import ReplicationPoint, lacks_write
from .urls import SENTINEL_SCHEME, SentinelURL

try:
    import redis
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # say which extra brings it
    raise ImportError("Redis ticket servers need redis-py: pip install 'seqid-orm[redis]'") from exc

__all__ = ["KEY_PREFIX", "RedisLeaseStore", "RedisTicketStore", "SentinelURL", "split_state_loss_option"]

KEY_PREFIX = "seqid:tickets:"
_T = TypeVar("_T")

# KEYS[1]: the sequence's hash.  ARGV: step, offset, delta, above ('' for none).  A missing hash is
# refused, never created: a counter that vanished (a restart without persistence, eviction,
# FLUSHALL) and started over would hand out its ids again.  A counter marked ``lost`` (a store saw
# that this primary lacks a confirmed write, see _MARK_LOST) is refused until repaired.  A counter
# at or below ``above`` (what the caller saw it hand out) went back: refused unmoved.  Decimal
# strings are compared as text (sign, then length, then digits): Lua's numbers are doubles, exact
# only below 2**53.
_ALLOCATE = """
local function at_most(a, b)
  local na, nb = a:sub(1, 1) == '-', b:sub(1, 1) == '-'
  if na ~= nb then return na end
  local x, y = a, b
  if na then x, y = b:sub(2), a:sub(2) end
  if #x ~= #y then return #x < #y end
  return x <= y
end
local stored = redis.call('HMGET', KEYS[1], 'step', 'offset', 'next_value', 'lost')
if not stored[1] then return {'missing'} end
if stored[4] then return {'lost', stored[4]} end
if stored[1] ~= ARGV[1] or stored[2] ~= ARGV[2] then
  return {'mismatch', stored[1], stored[2]}
end
if ARGV[4] ~= '' and at_most(stored[3], ARGV[4]) then return {'regressed', stored[3]} end
redis.call('HINCRBY', KEYS[1], 'next_value', ARGV[3])
return {'ok', redis.call('HGET', KEYS[1], 'next_value')}
"""

# KEYS[1]: the sequence's hash.  ARGV: next_value, step, offset.  Creates the row if absent, else
# raises next_value to ARGV[1] (never lowers it) when step and offset match (decimal strings,
# compared by length first: Lua's numbers are doubles, exact only below 2**53), and clears the
# ``lost`` mark: ARGV[1] is above every id in use (``seqid ticket repair``).
_RAISE = """
local stored = redis.call('HMGET', KEYS[1], 'next_value', 'step', 'offset')
if not stored[1] then
  redis.call('HSET', KEYS[1], 'next_value', ARGV[1], 'step', ARGV[2], 'offset', ARGV[3])
elseif stored[2] == ARGV[2] and stored[3] == ARGV[3] then
  local old, new = stored[1], ARGV[1]
  if #new > #old or (#new == #old and new > old) then redis.call('HSET', KEYS[1], 'next_value', new) end
  redis.call('HDEL', KEYS[1], 'lost')
end
return redis.call('HMGET', KEYS[1], 'next_value', 'step', 'offset')
"""

# KEYS[1]: the sequence's hash.  ARGV: next_value, step, offset.  Insert-if-absent.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'next_value', ARGV[1], 'step', ARGV[2], 'offset', ARGV[3])
end
return 1
"""

_DURABLE = {"appendonly": "yes", "appendfsync": "always"}

# The most replicas any seqid write on this data set waited for, kept in the data set itself
# (so in its AOF, and in its replicas): a store that starts finds it there, not only in the memory
# of the process that saw them.  An old primary restarted from its AOF as a primary with no replica
# (the seconds before Sentinel demotes it) then refuses, where a process that had never seen its
# replicas wrote there and the resync from the promoted replica dropped those writes: ids repeated.
REPLICATION_KEY = "seqid:replication"
# KEYS[1]: the record.  ARGV[1]: replicas now waited for.  Raised, never lowered (an operator who
# removes replicas for good lowers it: HSET seqid:replication replicas N).
_RECORD_REPLICAS = """
local n = tonumber(redis.call('HGET', KEYS[1], 'replicas') or '0')
if tonumber(ARGV[1]) > n then redis.call('HSET', KEYS[1], 'replicas', ARGV[1]) end
return 1
"""


# KEYS[1]: the replication record.  Counts this write under the primary's replication id, in the
# data set (so in its AOF and its replicas): ``at:<id>``.  Sent right after each write on the same
# connection, and waited for with it; a copy of the data set that counted as far holds the write
# (history.lacks_write).  INFO in a script is allowed (it is not a no-script command).
_RECORD_WRITE = """
local id = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
return {id, redis.call('HINCRBY', KEYS[1], 'at:' .. id, 1)}
"""


# KEYS[1]: the replication record.  ARGV[1]: the replication id of a primary found lacking
# confirmed writes.  1 for the first store to report that primary, which marks the data set; 0 for
# the others (once marked, or repaired since, the data set says what to do, and marking it again would
# undo a repair).
_CLAIM_FORK = """
if redis.call('HGET', KEYS[1], 'reported') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'reported', ARGV[1])
return 1
"""

# KEYS[1]: a ticket counter.  ARGV[1]: why.  Marks it lost (refused until repaired), if it is a counter.
_MARK_LOST = """
if redis.call('HEXISTS', KEYS[1], 'next_value') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'lost', ARGV[1])
return 1
"""

# KEYS[1]: a lease namespace's marks.  The namespace counts as new from now (Redis's clock): its next
# holders wait the quarantine, as for a namespace whose holders the store cannot know (_ACQUIRE).
_REBIRTH = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], '_born', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
"""

_LEASE_MARKS = "seqid:lease-marks:{*}"


def _online(info: dict[str, Any]) -> int:
    """The replicas an ``INFO replication`` reply lists as in sync (``state=online``): the ones a
    ``WAIT`` can count (one still loading its first copy confirms nothing until it is online)."""
    return sum(
        1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
    )


class _Commands:
    """The I/O the Redis steps ask for, on a redis-py client (:mod:`seqid_orm.calls.steps`: the decisions are
    :class:`_RedisStore`'s, written once; :class:`_AsyncCommands` awaits the same commands on
    ``redis.asyncio``, whose client builds them alike)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._scripts: dict[str, Any] = {}

    def _registered(self, text: str) -> Any:
        """The script of ``text``, registered once (run by its digest, ``EVALSHA``, loaded on first use)."""
        registered = self._scripts.get(text)
        if registered is None:
            registered = self._scripts[text] = self.client.register_script(text)
        return registered

    def _pipeline(self, text: str, keys: list[str], args: list[Any], waited: int, wait_ms: int, known: str) -> Any:
        """``INFO replication``, the count the data set recorded under the replication id ``known``,
        the script, its record (:data:`_RECORD_WRITE`) and ``WAIT``, queued on one pipeline (see
        :meth:`_RedisStore.write`)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.info("replication")
        pipe.hget(REPLICATION_KEY, f"at:{known}")
        pipe.eval(text, len(keys), *keys, *args)
        pipe.eval(_RECORD_WRITE, 1, REPLICATION_KEY)
        if waited:
            pipe.wait(waited, wait_ms)
        return pipe

    def config(self, keys: tuple[str, ...]) -> dict[Any, Any]:
        found: dict[Any, Any] = {}
        for key in keys:
            found.update(self.client.config_get(key))
        return found

    def info(self, section: str) -> dict[str, Any]:
        return dict(self.client.info(section))

    def hget(self, key: str, field: str) -> Any:
        return self.client.hget(key, field)

    def hmget(self, key: str, *fields: str) -> list[Any]:
        return list(self.client.hmget(key, list(fields)))

    def script(self, text: str, keys: list[str], args: list[Any]) -> Any:
        return self._registered(text)(keys=keys, args=args)

    def written(self, text: str, keys: list[str], args: list[Any], waited: int, wait_ms: int, known: str) -> list[Any]:
        return list(self._pipeline(text, keys, args, waited, wait_ms, known).execute())

    def keys(self, pattern: str) -> list[Any]:
        """Every key matching ``pattern`` (``SCAN``, never ``KEYS``, which blocks the server)."""
        return list(self.client.scan_iter(match=pattern, count=500))


class _AsyncCommands(_Commands):
    """:class:`_Commands` on a ``redis.asyncio`` client of one event loop: the same commands, awaited."""

    def __init__(self, client: Any, sentinels: list[Any]) -> None:
        super().__init__(client)
        self._sentinels = sentinels

    async def aclose(self) -> None:
        """Close the client and the Sentinel clients behind it, on their loop."""
        for each in (self.client, *self._sentinels):
            with contextlib.suppress(Exception):
                await each.aclose()

    async def config(self, keys: tuple[str, ...]) -> dict[Any, Any]:  # type: ignore[override]
        found: dict[Any, Any] = {}
        for key in keys:
            found.update(await self.client.config_get(key))
        return found

    async def info(self, section: str) -> dict[str, Any]:  # type: ignore[override]
        return dict(await self.client.info(section))

    async def hget(self, key: str, field: str) -> Any:
        return await self.client.hget(key, field)

    async def hmget(self, key: str, *fields: str) -> list[Any]:  # type: ignore[override]
        return list(await self.client.hmget(key, list(fields)))

    async def script(self, text: str, keys: list[str], args: list[Any]) -> Any:
        return await self._registered(text)(keys=keys, args=args)

    async def written(  # type: ignore[override]
        self, text: str, keys: list[str], args: list[Any], waited: int, wait_ms: int, known: str
    ) -> list[Any]:
        return list(await self._pipeline(text, keys, args, waited, wait_ms, known).execute())

    async def keys(self, pattern: str) -> list[Any]:  # type: ignore[override]
        return [key async for key in self.client.scan_iter(match=pattern, count=500)]


def _client_for(url: str, options: dict[str, Any], aio: bool) -> tuple[Any, list[Any]]:
    """A redis-py client for a store's URL, and the Sentinel clients behind it (closed with it):
    ``redis://``, ``rediss://`` and ``unix://`` by redis-py's own ``from_url``;
    ``redis+sentinel://`` the primary of its service, through redis-py's Sentinel client."""
    retry = AsyncRetry(NoBackoff(), 1) if aio else Retry(NoBackoff(), 1)
    if not url.lower().startswith(SENTINEL_SCHEME + "://"):
        if aio:
            from redis.asyncio import Redis as AsyncRedis

            return AsyncRedis.from_url(url, retry=retry, **options), []
        return redis.Redis.from_url(url, retry=retry, **options), []
    target = SentinelURL.parse(url)
    sentinel_options = dict(options)
    if target.sentinel_password is not None:
        sentinel_options["password"] = target.sentinel_password
    # the class as Any: redis-py before 8.2 leaves Sentinel's constructor untyped (mypy --strict refuses
    # the call), 8.2 types it (an ignore comment would then be unused): one spelling for both
    sentinel_class: Any
    if aio:
        from redis.asyncio.sentinel import Sentinel as sentinel_class
    else:
        from redis.sentinel import Sentinel as sentinel_class
    sentinel = sentinel_class(list(target.sentinels), sentinel_kwargs=sentinel_options, **options)
    client = sentinel.master_for(
        target.service, db=target.db, username=target.username, password=target.password, retry=retry
    )
    return client, list(sentinel.sentinels)


class _RedisStore:
    """What both Redis stores share: a client of their own made from a URL (closed by
    :meth:`close`), or a given ``redis.Redis`` (left open); ``read_timeout`` bounds one reply.

    Before its first command a store asks the server whether it keeps its data across a crash
    (``appendonly yes``, ``appendfsync always``) and refuses one that does not
    (:class:`~seqid_orm.errors.VolatileStoreError`) unless ``accept_state_loss=True`` (or the URL
    option ``?accept_state_loss=true``): a counter
    or a lease mark that comes back lower or empty after a restart is how ids repeat.  The
    warning an earlier version logged was not enough: nobody reads it before the duplicates.

    The decisions are steps (:mod:`seqid_orm.calls.steps`): :meth:`_drive` runs them on redis-py's client, and
    :meth:`_adrive` on a ``redis.asyncio`` client of the running loop (from the same URL), awaited
    there; a store made from a ``redis.Redis`` object runs them in a worker thread instead.
    """

    what = "store"

    def __init__(
        self,
        target: str | redis.Redis,
        *,
        connect_timeout: float = 5.0,
        accept_state_loss: bool = False,
        timeout: float = 5.0,
    ) -> None:
        if not isinstance(accept_state_loss, bool):
            raise ArgumentTypeError(f"accept_state_loss must be a bool, got {type(accept_state_loss).__name__}")
        self.timeout = timeout
        self._url: str | None = None
        self._sentinels: list[Any] = []
        if isinstance(target, redis.Redis):
            self.client = target
            kw = target.connection_pool.connection_kwargs
            where = kw.get("path") or f"{kw.get('host', '?')}:{kw.get('port', '?')}"
            self.label = f"redis://{where}/{kw.get('db', 0)} (a redis.Redis client)"
            self._owned = False
        else:
            target, in_url = split_state_loss_option(target)
            accept_state_loss = accept_state_loss or in_url
            # Every command within ``timeout``: half of it a try, and one retry (redis-py's default
            # retries three times with back-off, which multiplied a blackholed server's wait).
            self._client_options: dict[str, Any] = {
                "socket_connect_timeout": min(connect_timeout, socket_share(timeout)),
                "socket_timeout": socket_share(timeout),
            }
            try:
                self.client, self._sentinels = _client_for(target, self._client_options, aio=False)
            except ValueError as exc:  # a port that is no number, an unknown option
                raise InvalidArgumentError(
                    f"cannot use {hide_password(target)!r} as a store: {exc} (redis://host:port/db)"
                ) from None
            self.label = hide_password(target)
            self._owned = True
            self._url = target
        self._commands = _Commands(self.client)
        # a redis.asyncio client per event loop (its connections belong to the loop), closed there
        self._aclients: PerLoop[_AsyncCommands] = PerLoop(self._new_async_client, _AsyncCommands.aclose)
        self.accept_state_loss = accept_state_loss
        self._durability_checked = accept_state_loss
        # the replicas every write must reach: the most this store has seen the primary serve, or
        # its data set records (REPLICATION_KEY); and how many that record holds
        self._replicas = 0
        self._recorded = 0
        # the last write every replica confirmed, by its replication id and its count there
        self._confirmed: ReplicationPoint | None = None
        self._wait_ms = redis_wait_ms(timeout)

    @property
    def native_async(self) -> bool:
        """Whether the awaitable methods use ``redis.asyncio`` on the loop (a store made from a URL)."""
        return self._url is not None

    def _drive(self, steps: Steps[_T]) -> _T:
        """Run ``steps`` on the blocking client.  A caller's deadline passed down that has passed
        sends nothing; one with time left cannot shorten a call under way (redis-py has no per-command
        time-out): that is bounded by the socket's (:func:`~seqid_orm.calls.retry.socket_share` of the store's)."""
        if Deadline.within(self.timeout).left() <= 0:
            raise StoreTimeoutError(f"{self.what} {self.label}: the caller's deadline passed before the call")
        with self._errors():
            return drive(steps, self._commands)

    def _new_async_client(self) -> _AsyncCommands:
        assert self._url is not None
        client, sentinels = _client_for(self._url, self._client_options, aio=True)
        return _AsyncCommands(client, sentinels)

    async def _adrive(self, steps: Steps[_T]) -> _T:
        """Run ``steps`` on the running loop's ``redis.asyncio`` client, within the store's deadline
        (a call cut off by it leaves its connection closed, never back in the pool)."""
        if self._url is None:
            return await asyncio.to_thread(self._drive, steps)
        commands = await self._aclients.get()
        try:
            with self._errors():
                # the store's bound, or the caller's deadline passed down where it ends sooner
                return await asyncio.wait_for(adrive(steps, commands), max(0.0, Deadline.within(self.timeout).left()))
        except asyncio.TimeoutError:
            raise StoreTimeoutError(f"{self.what} {self.label} did not answer within {self.timeout:g} s") from None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """redis-py's errors as seqid's (the one place this store translates them; its steps see
        redis-py's own first, to read an overflow as exhaustion): callers fail over on them, and
        anything else that escapes is a bug and surfaces as itself."""
        try:
            yield
        except redis.RedisError as exc:
            if isinstance(exc, redis.TimeoutError):  # redis.asyncio raises the same classes
                raise StoreTimeoutError(f"{self.what} {self.label} did not answer within {self.timeout:g} s") from exc
            raise BackendUnavailableError(f"{self.what} {self.label}: {type(exc).__name__}: {exc}") from exc

    def check_durability(self) -> Steps[None]:
        """Refuse a server that would lose this store's state on a restart (once per store)."""
        if self._durability_checked:
            return
        try:
            config = yield Call("config", ((*_DURABLE, "maxmemory-policy"),))
            replication = yield Call("info", ("replication",))
        except redis.ResponseError as exc:  # CONFIG is often disabled on managed servers
            raise VolatileStoreError(
                f"{self.label} does not say whether it persists its data (CONFIG GET failed: {exc}), so this "
                f"{self.what} cannot tell whether a restart would lose its state and repeat ids. Pass "
                "accept_state_loss=True if the server persists with appendonly yes and appendfsync always, or if "
                "losing the state is acceptable"
            ) from None
        found = {key: _text(config.get(key, "?")) for key in _DURABLE}
        if found != _DURABLE:
            settings = " ".join(f"{k}={v}" for k, v in found.items())
            raise VolatileStoreError(
                f"{self.label} keeps its data only in memory or loses its last writes on a crash ({settings}): after "
                f"a restart this {self.what}'s state comes back lower or empty, and ids repeat. Run it with "
                "appendonly yes and appendfsync always, or pass accept_state_loss=True if losing the state is "
                "acceptable (tests, a throw-away server)"
            )
        policy = _text(config.get("maxmemory-policy", "noeviction"))
        if policy.startswith("allkeys-"):
            # volatile-* policies evict keys with a TTL only: a lease key then expires early, which
            # the takeover fence covers; counters and marks have none
            raise VolatileStoreError(
                f"{self.label} runs with maxmemory-policy {policy}: under memory pressure it may evict this "
                f"{self.what}'s counters or marks, and ids repeat. Use noeviction (or a volatile-* policy), or pass "
                "accept_state_loss=True"
            )
        role = str(replication.get("role", "master"))
        if role != "master":
            raise VolatileStoreError(
                f"{self.label} is a replica (role {role}): point the URL at the primary (Redis Sentinel names it)"
            )
        recorded = yield Call("hget", (REPLICATION_KEY, "replicas"))
        self._recorded = int(_text(recorded)) if recorded is not None else 0
        self._replicas = max(self._replicas, self._recorded, int(replication.get("connected_slaves", 0)))
        self._durability_checked = True

    def write(self, script: str, keys: list[str], args: list[Any], *, repair: bool = False) -> Steps[Any]:
        """Run a write ``script``; where writes may be lost, return its reply only once every
        replica confirmed it (see the module docstring).

        One round trip: ``INFO replication``, the script, its record in the data set and ``WAIT``
        are pipelined on one connection (``WAIT`` counts that connection's writes, so it cannot be sent again later on a
        pooled one).  When the primary serves a replica this store had not waited for, the write
        runs once more, waiting for it: every script is safe to run again (a reservation's first
        block is then never used, an acquisition's first worker id waits out its ttl; the others
        are idempotent).  A primary that lacks this store's last confirmed write
        (:func:`~.history.lacks_write`) is refused, and the data set marked for every process (the
        module docstring), except by a ``repair``, which is the answer to that.
        """
        if self.accept_state_loss:
            return (yield Call("script", (script, keys, args)))

        def once(left: float) -> Steps[tuple[ReplicationPoint | None, Any, Any, Any, Any, list[Any]]]:
            waited = self._replicas
            if waited > self._recorded:  # before the write, whose WAIT then confirms the record too
                yield Call("script", (_RECORD_REPLICAS, [REPLICATION_KEY], [waited]))
                self._recorded = waited
            known = self._confirmed
            info, recorded, reply, point, *acked = yield Call(
                "written", (script, keys, args, waited, self._wait_ms, known.replid if known else "")
            )
            serving = _online(info) if info.get("role") == "master" else 0
            if serving > waited:
                self._replicas = serving  # from now on; this write was not waited for: again
                raise Again(StoreTimeoutError(f"{self.what} {self.label}: replicas joined during each try of a write"))
            return known, info, recorded, reply, point, acked

        known, info, recorded, reply, point, acked = yield from NEW_REPLICA.steps(once)
        why = lacks_write(known, info, None if recorded is None else int(_text(recorded)))
        if why is not None and not repair:
            yield from self._history_lost(why, str(info.get("master_replid")))
        confirmed = int(acked[0]) if acked else 0
        if confirmed < self._replicas:
            raise StoreTimeoutError(
                f"{self.what} {self.label}: {confirmed} of {self._replicas} replica(s) confirmed a write within "
                f"{self._wait_ms} ms, so its values are not used (a replica promoted now would lack them). Writes go "
                "on once every replica confirms again. A primary that serves fewer replicas than its data set has had "
                f"({REPLICATION_KEY}) may be an old primary restarted alone, soon demoted: use the Sentinel URL. "
                f"Replicas removed for good: HSET {REPLICATION_KEY} replicas N; or pass accept_state_loss=True"
            )
        self._remember(ReplicationPoint(_text(point[0]), int(point[1])))
        return reply

    def _remember(self, point: ReplicationPoint) -> None:
        """Keep the later of two points of one history (threads confirm writes in any order)."""
        known = self._confirmed
        if known is None or known.replid != point.replid or known.writes < point.writes:
            self._confirmed = point

    def _history_lost(self, lacking: str, replid: str) -> Steps[None]:
        """Mark the data set for every process (counters refused until repaired, lease namespaces
        reborn), then refuse: the primary now serving (``replid``) lacks a write this store saw
        confirmed (``lacking`` says how).  Where another store reported that primary first, the data
        set already says what to do (refuse until repaired, or go on after the repair): the write's
        reply stands."""
        why = (
            f"the primary at {self.label} {lacking}: it lacks acknowledged writes, and its counters may hand out "
            "ids already in use"
        )
        self._confirmed = None  # the data set says it from now on
        if not int((yield Call("script", (_CLAIM_FORK, [REPLICATION_KEY], [replid])))):
            return  # another store reported this primary first
        marked = 0
        for key in (yield Call("keys", (KEY_PREFIX + "*",))):
            marked += int((yield Call("script", (_MARK_LOST, [key], [why]))))
        for key in (yield Call("keys", (_LEASE_MARKS,))):
            yield Call("script", (_REBIRTH, [key], []))
        raise StoreHistoryError(
            f"{self.what} {self.label}: {why}. Every ticket counter there ({marked}) refuses until `seqid ticket "
            "repair` moves it above the largest id in use; lease namespaces make their next holders wait the "
            "quarantine"
        )

    def close(self) -> None:
        if self._owned:
            for each in (self.client, *self._sentinels):
                each.close()


class RedisTicketStore(_RedisStore):
    """A ticket server on Redis: see the module docstring.  ``target``: a URL or a ``redis.Redis``."""

    what = "ticket store"

    def allocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        return self._drive(self._allocate(name, count, step, offset, max_value, above))

    async def aallocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None = None
    ) -> tuple[int, int]:
        return await self._adrive(self._allocate(name, count, step, offset, max_value, above))

    def _allocate(
        self, name: str, count: int, step: int, offset: int, max_value: int, above: int | None
    ) -> Steps[tuple[int, int]]:
        yield from self.check_durability()
        limit = last_value_limit(max_value, step)
        key = KEY_PREFIX + name
        wanted = count

        def reserve(_left: float) -> Steps[int]:
            nonlocal wanted
            try:
                return (yield from self._reserve(key, name, wanted, step, offset, above))
            except redis.ResponseError as exc:
                if "overflow" not in str(exc):
                    raise
                # HINCRBY refused to pass 2**63: reserve only what is left below the limit, if anything.
                # Another client may take it first and overflow this one again: ask again with what is
                # left then (fewer each time, so this ends), never read the refusal as a server's silence
                stored = yield Call("hget", (key, "next_value"))
                left = 0 if stored is None else (limit - int(_text(stored))) // step + 1
                exhausted = GeneratorExhaustedError(f"sequence {name!r} on {self.label} is exhausted: {exc}")
                if not 0 < left < wanted:
                    raise exhausted from None
                wanted = left
                raise Again(exhausted) from None

        first = yield from OVERFLOW.steps(reserve)
        count = wanted
        if first > limit:
            raise GeneratorExhaustedError(
                f"sequence {name!r} on {self.label} is exhausted: its next value {first} is past {limit}"
            )
        return first, min(count, (limit - first) // step + 1)

    def _reserve(self, key: str, name: str, count: int, step: int, offset: int, above: int | None) -> Steps[int]:
        """Run the script; the first value reserved."""
        delta = count * step
        reply = yield from self.write(_ALLOCATE, [key], [step, offset, delta, "" if above is None else above])
        status = _text(reply[0])
        if status == "missing":
            raise vanished(name, self.label)
        if status == "lost":
            raise StoreHistoryError(
                f"sequence {name!r} on {self.label} is marked lost: {_text(reply[1])}. Move it above the largest id "
                "in use with `seqid ticket repair` (TicketSequence.repair()), which clears the mark"
            )
        if status == "regressed":
            raise regressed(name, self.label, int(_text(reply[1])), above or 0)
        if status == "mismatch":
            raise BackendMismatchError(
                f"sequence {name!r} on {self.label} is stored with step={_text(reply[1])} offset={_text(reply[2])}, "
                f"but this client uses step={step} offset={offset}: clients must list the same servers in the "
                "same order (or pass the same step= and offsets=)"
            )
        return int(_text(reply[1])) - delta

    def _read(self, name: str) -> Steps[TicketRow | None]:
        yield from self.check_durability()
        values = yield Call("hmget", (KEY_PREFIX + name, "next_value", "step", "offset"))
        if None in values:
            return None
        next_value, step, offset = (int(_text(v)) for v in values)
        return TicketRow(name, next_value, step, offset)

    def read(self, name: str) -> TicketRow | None:
        return self._drive(self._read(name))

    async def aread(self, name: str) -> TicketRow | None:
        return await self._adrive(self._read(name))

    def _create(self, row: TicketRow) -> Steps[None]:
        yield from self.check_durability()
        yield from self.write(_CREATE, [KEY_PREFIX + row.name], [row.next_value, row.step, row.offset])

    def create(self, row: TicketRow) -> None:
        self._drive(self._create(row))

    async def acreate(self, row: TicketRow) -> None:
        await self._adrive(self._create(row))

    def raise_to(self, row: TicketRow) -> TicketRow:
        def steps() -> Steps[TicketRow]:
            yield from self.check_durability()
            reply = yield from self.write(
                _RAISE, [KEY_PREFIX + row.name], [row.next_value, row.step, row.offset], repair=True
            )
            next_value, step, offset = (int(_text(v)) for v in reply)
            return TicketRow(row.name, next_value, step, offset)

        return self._drive(steps())

    def rows(self) -> list[TicketRow]:
        found = []
        with self._errors():
            for key in self.client.scan_iter(match=KEY_PREFIX + "*", count=500):
                name = _text(key)[len(KEY_PREFIX) :]
                values = self.client.hmget(key, "next_value", "step", "offset")
                if None not in values:
                    found.append(TicketRow(name, *(int(_text(v)) for v in values)))
        return sorted(found, key=lambda r: r.name)

    def after_fork(self) -> None:
        # redis-py's pool notices the new pid and reconnects itself; the loops' clients are the parent's
        self._aclients.forget()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ARGV: key prefix, marks key, token, max_workers, ttl_ms, quarantine_ms.  The marks hash also
# holds the namespace's record: '_born' (when this server first saw it, by Redis's clock) and
# '_high' (the highest worker id granted since).  Never-used ids come first (no wait but the
# namespace's own); a takeover of an expired or released id waits one ttl (its record may be a copy
# put back under a live holder); an id granted before whose mark is gone waits the quarantine.
_ACQUIRE = """
local prefix, marks, token = ARGV[1], ARGV[2], ARGV[3]
local max, ttl, quarantine = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local born = tonumber(redis.call('HGET', marks, '_born') or '-1')
if born < 0 then
  born = now
  redis.call('HSET', marks, '_born', born, '_high', -1)
end
local high = tonumber(redis.call('HGET', marks, '_high') or '-1')
local fresh = math.max(0, born + quarantine - now)
for wid = high + 1, max - 1 do
  if redis.call('SET', prefix .. wid, token, 'NX', 'PX', ttl) then
    redis.call('HSET', marks, '_high', wid)
    return {wid, '0', fresh}
  end
end
for wid = 0, math.min(high, max - 1) do
  if redis.call('SET', prefix .. wid, token, 'NX', 'PX', ttl) then
    local mark = redis.call('HGET', marks, tostring(wid))
    if mark then return {wid, mark, math.max(fresh, tonumber(ttl))} end
    return {wid, '0', quarantine}
  end
end
return false
"""

# KEYS: the lease, the marks.  ARGV: token, ttl_ms (renew: the mark only rises) or "" (release:
# the mark becomes what the holder used), worker id, mark.
_RENEW_OR_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  return 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[3]) or '0')
if tonumber(ARGV[4]) > old then redis.call('HSET', KEYS[2], ARGV[3], ARGV[4]) end
return 1
"""


class RedisLeaseStore(_RedisStore):
    """Worker-id leases on Redis: see the module docstring.  ``target``: a URL or a ``redis.Redis``.

    Every failure of the server or the connection is raised as
    :class:`~seqid_orm.errors.BackendUnavailableError` naming the store.
    """

    what = "lease store"

    @staticmethod
    def _keys(namespace: str) -> tuple[str, str]:
        return f"seqid:lease:{{{namespace}}}:", f"seqid:lease-marks:{{{namespace}}}"

    def _acquire(
        self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int
    ) -> Steps[Grant | None]:
        prefix, marks = self._keys(namespace)
        yield from self.check_durability()
        reply = yield from self.write(_ACQUIRE, [], [prefix, marks, token, max_workers, ttl_ms, quarantine_ms])
        if not reply:
            return None
        return Grant(int(reply[0]), int(_text(reply[1])), int(reply[2]))

    def _renew_or_release(
        self, namespace: str, worker_id: int, token: str, ttl_ms: int | str, mark_ms: int
    ) -> Steps[bool]:
        prefix, marks = self._keys(namespace)
        reply = yield from self.write(
            _RENEW_OR_RELEASE, [f"{prefix}{worker_id}", marks], [token, ttl_ms, worker_id, mark_ms]
        )
        return bool(reply)

    def acquire(self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int) -> Grant | None:
        with self._errors():
            return self._drive(self._acquire(namespace, token, max_workers, ttl_ms, quarantine_ms))

    async def aacquire(
        self, namespace: str, token: str, max_workers: int, ttl_ms: int, quarantine_ms: int
    ) -> Grant | None:
        with self._errors():
            return await self._adrive(self._acquire(namespace, token, max_workers, ttl_ms, quarantine_ms))

    def renew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        with self._errors():
            return self._drive(self._renew_or_release(namespace, worker_id, token, ttl_ms, mark_ms))

    async def arenew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        with self._errors():
            return await self._adrive(self._renew_or_release(namespace, worker_id, token, ttl_ms, mark_ms))

    def release(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        with self._errors():
            self._drive(self._renew_or_release(namespace, worker_id, token, "", mark_ms))

    async def arelease(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        with self._errors():
            await self._adrive(self._renew_or_release(namespace, worker_id, token, "", mark_ms))

    def leases(self, namespace: str) -> list[LeaseRow]:
        prefix, marks = self._keys(namespace)
        with self._errors():
            stored = {int(_text(k)): int(_text(v)) for k, v in self.client.hgetall(marks).items() if _text(k).isdigit()}
            held, holders = {}, {}
            for key in self.client.scan_iter(match=prefix + "*", count=500):  # braces are not glob characters
                worker_id = int(_text(key)[len(prefix) :])
                held[worker_id] = max(0, int(self.client.pttl(key)))
                holders[worker_id] = holder_of(_text(self.client.get(key) or b""))
        return [
            LeaseRow(namespace, w, w in held, held.get(w, 0), stored.get(w, 0), holders.get(w, ""))
            for w in sorted({*stored, *held})
        ]

    def namespaces(self) -> list[str]:
        found = set()
        with self._errors():
            for pattern in ("seqid:lease:{*}:*", _LEASE_MARKS):
                for key in self.client.scan_iter(match=pattern, count=500):
                    text = _text(key)
                    found.add(text[text.index("{") + 1 : text.index("}")])
        return sorted(found)

    def after_fork(self) -> None:
        # redis-py's pool notices the new pid and reconnects itself; the loops' clients are the parent's
        self._aclients.forget()
