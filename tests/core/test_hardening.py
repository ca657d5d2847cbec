"""Regression tests for the defects a hostile tester found (each failed before its fix).

Forks made in C, a racing random pool, text that parses too liberally, errors that were not
typed.  Database-side effects of the same defects are tested against the live servers in
test_sqlalchemy_orm.py and tests/django/test_fields.py.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import mmap
import os
import pathlib
import re
import subprocess
import sys
import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

import seqid_orm
import seqid_orm.errors
import seqid_orm.ids.text
import seqid_orm.ids.validate
from seqid_orm import (
    InvalidIDError,
    Layout,
    SeqIDError,
    Snowflake,
    comb_batch,
    describe,
    timestamp_of,
    uuid_time_nextval,
)
from seqid_orm.errors import ArgumentTypeError, GeneratorExhaustedError, InvalidArgumentError
from seqid_orm.ids import randomness
from seqid_orm.ids.comb import _MS_LIMIT, _MS_MAX, CombGenerator, decode_comb
from seqid_orm.ids.randomness import POOL, RandomPool
from seqid_orm.ids.text import check_text_id, decode_base32, decode_bsv

ROOT = pathlib.Path(__file__).resolve().parents[2]
needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="libc fork() on Linux")

RFC_V7_VECTOR = uuid.UUID("017f22e2-79b0-7cc3-98c4-dc0c0c07398f")  # RFC 9562 appendix A.6


# --- 1. fork() made in C, without Python's at-fork hooks ---------------------------------


def _raw_fork_children(kind: str, arg: str = "", children: int = 4, per_child: int = 200) -> dict:
    """Children of a C-level fork of a parent set up as ``kind`` (tests/core/raw_fork.py), run in a
    fresh interpreter with no other Python thread, which such a fork needs; what they made, and
    what the parent saw after."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.core.raw_fork", kind, arg, str(children), str(per_child)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@needs_fork
@pytest.mark.parametrize("layout", list(Layout))
def test_children_of_a_c_level_fork_never_share_ids(layout):
    for _ in range(5):  # several rounds: the clock may or may not tick between fork and first id
        made = _raw_fork_children("comb", layout.value)["children"]
        flat = [i for child in made for i in child]
        assert len(flat) == 4 * 200 and len(set(flat)) == len(flat)


@needs_fork
def test_children_of_a_c_level_fork_do_not_share_batches_or_the_module_generators():
    made = _raw_fork_children("batches")["children"]
    flat = [i for child in made for i in child]
    assert len(set(flat)) == len(flat)
    made = _raw_fork_children("bsv")["children"]
    flat = [i for child in made for i in child]
    assert len(set(flat)) == len(flat)


@needs_fork
def test_the_fork_mark_is_a_page_the_kernel_wipes_and_reads_zero_in_a_c_level_child():
    """Linux gives every child a zeroed copy of the MADV_WIPEONFORK page: the generators' cheap
    check (``if not MARK[0]``) sees the fork before any Python hook could run."""
    assert isinstance(randomness.MARK, mmap.mmap), "MADV_WIPEONFORK refused here: the getpid fallback is in use"
    assert randomness.MARK[0] == 1
    seen = _raw_fork_children("mark", "", 2, 3)
    assert [child[0] for child in seen["children"]] == ["0", "0"]  # wiped in the child, before its first id
    assert seen["after"] == 1  # the parent's page is untouched


@needs_fork
def test_the_pid_mark_fallback_notices_a_c_level_fork():
    assert randomness._PidMark()[0] == 1
    seen = _raw_fork_children("pidmark", "", 2, 1)
    assert seen == {"children": [["0"], ["0"]], "after": 1}


@needs_fork
def test_a_snowflake_refuses_to_run_in_a_child_of_a_c_level_fork():
    made = _raw_fork_children("snowflake")
    assert made == {"children": [["refused"]] * 4, "after": True}  # the parent goes on


# --- 2. the random pool under concurrent use ----------------------------------------------


