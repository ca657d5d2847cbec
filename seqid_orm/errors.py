"""Typed errors of seqid_orm.

Imports nothing (every module of the package may import it), so ``from seqid_orm.errors import X``
costs nothing and never pulls an adapter in.

Every error the package raises derives from :class:`SeqIDError` *and* from the built-in class
a caller would naturally catch, so ``except ValueError`` keeps working for code that does not
know this package:

* ``TypeError``: :class:`ArgumentTypeError` (an argument or value of the wrong type).
* ``ValueError``: :class:`InvalidIDError` (a malformed id), :class:`InvalidArgumentError` (an
  argument or setting out of range), :class:`NoTimestampError`, and the two look-up failures
  :class:`UnknownLayoutError` and :class:`ServerDefaultUnavailableError` (also ``LookupError``).
* ``RuntimeError``: the generator's state refuses to go on (:class:`ClockMovedBackwardsError`,
  :class:`GeneratorExhaustedError`, :class:`ForkedGeneratorError`), and a key column could not be
  read before its first key (:class:`ColumnReadError`). These are not caused by a bad argument, so
  they are deliberately not ``ValueError``.
* Allocation from a shared backend (ticket sequences, worker leases) fails with an
  :class:`AllocationError` (a ``RuntimeError``): :class:`BackendUnavailableError` when no
  backend answers, :class:`BackendMismatchError` when a backend's stored settings contradict
  the client's (two clients that disagree would hand out the same ids).
* Migrations: :class:`MigrationRefusedError` (a ``ValueError``: refused before anything changed) and
  the migration lock's :class:`MigrationLockError` (a ``RuntimeError``; its time-out is also a
  ``TimeoutError``).

No ``OverflowError``, ``MemoryError`` or bare ``ValueError`` escapes from bad input: a test
scans the source for built-in raises.
"""

from __future__ import annotations


class SeqIDError(Exception):
    """Base class of every error raised by seqid_orm."""


class InvalidIDError(SeqIDError, ValueError):
    """A value is not a well-formed id of the expected kind (bad length, alphabet, hex...)."""


class UnmaskError(InvalidIDError):
    """A public id that this key (and layout) cannot have produced: wrong key, layout or id
    (:func:`~seqid_orm.unmask`)."""


class InvalidArgumentError(SeqIDError, ValueError):
    """An argument or setting is outside what it allows (a count, a bit width, a storage name...)."""


class ArgumentTypeError(SeqIDError, TypeError):
    """An argument or id value has the wrong type (a ``float`` for an integer key, ``bool``...)."""


class NoTimestampError(SeqIDError, ValueError):
    """The id carries no absolute time (for example a random UUIDv4 or a wrapping prefix)."""


class ClockMovedBackwardsError(SeqIDError, RuntimeError):
    """The wall clock stepped back further than the generator is configured to tolerate."""


class GeneratorExhaustedError(SeqIDError, RuntimeError):
    """The generator's time field has run out of bits (its epoch is used up)."""


class ForkedGeneratorError(SeqIDError, RuntimeError):
    """A generator whose uniqueness rests on a worker id was inherited by a forked child.

    Parent and child would share the worker id and produce the same ids, so the child must
    build its own generator with a worker id of its own.
    """


class UnknownLayoutError(SeqIDError, LookupError, ValueError):
    """No layout is known to keep ids ordered for this database, version and storage."""


class ServerDefaultUnavailableError(SeqIDError, LookupError, ValueError):
    """The database cannot generate time-ordered UUIDs itself for this version and column type."""


class StorageMismatchError(SeqIDError, ValueError):
    """A key column holds its UUIDs in another form than the seqid type or field would write them.

    A column ``sa.Uuid`` made on SQLite or MySQL holds 32 hex characters, where ``SeqUUID()`` would
    write 16 raw bytes: on SQLite the new rows would sit beside the old ones in a second storage
    class, and a look-up of an old key by the new form would find nothing.  Refused at the column's
    first use, before a row is written; the message names the column, both forms and the two fixes
    (declare the storage the column has, or convert the column).
    """


class ColumnReadError(SeqIDError, RuntimeError):
    """Reading a key column before its first key failed: the catalog or key statement the database
    refused or did not finish (a short ``statement_timeout``, a revoked catalog, a lost connection).

    The message names the column and the statement, and the driver's error is the ``__cause__``.  On
    PostgreSQL the failed statement aborted the transaction it ran in, as any failed statement does:
    the row that needed the key was not written.
    """


class UnknownServerVersionError(ServerDefaultUnavailableError):
    """The SQL depends on the server version, which is unknown (offline DDL); the message says how to give it."""


class DatabaseUnavailableError(SeqIDError, ConnectionError):
    """A database a read-only tool (``seqid doctor``) was pointed at could not be reached, opened
    or read within its statement timeout.  The message names it, password hidden."""


class AllocationError(SeqIDError, RuntimeError):
    """Ids could not be allocated from a shared backend (a ticket server, a lease table, Redis)."""


class BackendUnavailableError(AllocationError):
    """No backend answered: every ticket server (or the lease store) is unreachable or failing.

    The message names each backend (passwords hidden) with the error it gave.
    """


class BackendMismatchError(AllocationError):
    """A backend's stored settings contradict this client's, so going on could duplicate ids.

    For example a ticket sequence stored with ``step=2, offset=1`` on a server that this client
    lists with ``step=3, offset=2``: two clients listing the servers in different orders would
    otherwise both hand out the same residues.
    """


