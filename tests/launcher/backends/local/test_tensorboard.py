"""`tensorboard NAME --local` after a real (short) local run: TensorBoard serves the built-in
evaluator's scalars over HTTP, and Ctrl-C stops it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from local_clusters import Submission, final_marker, make_spec, measure
from support import REPO
from tensorboard_client import TensorBoardSession, connection_refused, free_port

pytestmark = pytest.mark.process

ARGS = ["--steps", "40", "--checkpoint-every", "20", "--global-batch-size", "32", "--data", "digits"]


def test_tensorboard_serves_the_evaluators_scalars(backend, workdir, tmp_path):
    name = "board"
    spec = make_spec(name, "mirrored", ["--loop", "custom", *ARGS])
    assert Submission(backend, spec).wait(300) == 0
    final_step = final_marker(backend, name)["step"]

    session = TensorBoardSession(
        [name, "--local", "--workdir", str(workdir), "--port", str(free_port())],
        tmp_path / "tensorboard.log",
        start_timeout=120,
    )
    try:
        assert session.url.startswith("http://127.0.0.1:")
        scalars = session.eval_scalars(timeout=60)
    finally:
        code = session.interrupt(timeout=30)
    measure(
        f"tensorboard --local: {session.line}\n  /data/runs: {scalars['runs_text']}\n"
        f"  /data/plugin/scalars/tags: {scalars['tags_text'][:400]}\n"
        f"  accuracy points: {scalars['points_text'][:400]}"
    )
    assert {"accuracy", "loss"} <= set(scalars["tags"])
    steps = [step for _, step, _ in scalars["points"]]
    assert final_step in steps and steps == sorted(steps)
    assert code == 0, session.output()
    assert connection_refused(session.url)


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
