"""The settings the production guide tells users to copy (``docs/stacks/``), read here so that the
stack tests start their tools with them: the page and the tests cannot drift apart.  A test changes
only what a private instance must (addresses, ports, files) and, where it says so, the timings it
shortens; the settings seqid depends on are the files'."""

from __future__ import annotations

import configparser
import pathlib
from typing import Any

STACKS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "stacks"


def _directives(name: str) -> list[list[str]]:
    """The non-comment lines of a Redis-style file, split into words."""
    lines = (STACKS / name).read_text().splitlines()
    return [line.split() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def redis_args() -> tuple[str, ...]:
    """``redis.conf`` as ``redis-server`` command-line options (``--appendonly yes`` ...)."""
    return tuple(word for key, *values in _directives("redis.conf") for word in (f"--{key}", *values))


def sentinel_conf(service: str, host: str, port: int, quorum: int, down_after_ms: int, failover_ms: int) -> str:
    """``sentinel.conf``'s directives for ``service`` watching ``host:port``: the file's, with the
    address, the quorum (one Sentinel here) and the timings (shortened) of this test."""
    values = {"monitor": [host, str(port), str(quorum)], "down-after-milliseconds": [str(down_after_ms)]}
    values["failover-timeout"] = [str(failover_ms)]
    out = []
    for words in _directives("sentinel.conf"):
        assert words[0] == "sentinel" and words[1] in values, f"sentinel.conf: {' '.join(words)} is not read here"
        out.append(" ".join(["sentinel", words[1], service, *values[words[1]]]))
    return "\n".join(out) + "\n"


def pgbouncer_settings() -> dict[str, str]:
    """``pgbouncer.ini``'s ``[pgbouncer]`` settings."""
    parser = configparser.ConfigParser(comment_prefixes=(";", "#"))
    parser.read(STACKS / "pgbouncer.ini")
    return dict(parser["pgbouncer"])


def patroni_dcs() -> dict[str, Any]:
    """``patroni.yml``'s ``bootstrap.dcs`` settings."""
    import yaml

    return dict(yaml.safe_load((STACKS / "patroni.yml").read_text())["bootstrap"]["dcs"])
