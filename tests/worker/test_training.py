"""Every strategy and loop, trained to the end through LocalBackend with real TF processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from local_clusters import (
    REPO_ROOT,
    Submission,
    assert_no_task_processes,
    events,
    final_marker,
    make_spec,
    measure,
    metrics,
    run_files,
)

pytestmark = pytest.mark.process

STEPS = 200
EVERY = 50
ARGS = ["--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--global-batch-size", "64", "--data", "digits"]
CHANCE = 0.1
MIN_ACCURACY = 0.8  # measured 0.96-0.98 after 200 steps on digits
PROBES = Path(__file__).parent / "probes"


def train(backend, workdir, name, strategy, loop, timeout=420):
    spec = make_spec(name, strategy, ["--loop", loop, *ARGS])
    run = Submission(backend, spec)
    exit_code = run.wait(timeout)
    assert exit_code == 0, backend.status(name)
    assert_no_task_processes(workdir)
    status = backend.status(name)
    assert status.phase == "Succeeded", status
    return run, status


def check_evaluated_final(backend, name, loop):
    marker = final_marker(backend, name)
    assert marker["step"] == STEPS and marker["requested_steps"] == STEPS
    assert marker["loop"] == loop
    records = metrics(backend, name)
    final = [r for r in records if r["final"]]
    assert len(final) == 1 and final[0]["checkpoint"] == marker["checkpoint"], records
    assert final[0]["step"] == STEPS
    assert final[0]["accuracy"] > MIN_ACCURACY > CHANCE, records
    steps = [r["step"] for r in records]
    assert steps == sorted(steps), "evaluated out of order"
    return final[0]


def saved_model_accuracy(backend, name) -> dict:
    path = run_files(backend, name).dir / "model" / "saved_model"
    done = subprocess.run(
        [sys.executable, str(PROBES / "saved_model_accuracy.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("loop", ["custom", "fit"])
def test_parameter_server(backend, workdir, loop):
    name = f"ps-{loop}"
    run, status = train(backend, workdir, name, "parameter_server", loop)
    final = check_evaluated_final(backend, name, loop)
    roles = {r.role: r for r in status.roles}
    # ps and workers never exit: the launcher stopped them after training and they count as done.
    assert roles["ps"].succeeded == 1 and roles["worker"].succeeded == 2
    assert roles["evaluator"].succeeded == 1 and roles["chief"].succeeded == 1
    exported = saved_model_accuracy(backend, name)
    assert exported["strategy"] == "_DefaultDistributionStrategy"
    assert exported["accuracy"] > MIN_ACCURACY
    connected = events(backend, name, "chief", 0, "connected")[0]
    first = (events(backend, name, "chief", 0, "first_step") or events(backend, name, "chief", 0, "first_epoch"))[0]
    measure(
        f"PS {loop}: final accuracy {final['accuracy']:.3f} at step {final['step']}, "
        f"SavedModel accuracy {exported['accuracy']:.3f}, chief connected at "
        f"{connected['t']:.1f} s, first {'step' if loop == 'custom' else 'epoch'} at "
        f"{first['t']:.1f} s, cluster wall time {run.seconds:.1f} s"
    )


@pytest.mark.parametrize("loop", ["custom", "fit"])
def test_multi_worker_mirrored(backend, workdir, loop):
    name = f"mwms-{loop}"
    run, status = train(backend, workdir, name, "multi_worker_mirrored", loop)
    final = check_evaluated_final(backend, name, loop)
    roles = {r.role: r for r in status.roles}
    assert roles["worker"].succeeded == 2 and roles["worker"].failed == 0
    # Only worker 0 writes into the model dir; worker 1's checkpoint copies were temporary.
    model_dir = run_files(backend, name).dir / "model"
    assert not [p for p in model_dir.rglob("*workertemp*")], "worker 1 left files behind"
    if loop == "custom":
        temporary = Path(events(backend, name, "worker", 1, "checkpoint")[-1]["path"]).parent
        assert not temporary.is_relative_to(model_dir)
        assert not temporary.exists(), f"worker 1's temporary checkpoints left in {temporary}"
    assert saved_model_accuracy(backend, name)["accuracy"] > MIN_ACCURACY
    measure(
        f"MWMS {loop}: final accuracy {final['accuracy']:.3f} at step {final['step']}, "
        f"cluster wall time {run.seconds:.1f} s"
    )


def test_mirrored(backend, workdir):
    name = "mirrored"
    run, status = train(backend, workdir, name, "mirrored", "custom")
    final = check_evaluated_final(backend, name, "custom")
    devices = events(backend, name, "chief", 0, "devices")[0]
    assert devices["replicas"] >= 1
    measure(
        f"mirrored custom ({devices['replicas']} device(s)): final accuracy "
        f"{final['accuracy']:.3f}, cluster wall time {run.seconds:.1f} s"
    )


def test_resubmitting_a_finished_cluster_is_a_no_op(backend, workdir):
    """FINAL.json with the same --steps: the chief exits 0 at once; nothing is retrained."""
    name = "again"
    spec = make_spec(name, "mirrored", ["--loop", "fit", *ARGS], evaluator=False)
    assert Submission(backend, spec).wait(300) == 0
    first = final_marker(backend, name)
    assert Submission(backend, spec, replace=True).wait(120) == 0
    assert final_marker(backend, name) == first
    assert not events(backend, name, "chief", 0, "epoch"), "trained again"
    assert_no_task_processes(workdir)


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
