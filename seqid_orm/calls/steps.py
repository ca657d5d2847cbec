"""Store logic as generators of I/O requests: one copy of every decision, driven by sync or async I/O.

The decisions of a store — what a reservation reads and writes and in which order, when a
lease may be granted, what a store's history says — are written once, as generator functions
that *yield* what they need done (:class:`Call`: "run this statement", "ask that store";
:class:`Sleep`) and receive its result, or its exception, back at the ``yield``.  They never
touch a socket.  Two runners carry the requests out:

* :func:`drive` on a synchronous I/O object (a store's connection, through its blocking driver);
* :func:`adrive` on an asynchronous one (psycopg's async connection, aiomysql through
  SQLAlchemy's ``AsyncConnection``, ``redis.asyncio``): the statements are awaited on the event loop, and a
  :class:`Call` to an object without an awaitable twin (``a`` + its method name) runs in a
  worker thread — a thread only where no async driver exists.

This is h11's shape (https://h11.readthedocs.io/en/latest/api.html: "bring your own I/O"), for a
protocol of SQL statements instead of HTTP bytes.  A :class:`Call` whose ``method`` is a name
goes to the runner's own I/O object, so a step function says *what* to run, not *where*; a call's
:class:`Deadline`, where its caller has one, is written at the call and passed down by the runner.

May import: the standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "Call",
    "Deadline",
    "Executor",
    "PerLoop",
    "Sleep",
    "Steps",
    "adrive",
    "awaitable_twin",
    "call",
    "drive",
    "fetch",
    "run",
]

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class Deadline:
    """When one call must have ended (seconds of ``clock``), and what is left of it.

    A public call (a lease's ``acquire``, ``release``) makes its deadline once and passes it down
    (:meth:`passed_down`); every store call beneath it takes :meth:`within`: its own bound, or
    what is left of the caller's where that is shorter.  A store call made 4.7 s into a 5 s call has
    0.3 s, not a fresh 5; one made past the caller's deadline sends nothing and times out at once.
    It is passed as a context variable, as asyncio's own ``timeout()`` scopes are: it follows the
    call through its steps, into ``asyncio.to_thread`` and the tasks it awaits, and not into a
    thread of its own (background work takes the bound its starter gives it)."""

    end: float
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    @classmethod
    def within(cls, seconds: float) -> Deadline:
        """A store call's deadline: ``seconds`` (the store's bound on one call) from now, or the
        caller's deadline passed down, where it ends sooner."""
        caller = _CALLER.get()
        return cls.after(seconds if caller is None else min(seconds, caller.left()))

    def left(self) -> float:
        """Seconds left (0 or less once it has passed)."""
        return self.end - self.clock()

    @contextlib.contextmanager
    def passed_down(self) -> Iterator[Deadline]:
        """Make this the deadline of every store call made inside (see the class docstring)."""
        token = _CALLER.set(self)
        try:
            yield self
        finally:
            _CALLER.reset(token)


_CALLER: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("seqid_deadline", default=None)


