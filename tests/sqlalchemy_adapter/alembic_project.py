"""A throw-away Alembic project for the tests of migrations as deployments run them: an ``env.py`` (with or
without seqid's migration lock), one migration whose ``upgrade()`` the test writes, and ``alembic upgrade
head`` run through Alembic's command API in a process of its own (a pod), as a user's deploy runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ENV_PY = """
from alembic import context
import sqlalchemy as sa
import seqid_orm.sqlalchemy.alembic  # noqa: F401
from seqid_orm.sqlalchemy.alembic import migration_lock

engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=sa.NullPool)
if {locked}:
    with migration_lock(engine, wait={wait}) as lock, engine.connect() as connection:
        context.configure(connection=connection, target_metadata=None, version_table="{version}",
                          on_version_apply=lambda **kw: lock.check())
        with context.begin_transaction():
            context.run_migrations()
else:
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=None, version_table="{version}")
        with context.begin_transaction():
            context.run_migrations()
"""

MIGRATION = """
revision = "0001"
down_revision = None
from alembic import op
import sqlalchemy as sa
import seqid_orm.sqlalchemy.alembic


def upgrade():
{body}


def downgrade():
    pass
"""

RUN = """
import sys
from alembic import command
from alembic.config import Config
config = Config()
config.set_main_option("script_location", sys.argv[1])
config.set_main_option("sqlalchemy.url", sys.argv[2])
command.upgrade(config, "head")
"""


def project(where: Path, version_table: str, body: str, *, locked: bool = False, wait: float | None = None) -> Path:
    """An Alembic project at ``where`` whose one migration runs ``body`` (indented lines of ``upgrade()``)."""
    (where / "versions").mkdir(parents=True, exist_ok=True)
    (where / "env.py").write_text(ENV_PY.format(locked=locked, wait=wait, version=version_table))
    (where / "script.py.mako").write_text("")
    (where / "versions" / "0001.py").write_text(MIGRATION.format(body=body))
    return where


def upgrade(where: Path, url: str) -> subprocess.Popen[str]:
    """``alembic upgrade head`` of ``where`` against ``url``, in a process of its own (its stderr kept)."""
    return subprocess.Popen(
        [sys.executable, "-c", RUN, str(where), url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


def last_error(said: str) -> str:
    """The exception a failed run ended with (the last line naming one)."""
    lines = [line for line in said.splitlines() if "Error" in line or "Exception" in line]
    return lines[-1].strip() if lines else ""
