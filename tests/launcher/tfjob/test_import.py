"""`python -m launcher import tfjob.yaml`: the corpus of TFJobs (corpus/*.yaml: PS with an
evaluator, MWMS on GPUs, Master with ExitCode, Estimator-style worker-only, data claims and pod
fields, Kueue with a priority class, a List) converted to golden cluster.yamls and notes; each
written cluster.yaml loads and renders; `submit TFJOB --dry-run client` renders what `render` of
the imported file does; each field that cannot be mapped exits 2 naming its path and line."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from launcher import cli
from launcher.api import TFK8sClient
from launcher.cluster_spec.loader import load_text
from launcher.cluster_spec.tfjob.document import import_text
from launcher.errors import SpecError
from launcher.plan import storage
from launcher.plan.plan import plan
from launcher.render import render

HERE = Path(__file__).parent
CORPUS = sorted((HERE / "corpus").glob("*.yaml"))
GOLDEN = HERE / "golden"
# The corpus TFJobs that mount no claim every task writes: like their TFJob, a replaced pod of
# theirs starts without the old checkpoints, and render says so.
NO_SHARED_CLAIM = {"estimator-worker", "master-exitcode", "list"}


def _imported(path: Path):
    return import_text(path.read_text(), f"corpus/{path.name}")


@pytest.mark.parametrize("tfjob", CORPUS, ids=lambda p: p.stem)
def test_golden_conversion(tfjob):
    imported = _imported(tfjob)
    text = "---\n".join(one.text for one in imported)
    notes = "".join(f"note: {note}\n" for one in imported for note in one.notes)
    for suffix, got in ((".yaml", text), (".notes", notes)):
        golden = GOLDEN / (tfjob.stem + suffix)
        if os.environ.get("TFK8S_UPDATE_GOLDEN") == "1":
            golden.parent.mkdir(exist_ok=True)
            golden.write_text(got)
        assert golden.exists(), f"no golden file; run with TFK8S_UPDATE_GOLDEN=1 to create {golden}"
        assert got == golden.read_text(), f"import of {tfjob.name} changed; review, rerun with TFK8S_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("tfjob", CORPUS, ids=lambda p: p.stem)
def test_each_note_is_one_line_on_stderr_and_a_comment_in_the_yaml(tfjob, capsys):
    assert cli.main(["import", str(tfjob)]) == 0
    out, err = capsys.readouterr()
    imported = TFK8sClient.import_tfjob(tfjob)
    assert out == "---\n".join(one.text for one in imported)
    assert err.splitlines() == [f"note: {note}" for one in imported for note in one.notes]
    for one in imported:
        comments = [line.strip() for line in one.text.splitlines() if line.lstrip().startswith("# ")]
        for note in one.notes:  # "file:line: path: text" -> "# path: text"
            assert "# " + note.split(": ", 1)[1] in comments, note


@pytest.mark.parametrize("tfjob", CORPUS, ids=lambda p: p.stem)
def test_the_written_cluster_yaml_loads_and_renders_with_no_undeserved_warning(tfjob):
    for one in _imported(tfjob):
        spec = load_text(one.text, filename="cluster.yaml")
        assert render.render(plan(spec))
        warned = storage.ephemeral_warning(spec) is not None
        assert warned == (tfjob.stem in NO_SHARED_CLAIM), (tfjob.name, storage.ephemeral_warning(spec))


@pytest.mark.parametrize("tfjob", [p for p in CORPUS if p.stem != "list"], ids=lambda p: p.stem)
def test_submit_of_a_tfjob_renders_what_render_of_its_import_does(tfjob, tmp_path, capsys):
    assert cli.main(["import", str(tfjob)]) == 0
    imported = tmp_path / "cluster.yaml"
    imported.write_text(capsys.readouterr().out)
    assert cli.main(["render", str(imported)]) == 0
    rendered = capsys.readouterr().out
    assert cli.main(["submit", str(tfjob), "--dry-run", "client"]) == 0
    submitted, notes = capsys.readouterr()
    assert submitted == rendered
    assert notes.startswith("note: ") and "strategy " in notes  # the import's notes, as `import` says them


def test_submit_refuses_a_file_of_several_tfjobs(capsys):
    assert cli.main(["submit", str(HERE / "corpus" / "list.yaml"), "--dry-run", "client"]) == 2
    assert "holds 2 TFJobs; a submit takes one" in capsys.readouterr().err


BASE = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: r
spec:
  tfReplicaSpecs:
    Chief:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            image: i
            command: [python, t.py]
"""


