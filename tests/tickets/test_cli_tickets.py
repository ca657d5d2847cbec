"""``seqid ticket status | init | bench`` against real servers."""

from __future__ import annotations

import json
import re

import pytest

from seqid_orm.allocation.tickets import TicketSequence
from seqid_orm.cli import main

sa = pytest.importorskip("sqlalchemy")


def test_status_lists_each_sequence_with_step_and_offset(server, seq_name, capsys):
    with TicketSequence(seq_name, server, step=2, offsets=[2], block_size=4, double_buffer=False) as seq:
        seq.next_id()
    assert main(["ticket", "status", server, "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["name"] == seq_name]
    assert [(r["next_value"], r["step"], r["offset"]) for r in rows] == [(10, 2, 2)]
    assert main(["ticket", "status", server]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["server", "name", "next_value", "step", "offset"]
    assert any(line.split()[1:] == [seq_name, "10", "2", "2"] for line in text.splitlines()[1:])


def test_init_creates_the_table_and_status_of_an_empty_server(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    assert main(["ticket", "status", url]) == 0
    assert "no ticket sequences" in capsys.readouterr().out
    assert main(["ticket", "init", url]) == 0
    assert "is ready" in capsys.readouterr().out
    assert sa.inspect(sa.create_engine(url)).has_table("seqid_tickets")


def test_unknown_scheme_is_a_clear_error(capsys):
    assert main(["ticket", "status", "ftp://example.org/x"]) == 2
    assert "unknown ticket server scheme 'ftp'" in capsys.readouterr().err


def test_repair_moves_the_counter_above_the_largest_key_and_never_lowers_it(server, seq_name, tmp_path, capsys):
    data = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    engine = sa.create_engine(data)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id BIGINT PRIMARY KEY)"))
        conn.execute(sa.text("INSERT INTO orders (id) VALUES (:i)"), [{"i": i} for i in (7, 4999, 5000)])
    engine.dispose()
    with TicketSequence(seq_name, server) as seq:
        assert seq.next_id() == 1
    assert main(["ticket", "repair", seq_name, server, "--key", data, "orders.id"]) == 0
    assert "next_value 5001" in capsys.readouterr().out
    assert main(["ticket", "repair", seq_name, server, "--above", "10"]) == 0  # lower: left alone
    assert "next_value 5001" in capsys.readouterr().out
    with TicketSequence(seq_name, server) as seq:
        assert seq.next_id() == 5001
    assert main(["ticket", "repair", seq_name, server]) == 2
    assert "needs the largest id in use" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://127.0.0.1:1/0", "Connection refused"),
        ("redis://127.0.0.1:6379/99", "DB index is out of range"),
        ("unix:///nonexistent/seqid.sock", "No such file or directory"),
        ("redis://u:p@ss@127.0.0.1:6379/0", r"redis://u:\*\*\*@127\.0\.0\.1:6379/0"),
    ],
)
def test_status_of_a_redis_store_it_cannot_read_is_a_clear_error(redis_url, url, says, capsys):
    """Before: these were untyped tracebacks (exit 1); a password holding an unescaped @ was
    printed in part.  Now each is seqid's one-line error, exit 2, the password hidden whole."""
    assert main(["status", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("seqid: error:") and "Traceback" not in err and "ss@" not in err
    assert re.search(says, err), err


@pytest.mark.parametrize(
    "command", [["status", "{url}", "BAD NAMESPACE"], ["lease", "status", "{url}", "--namespace", "BAD NAMESPACE"]]
)
def test_a_namespace_no_store_can_hold_is_refused(redis_url, command, capsys):
    """Before: `status URL "BAD NAMESPACE"` exited 0 saying nothing was held there."""
    assert main([part.format(url=redis_url) for part in command]) == 2
    assert "invalid lease namespace 'BAD NAMESPACE'" in capsys.readouterr().err


def test_repair_gives_up_on_a_key_column_locked_past_its_timeout(pg_engine, sqlite_ticket_url, seq_name, capsys):
    """`--key` reads the column's largest value; with its table held by another session's ACCESS
    EXCLUSIVE lock, the read is an error at `--timeout` (PostgreSQL's lock_timeout, sent with the
    read: the store's engine sets none on the connection, which a pooler would drop), and the
    counters stay as they were."""
    table = f"locked_{seq_name[-8:]}"
    url = pg_engine.url.render_as_string(hide_password=False)
    with pg_engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY)"))
        conn.execute(sa.text(f"INSERT INTO {table} (id) VALUES (9000)"))
    try:
        with TicketSequence(seq_name, sqlite_ticket_url) as seq:
            assert seq.next_id() == 1
        with pg_engine.connect() as holder:
            holder.execute(sa.text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            code = main(
                ["ticket", "repair", seq_name, sqlite_ticket_url, "--key", url, f"{table}.id", "--timeout", "1"]
            )
            holder.rollback()
        err = capsys.readouterr().err
        assert code == 2, err
        assert "lock timeout" in err, err
        assert main(["ticket", "repair", seq_name, sqlite_ticket_url, "--key", url, f"{table}.id"]) == 0
        assert "next_value 9001" in capsys.readouterr().out
    finally:
        with pg_engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "soon"])
def test_repair_refuses_a_timeout_that_is_not_seconds(bad, sqlite_ticket_url, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["ticket", "repair", "s", sqlite_ticket_url, "--above", "5", "--timeout", bad])
    assert stop.value.code == 2
    assert "--timeout" in capsys.readouterr().err
