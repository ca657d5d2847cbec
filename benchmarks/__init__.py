"""Benchmark harnesses for seqid_orm: measurements for docs/benchmarks.md, outside the wheel.

Run from a checkout with the ``bench`` extra installed (``make bench`` or ``pip install -e '.[bench]'``):

* ``python -m benchmarks.insert`` — ``seqid bench`` plus ``--small-memory`` (a private PostgreSQL with
  16 MB of ``shared_buffers``, MariaDB with a 32 MB buffer pool) and ``--generation``;
* ``python -m benchmarks.generation`` — ids per second against ``uuid.uuid4()``;
* ``python -m benchmarks.insert_paths`` — ``executemany``, ``insertmanyvalues``, the ORM's bulk INSERT, ``COPY``;
* ``python -m benchmarks.django_bulk`` — Django ``bulk_create`` with ``SeqUUIDField`` against ``UUIDField``;
* ``python -m benchmarks.instructions`` — the client's instructions per row, counted under valgrind;
* ``python -m benchmarks.tickets`` — ticket servers: ids/s, round trips, latency, index size;
* ``python -m benchmarks.simulate`` — a model of a range-splitting store (CockroachDB, TiDB).

They may import anything: seqid_orm, its extras, and the private-server starters in ``tests/servers``.
"""
