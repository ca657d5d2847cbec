"""``python manage.py seqid_doctor [--database NAME] [--json] [--fail-on KINDS]``.

The same report as ``seqid doctor URL`` (one set of decisions, :mod:`seqid_orm.schema.doctor`),
read through the project's own database settings.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from ....errors import SeqIDError
from ....schema.doctor import FAIL_ON, failing, render, render_json
from ...doctor import diagnose_alias


class Command(BaseCommand):
    help = (
        "Read every table's primary key (and unique UUID/integer keys) from a bounded sample and say which "
        "tables suffer from random or out-of-order keys, and the fix. Read-only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="the database alias (default: default)")
        parser.add_argument("--json", action="store_true", help="a JSON list of findings")
        parser.add_argument(
            "--fail-on", default="", help=f"exit 1 when a key is one of these (comma-separated: {','.join(FAIL_ON)})"
        )
        parser.add_argument("--sample", type=int, default=1000, help="keys read per column")
        parser.add_argument("--timeout", type=float, default=5.0, help="seconds allowed per statement")
        parser.add_argument(
            "--schema",
            action="append",
            metavar="NAME",
            help="PostgreSQL: read only this schema (repeat for several; default: every schema but the system's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        fail_on = [n.strip() for n in options["fail_on"].split(",") if n.strip()]
        try:
            failing([], fail_on)  # refuses an unknown name before anything is read
            findings = diagnose_alias(
                options["database"], sample=options["sample"], timeout=options["timeout"], schemas=options["schema"]
            )
        except SeqIDError as exc:  # exit 2, as `seqid doctor`: 1 says --fail-on found something
            if options["json"]:  # a document on stdout whatever happened, as `seqid doctor --json`
                self.stdout.write(render_json([], [exc]))
            raise CommandError(str(exc), returncode=2) from exc
        self.stdout.write(render_json(findings) if options["json"] else render(findings))
        bad = failing(findings, fail_on)
        if bad:
            raise CommandError(
                f"{len(bad)} key column(s) are {', '.join(sorted({f.problem or f.kind for f in bad}))}", returncode=1
            )
