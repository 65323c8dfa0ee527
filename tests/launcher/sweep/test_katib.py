"""`import` of a Katib Experiment whose trial is a TFJob: Katib's own example (katib/, from
kubeflow/katib, SOURCES.tsv), as it is and with a checkpoint claim added, and each refusal at
its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher import cli
from launcher.errors import SpecError
from launcher.plan import storage
from launcher.sweep import katib, load, trials

EXAMPLE = Path(__file__).parent / "katib" / "tfjob-mnist-with-summaries-experiment.yaml"
TEXT = EXAMPLE.read_text()
# What a TFJob user adds for tfk8s: MWMS workers need checkpoints every worker shares.
WITH_CLAIM = TEXT.replace(
    "                containers:\n",
    "                volumes: [{name: logs, persistentVolumeClaim: {claimName: katib-logs}}]\n"
    "                containers:\n",
).replace(
    "                    command:\n",
    "                    volumeMounts: [{name: logs, mountPath: /mnist-with-summaries-logs}]\n"
    "                    command:\n",
)


def refusals(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        katib.import_text(text, "exp.yaml")
    return [str(p) for p in caught.value.problems]


def test_katibs_example_imports_as_it_is():
    """Its trial is a command of your own with two MWMS workers and no claim: imported as TFJob
    allowed it, the unshared model dir said at render and submit (plan/storage.py)."""
    imported = katib.import_text(TEXT, "exp.yaml")
    loaded = load.load_text(imported.text, "sweep.yaml")
    assert loaded.base.spec.strategy == "multi_worker_mirrored" and loaded.base.spec.replicas("worker") == 2
    assert "the 2 workers do not share the model dir" in storage.unshared_warning(loaded.base.spec)


def test_katibs_example_with_a_shared_claim_is_a_sweep():
    imported = katib.import_text(WITH_CLAIM, "exp.yaml")
    loaded = load.load_text(imported.text, "sweep.yaml")
    sweep, base = loaded.sweep, loaded.base.spec
    assert sweep.name == "tfjob-mnist-with-summaries" and sweep.algorithm == "random"
    assert (sweep.parallel_trials, sweep.max_trials, sweep.max_failed_trials) == (3, 12, 3)
    assert sweep.objective.model_dump() == {"metric": "accuracy", "direction": "maximize", "goal": 0.99}
    assert [p.model_dump(exclude_none=True) for p in sweep.parameters] == [
        {
            "name": "learning_rate",
            "placeholder": "${trialParameters.learningRate}",
            "float": {"min": 0.01, "max": 0.05, "log": False},
        },
        {
            "name": "batch_size",
            "placeholder": "${trialParameters.batchSize}",
            "int": {"min": 32, "max": 64, "log": False, "step": 1},
        },
    ]
    assert base.strategy == "multi_worker_mirrored" and base.replicas("worker") == 2
    trial = trials.trial_spec(sweep, base, 0, {"learning_rate": 0.02, "batch_size": 48})
    assert trial.command == [
        "python",
        "/opt/tf-mnist-with-summaries/mnist.py",
        "--epochs=1",
        "--learning-rate=0.02",
        "--batch-size=48",
        "--log-path=/mnist-with-summaries-logs",
    ]
    notes = "\n".join(imported.notes)
    assert "exp.yaml:17: spec.metricsCollectorSpec: Katib's TensorFlowEvent collector is not run" in notes
    assert "exp.yaml:36: spec.trialTemplate.primaryContainerName: not needed" in notes
    assert "spec.trialTemplate.trialSpec.spec.tfReplicaSpecs: strategy multi_worker_mirrored" in notes


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            ("algorithmName: random", "algorithmName: bayesianoptimization"),
            "exp.yaml:16: spec.algorithm.algorithmName: 'bayesianoptimization': a sweep searches by random, grid, tpe "
            "(change it to one of those, or run this Experiment with Katib)",
        ),
        (
            ('        max: "0.05"\n', '        max: "0.05"\n        distribution: normal\n'),
            "exp.yaml:30: spec.parameters.0.feasibleSpace.distribution: 'normal': a sweep samples uniform and "
            "logUniform only",
        ),
        (
            ("      kind: TFJob", "      kind: PyTorchJob"),
            "exp.yaml:49: spec.trialTemplate.trialSpec.kind: 'PyTorchJob': the trial must be a TFJob",
        ),
        (
            ("        reference: batch_size", "        reference: batch"),
            "exp.yaml:46: spec.trialTemplate.trialParameters.1.reference: 'batch' is no parameter of spec.parameters",
        ),
    ],
    ids=["algorithm", "distribution", "not-a-tfjob", "reference"],
)
def test_what_a_sweep_cannot_do_is_refused_at_its_line(change, expected):
    found = refusals(WITH_CLAIM.replace(*change))
    assert found[0] == expected, found


def test_import_writes_the_sweep_and_its_notes(tmp_path, capsys):
    path = tmp_path / "experiment.yaml"
    path.write_text(WITH_CLAIM)
    assert cli.main(["import", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"# imported from {path} (Experiment tfjob-mnist-with-summaries)")
    assert load.load_text(out, "sweep.yaml").sweep.name == "tfjob-mnist-with-summaries"
    assert f"note: {path}:17: spec.metricsCollectorSpec: Katib's TensorFlowEvent collector" in err
