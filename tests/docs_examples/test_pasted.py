"""Blocks the documentation says run pasted into a REPL, pasted into one: ``python -m asyncio`` in a
subprocess, with its standard input the block as the page shows it (a REPL ends a compound statement
at a blank line, which a script does not need: a block that runs as a script may fail pasted)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _block_after(page: str, heading: str) -> str:
    text = (ROOT / page).read_text()
    found = re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S)
    assert found, f"no python block after {heading!r} in {page}"
    return found.group(1)


def test_the_async_calls_run_pasted_into_the_asyncio_repl(tmp_path):
    block = _block_after("docs/how-to/async.md", "## The awaitable calls")
    check = "print('pasted-ok', len(batch), len(keys), order_id < batch[0])\n"
    done = subprocess.run(
        [sys.executable, "-m", "asyncio"],
        input=block + "\n" + check,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "Error" not in output, output[-3000:]
    assert "pasted-ok 500 1000 True" in output, output[-3000:]
