"""An Alembic script directory holding one hand-written migration, run up or down on a connection.

Shared by the tests of seqid's Alembic operations (conversions, adoption, the sequential-uuids
functions): each writes its migration text, then upgrades and downgrades a real database.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from alembic import command
from alembic.config import Config

from tests.sqlalchemy_adapter.test_alembic import SCRIPT_MAKO

ENV_PY = """
from alembic import context
connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
"""


def write(path: Path, migration: str, filename: str = "0001.py") -> None:
    """``path`` becomes a script directory whose only revision is ``migration`` (dedented)."""
    (path / "versions").mkdir(exist_ok=True)
    (path / "env.py").write_text(ENV_PY)
    (path / "script.py.mako").write_text(SCRIPT_MAKO)
    (path / "versions" / filename).write_text(textwrap.dedent(migration))


def migrate(engine, path: Path, direction: str) -> None:
    """Upgrade to head (``"up"``) or downgrade to base (``"down"``), in one transaction."""
    config = Config()
    config.set_main_option("script_location", str(path))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        if direction == "up":
            command.upgrade(config, "head")
        else:
            command.downgrade(config, "base")
