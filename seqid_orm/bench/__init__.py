"""The insert benchmark behind ``seqid bench`` (needs the ``sqlalchemy`` extra and a driver).

It inserts the same rows — a key and a 100-character payload — into one table per key kind,
through SQLAlchemy as users would, and measures what the COMB and sequential-uuids articles measured: time per
million rows as the index grows, table and index size, and the engine's own counters (WAL and
full-page images on PostgreSQL, page splits on InnoDB, buffer hit ratios).
"""
