"""Allocation: integer keys reserved in blocks from ticket servers (:mod:`.tickets`), and Snowflake
worker ids leased from a shared store instead of configured (:mod:`.leases`), after Meituan's Leaf
(segments, double buffering) and Baidu's uid-generator (worker ids assigned at start).

May import :mod:`seqid_orm.ids` and :mod:`seqid_orm.errors`.  The stores (:mod:`.stores`) load
SQLAlchemy, redis-py or Django only when a store of that kind is opened, so the core stays
importable with the standard library alone.
"""
