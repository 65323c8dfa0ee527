"""Rules over the source tree itself: `ruff check` (pyflakes, pycodestyle, import order, bugbear)
and `ruff format --check`, as configured in pyproject.toml. A module that loses an import in a
move or a merge fails here in seconds, not on the one cluster path that reaches it. The layers'
import rules are in tests/test_layers.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    if (
        shutil.which("ruff") is None
        and subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0
    ):
        pytest.fail("ruff is not installed: pip install -e '.[test]'", pytrace=False)
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True)


def test_ruff_check_is_clean():
    done = ruff("check", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean():
    done = ruff("format", "--check", ".")
    assert done.returncode == 0, f"run `ruff format .`:\n{done.stdout}{done.stderr}"
