"""A `--local` grid sweep of the built-in worker (real TensorFlow): two trials of the digits
program, 20 steps each, side by side; every trial's objective is its evaluator's final
evaluation, as the evaluator wrote it in the trial's model dir, and the best is marked."""

from __future__ import annotations

import json

import pytest
import yaml
from local_clusters import SMALL_PROGRAM, measure, worker_args

from launcher import cli

pytestmark = pytest.mark.process


def test_a_local_grid_sweep_of_the_built_in_worker_reads_every_trials_metric(backend, workdir, tmp_path, capsys):
    sweep = {
        "name": "digits",
        "cluster": {
            "name": "base",
            "strategy": "mirrored",
            "program": {"module": SMALL_PROGRAM, "args": worker_args(steps=20, every=10, batch=64)},
            "roles": {"chief": {"replicas": 1}, "evaluator": {"replicas": 1}},
        },
        "parameters": [{"name": "batch", "flag": "--global-batch-size", "values": [8, 128]}],
        "objective": {"metric": "accuracy", "direction": "maximize"},
        "algorithm": "grid",
        "parallelTrials": 2,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    flags = ["--workdir", str(workdir), "--python", backend.config.task_python]
    try:
        assert cli.main(["sweep", str(path), "--local", *flags, "--poll", "0.5"]) == 0
        ran = capsys.readouterr().out
        assert cli.main(["sweep", "status", "digits", *flags, "-o", "json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["phase"] == "Succeeded", ran
        # the end said once (the last event), then the table
        assert [line for line in ran.splitlines() if line.startswith("sweep digits: ")] == [
            f"sweep digits: Succeeded - best: {max(status['trials'], key=lambda t: t['value'])['cluster']}, "
            f"accuracy {status['best']['value']:.4g}"
        ], ran
        trials = {t["cluster"]: t for t in status["trials"]}
        assert sorted(trials) == ["digits-t0", "digits-t1"]
        for name, trial in trials.items():
            assert trial["phase"] == "Succeeded", trial
            # the evaluator's own record of the final checkpoint, in the trial's model dir
            records = [json.loads(line) for line in (workdir / name / "model" / "eval" / "metrics.jsonl").open()]
            final = [r for r in records if r["final"]]
            assert len(final) == 1 and final[0]["step"] == 20 and trial["value"] == final[0]["accuracy"]
        best = max(trials.values(), key=lambda t: t["value"])
        assert status["best"] == {"trial": best["trial"], "cluster": best["cluster"], "value": best["value"]}
        assert [t["best"] for t in trials.values()].count(True) == 1 and best["best"]
        measure(
            "sweep of 2 digits trials, 20 steps: "
            + ", ".join(f"{n} batch {t['parameters']['batch']} accuracy {t['value']}" for n, t in trials.items())
        )
    finally:
        cli.main(["sweep", "delete", "digits", *flags])
