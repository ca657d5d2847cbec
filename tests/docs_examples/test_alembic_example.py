"""examples/alembic/env.py as its docstring says to use it: a project made by ``alembic init``, that
file copied over its ``env.py``, the models beside it, the database URL written into ``alembic.ini``
(the one change), then Alembic's own command line on PostgreSQL, online and offline."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import sqlalchemy as sa

from tests.docs_examples.harness import reader_env
from tests.integrations.served import scratch_database

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alembic"


def test_the_env_py_autogenerates_upgrades_and_writes_offline_sql(tmp_path):
    env = reader_env()

    def alembic(*args: str, ok: bool = True) -> str:
        done = subprocess.run(["alembic", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert (done.returncode == 0) == ok, (args, done.stdout[-3000:], done.stderr[-3000:])
        return done.stdout + done.stderr

    with scratch_database("seqid_alembic_example") as url:
        alembic("init", "migrations")
        shutil.copy(EXAMPLE / "env.py", tmp_path / "migrations" / "env.py")
        shutil.copy(EXAMPLE / "models.py", tmp_path / "models.py")
        ini = tmp_path / "alembic.ini"
        ini.write_text(re.sub(r"(?m)^sqlalchemy\.url = .*$", f"sqlalchemy.url = {url}", ini.read_text()))

        alembic("revision", "--autogenerate", "-m", "create")
        (created,) = (tmp_path / "migrations" / "versions").glob("*_create.py")
        script = created.read_text()
        assert "import seqid_orm.sqlalchemy" in script, script
        assert "server_default=seqid_orm.sqlalchemy.DatabaseSeqUUID()" in script, script
        alembic("upgrade", "head")

        engine = sa.create_engine(url, poolclass=sa.NullPool)
        with engine.begin() as conn:  # the database makes the reading's key: in order of insertion
            for _ in range(5):
                conn.execute(sa.text("INSERT INTO reading DEFAULT VALUES"))
                conn.execute(sa.text("SELECT pg_sleep(0.002)"))  # past one clock tick: ordered by time
            keys = conn.execute(sa.text("SELECT id FROM reading ORDER BY ctid")).scalars().all()
            assert keys == conn.execute(sa.text("SELECT id FROM reading ORDER BY id")).scalars().all()
        engine.dispose()

        again = alembic("revision", "--autogenerate", "-m", "again")
        assert "Detected" not in again, again  # a second autogenerate finds nothing to do

        offline = alembic("-x", "seqid_server_version=16", "upgrade", "head", "--sql")
        assert "CREATE TABLE reading" in offline and "clock_timestamp()" in offline, offline[-3000:]
        refused = alembic("upgrade", "head", "--sql", ok=False)
        assert "UnknownServerVersionError" in refused and "seqid_server_version" in refused