def test_the_random_pool_never_hands_a_word_out_twice_across_threads():
    pool = RandomPool()
    seen: list[list[int]] = []
    start = threading.Barrier(8)

    def worker(k: int) -> None:
        got: list[int] = []
        start.wait()
        for i in range(3000):
            got.extend(pool.words(1 + (i + k) % 7) if i % 2 else [pool.word()])
        seen.append(got)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [w for got in seen for w in got]
    assert len(flat) > 8 * 3000 and len(set(flat)) == len(flat)


def test_words_of_any_size_are_fresh():
    assert len(set(POOL.words(200))) == 200 and POOL.words(0) == []


# --- 3, 5. text is parsed strictly, hex in either case -------------------------------------


def test_upper_case_hex_is_never_read_as_a_bsv_id():
    text = RFC_V7_VECTOR.hex.upper()  # as MySQL HEX(id) and Oracle RAWTOHEX print it
    with pytest.raises(InvalidIDError, match="ambiguous"):
        timestamp_of(text)
    assert timestamp_of(text, kind="uuid") == dt.datetime(2022, 2, 22, 19, 22, 22, tzinfo=dt.timezone.utc)
    assert timestamp_of(text.lower(), kind="uuid") == timestamp_of(RFC_V7_VECTOR)
    assert timestamp_of(str(RFC_V7_VECTOR).upper()) == timestamp_of(RFC_V7_VECTOR)  # RFC 9562 §4
    assert describe(text, kind="uuid").kind == "uuid7"


@pytest.mark.parametrize(
    "text",
    [
        "0190_aaa-0000-7000-8000-000000000000",
        " 0190aaaa-0000-7000-8000-00000000000",
        "0190aaaa-0000-7000-8000-000000000000 ",
        "{0190aaaa-0000-7000-8000-00000000000}",
        "urn:uuid:0190aaaa-0000-7000-8000-0000",
        "0x0190aaaa00007000800000000000000000",
        "0190aaaa0-000-7000-8000-000000000000",
        "0190aaaa-0000-7000-8000-00000000000\u0661",
    ],
)
def test_uuid_text_that_uuid_UUID_would_accept_is_refused(text):
    with pytest.raises(InvalidIDError):
        timestamp_of(text)
    with pytest.raises(InvalidIDError, match="invalid UUID text"):
        seqid_orm.ids.validate.coerce_uuid(text)


# --- 4. base32 is ASCII only ----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["\u017f" * 26, "\u00df" + "0" * 25, "0" * 25 + "\ufb00", "0" * 25 + "\u0131"])
def test_base32_refuses_letters_that_upper_case_onto_ascii(bad):
    with pytest.raises(InvalidIDError, match="non-ASCII"):
        decode_base32(bad)
    with pytest.raises(InvalidIDError):
        check_text_id(bad, "base32")


@given(st.text(min_size=26, max_size=26))
def test_base32_never_returns_more_than_128_bits(text):
    try:
        value = decode_base32(text)
    except InvalidIDError:
        return
    assert text.isascii() and 0 <= value.int < 1 << 128


# --- 6. only canonical bsv text ---------------------------------------------------------


def test_non_canonical_bsv_text_is_refused():
    # the last two are canonical base64, of 22 and 23 bytes: only 24 bytes make a bsv id
    for bad in [
        "0" * 30 + "!!",
        "0" * 31 + "!",
        seqid_orm.ids.text.encode_bsv(bytes(22)),
        seqid_orm.ids.text.encode_bsv(bytes(23)),
    ]:
        with pytest.raises(InvalidIDError):
            check_text_id(bad, "bsv")
        with pytest.raises(InvalidIDError):
            timestamp_of(bad)
    # base64 text whose unused low bits are set decodes to the same bytes as the canonical one
    canonical = seqid_orm.ids.text.encode_bsv(b"\x00")
    sloppy = canonical[0] + "0" + canonical[2:]
    assert sloppy != canonical
    with pytest.raises(InvalidIDError, match="canonical"):
        decode_bsv(sloppy)