@pytest.mark.parametrize(
    "extra, line, path, why",
    [
        ("  enableDynamicWorker: true\n", 15, "spec.enableDynamicWorker", "fixed set of workers"),
        (
            "          - name: redis\n            image: redis\n            ports: [{containerPort: 6379}]\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.1",
            "serves ports the program may talk to",
        ),
        ("          hostNetwork: true\n", 15, "spec.tfReplicaSpecs.Chief.template.spec.hostNetwork", "NetworkPolicy"),
        (
            "            workingDir: /app\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.0.workingDir",
            "absolute paths",
        ),
        (
            "            resources: {limits: {amd.com/gpu: 1}}\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.0.resources.limits.amd.com/gpu",
            "asks only for",
        ),
        (
            "            securityContext: {privileged: true}\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.0.securityContext.privileged",
            "restricted",
        ),
        (
            "            env: [{name: TF_CONFIG, value: '{}'}]\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.0.env.0",
            "set by tfk8s",
        ),
        ("  runPolicy: {suspend: true}\n", 15, "spec.runPolicy.suspend", "no suspended submit"),
        (
            "          priorityClassName: low\n  runPolicy: {schedulingPolicy: {priorityClass: high}}\n",
            7,
            "spec.tfReplicaSpecs.Chief",
            "the pods' priorityClassName low is not the runPolicy's high",
        ),
        (
            "  runPolicy: {schedulingPolicy: {minAvailable: 2}}\n",
            15,
            "spec.runPolicy.schedulingPolicy.minAvailable",
            "gang scheduling is Kueue's",
        ),
        (
            "    Master:\n      replicas: 1\n"
            "      template: {spec: {containers: [{name: tensorflow, command: [a]}]}}\n",
            15,
            "spec.tfReplicaSpecs.Master",
            "one role",
        ),
        (
            "    Evaluator:\n      replicas: 1\n"
            "      template: {spec: {containers: [{name: tensorflow, image: i, command: [e]}]}}\n",
            None,
            "",
            "as cluster.yaml, checkpoint.volume: the evaluator reads the chief's checkpoints",
        ),
    ],
)
def test_a_field_that_cannot_be_mapped_exits_2_with_its_path(extra, line, path, why, tmp_path, capsys):
    tfjob = tmp_path / "tfjob.yaml"
    tfjob.write_text(BASE + extra)
    assert cli.main(["import", str(tfjob)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [problem] = err.splitlines()
    where = f"{tfjob}:{line}: {path}: " if line else f"{tfjob}: "
    assert problem.startswith(f"error: {where}") and why in problem, problem


def test_a_chief_without_a_command_is_refused():
    text = BASE.replace("            command: [python, t.py]\n", "")
    with pytest.raises(SpecError) as caught:
        import_text(text, "tfjob.yaml")
    [problem] = caught.value.problems
    assert problem.path == "spec.tfReplicaSpecs.Chief.template.spec.containers"
    assert "no command (the image's entrypoint ran)" in problem.message


def test_other_objects_of_the_file_are_named_not_dropped():
    claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\n"
    [imported] = import_text(claim + "---\n" + BASE, "tfjob.yaml")
    assert imported.notes[0] == "tfjob.yaml:2: PersistentVolumeClaim data: not a TFJob, left out: apply it yourself"
    assert load_text(imported.text).name == "r"


def test_a_file_without_a_tfjob_is_refused():
    with pytest.raises(SpecError, match=r"no TFJob \(kubeflow.org/v1\) in the file"):
        import_text(textwrap.dedent("apiVersion: v1\nkind: ConfigMap\n"), "cm.yaml")
