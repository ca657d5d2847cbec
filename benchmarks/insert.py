"""The insert benchmark: ``seqid bench``, plus what needs more than the wheel.

``--small-memory`` runs PostgreSQL as a private cluster with 16 MB of ``shared_buffers`` and MariaDB
with a 32 MB buffer pool (restored afterwards), so the index outgrows memory early, as in the
sequential-uuids article; ``--generation`` also times id generation against ``uuid.uuid4()``.

    python -m benchmarks.insert --url postgresql+psycopg://postgres@127.0.0.1/test --small-memory --rows 2000000
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

from seqid_orm.cli.bench import add_arguments, command


@contextlib.contextmanager
def small_memory(url: str) -> Iterator[str]:
    """``url``'s server with small buffers: a private PostgreSQL, or the MariaDB's pool shrunk for the run."""
    from tests.servers.private import small_mariadb, small_postgres

    dialect = url.split(":", 1)[0].split("+", 1)[0]
    if dialect == "postgresql":
        with small_postgres(url) as private:
            yield private
    elif dialect in ("mysql", "mariadb"):
        with small_mariadb(url) as same:
            yield same
    else:
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.insert", description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument(
        "--small-memory",
        action="store_true",
        help="PostgreSQL: a private cluster with 16 MB shared_buffers; MariaDB: a 32 MB buffer pool for the run",
    )
    parser.add_argument("--generation", action="store_true", help="also time id generation against uuid.uuid4()")
    args = parser.parse_args(argv)
    code = command(
        args,
        prepare_url=small_memory if args.small_memory else None,
        note="small-memory mode" if args.small_memory else None,
    )
    if code == 0 and args.generation:
        from benchmarks import generation

        print("benchmarks.insert: generation benchmark", file=sys.stderr)
        rows = generation.run(calls=50_000, rounds=5)
        print()
        print(generation.markdown(rows))
    return code


if __name__ == "__main__":
    sys.exit(main())
