"""MkDocs hook: the docstrings are written for both ``help()`` and Sphinx-style readers, so their
cross-reference roles (``:class:`~seqid_orm.errors.LeaseLostError```) reach the rendered page as
``:class:<code>~seqid_orm.errors.LeaseLostError</code>``.  Show them as the code they name (the last
part where Sphinx's ``~`` asks for it)."""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj|const):<code>(~?)([^<]+)</code>")


def _name(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, **_: object) -> str:
    return _ROLE.sub(_name, html)
