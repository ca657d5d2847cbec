"""The Django bulk_create benchmark (``python -m benchmarks.django_bulk``) on each real database: rows, not timings.

It configures Django itself, so it runs as a process, once per database (not once per Django settings module).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.system import need

pytest.importorskip("django")
sa = pytest.importorskip("sqlalchemy")

CHECKOUT = Path(__file__).resolve().parents[2]


def test_the_django_benchmark_builds_and_inserts_every_kind(engine, tmp_path):
    """Its tables are created, filled (every row counted by the database) and dropped."""
    if engine.dialect.name == "mysql":
        need("mysqlclient")
    prefix = f"b{uuid.uuid4().hex[:6]}_"
    url = engine.url.render_as_string(hide_password=False)
    if engine.dialect.name == "sqlite":
        url = f"sqlite:///{tmp_path / 'bench.sqlite3'}"  # a file of its own
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    argv = [sys.executable, "-m", "benchmarks.django_bulk", "--url", url, "--rows", "400", "--rounds", "2"]
    out = subprocess.run(
        [*argv, "--batch", "150", "--table-prefix", prefix, "--json"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(CHECKOUT)},
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["vendor"] == engine.dialect.name and result["rows"] == 400
    assert list(result["kinds"]) == ["BigAutoField", "UUIDField(uuid4)", "SeqUUIDField", "SeqUUIDField+bulk_insert"]
    assert result["kinds"]["UUIDField(uuid4)"]["vs_uuid4_median"] == 1.0
    for figures in result["kinds"].values():
        assert figures["rows_stored"] == 400
        assert figures["seconds_median"] > 0 and figures["build_us_per_object"] > 0
    assert result["seq_uuid_keys_in_database_order"] is True  # ORDER BY pk, asked of the database
    if engine.dialect.name != "sqlite":
        assert not [t for t in sa.inspect(engine).get_table_names() if t.startswith(prefix)]
