"""Rules over the source tree itself: every name the code uses is defined (a module that loses
an import in a move or a merge fails here in a second, not on the one cluster path that reaches
it; pyflakes), and no module of the launcher, the worker or the scripts grows past the limit."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The trees whose modules must stay under MAX_MODULE_LINES: a module that grows past it mixes
# concerns (issue 10).
LINE_LIMITED_TREES = ("launcher", "worker", "scripts")
MAX_MODULE_LINES = 300


def test_no_undefined_names():
    pyflakes_api = pytest.importorskip("pyflakes.api")
    from pyflakes import messages

    undefined = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)

    class Collect:  # pyflakes' reporter interface
        found: list[str] = []

        def flake(self, message):
            if isinstance(message, undefined):
                self.found.append(str(message))

        def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802
            self.found.append(f"{filename}:{lineno}: syntax error: {msg}")

        def unexpectedError(self, filename, msg):  # noqa: N802
            self.found.append(f"{filename}: {msg}")

    collect = Collect()
    for folder in ("launcher", "worker", "scripts", "bench", "tests"):
        pyflakes_api.checkRecursive([str(REPO / folder)], collect)
    assert not collect.found, "\n".join(collect.found)


def test_no_module_exceeds_the_line_limit():
    too_long = {}
    for tree in LINE_LIMITED_TREES:
        for path in sorted((REPO / tree).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > MAX_MODULE_LINES:
                too_long[str(path.relative_to(REPO))] = lines
    assert too_long == {}, f"modules over {MAX_MODULE_LINES} lines: split them"
