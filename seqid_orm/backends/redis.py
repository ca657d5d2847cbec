"""Ticket server and worker-id leases on Redis, through redis-py.

One hash per sequence, ``seqid:tickets:<name>`` with the fields ``next_value``, ``step`` and
``offset``.  A reservation is one Lua script (one round trip, atomic on the server): check the
stored step and offset, ``HINCRBY next_value``, and return the new value *as text* — Redis
hands integers to Lua as doubles, which cannot hold a BIGINT above 2**53, while ``HGET``
returns the exact decimal string.  A new name is created by the same script, and only when the
caller has not seen it before: a counter that *vanishes* later (a restart without persistence,
eviction, ``FLUSHALL``) is refused rather than started over, which would hand out its ids again.

Durability is Redis's: a counter is only as safe as ``appendonly yes`` with
``appendfsync always``.  With less, a crash loses the last increments and the counter comes
back lower, and a restart without persistence loses it entirely, so ids repeat.  The store logs
a warning once when the server says it persists less.

Leases (:class:`RedisLeaseStore`): one key per worker id, ``seqid:lease:{<namespace>}:<id>``, set
with ``SET NX PX`` to the holder's random token, so Redis's clock expires it; renewal and release
are scripts that act only when the key still holds the caller's token.  The high-water marks live
in a hash without expiry, ``seqid:lease-marks:{<namespace>}``, so they outlive the leases.  The
braces make every key of a namespace one Redis Cluster hash slot.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..errors import BackendMismatchError, GeneratorExhaustedError
from .base import Grant, LeaseRow, TicketRow, first_value, hide_password, last_value_limit, vanished

try:
    import redis
except ImportError as exc:  # say which extra brings it
    raise ImportError("Redis ticket servers need redis-py: pip install 'seqid-orm[redis]'") from exc

__all__ = ["KEY_PREFIX", "RedisLeaseStore", "RedisTicketStore"]

KEY_PREFIX = "seqid:tickets:"
log = logging.getLogger("seqid_orm.tickets")
_warned: set[str] = set()  # servers already warned about, once per process

# KEYS[1]: the sequence's hash.  ARGV: step, offset, first value, may_create ("1"/"0"), delta.
_ALLOCATE = """
local stored = redis.call('HMGET', KEYS[1], 'step', 'offset')
if not stored[1] then
  if ARGV[4] ~= '1' then return {'missing'} end
  redis.call('HSET', KEYS[1], 'next_value', ARGV[3], 'step', ARGV[1], 'offset', ARGV[2])
elseif stored[1] ~= ARGV[1] or stored[2] ~= ARGV[2] then
  return {'mismatch', stored[1], stored[2]}
