"""Deprecated: :mod:`seqid_orm.schema.conversions` (the features that read or change live tables left the
per-vendor rules for a package of their own).  This alias warns on import and goes in the next release."""

import warnings

from ..schema import conversions as _moved
from ..schema.conversions import *  # noqa: F403 - the alias's names are the module's

__all__ = _moved.__all__

warnings.warn(
    "seqid_orm.vendors.conversions moved to seqid_orm.schema.conversions; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
