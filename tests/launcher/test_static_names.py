"""Every name the code uses is defined: a module that loses an import (a move between modules, a
merge) fails here in a second instead of on the one cluster path that reaches it (pyflakes)."""
from __future__ import annotations

from pathlib import Path

import pytest

pyflakes_api = pytest.importorskip("pyflakes.api")
from pyflakes import messages, reporter  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


class _Collect(reporter.Reporter):
    def __init__(self):
        self.found: list[str] = []

    def flake(self, message):
        if isinstance(message, UNDEFINED):
            self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802 - pyflakes' API
        self.found.append(f"{filename}:{lineno}: syntax error: {msg}")

    def unexpectedError(self, filename, msg):  # noqa: N802
        self.found.append(f"{filename}: {msg}")


def test_no_undefined_names():
    collect = _Collect()
    for folder in ("launcher", "worker", "scripts", "bench", "tests"):
        pyflakes_api.checkRecursive([str(REPO / folder)], collect)
    assert not collect.found, "\n".join(collect.found)
