"""Rules over the source tree itself: every name the code uses is defined (a module that loses
an import in a move or a merge fails here in a second, not on the one cluster path that reaches
it; pyflakes). The layers' import rules are in tests/test_layers.py."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

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
