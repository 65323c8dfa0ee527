"""sweep.yaml's model and loader: what loads, and each refusal with its file:line, field and fix."""

from __future__ import annotations

import textwrap

import pytest

from launcher.errors import SpecError
from launcher.sweep import load

CLUSTER = """\
cluster:
  name: base
  strategy: mirrored
  program: {module: worker.examples.digits, args: [--steps, "20"]}
  roles:
    chief: {replicas: 1}
"""


def sweep_text(body: str, cluster: str = CLUSTER) -> str:
    return "name: sw\n" + cluster + textwrap.dedent(body)


VALID = """\
parameters:
  - {name: batch, flag: --global-batch-size, int: {min: 16, max: 128, log: true}}
  - {name: lr, env: LR, float: {min: 1.0e-4, max: 0.1, log: true}}
  - {name: loop, flag: --loop, values: [custom, fit]}
objective: {metric: accuracy, direction: maximize, goal: 0.99}
algorithm: tpe
parallelTrials: 2
maxTrials: 8
earlyStopping: {rule: median, minTrials: 2, startStep: 10}
"""


def problems_of(text: str, tmp_path=None) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load.load_text(text, "sweep.yaml", tmp_path)
    return [str(p) for p in caught.value.problems]


def test_a_sweep_with_an_inline_cluster_loads():
    loaded = load.load_text(sweep_text(VALID), "sweep.yaml")
    assert loaded.sweep.name == "sw" and loaded.base.spec.name == "base"
    assert [p.name for p in loaded.sweep.parameters] == ["batch", "lr", "loop"]
    assert loaded.sweep.early_stopping.min_trials == 2 and loaded.sweep.objective.goal == 0.99


def test_the_cluster_may_be_a_path_relative_to_the_sweep_file(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "c.yaml").write_text(CLUSTER.replace("cluster:\n", "").replace("\n  ", "\n")[2:])
    loaded = load.load_text(sweep_text(VALID, cluster="cluster: specs/c.yaml\n"), "sweep.yaml", tmp_path)
    assert loaded.base.spec.name == "base"
    missing = problems_of(sweep_text(VALID, cluster="cluster: nothere.yaml\n"), tmp_path)
    assert len(missing) == 1 and missing[0].startswith("sweep.yaml:2: cluster: ") and "is not a file" in missing[0]


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            VALID.replace("parallelTrials", "parallelTrial"),
            "sweep.yaml:14: parallelTrial: unknown key 'parallelTrial' (did you mean 'parallelTrials'?)",
        ),
        (
            VALID.replace("env: LR,", "env: LR, flag: --lr,"),
            "sweep.yaml:10: parameters[1]: set exactly one of flag, env and placeholder (it has flag, env)",
        ),
        (
            VALID.replace("min: 1.0e-4", "min: 0"),
            "sweep.yaml:10: parameters[1].float: a log range needs min above 0, not 0: set min > 0, or remove log",
        ),
        (VALID.replace("maxTrials: 8\n", ""), "sweep.yaml: maxTrials: tpe needs maxTrials: how many trials in all"),
        (
            VALID.replace("algorithm: tpe", "algorithm: grid"),
            "sweep.yaml:9: parameters[0].int.log: a grid takes every integer of the range: remove log",
        ),
        (
            VALID.replace("direction: maximize", "direction: up"),
            "sweep.yaml:12: objective.direction: Input should be 'minimize' or 'maximize'",
        ),
    ],
    ids=["unknown-key", "two-targets", "log-from-0", "no-max-trials", "grid-log-int", "direction"],
)
def test_a_wrong_sweep_is_refused_at_its_line(body, expected):
    found = problems_of(sweep_text(body))
    assert any(p.startswith(expected) for p in found), found


def test_a_grid_float_range_needs_a_step():
    body = VALID.replace("algorithm: tpe", "algorithm: grid").replace("log: true}}\n  - {name: lr", "}}\n  - {name: lr")
    body = body.replace("max: 0.1, log: true", "max: 0.1")
    found = problems_of(sweep_text(body))
    assert found == [
        "sweep.yaml:10: parameters[1].float: a grid takes finitely many values: give the range a step, or list values",
    ]


def test_the_inline_clusters_problems_are_at_their_line_in_the_sweep_file():
    found = problems_of(sweep_text(VALID, cluster=CLUSTER.replace("chief: {replicas: 1}", "chief: {replicas: 3}")))
    assert found and all(p.startswith("sweep.yaml:7: cluster.roles.chief.replicas:") for p in found), found


def test_a_placeholder_the_base_spec_lacks_is_refused():
    body = VALID.replace("env: LR,", "placeholder: '${trialParameters.lr}',")
    found = problems_of(sweep_text(body))
    assert found == [
        "sweep.yaml:10: parameters[1]: placeholder '${trialParameters.lr}' is in none of the base spec's command, "
        "args, program.args and env values: write it where the value goes, or use flag or env"
    ]


def test_a_sweep_name_leaves_room_for_its_trials():
    found = problems_of(sweep_text(VALID).replace("name: sw\n", f"name: {'s' * 41}\n", 1))
    assert found == ["sweep.yaml:1: name: 41 characters; a sweep's name has at most 40 (its trials' need room)"]


def test_a_worker_flag_value_the_trial_cannot_take_is_refused_before_any_trial():
    """The first values must make a valid trial: here a flag put into the base spec's command."""
    cluster = (
        "cluster:\n  name: base\n  strategy: mirrored\n  image: example.com/own:1\n"
        "  command: [python, train.py, --lr, '0.1']\n  roles: {chief: {replicas: 1}}\n"
    )
    found = problems_of(
        sweep_text(
            "parameters: [{name: lr, flag: --lr, values: [0.1]}]\n"
            "objective: {metric: loss, direction: minimize}\nalgorithm: grid\n",
            cluster,
        )
    )
    assert found == [
        "sweep.yaml:8: parameters[0]: flag --lr is in the base spec's command, where a flag's value is not replaced: "
        "move it to args, or mark its value with a placeholder"
    ]


TFJOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: mnist}
spec:
  tfReplicaSpecs:
    Chief:
      replicas: 1
      template:
        spec:
          containers:
            - {name: tensorflow, image: example.com/mnist:1, command: [python, train.py, --lr, "0.1"]}
"""


def test_the_cluster_may_be_a_tfjob_file_converted_as_import_does(tmp_path):
    (tmp_path / "tfjob.yaml").write_text(TFJOB)
    body = "parameters: [{name: lr, flag: --lr, values: [0.1]}]\nobjective: {metric: loss, direction: minimize}\n"
    found = problems_of(sweep_text(body + "algorithm: grid\n", cluster="cluster: tfjob.yaml\n"), tmp_path)
    # converted, then judged as any base: here the flag sits in the TFJob's command
    assert found == [
        "sweep.yaml:3: parameters[0]: flag --lr is in the base spec's command, where a flag's value is not replaced: "
        "move it to args, or mark its value with a placeholder"
    ]
    (tmp_path / "tfjob.yaml").write_text(
        TFJOB.replace('command: [python, train.py, --lr, "0.1"]', "command: [python, train.py], args: [--lr, '0.1']")
    )
    loaded = load.load_text(
        sweep_text(body + "algorithm: grid\n", cluster="cluster: tfjob.yaml\n"), "sweep.yaml", tmp_path
    )
    assert loaded.base.spec.name == "mnist" and loaded.base.spec.args == ["--lr", "0.1"]
