"""Two live processes configured with one worker id make the same ids (before: the FastAPI example
under ``uvicorn --workers 4`` failed 235 of 4,707 POSTs with duplicate keys, and nothing said why).
A process cannot tell another live process's keys from its own previous run's, so the column's
unique key is where it shows: a configured Snowflake's default has the key's duplicate logged as
what it is, on the real databases, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")

pytestmark = pytest.mark.slow
WORKER = Path(__file__).with_name("shared_worker.py")
CHECKOUT = Path(__file__).resolve().parents[2]


def test_two_processes_on_one_configured_worker_id_are_named_by_the_keys_duplicate(engine, table_name):
    metadata = sa.MetaData()
    table = sa.Table(
        table_name,
        metadata,
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("note", sa.String(20), unique=True),
    )
    metadata.create_all(engine)
    try:
        url = engine.url.render_as_string(hide_password=False)
        start = time.time() + 0.5  # the injected clock makes the ids collide whatever the start order
        procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), url, table_name, str(start), name],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=CHECKOUT,
            )
            for name in ("a", "b")
        ]
        outs = [p.communicate(timeout=60) for p in procs]
        duplicates = [line for out, _ in outs for line in out.splitlines() if line.startswith("duplicate")]
        warned = [err for _, err in outs if "a configured worker id is used by another live process" in err]
        assert duplicates, ("the two processes made no duplicate key", [(o[-300:], e[-800:]) for o, e in outs])
        assert warned, [err[-500:] for _, err in outs]
        if sys.version_info >= (3, 11):  # exception notes
            assert all("Snowflake(worker_id=1)" in line for line in duplicates), duplicates
        # a duplicate of another unique column is not taken for a shared worker id
        with engine.begin() as conn:
            conn.execute(table.insert(), {"id": 1, "note": "same"})
        with pytest.raises(sa.exc.IntegrityError) as info, engine.begin() as conn:
            conn.execute(table.insert(), {"id": 2, "note": "same"})
        assert not getattr(info.value, "__notes__", [])
    finally:
        metadata.drop_all(engine)
