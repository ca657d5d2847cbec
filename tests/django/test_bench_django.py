"""The Django bulk_create benchmark on this settings module's default database: rows, not timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from django.conf import settings
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def _url() -> str:
    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['TEST']['NAME']}-bench"  # a file of its own: the benchmark sets Django up anew
    scheme = {"postgresql": "postgresql", "mysql": "mysql"}[connection.vendor]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"{scheme}://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or ''}/{connection.settings_dict['NAME']}"


def test_the_django_benchmark_builds_and_inserts_every_kind(tmp_path):
    """Run as a process (it configures Django itself); its tables are created, filled and dropped."""
    prefix = f"b{uuid.uuid4().hex[:6]}_"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "seqid_orm.bench.django_bulk",
            "--url",
            _url(),
            "--rows",
            "400",
            "--rounds",
            "2",
            "--batch",
            "150",
            "--table-prefix",
            prefix,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["vendor"] == connection.vendor and result["rows"] == 400
    assert list(result["kinds"]) == ["BigAutoField", "UUIDField(uuid4)", "SeqUUIDField"]
    assert result["kinds"]["UUIDField(uuid4)"]["vs_uuid4_median"] == 1.0
    for figures in result["kinds"].values():
        assert figures["rows_stored"] == 400
        assert figures["seconds_median"] > 0 and figures["build_us_per_object"] > 0
    assert result["seq_uuid_keys_in_database_order"] is True  # ORDER BY pk, asked of the database
    with connection.cursor() as cursor:
        left = [t for t in connection.introspection.table_names(cursor) if t.startswith(prefix)]
    assert left == []
