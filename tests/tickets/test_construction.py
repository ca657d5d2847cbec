"""A TicketSequence made on a running event loop does no blocking work there: its stores are opened by
the first reservation, in a worker thread (before: a sequence built in a FastAPI lifespan or a
Django async view stalled the loop 0.1-0.3 s importing its driver and building its engine)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

# Run in a fresh interpreter, so no driver is imported before the sequence is made.  An audit hook
# records the thread each driver module is imported in (the loop's thread must import none), and
# what could block during construction: a connection, a name lookup, a sleep (3.11+ audits it).
ON_A_LOOP = """
import asyncio, json, sys, threading, time

DRIVERS = ("psycopg", "redis", "sqlalchemy", "etcd3gw", "pymysql")
BLOCKING = ("socket.connect", "socket.getaddrinfo", "time.sleep", "subprocess.Popen")
imported_on, blocked = {}, []

def hook(event, args):
    if event == "import" and args[0].split(".")[0] in DRIVERS:
        imported_on.setdefault(args[0].split(".")[0], set()).add(threading.get_ident())
    elif event in BLOCKING:
        blocked.append(event)

sys.addaudithook(hook)
from seqid_orm.allocation.tickets import TicketSequence

async def main(urls, name):
    loop_thread = threading.get_ident()
    spans, ids, made = {}, {}, []
    for url in urls:
        began = time.perf_counter()
        made.append(TicketSequence(name, url, block_size=10, accept_state_loss=True))
        spans[url] = time.perf_counter() - began
    after_construction = sorted(imported_on)
    blocked_in_construction = list(blocked)
    for url, seq in zip(urls, made):
        if not url.startswith("etcd"):  # no etcd server here: made, never asked
            ids[url] = [await seq.anext_id() for _ in range(3)]
        await asyncio.to_thread(seq.close)
    on_loop = sorted(m for m, threads in imported_on.items() if loop_thread in threads)
    return {
        "spans": spans,
        "ids": ids,
        "after_construction": after_construction,
        "blocked": blocked_in_construction,
        "on_loop": on_loop,
    }

print(json.dumps(asyncio.run(main(sys.argv[2:], sys.argv[1]))))
"""


def test_a_sequence_built_on_a_running_loop_opens_its_stores_off_the_loop(tmp_path, seq_name, redis_url):
    urls = [
        "postgresql+psycopg://postgres@127.0.0.1:5432/test",
        redis_url,
        f"sqlite:///{tmp_path / 'tickets.sqlite3'}",
        "etcd://127.0.0.1:1",
    ]
    done = subprocess.run(
        [sys.executable, "-c", ON_A_LOOP, seq_name, *urls], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["after_construction"] == []  # made, nothing of a driver was imported
    assert found["on_loop"] == []  # the first ids opened the stores, in a worker thread
    assert found["blocked"] == []  # no connection, lookup or sleep while constructing
    print("construction, seconds:", found["spans"])  # a few ms here: timed in the note, not asserted
    for url, ids in found["ids"].items():
        assert len(set(ids)) == 3 and ids == sorted(ids), (url, ids)
    assert not (tmp_path / "tickets.sqlite3").exists() or found["ids"]  # made by the first id, not before
