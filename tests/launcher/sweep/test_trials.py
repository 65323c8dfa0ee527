"""A trial's cluster from the base spec and its values; its objective from its progress lines."""

from __future__ import annotations

import json

import pytest

from launcher.cluster_spec.spec import ClusterSpec
from launcher.errors import SpecError
from launcher.status.progress import read_progress
from launcher.status.status import ClusterStatus, Phase
from launcher.sweep import trials
from launcher.sweep.spec import Objective, SweepSpec
from worker.contract import PROGRESS_PREFIX

BASE = {
    "name": "base",
    "strategy": "mirrored",
    "program": {"module": "worker.examples.digits", "args": ["--steps", "20", "--global-batch-size=64"]},
    "env": {"KEEP": "1"},
    "labels": {"team": "a"},
    "roles": {"chief": {"replicas": 1}, "evaluator": {"replicas": 1}},
    "checkpoint": {"dir": "/ckpt/runs", "volume": {"persistentVolumeClaim": {"claimName": "c"}}},
}


def sweep(*parameters, **fields) -> SweepSpec:
    return SweepSpec.model_validate(
        {
            "name": "sw",
            "cluster": "unused.yaml",
            "parameters": list(parameters),
            "objective": {"metric": "accuracy", "direction": "maximize"},
            "algorithm": "grid",
            **fields,
        }
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--a", "1", "--b", "2"], ["--a", "9", "--b", "2"]),
        (["--b=2", "--a=1"], ["--b=2", "--a=9"]),
        (["--b", "2"], ["--b", "2", "--a", "9"]),
        (["--ab", "1"], ["--ab", "1", "--a", "9"]),  # another flag that starts alike is not it
    ],
)
def test_a_flag_is_replaced_where_it_is_or_appended(args, expected):
    assert trials.with_flag(args, "--a", "9") == expected


def test_a_trial_is_the_base_with_its_values_name_labels_and_own_model_dir():
    s = sweep(
        {"name": "batch", "flag": "--global-batch-size", "values": [16, 32]},
        {"name": "lr", "env": "LR", "float": {"min": 0.001, "max": 0.1, "step": 0.01}},
        {"name": "steps", "flag": "--steps", "values": [40]},
    )
    spec = trials.trial_spec(s, ClusterSpec.model_validate(BASE), 3, {"batch": 32, "lr": 0.011, "steps": 40})
    assert spec.name == "sw-t3"
    assert spec.labels == {"team": "a", "tfk8s.io/sweep": "sw", "tfk8s.io/sweep-trial": "3"}
    assert spec.program.args == ["--steps", "40", "--global-batch-size=32"]
    assert [(e.name, e.value) for e in spec.env] == [("KEEP", "1"), ("LR", "0.011")]
    assert spec.checkpoint.dir == "/ckpt/runs/sw-t3" and spec.model_dir == "/ckpt/runs/sw-t3"
    # the default model dir is per cluster name: a trial's is its own without a rewrite
    unset = {**BASE, "checkpoint": {"volume": BASE["checkpoint"]["volume"]}}
    one, two = (
        trials.trial_spec(s, ClusterSpec.model_validate(unset), n, {"batch": 16, "lr": 0.1, "steps": 40})
        for n in (0, 1)
    )
    assert one.checkpoint.dir is None and one.model_dir != two.model_dir and one.model_dir.endswith("/sw-t0")


def test_a_command_of_your_own_takes_flags_in_args_and_placeholders_anywhere():
    base = ClusterSpec.model_validate(
        {
            "name": "base",
            "strategy": "mirrored",
            "image": "example.com/own:1",
            "command": ["python", "train.py", "--lr=${trialParameters.lr}"],
            "args": ["--epochs", "1"],
            "env": {"NOTE": "lr is ${trialParameters.lr}"},
            "roles": {"chief": {"replicas": 1}},
        }
    )
    s = sweep(
        {"name": "lr", "placeholder": "${trialParameters.lr}", "values": [0.5]},
        {"name": "epochs", "flag": "--epochs", "int": {"min": 1, "max": 3}},
    )
    spec = trials.trial_spec(s, base, 0, {"lr": 0.5, "epochs": 2})
    assert spec.command == ["python", "train.py", "--lr=0.5"] and spec.args == ["--epochs", "2"]
    assert [(e.name, e.value) for e in spec.env] == [("NOTE", "lr is 0.5")]


def test_a_value_that_makes_no_valid_cluster_is_a_spec_error():
    s = sweep({"name": "port", "env": "BAD NAME", "values": [1]})
    with pytest.raises(SpecError) as caught:
        trials.trial_spec(s, ClusterSpec.model_validate(BASE), 0, {"port": 1})
    assert caught.value.problems[0].path == "env"


def progress(*records: dict) -> list[str]:
    return [PROGRESS_PREFIX + json.dumps(r) + "\n" for r in records]


def status_of(chief: list[str], evaluator: list[str]) -> ClusterStatus:
    return ClusterStatus("sw-t0", "default", Phase.SUCCEEDED, training=read_progress(chief, evaluator))


CHIEF = progress(
    {"event": "step", "step": 20, "target": 20, "loss": 0.25},
    {"event": "final", "step": 20, "checkpoint": "ckpt-20"},
)


def test_the_objective_is_the_final_evaluations_metric():
    evaluator = progress(
        {"event": "evaluated", "step": 10, "checkpoint": "ckpt-10", "accuracy": 0.5, "loss": 1.0},
        {"event": "evaluated", "step": 20, "checkpoint": "ckpt-20", "accuracy": 0.75, "loss": 0.5},
    )
    status = status_of(CHIEF, evaluator)
    assert trials.objective_value(status, Objective(metric="accuracy", direction="maximize")) == (
        0.75,
        "final evaluation ckpt-20",
    )
    assert trials.intermediate_values(status, "accuracy") == [(10, 0.5), (20, 0.75)]
    value, why = trials.objective_value(status, Objective(metric="auc", direction="maximize"))
    assert value is None and why == "the final evaluation has no metric 'auc' (it has: accuracy, loss)"


def test_without_a_final_evaluation_there_is_no_value():
    evaluator = progress({"event": "evaluated", "step": 10, "checkpoint": "ckpt-10", "accuracy": 0.5})
    value, why = trials.objective_value(status_of(CHIEF, evaluator), Objective(metric="accuracy", direction="maximize"))
    assert value is None and why == "the evaluator reported no evaluation of the final checkpoint"


def test_without_an_evaluator_loss_is_the_trainings_last():
    status = status_of(CHIEF, [])
    assert trials.objective_value(status, Objective(metric="loss", direction="minimize")) == (
        0.25,
        "training loss at step 20",
    )
    value, why = trials.objective_value(status, Objective(metric="accuracy", direction="maximize"))
    assert value is None and "no metric 'accuracy' was reported" in why
