"""Typed errors of seqid_orm.

Every error derives from :class:`SeqIDError` *and* from the built-in class a caller would
naturally catch (``ValueError`` for bad input, ``RuntimeError`` for generator state), so
``except ValueError`` keeps working for code that does not know this package.
"""

from __future__ import annotations


class SeqIDError(Exception):
    """Base class of every error raised by seqid_orm."""


class InvalidIDError(SeqIDError, ValueError):
    """A value is not a well-formed id of the expected kind (bad length, alphabet, hex...)."""


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


class UnknownLayoutError(SeqIDError, LookupError):
    """No layout is known to keep ids ordered for this database, version and storage."""


class ServerDefaultUnavailableError(SeqIDError, LookupError):
    """The database cannot generate time-ordered UUIDs itself for this version and column type."""
