"""Id generators and codecs: time-ordered UUIDs (UUIDv7 and the COMB layouts), Snowflake ids,
wrapping-prefix UUIDs, sortable text, the key validator, and reading any of them back.

May import the standard library and :mod:`seqid_orm.errors` only.  Nothing here knows a
database, an ORM or a store: where the time goes for a given database is
:mod:`seqid_orm.vendors`' decision, and this package only builds the bits it is told to.
"""
