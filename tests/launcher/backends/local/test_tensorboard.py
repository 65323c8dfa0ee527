"""`tensorboard NAME --local` of a cluster that is not there. After a real local run (TensorBoard
serves the built-in evaluator's scalars over HTTP, and Ctrl-C stops it): on the finished run that
tests/worker/test_progress_view.py observes, which has an evaluator already."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO

pytestmark = pytest.mark.process


def test_tensorboard_of_an_unknown_local_cluster_says_so(workdir):
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "tensorboard", "nothing", "--local", "--workdir", str(workdir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"no local cluster 'nothing' in {workdir}" in done.stderr
