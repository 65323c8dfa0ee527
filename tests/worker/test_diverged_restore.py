"""MWMS workers that restore different steps stop with exit 5 (worker/lifecycle/agreement.py)
instead of all-reducing gradients into different weights.

Real TensorFlow: two `python -m worker` processes with a hand-written TF_CONFIG, as two pods.
The realistic cause is a checkpoint dir that is not shared (each pod its own emptyDir or
ReadWriteOnce copy), which the spec refuses up front on Kubernetes; here worker 1 is simply
given a dir of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from local_clusters import REPO_ROOT, SMALL_PROGRAM, free_port, measure

from worker.errors import EXIT_DIVERGED_RESTORE

pytestmark = pytest.mark.process

TIMEOUT = 240


def run_pair(logs: Path, model_dirs: list[Path], steps: int) -> list[tuple[int, str]]:
    """Both workers of a 2-worker MWMS cluster to their end: (exit code, output) each."""
    cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in model_dirs]}
    outputs = [logs / f"worker-{index}.log" for index in range(len(model_dirs))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "worker", "--loop", "custom", "--steps", str(steps), "--data", "digits"],
            env={
                **os.environ,
                "PYTHONPATH": str(REPO_ROOT),
                "TFK8S_STRATEGY": "multi_worker_mirrored",
                "TFK8S_PROGRAM": SMALL_PROGRAM,
                "TFK8S_MODEL_DIR": str(model_dir),
                "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
            },
            stdout=outputs[index].open("w"),
            stderr=subprocess.STDOUT,
        )
        for index, model_dir in enumerate(model_dirs)
    ]
    try:
        return [(proc.wait(timeout=TIMEOUT), output.read_text()) for proc, output in zip(procs, outputs)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def test_workers_that_restore_different_steps_stop_with_exit_5(tmp_path):
    shared, own = tmp_path / "shared", tmp_path / "own"
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = run_pair(tmp_path / "first", [shared, shared], steps=20)
    assert [code for code, _ in first] == [0, 0], first[0][1][-3000:] + first[1][1][-3000:]

    # Trained on (more steps): worker 0 restores step 20, worker 1 finds no checkpoint.
    second = run_pair(tmp_path / "second", [shared, own], steps=40)
    for code, output in second:
        assert code == EXIT_DIVERGED_RESTORE, output[-3000:]
        assert "the workers restored different steps [20, 0]" in output, output[-3000:]
        assert '"event": "first_step"' not in output, output[-3000:]  # not one step trained
    cause = next(line for line in second[1][1].splitlines() if "restored different steps" in line)
    measure(f"MWMS workers restoring steps 20 and 0: both exit {EXIT_DIVERGED_RESTORE} before a step: {cause[:200]}")
