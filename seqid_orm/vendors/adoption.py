"""Deprecated: :mod:`seqid_orm.schema.adoption` (the features that read or change live tables left the
per-vendor rules for a package of their own).  This alias warns on import and goes in the next release."""

import warnings

from ..schema import adoption as _moved
from ..schema.adoption import *  # noqa: F403 - the alias's names are the module's

__all__ = _moved.__all__

warnings.warn(
    "seqid_orm.vendors.adoption moved to seqid_orm.schema.adoption; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
