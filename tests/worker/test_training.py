"""How the worker scales the loss across replicas, against one replica (a probe in one process).

Every strategy and loop is trained to the end through LocalBackend in test_preemption.py: each of
its runs goes through a SIGTERM and on to the final step, and one per strategy and loop also
checks what a plain training must show (the final evaluation's accuracy, the SavedModel's, each
role done; test_preemption.check_trained_to_the_end). A second run of the same cluster without
the SIGTERM would start the same TensorFlow processes to prove nothing more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from local_clusters import REPO_ROOT, measure

pytestmark = pytest.mark.process

PROBES = Path(__file__).parent / "probes"


def test_loss_scaling_matches_one_replica():
    """Same global batch: 2 replicas' summed loss and gradients equal one replica's."""
    done = subprocess.run(
        [sys.executable, str(PROBES / "loss_scaling.py")], capture_output=True, text=True, timeout=180, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2 and result["per_replica_examples"] == [8, 8]
    assert result["distributed_loss"] == pytest.approx(result["single_loss"], rel=1e-5)
    assert result["max_gradient_difference"] <= 1e-5 * max(1.0, result["max_gradient"])
    # The check can fail: averaging per replica instead would double the loss.
    assert result["summed_per_replica_means"] == pytest.approx(2 * result["single_loss"], rel=1e-2)
    measure(
        f"loss scaling: 1 replica loss {result['single_loss']:.6f}, 2 replicas "
        f"{result['distributed_loss']:.6f}, max gradient difference "
        f"{result['max_gradient_difference']:.2e}"
    )