@dataclass(frozen=True, slots=True)
class Call:
    """Call ``method(*args)`` and send back its result.

    ``method`` is a bound method of the object asked (a store's ``acquire``, a floor's ``taken_in``),
    named by reference so a reader (and an IDE) follows a decision to its I/O: a thread calls it, a
    loop awaits its awaitable twin (``a`` + its name, ``aacquire``) where its object has one, else runs
    it in a worker thread.  A ``str`` names a method of the runner's own I/O object instead (a
    statement on a store's connection: ``"fetch"``, ``"run"``), which differs between the two runners.

    ``deadline``: when the call must have ended, where its caller has one (a lease's grant, a renewal
    bounded by what is left of the lease), written at the call so a reader sees it; the runner makes it
    the deadline of the store call (:meth:`Deadline.passed_down`), whose own bound
    applies where it ends sooner.
    """

    method: Callable[..., Any] | str
    args: tuple[Any, ...] = ()
    deadline: Deadline | None = None


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` (``time.sleep`` in a thread, ``asyncio.sleep`` on a loop)."""

    seconds: float


#: A step function's generator: yields requests, receives their results, returns its outcome.
Steps = Generator["Call | Sleep", Any, _T]


class Executor(Protocol):
    """The I/O a SQL step function needs: one text statement (``:name`` parameters) on a store's
    own connection, in autocommit."""

    def fetch(self, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        """Rows of a ``SELECT``."""
        ...

    def run(self, sql: str, params: dict[str, object]) -> int:
        """Rows changed by ``INSERT``/``UPDATE``; 0 when an ``INSERT`` met an existing key."""
        ...


def call(method: Callable[..., Any] | str, *args: Any) -> Steps[Any]:
    """The result of one :class:`Call` (``yield from call(...)`` in a step function, or a step
    function of its own for a single call)."""
    return (yield Call(method, args))


def _within(request: Call) -> contextlib.AbstractContextManager[object]:
    """The call's deadline passed down to what it calls, where it has one."""
    return request.deadline.passed_down() if request.deadline is not None else contextlib.nullcontext()


def fetch(sql: str, params: dict[str, object]) -> Steps[list[tuple[Any, ...]]]:
    """The rows of a ``SELECT`` (``yield from fetch(...)`` in a step function)."""
    rows: list[tuple[Any, ...]] = yield Call("fetch", (sql, params))
    return rows


def run(sql: str, params: dict[str, object]) -> Steps[int]:
    """The rows an ``INSERT``/``UPDATE`` changed (0 when an ``INSERT`` met an existing key)."""
    changed: int = yield Call("run", (sql, params))
    return changed


def _resume(steps: Steps[_T], result: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Send ``result`` (or throw ``error``) into ``steps``: ``(True, outcome)`` once it returns,
    else ``(False, its next request)``."""
    try:
        return False, steps.send(result) if error is None else steps.throw(error)
    except StopIteration as stop:
        return True, stop.value


def drive(steps: Steps[_T], io: object, sleep: Callable[[float], object] = time.sleep) -> _T:
    """Carry out ``steps`` with blocking calls on ``io`` (``sleep`` for a :class:`Sleep`); its outcome (or
    its exception).  Every exception of a request goes back into the step function at its ``yield``, an
    interrupt included, so its ``except`` and ``finally`` run then, not when the generator is collected."""
    result: Any = None
    error: BaseException | None = None
    while True:
        done, request = _resume(steps, result, error)
        if done:
            return request  # type: ignore[no-any-return]
        result, error = None, None
        try:
            if isinstance(request, Sleep):
                sleep(request.seconds)
            elif isinstance(request.method, str):
                with _within(request):
                    result = getattr(io, request.method)(*request.args)
            else:
                with _within(request):
                    result = request.method(*request.args)
        except BaseException as exc:  # the step function decides what a failure means
            error = exc


async def adrive(steps: Steps[_T], aio: object) -> _T:
    """Carry out ``steps`` on an event loop: ``aio``'s methods are awaited; a :class:`Call` to a
    coroutine function is awaited, to another target its ``a``-prefixed method where it has one, else
    it runs in a worker thread.  A cancellation goes back into the step function at its ``yield`` as any
    error does (its ``except`` and ``finally`` run then); the closing of a loop's task does not."""
    result: Any = None
    error: BaseException | None = None
    while True:
        done, request = _resume(steps, result, error)
        if done:
            return request  # type: ignore[no-any-return]
        result, error = None, None
        try:
            if isinstance(request, Sleep):
                await asyncio.sleep(request.seconds)
                continue
            with _within(request):
                if isinstance(request.method, str):
                    result = await getattr(aio, request.method)(*request.args)
                elif inspect.iscoroutinefunction(request.method):  # a coroutine function: awaited as it is
                    result = await request.method(*request.args)
                else:
                    twin = awaitable_twin(request.method)
                    if twin is not None:
                        result = await twin(*request.args)
                    else:
                        result = await asyncio.to_thread(request.method, *request.args)
        except GeneratorExit:  # the coroutine is being closed: nothing may be awaited any more
            raise
        except BaseException as exc:
            error = exc


def awaitable_twin(method: Callable[..., Any]) -> Callable[..., Awaitable[Any]] | None:
    """The awaitable twin of a bound method (``store.aacquire`` of ``store.acquire``), where its object has one."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    twin = getattr(owner, "a" + name, None) if owner is not None and name else None
    return twin if callable(twin) else None


class PerLoop(Generic[_R]):
    """One resource per running event loop (a pooled async engine, a ``redis.asyncio`` client),
    closed on that loop before it closes.

    An asyncio connection belongs to the loop that opened it: pooled past the loop's end it can no
    longer be closed.  ``asyncio.run`` (and every runner that follows it) finalizes the loop's
    asynchronous generators before closing it (``loop.shutdown_asyncgens()``), so each resource is
    kept by a small asynchronous generator whose ``finally`` closes it there.  A loop closed without
    that step (``loop.close()`` alone) leaves its resource to the garbage collector.
    """

    def __init__(self, make: Callable[[], _R], close: Callable[[_R], Awaitable[object]]) -> None:
        self._make = make
        self._close = close
        self._items: dict[asyncio.AbstractEventLoop, tuple[_R, AsyncGenerator[None, None]]] = {}
        self._making: dict[asyncio.AbstractEventLoop, asyncio.Future[_R]] = {}

    async def get(self) -> _R:
        """The running loop's resource, made on first use in a worker thread (making one imports its
        driver and builds an engine: 0.5-0.9 s on the loop measured on a loaded machine); tasks
        that ask while it is made await the same one."""
        loop = asyncio.get_running_loop()
        found = self._items.get(loop)
        if found is not None:
            return found[0]
        making = self._making.get(loop)
        if making is None:
            making = self._making[loop] = loop.create_future()
            try:
                resource = await asyncio.to_thread(self._make)
                keeper = self._keep(loop, resource)
                self._items[loop] = (resource, keeper)
                await keeper.__anext__()  # the loop now finalizes it at its shutdown
            except BaseException as exc:
                if not making.done():
                    making.set_exception(exc if isinstance(exc, Exception) else RuntimeError("not made"))
                    making.exception()  # retrieved: the tasks awaiting it raise it
                raise
            finally:
                self._making.pop(loop, None)
            making.set_result(resource)
            return resource
        return await asyncio.shield(making)

    async def _keep(self, loop: asyncio.AbstractEventLoop, resource: _R) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            self._items.pop(loop, None)
            await self._close(resource)

    def forget(self) -> None:
        """Drop every loop's resource unclosed (after a fork: they belong to the parent)."""
        self._items = {}
        self._making = {}
