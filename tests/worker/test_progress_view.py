"""What a user sees of a real local PS run: the view on the terminal, the training fields of
`status -o json` while it trains and after it ended, every task's raw log behind `logs --all`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from local_clusters import REPO_ROOT, make_spec, measure

pytestmark = pytest.mark.process

STEPS = 600


def launcher(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT
    )


def status_json(name: str, workdir) -> dict:
    done = launcher("status", name, "--local", "--workdir", str(workdir), "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_status_reports_training_while_it_runs_and_after_it_ended(tmp_path):
    name, workdir = "view", tmp_path / "work"
    spec = make_spec(
        name,
        "parameter_server",
        ["--steps", str(STEPS), "--checkpoint-every", "100", "--global-batch-size", "64", "--data", "digits"],
        env={"TFK8S_PROGRESS_SECONDS": "1"},
    )
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True)))
    terminal = (tmp_path / "terminal.txt").open("w")
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "launcher",
            "submit",
            str(spec_file),
            "--local",
            "--workdir",
            str(workdir),
            "--every",
            "2",
        ],
        stdout=terminal,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
    )
    seen: list[dict] = []
    try:
        deadline = time.monotonic() + 400
        # Polled until two steps were seen: each `status` costs about a second of CPU, which
        # the training shares.
        while run.poll() is None and time.monotonic() < deadline and len(seen) < 2:
            if (workdir / name / "status.json").exists():
                training = status_json(name, workdir)["training"]
                if training and training["step"] and training["step"] < STEPS and training.get("stepsPerSecond"):
                    if not seen or training["step"] > seen[-1]["step"]:
                        seen.append(training)
            time.sleep(1.0)
        assert run.wait(timeout=max(deadline - time.monotonic(), 1)) == 0
    finally:
        if run.poll() is None:
            run.kill()
        terminal.close()

    # While training: the step advanced, with the target, the loss, a rate and an ETA.
    assert len(seen) >= 2, seen
    running = seen[0]
    print("status -o json while training:", json.dumps(running))
    assert running["target"] == STEPS and running["loss"] > 0
    assert running["stepsPerSecond"] > 0 and running["etaSeconds"] > 0
    assert not running["finished"]
    assert seen[-1]["step"] > running["step"]

    # After the end: the final step, the final evaluation and the checkpoint it came from.
    final = status_json(name, workdir)
    assert final["phase"] == "Succeeded"
    training = final["training"]
    print("status -o json after the end:", json.dumps(training))
    assert training["finished"] and training["step"] == training["target"] == STEPS
    assert training["finalCheckpoint"].endswith(f"ckpt-{STEPS}")
    evaluation = training["evaluation"]
    assert evaluation["final"] and evaluation["checkpoint"] == f"ckpt-{STEPS}"
    assert evaluation["step"] == STEPS and evaluation["metrics"]["accuracy"] > 0.8
    text = launcher("status", name, "--local", "--workdir", str(workdir)).stdout
    assert f"training: step {STEPS}/{STEPS} (100%)" in text
    assert f"final eval ckpt-{STEPS}: accuracy" in text

    # status --watch of a cluster that has ended shows its last state and exits with its code.
    watched = launcher("status", name, "--local", "--workdir", str(workdir), "--watch")
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout.startswith("[Succeeded]") and f"step {STEPS}/{STEPS}" in watched.stdout

    # The terminal got the view; the raw output, TensorFlow's C++ logging included, went to
    # the logs, where `logs --all` shows it behind each task's name.
    shown = (tmp_path / "terminal.txt").read_text().splitlines()
    raw = launcher("logs", name, "--all", "--local", "--workdir", str(workdir)).stdout.splitlines()
    measure(
        f"MEASURE local PS run ({STEPS} steps): {len(shown)} lines on the terminal, "
        f"{len(raw)} in logs --all; {len(seen)} distinct steps seen by status while training"
    )
    assert not [x for x in shown if "tfk8s-progress" in x or "oneDNN" in x], shown
    assert any(x.startswith("[Running]") and f"/{STEPS}" in x for x in shown), shown
    assert shown[-1].startswith("[Succeeded]") or "[Succeeded]" in "\n".join(shown[-3:])
    for task in ("chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0"):
        assert any(x.startswith(f"[{task}] ") for x in raw), task
    assert any("tfk8s-progress" in x for x in raw)
