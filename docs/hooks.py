"""MkDocs hooks.

* The docstrings are written for both ``help()`` and Sphinx-style readers, so their cross-reference
  roles (``:class:`~seqid_orm.errors.LeaseLostError```) reach the rendered page as
  ``:class:<code>~seqid_orm.errors.LeaseLostError</code>``.  Show them as the code they name (the
  last part where Sphinx's ``~`` asks for it), linked to its entry where the reference has one (an
  optional cross-reference that mkdocs-autorefs, which mkdocstrings brings, resolves once every page
  is rendered; a name without an entry stays plain code).  A reST literal block's ``::`` reads as
  one colon.
* The command line's reference (``reference/cli.md``) ends with every command's ``--help``, read from
  the parser ``seqid`` runs (:func:`seqid_orm.cli.build_parser`), so the page lists every option and
  cannot fall behind it."""

from __future__ import annotations

import argparse
import os
import re

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj|const):<code>(~?)([^<]+)</code>")


def _name(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    code = f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"
    if target.startswith("seqid_orm."):  # a full path: the reference's entry, if it has one
        return f'<autoref identifier="{target}" optional>{code}</autoref>'
    return code


def on_page_content(html: str, **_: object) -> str:
    return _ROLE.sub(_name, html).replace("::</p>", ":</p>")


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(command line, its --help)`` for ``parser`` and every subcommand under it, depth first."""
    found = [(" ".join(words), parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, (*words, name))
    return found


def cli_reference() -> str:
    """Every ``seqid`` command's help, as Markdown."""
    from seqid_orm.cli import build_parser

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same page on every machine
    try:
        parts = ["\n## Every command and its options\n\n", "Generated from the parser `seqid` runs.\n"]
        for line, text in _commands(build_parser(), ("seqid",)):
            parts.append(f"\n### `{line}`\n\n```text\n{text.rstrip()}\n```\n")
        return "".join(parts)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def on_page_markdown(markdown: str, page: object, **_: object) -> str:
    if getattr(getattr(page, "file", None), "src_uri", "") == "reference/cli.md":
        return markdown + cli_reference()
    return markdown
