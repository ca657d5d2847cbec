"""The code examples of README.md and docs/ run as tests (Sybil, https://sybil.readthedocs.io):
``make test-docs`` collects them; tests/docs_examples/harness.py says on which servers they run.

Only the files given on the command line are read (``pytest README.md docs``), so the main suite,
which collects tests/ only, is not touched; without Sybil installed (a nox session of the core
only) there is nothing to collect."""

from __future__ import annotations

try:
    from sybil import Sybil
    from sybil.parsers.markdown import CodeBlockParser, SkipParser
except ImportError:  # the docs extra is not installed here
    pass
else:
    from tests.docs_examples import harness

    pytest_collect_file = Sybil(
        parsers=[CodeBlockParser(language="python", evaluator=harness.evaluate), SkipParser()],
        patterns=["README.md", "docs/*.md", "docs/**/*.md"],
        setup=harness.setup,
    ).pytest()
