"""Typed errors of seqid_orm.

Every error the package raises derives from :class:`SeqIDError` *and* from the built-in class
a caller would naturally catch, so ``except ValueError`` keeps working for code that does not
know this package:

* ``TypeError``: :class:`ArgumentTypeError` (an argument or value of the wrong type).
* ``ValueError``: :class:`InvalidIDError` (a malformed id), :class:`InvalidArgumentError` (an
  argument or setting out of range), :class:`NoTimestampError`, and the two look-up failures
  :class:`UnknownLayoutError` and :class:`ServerDefaultUnavailableError` (also ``LookupError``).
* ``RuntimeError``: the generator's state refuses to go on (:class:`ClockMovedBackwardsError`,
  :class:`GeneratorExhaustedError`, :class:`ForkedGeneratorError`). These are not caused by a
  bad argument, so they are deliberately not ``ValueError``.

No ``OverflowError``, ``MemoryError`` or bare ``ValueError`` escapes from bad input: a test
scans the source for built-in raises.
"""

from __future__ import annotations


class SeqIDError(Exception):
    """Base class of every error raised by seqid_orm."""


class InvalidIDError(SeqIDError, ValueError):
    """A value is not a well-formed id of the expected kind (bad length, alphabet, hex...)."""


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
