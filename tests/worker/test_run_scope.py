"""A run's evaluator evaluates that run: after `--replace` onto a kept model dir, the evaluator
ends on a FINAL.json of its own run (TFK8S_RUN, one id per submission), never on the one the
previous run left (worker/model_dir/layout.py). Real TF clusters through LocalBackend, and an
evaluator started by hand on the kept dir."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from local_clusters import REPO_ROOT, Submission, events, final_marker, make_spec, run_files, wait_until, worker_args

from worker.model_dir import layout

pytestmark = pytest.mark.process

TIMEOUT = 300
NAME = "rerun-eval"


def spec(**env):
    return make_spec(NAME, "mirrored", worker_args(20, 10), env=env)


def test_a_replaced_runs_evaluator_ends_on_its_own_runs_final(backend):
    assert Submission(backend, spec()).wait(TIMEOUT) == 0
    first = final_marker(backend, NAME)
    [first_done] = events(backend, NAME, "evaluator", 0, "evaluator_done")
    assert first["run"] and first_done["run"] == first["run"], (first, first_done)

    # The same training again (another env: --replace): nothing left to train; the writer
    # re-stamps the marker with this run, and this run's evaluator ends on that one.
    assert Submission(backend, spec(RERUN="1"), replace=True).wait(TIMEOUT) == 0
    [final] = events(backend, NAME, "chief", 0, "final")
    assert final["already_finished"] is True, final
    second = final_marker(backend, NAME)
    assert second["run"] and second["run"] != first["run"], (first, second)
    assert second["checkpoint"] == first["checkpoint"] and second["step"] == first["step"] == 20
    [second_done] = events(backend, NAME, "evaluator", 0, "evaluator_done")
    assert second_done["run"] == second["run"], (second, second_done)
    assert second_done["final"] == second["checkpoint"]

    # A later run's evaluator on the same dir (run id "third"), started before its writer acts:
    # the marker there is run 2's, so it keeps watching; it evaluates the next checkpoint, and
    # ends only on a marker of its own run.
    model = run_files(backend, NAME).dir / "model"
    evaluator = Evaluator(model, run="third")
    try:
        evaluator.wait_for("watching")
        for part in (model / "checkpoints").glob(f"{second['checkpoint']}.*"):
            shutil.copy(part, part.with_name(part.name.replace(second["checkpoint"], "ckpt-30")))
        # written whole, as the worker writes: the watching evaluator read a half-written file once
        layout.write_atomically(str(model / "checkpoints" / "checkpoint"), 'model_checkpoint_path: "ckpt-30"\n')
        evaluated = evaluator.wait_for("evaluated")
        assert evaluated["checkpoint"] == "ckpt-30", evaluated
        own = {**second, "checkpoint": "ckpt-30", "run": "third"}
        layout.write_atomically(str(model / "FINAL.json"), json.dumps(own))  # as its writer would
        assert evaluator.process.wait(TIMEOUT) == 0, evaluator.output()
        done = evaluator.wait_for("evaluator_done")
        assert (done["final"], done["run"]) == ("ckpt-30", "third"), done
    finally:
        evaluator.process.kill()


class Evaluator:
    """`python -m worker` as the cluster's evaluator on `model`, as its pod would run it."""

    def __init__(self, model, run: str):
        owner = json.loads((model / "OWNER.json").read_text())
        self.log = model.parent / "hand-evaluator.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worker", *worker_args(20, 10)],
            env={
                **os.environ,
                "PYTHONPATH": str(REPO_ROOT),
                "TF_CONFIG": json.dumps({"cluster": {}, "task": {"type": "evaluator", "index": 0}}),
                "TFK8S_STRATEGY": owner["training"]["strategy"],
                "TFK8S_PROGRAM": owner["training"]["program"],
                "TFK8S_MODEL_DIR": str(model),
                "TFK8S_CLUSTER": owner["cluster"],
                "TFK8S_NAMESPACE": owner["namespace"],
                "TFK8S_PLATFORM": owner["platform"],
                "TFK8S_RUN": run,
            },
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def records(self, event: str) -> list[dict]:
        prefix = "tfk8s-progress "
        lines = self.output_all().splitlines()
        return [r for r in (json.loads(x[len(prefix) :]) for x in lines if x.startswith(prefix)) if r["event"] == event]

    def output_all(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, event: str) -> dict:
        def seen():
            found = self.records(event)
            if not found and self.process.poll() is not None:
                raise AssertionError(f"the evaluator exited {self.process.returncode} before {event}: {self.output()}")
            return found

        return wait_until(seen, TIMEOUT, f"the evaluator's {event}")[0]