end
redis.call('HINCRBY', KEYS[1], 'next_value', ARGV[5])
return {'ok', redis.call('HGET', KEYS[1], 'next_value')}
"""


class _RedisStore:
    """What both Redis stores share: a client of their own made from a URL (closed by
    :meth:`close`), or a given ``redis.Redis`` (left open).  ``read_timeout`` bounds one reply."""

    def __init__(self, target: str | redis.Redis, connect_timeout: float, read_timeout: float) -> None:
        if isinstance(target, redis.Redis):
            self.client = target
            self.label = repr(target)
            self._owned = False
        else:
            self.client = redis.Redis.from_url(
                target, socket_connect_timeout=connect_timeout, socket_timeout=read_timeout
            )
            self.label = hide_password(target)
            self._owned = True

    def close(self) -> None:
        if self._owned:
            self.client.close()


class RedisTicketStore(_RedisStore):
    """A ticket server on Redis: see the module docstring.  ``target``: a URL or a ``redis.Redis``."""

    def __init__(self, target: str | redis.Redis, *, connect_timeout: float = 5.0) -> None:
        super().__init__(target, connect_timeout, read_timeout=connect_timeout * 6)
        self._script = self.client.register_script(_ALLOCATE)
        self._seen: set[str] = set()  # names this process has allocated from: never re-created
        self._checked_durability = False
        self._lock = threading.Lock()

    def allocate(self, name: str, count: int, step: int, offset: int, start: int, max_value: int) -> tuple[int, int]:
        self._warn_if_volatile()
        limit = last_value_limit(max_value, step)
        key = KEY_PREFIX + name
        try:
            first = self._reserve(key, name, count, step, offset, start)
        except redis.ResponseError as exc:
            if "overflow" not in str(exc):
                raise
            # HINCRBY refused to pass 2**63: reserve only what is left below the limit, if anything
            stored = self.client.hget(key, "next_value")
            left = 0 if stored is None else (limit - int(_text(stored))) // step + 1
            if not 0 < left < count:
                raise GeneratorExhaustedError(f"sequence {name!r} on {self.label} is exhausted: {exc}") from None
            count = left
            first = self._reserve(key, name, count, step, offset, start)
        if first > limit:
            raise GeneratorExhaustedError(
                f"sequence {name!r} on {self.label} is exhausted: its next value {first} is past {limit}"
            )
        return first, min(count, (limit - first) // step + 1)

    def _reserve(self, key: str, name: str, count: int, step: int, offset: int, start: int) -> int:
        """Run the script; the first value reserved."""
        delta = count * step
        may_create = "0" if name in self._seen else "1"
        args: list[str | int] = [step, offset, first_value(offset, step, start), may_create, delta]
        reply = self._script(keys=[key], args=args)
        status = _text(reply[0])
        if status == "missing":
            raise vanished(name, self.label)
        if status == "mismatch":
            raise BackendMismatchError(
                f"sequence {name!r} on {self.label} is stored with step={_text(reply[1])} offset={_text(reply[2])}, "
                f"but this client uses step={step} offset={offset}: clients must list the same servers in the "
                "same order (or pass the same step= and offsets=)"
            )
        self._seen.add(name)
        return int(_text(reply[1])) - delta

    def rows(self) -> list[TicketRow]:
        found = []
        for key in self.client.scan_iter(match=KEY_PREFIX + "*", count=500):
            name = _text(key)[len(KEY_PREFIX) :]
            values = self.client.hmget(key, "next_value", "step", "offset")
            if None not in values:
                found.append(TicketRow(name, *(int(_text(v)) for v in values)))
        return sorted(found, key=lambda r: r.name)

    def after_fork(self) -> None:
        self._lock = threading.Lock()  # redis-py's pool notices the new pid and reconnects itself

    def _warn_if_volatile(self) -> None:
        if self._checked_durability:
            return
        with self._lock:
            if self._checked_durability or self.label in _warned:
                self._checked_durability = True
                return
            self._checked_durability = True
            _warned.add(self.label)
            try:
                config: dict[Any, Any] = {}
                for key in ("appendonly", "appendfsync"):
                    config.update(self.client.config_get(key))
            except redis.RedisError:  # CONFIG is often disabled on managed servers
                return
            if _text(config.get("appendonly", "")) != "yes" or _text(config.get("appendfsync", "")) != "always":
                log.warning(
                    "%s persists ticket counters only with appendonly=%s appendfsync=%s: after a crash or restart "
                    "its counters come back lower or empty and ids repeat (use appendonly yes, appendfsync always)",
                    self.label,
                    _text(config.get("appendonly", "?")),
                    _text(config.get("appendfsync", "?")),
                )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ARGV: key prefix, marks key, token, max_workers, ttl_ms, first id to try.
_ACQUIRE = """
local prefix, marks, token = ARGV[1], ARGV[2], ARGV[3]
local max, ttl, start = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
for i = 0, max - 1 do
  local wid = (start + i) % max
  if redis.call('SET', prefix .. wid, token, 'NX', 'PX', ttl) then
    return {wid, redis.call('HGET', marks, tostring(wid)) or '0'}
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
    """Worker-id leases on Redis: see the module docstring.  ``target``: a URL or a ``redis.Redis``."""

    def __init__(self, target: str | redis.Redis, *, connect_timeout: float = 5.0) -> None:
        super().__init__(target, connect_timeout, read_timeout=connect_timeout)
        self._acquire = self.client.register_script(_ACQUIRE)
        self._renew = self.client.register_script(_RENEW_OR_RELEASE)

    @staticmethod
    def _keys(namespace: str) -> tuple[str, str]:
        return f"seqid:lease:{{{namespace}}}:", f"seqid:lease-marks:{{{namespace}}}"

    def acquire(self, namespace: str, token: str, max_workers: int, ttl_ms: int) -> Grant | None:
        import secrets

        prefix, marks = self._keys(namespace)
        reply = self._acquire(args=[prefix, marks, token, max_workers, ttl_ms, secrets.randbelow(max_workers)])
        if not reply:
            return None
        return Grant(int(reply[0]), int(_text(reply[1])))

    def renew(self, namespace: str, worker_id: int, token: str, ttl_ms: int, mark_ms: int) -> bool:
        prefix, marks = self._keys(namespace)
        return bool(self._renew(keys=[f"{prefix}{worker_id}", marks], args=[token, ttl_ms, worker_id, mark_ms]))

    def release(self, namespace: str, worker_id: int, token: str, mark_ms: int) -> None:
        prefix, marks = self._keys(namespace)
        self._renew(keys=[f"{prefix}{worker_id}", marks], args=[token, "", worker_id, mark_ms])

    def leases(self, namespace: str) -> list[LeaseRow]:
        prefix, marks = self._keys(namespace)
        stored = {int(_text(k)): int(_text(v)) for k, v in self.client.hgetall(marks).items()}
        held = {}
        for key in self.client.scan_iter(match=prefix + "*", count=500):  # braces are not glob characters
            held[int(_text(key)[len(prefix) :])] = max(0, int(self.client.pttl(key)))
        return [LeaseRow(namespace, w, w in held, held.get(w, 0), stored.get(w, 0)) for w in sorted({*stored, *held})]

    def after_fork(self) -> None:
        pass  # redis-py's pool notices the new pid and reconnects itself
