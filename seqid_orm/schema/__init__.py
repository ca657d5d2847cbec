"""The features that read or change the tables users already have: a live key column read before its
first key (:mod:`.live`), a key column's adoption and its record (:mod:`.adoption`), a key column added to a
table while it is used (:mod:`.online`), a UUID column's storage converted (:mod:`.conversions`), and the
doctor that reads a whole database (:mod:`.doctor`).  Both ORMs' adapters run them; each asks the vendor
modules for every statement and names no vendor itself (h11's shape: the adapters bring the I/O).

May import the standard library, :mod:`seqid_orm.errors`, :mod:`seqid_orm.ids`, :mod:`seqid_orm.vendors`
(its public names: the per-vendor rules and the target) and this folder.
"""
