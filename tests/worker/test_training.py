"""How the worker scales the loss across replicas, against one replica (a probe in one process).

Every strategy and loop is trained to the end through LocalBackend in test_preemption.py: each of
its runs goes through a SIGTERM and on to the final step, and one per strategy and loop also
checks what a plain training must show (the final evaluation's accuracy, the SavedModel's, each
role done; test_preemption.check_trained_to_the_end). A second run of the same cluster without
the SIGTERM would start the same TensorFlow processes to prove nothing more.
"""

from __future__ import annotations

import json
import os
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


LEARNING_RATE_PROBE = """
import dataclasses, sys
from worker import args, program
from worker.roles import training

options = args.parse(["--learning-rate", sys.argv[1]])
built = training.build_optimizer(
    dataclasses.replace(program.load("worker.examples.digits"), learning_rate=options.learning_rate)
)
print(type(built).__module__, float(built.learning_rate.numpy()))
"""


@pytest.mark.parametrize("legacy_keras", ["0", "1"])
def test_learning_rate_flag_sets_the_programs_optimizer(legacy_keras):
    """--learning-rate (what a sweep tunes) reaches the optimizer build_optimizer() returns, under
    Keras 3 and tf_keras; digits' own rate is 0.01."""
    done = subprocess.run(
        [sys.executable, "-c", LEARNING_RATE_PROBE, "0.25"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
        env={**os.environ, "TF_USE_LEGACY_KERAS": legacy_keras},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    module, rate = done.stdout.split()[-2:]
    assert float(rate) == pytest.approx(0.25)
    assert module.startswith("tf_keras" if legacy_keras == "1" else "keras"), module
