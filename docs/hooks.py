"""MkDocs hooks.

* The docstrings are written for both ``help()`` and Sphinx-style readers, so their cross-reference
  roles (``:class:`~seqid_orm.errors.LeaseLostError```) reach the rendered page as
  ``:class:<code>~seqid_orm.errors.LeaseLostError</code>``.  Show them as the code they name (the
  last part where Sphinx's ``~`` asks for it), linked to its entry where the reference has one (an
  optional cross-reference that mkdocs-autorefs, which mkdocstrings brings, resolves once every page
  is rendered; a name without an entry stays plain code).  A reST literal block's ``::`` reads as
  one colon.
* ``<!-- picture: layouts -->`` becomes a drawing of each layout's bytes, made from the layouts
  themselves (:class:`seqid_orm.ids.layout.Layout`), so the picture cannot disagree with the code.
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


_LAYOUT_ROWS = (  # each layout, and the databases whose comparison order it is drawn in
    ("TIME_FIRST", "PostgreSQL, SQLite, MySQL, BINARY(16), MariaDB ≥ 10.11.5"),
    ("TIME_LAST", "SQL Server, MariaDB UUID before 10.11.5"),
    ("TIME_FIRST_LE", "BINARY(16) written by .NET"),
    ("SHARDED", "CockroachDB, TiDB, YugabyteDB"),
)
_FILL = {"time": "#3b82f6", "counter": "#22c55e", "shard, then time": "#f59e0b", "other": "#d1d5db"}


def layouts_svg() -> str:
    """The layouts' bytes as an inline SVG: time, counter (and shard) coloured, each byte with its
    rank in the database's comparison order."""
    from seqid_orm.ids.layout import Layout

    cell, left, top, row_h = 30, 10, 28, 74
    width = left + 16 * cell + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {top + row_h * len(_LAYOUT_ROWS) - 10}" '
        'role="img" aria-label="the bytes of each layout" style="max-width:100%;font-family:sans-serif">'
    ]
    x = left
    for label, color in _FILL.items():
        out.append(f'<rect x="{x}" y="4" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x + 16}" y="14" font-size="11">{label}</text>')
        x += 40 + 7 * len(label)
    for row, (name, where) in enumerate(_LAYOUT_ROWS):
        layout = Layout[name]
        y = top + row * row_h
        time, counter = set(layout.requires[:6]), set(layout.requires[6:])
        rank = {position: n + 1 for n, position in enumerate(layout.order)}
        out.append(f'<text x="{left}" y="{y + 12}" font-size="12"><tspan font-weight="bold">{name}</tspan>')
        out.append(f" — {where}</text>")
        for position in range(16):
            kind = "time" if position in time else "counter" if position in counter else "other"
            if name == "SHARDED" and position == 0:
                kind = "shard, then time"  # its top four bits are the shard, the rest milliseconds
            x = left + position * cell
            out.append(f'<rect x="{x}" y="{y + 18}" width="{cell - 2}" height="22" fill="{_FILL[kind]}"/>')
            out.append(f'<text x="{x + 14}" y="{y + 33}" font-size="10" text-anchor="middle">{position}</text>')
            out.append(f'<text x="{x + 14}" y="{y + 54}" font-size="9" text-anchor="middle" fill="#555">')
            out.append(f"{rank[position]}</text>")
    out.append("</svg>")
    return "".join(out)


def on_page_markdown(markdown: str, page: object, **_: object) -> str:
    if getattr(getattr(page, "file", None), "src_uri", "") == "reference/cli.md":
        return markdown + cli_reference()
    return markdown.replace("<!-- picture: layouts -->", layouts_svg())
