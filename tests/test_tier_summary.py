"""The tier summary at the end of a session (tests/conftest.py): a tier whose tests all skipped
(the toolchain missing, say) is said `not run`, not `0.0 min`, and under CI it fails the session.
A pytest in a temporary directory runs tests/conftest.py as a plugin on a unit test and a helm
test that skips."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import REPO

TESTS = """\
import pytest


def test_unit():
    pass


@pytest.mark.helm
def test_needs_helm():
    pytest.skip("no helm binary (a stand-in)")
"""


@pytest.mark.parametrize("ci", ["", "1"])
def test_a_tier_whose_tests_all_skipped_is_said_not_run_and_fails_ci(tmp_path, ci):
    (tmp_path / "test_tiers.py").write_text(TESTS)
    env = {**os.environ, "CI": ci, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "1 passed, 1 skipped" in r.stdout, r.stdout + r.stderr
    assert "helm not run (all its tests skipped)" in r.stdout and "helm 0.0 min" not in r.stdout, r.stdout
    assert "unit 0.0 min (budget 4)" in r.stdout, r.stdout
    if ci:
        assert r.returncode == 1 and "CI is set and the helm tier did not run" in r.stdout, r.stdout
    else:
        assert r.returncode == 0, r.stdout + r.stderr
