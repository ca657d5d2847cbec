"""Deprecated: :mod:`seqid_orm.schema.adoption` (the features that read or change live tables left the
per-vendor rules for a package of their own).  This alias warns on import and goes in the next release."""

from ._moved import moved

__getattr__, __all__ = moved(__name__, "seqid_orm.schema.adoption")
