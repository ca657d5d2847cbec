"""Deprecated alias of :mod:`seqid_orm.vendors`;
the old path goes in the next release."""

from ._deprecated import moved_module

__getattr__ = moved_module(__name__, "seqid_orm.vendors")