class LeaseUnavailableError(AllocationError):
    """Every worker id of a lease namespace is held; the message names the namespace and ``max_workers``."""


class LeaseLostError(AllocationError):
    """No worker-id lease is held now (not taken yet, or not renewed before it expired).

    A leased generator raises it instead of making ids that another holder of the same worker id
    could also make; it resumes once a lease is held again.
    """


class WorkerIdNotReadyError(LeaseLostError):
    """A worker id is granted but not safe to stamp before the call's deadline: its fence (a
    takeover's or a new namespace's wait of ``ttl + clock_tolerance``, a previous holder's clock
    mark) ends later than ``timeout`` allows.

    Raised by a leased generator's first id, which does not wait past its deadline unless the
    lease was made with ``first_id_waits=True``; ``acquire()``, ``aacquire()`` and ``with lease:``
    wait it out, which is what an application's start-up should call.  The grant goes on in the
    background, renewing its lease, so a call after ``safe_in`` seconds finds the worker id held.
    ``safe_in`` is ``None`` where the grant had not yet answered.
    """

    def __init__(self, message: str, *, safe_in: float | None = None) -> None:
        super().__init__(message)
        self.safe_in = safe_in

    def __reduce__(self) -> tuple[object, ...]:
        return (_not_ready, (str(self), self.safe_in))


def _not_ready(message: str, safe_in: float | None) -> WorkerIdNotReadyError:
    return WorkerIdNotReadyError(message, safe_in=safe_in)


class CounterRegressedError(AllocationError):
    """A ticket server handed out a block at or below one this process already drew from it.

    The counter went backwards: a row restored from an older backup, deleted and created again,
    a Redis restarted empty and re-created by another process.  Taking the block would repeat
    ids this process has handed out, so the sequence refuses it, and keeps refusing, until the
    counter is set above them again (``seqid ticket repair``).  The message names the sequence,
    the server and both values.
    """


class CounterBelowDataError(AllocationError):
    """A ticket sequence bound to a key column was handed a block whose values are already keys there.

    The counter is lower than the data allows (created anew, or restored from a backup, while
    the table kept its rows): going on would insert duplicate keys.  ``seqid ticket repair``
    (:meth:`~seqid_orm.allocation.tickets.TicketSequence.repair`) moves the counter above the largest key.
    """


class WorkerIdConflictError(AllocationError):
    """A leased Snowflake found, in the key column it fills, ids stamped with its worker id that
    no holder of its lease could have made: another allocator hands out the same worker ids for
    that column (a second lease namespace, the same namespace on a second store, or a configured
    ``worker_id``), and the two would repeat each other's ids.  Refused until the column has one
    namespace on one store; the message names the column, the worker id and the key found.
    """


class VolatileStoreError(AllocationError):
    """A ticket or lease store could lose writes it acknowledged, and the caller did not accept that.

    Redis keeps a counter across a crash only with ``appendonly yes`` and ``appendfsync always``;
    with less, the counter comes back lower or empty and ids repeat.  A PostgreSQL server with
    asynchronous standbys and no synchronous one can be failed over to a standby that lacks the
    last reservations; a Redis whose ``maxmemory-policy`` may evict every key (``allkeys-*``) can
    drop a counter.  The message names the setting and the fix.  Pass ``accept_state_loss=True``
    (or ``?accept_state_loss=true`` in the URL) where that is acceptable (tests, a throw-away
    cache): seqid then still refuses a store whose history it sees change
    (:class:`StoreHistoryError`), but cannot see a loss that leaves the history as it was.
    """


class StoreHistoryError(AllocationError):
    """A store's history changed since seqid recorded it, and its state may have gone back.

    PostgreSQL starts a new *timeline* on a promotion or a point-in-time recovery, and a new
    *system identifier* for a new cluster: a standby promoted while it lagged, or a backup
    restored, lacks the last reservations its predecessor acknowledged, so its counters hand out
    values that processes already used.  Ticket sequences refuse such a store until ``seqid ticket
    repair`` moves the counters above the largest id in use and records the new history.  Where
    every write seqid made waited for a synchronous standby, a promotion loses nothing and is
    accepted.  A Redis primary promoted from a replica that had not received a write a store saw
    every replica confirm (Redis's ``master_replid2`` and ``second_repl_offset`` say where it left
    the old history) is refused alike, and its counters marked for every process until repaired.
    The message names the store, both histories and the command to run.
    """


class StoreTimeoutError(BackendUnavailableError):
    """A store did not answer within the call's deadline (a stalled server, a network that drops
    packets with the connection still open, a synchronous standby that does not confirm).

    The connection it was on is closed; the call moves to the next server where there is one.
    """


class MigrationRefusedError(InvalidArgumentError):
    """A migration operation of seqid would not work on this table or connection as it stands, and was
    refused before it changed anything: a partitioned table asked for a unique key, a role's time-out
    that would cut an index build short on a session seqid does not own (a transaction pooler), a
    table too big for the migration's transaction, triggers that cannot be held back.  The message
    names what to change; the schema is as it was.
    """


class MigrationLockError(SeqIDError, RuntimeError):
    """The migration lock (several pods running the same migrations) could not be held."""


class MigrationLockTimeoutError(MigrationLockError, TimeoutError):
    """Another run held the migration lock for longer than this one would wait; the message names the
    holder (its host, process and since when) and when its lease ends unless it renews it."""


class MigrationLockLostError(MigrationLockError):
    """This run's migration lock was not renewed before it expired (the process was frozen, the
    database did not answer), so another run may hold it now: the run stops before its next step."""
