"""What the ``seqid`` commands share: argument types and the one-line fixes for what is missing."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

__all__ = ["EXTRA_OF", "in_cli_words", "missing_driver", "positive", "seconds"]


def positive(what: str) -> Callable[[str], int]:
    """argparse type: a whole number of ``what``, at least 1."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {what}, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"at least 1 of {what}, got {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds above 0 (``0.5``, ``30``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be above 0 and finite, got {text!r}")
    return value


#: The extra (pyproject.toml) that brings each optional module, for the one-line fix in an error.
EXTRA_OF = {
    "sqlalchemy": "sqlalchemy",
    "alembic": "alembic",
    "psycopg": "postgres",
    "pymysql": "mysql",
    "MySQLdb": "mysqlclient",
    "asyncpg": "async",
    "aiosqlite": "async",
    "aiomysql": "async",
    "redis": "redis",
    "django": "django",
    "pydantic": "pydantic",
    "matplotlib": "bench",
    "uuid6": "bench",
    "uuid_utils": "bench",
}

#: Drivers SQLAlchemy picks for a bare ``dialect://`` URL, and the one our extras install instead.
_DRIVER_HINTS = {
    "psycopg2": ("postgresql://", "postgresql+psycopg://", "postgres"),
    "MySQLdb": ("mysql://", "mysql+pymysql://", "mysql"),
}


def missing_driver(url: str, exc: ModuleNotFoundError) -> str:
    """What to tell a user whose URL names a driver that is not installed."""
    hint = _DRIVER_HINTS.get(exc.name or "")
    if hint and url.startswith(hint[0]):
        return (
            f"the driver for {url!r} is not installed ({exc.name}, SQLAlchemy's default for {hint[0]}); "
            f"the '{hint[2]}' extra installs another one: use {hint[1]}..."
        )
    return f"the driver for {url!r} is not installed ({exc.name})"


_KEYWORD_VALUE = re.compile(r'\b(kind|layout|storage)="([^"]+)"')
_KEYWORD = re.compile(r"\b(kind|layout|storage)=(?=[\s,;)]|$)")


def in_cli_words(message: str) -> str:
    """A core message that names Python keywords (``kind="uuid"``, ``layout=``) as the options of
    the command line say them (``--kind uuid``, ``--layout``)."""
    return _KEYWORD.sub(r"--\1", _KEYWORD_VALUE.sub(r"--\1 \2", message))