@given(st.text(alphabet="$-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!", min_size=4, max_size=40))
def test_two_bsv_texts_never_decode_to_the_same_bytes(text):
    try:
        raw = decode_bsv(text)
    except InvalidIDError:
        return
    assert seqid_orm.ids.text.encode_bsv(raw) == text


# --- 7. every error is typed ------------------------------------------------------------------


def _max_time_v7() -> uuid.UUID:
    return uuid.UUID(int=(_MS_MAX << 80) | (0x7 << 76) | (0b10 << 62))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: timestamp_of(_max_time_v7()), InvalidIDError),
        (lambda: timestamp_of("z" * 32), InvalidIDError),
        (lambda: comb_batch(2**63), InvalidArgumentError),
        (lambda: comb_batch(2**40), InvalidArgumentError),
        (lambda: comb_batch(-1), InvalidArgumentError),
        (lambda: comb_batch(1.5), ArgumentTypeError),
        (lambda: uuid_time_nextval(now=math.inf), InvalidArgumentError),
        (lambda: uuid_time_nextval(now=math.nan), InvalidArgumentError),
        (lambda: Snowflake.sonyflake(machine_id=70000), InvalidArgumentError),
        (lambda: seqid_orm.comb("sideways"), InvalidArgumentError),
        (lambda: timestamp_of(1.5), ArgumentTypeError),
        (lambda: Snowflake(worker_id=0).decode(-1), InvalidIDError),
    ],
)
def test_bad_input_raises_a_typed_error(call, error):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, SeqIDError)
    assert isinstance(info.value, (TypeError, ValueError))


def test_errors_name_what_is_wrong():
    with pytest.raises(InvalidArgumentError, match="machine_id"):
        Snowflake.sonyflake(machine_id=70000)
    with pytest.raises(InvalidArgumentError, match="now"):
        uuid_time_nextval(now=math.nan)
    with pytest.raises(InvalidArgumentError, match="MAX_BATCH"):
        comb_batch(2**40)


@pytest.mark.parametrize("layout", list(Layout))
def test_the_end_of_the_48_bit_clock_raises_exhausted_instead_of_wrapping(layout):
    top = _MS_LIMIT[layout]  # 48 bits, 44 for the sharded layout
    gen = CombGenerator(layout, clock=lambda: top * 1_000_000)
    first = gen()
    # as if the counter had run up to its end within the last millisecond (2**41 calls for v7)
    gen._counter = gen._counter_max
    with pytest.raises(GeneratorExhaustedError):
        gen()
    with pytest.raises(GeneratorExhaustedError):
        gen.batch(3)
    gen._counter = gen._counter_max - 2
    with pytest.raises(GeneratorExhaustedError):  # a batch stops whole, not with a partial list
        gen.batch(5)
    assert [decode_comb(u, layout)[0] for u in gen.batch(2)] == [top] * 2
    assert 0 <= first.int < 1 << 128 and decode_comb(first, layout)[0] == top
    late = CombGenerator(layout, clock=lambda: (top + 1) * 1_000_000)
    with pytest.raises(GeneratorExhaustedError):
        late()


def test_no_builtin_error_is_raised_by_the_package_source():
    """A guard against new bare ValueError/TypeError/OverflowError raises (typed errors only)."""
    root = pathlib.Path(seqid_orm.__file__).parent
    pattern = re.compile(r"raise (ValueError|TypeError|OverflowError|RuntimeError|LookupError|KeyError)\(")
    offenders = [
        f"{p.relative_to(root)}:{n}"
        for p in root.rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


# --- a newcomer's first minute: an adapter without its ORM names the extra ------------------


@pytest.mark.parametrize(
    ("adapter", "module", "extra"), [("sqlalchemy", "sqlalchemy", "sqlalchemy"), ("django", "django", "django")]
)
def test_an_adapter_without_its_orm_names_the_extra_to_install(adapter, module, extra):
    import subprocess

    code = f"import sys; sys.modules[{module!r}] = None; import seqid_orm.{adapter}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert f"pip install 'seqid-orm[{extra}]'" in done.stderr.splitlines()[-1]
