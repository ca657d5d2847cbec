"""A database of a test's own beside a throw-away Django project (the online column's, the deployments', the
rekey's tests): made on the settings module's server, or an SQLite file in the project's folder, with the
reads and admin statements the tests make beside the project's ``manage.py``, and dropped after."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings


class OwnDatabase:
    """The database ``<prefix>_<random>`` on the default database's server (``vendor`` ``"sqlite"``: a file in
    ``tmp``); :attr:`database` is its ``DATABASES`` entry for the project's settings, :meth:`create` makes it
    (once the project's files are written, so that nothing is left behind where writing them failed)."""

    def __init__(self, tmp: Path, prefix: str, *, sqlite: bool = False) -> None:
        from django.db import connection

        self.tmp = tmp
        self.vendor = "sqlite" if sqlite else connection.vendor
        self.name = f"{prefix}_{secrets.token_hex(4)}"
        self.db = settings.DATABASES["default"]
        if sqlite:
            self.database: dict[str, Any] = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp / "app.sqlite3")}
            return
        self.database = {k: self.db[k] for k in ("ENGINE", "HOST", "PORT", "USER", "PASSWORD")}
        self.database["NAME"] = self.name
        if self.vendor == "mysql":
            self.database["OPTIONS"] = {"charset": "utf8mb4"}

    def create(self) -> None:
        if self.vendor != "sqlite":
            self.admin(f"CREATE DATABASE {self.name}")

    @property
    def url(self) -> str:
        if self.vendor == "sqlite":
            return f"sqlite:///{self.tmp / 'app.sqlite3'}"
        db = self.db
        driver = "postgresql+psycopg" if self.vendor == "postgresql" else "mysql+pymysql"
        password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
        return f"{driver}://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{self.name}"

    def admin(self, statement: str) -> None:
        """``statement`` on the server's maintenance database, outside a transaction (CREATE/DROP DATABASE)."""
        import sqlalchemy as sa

        engine = sa.create_engine(self.url.rsplit("/", 1)[0] + ("/postgres" if self.vendor == "postgresql" else "/"))
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(statement)
        engine.dispose()

    def sql(self, statement: str) -> list[tuple]:
        """``statement`` in the database, in a transaction of its own; its rows."""
        import sqlalchemy as sa

        engine = sa.create_engine(self.url, poolclass=sa.NullPool)
        with engine.begin() as conn:
            result = conn.exec_driver_sql(statement)
            rows = [tuple(r) for r in result] if result.returns_rows else []
        engine.dispose()
        return rows

    def drop(self) -> None:
        if self.vendor != "sqlite":
            self.admin(
                f"DROP DATABASE IF EXISTS {self.name}" + (" WITH (FORCE)" if self.vendor == "postgresql" else "")
            )
