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
import yaml

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
        (  # a privileged sidecar: the launcher's rule for a container a podTemplate adds (#61)
            "          - name: side\n            image: evil\n            securityContext: {privileged: true}\n",
            7,
            "spec.tfReplicaSpecs.Chief",
            "a container added to the pod is Pod Security restricted too: set privileged to false or remove it "
            "(tfk8s's roles.chief.podTemplate.spec.initContainers.0.securityContext.privileged)",
        ),
        (
            "          - name: redis\n            image: redis\n            ports: [{containerPort: 6379}]\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.1",
            "serves ports the program may talk to",
        ),
        ("          hostNetwork: true\n", 15, "spec.tfReplicaSpecs.Chief.template.spec.hostNetwork", "NetworkPolicy"),
        (
            "            resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]\n",
            15,
            "spec.tfReplicaSpecs.Chief.template.spec.containers.0.resizePolicy",
            "not mapped",
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
            "          securityContext: {runAsUser: 1}\n    Evaluator:\n      replicas: 1\n      template:\n"
            "        spec:\n          securityContext: {runAsUser: 2}\n"
            "          containers: [{name: tensorflow, image: i, command: [e]}]\n",
            7,
            "spec.tfReplicaSpecs.Chief",
            "the replicas run as different users",
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


def test_a_container_without_a_command_runs_its_image_entrypoint():
    text = BASE.replace("            command: [python, t.py]\n", "            args: [--steps, '5']\n")
    # the image not on this machine: command [] (the ENTRYPOINT, the args kept), said
    spec, notes = _one(text)
    assert spec["command"] == [] and spec["args"] == ["--steps", "5"] and spec.get("workload", "jobs") == "jobs"
    assert any("no command: each task runs its image's ENTRYPOINT" in n for n in notes), notes
    job = next(d for d in render.render(plan(load_text(yaml.safe_dump(spec)))) if d["kind"] == "Job")
    [task] = [c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "tensorflow"]
    assert "command" not in task and task["args"] == ["--steps", "5"]
    # the image here (what docker image inspect said of it): the entrypoint written out
    [imported] = import_text(text, "tfjob.yaml", image_command=lambda image: (["python", "-m", "m"], ["x"], "here"))
    spec = load_text(imported.text)
    assert spec.command == ["python", "-m", "m"] and spec.args == ["--steps", "5"]  # args given: CMD not used


def test_parameter_servers_running_an_image_entrypoint_run_as_a_jobset():
    ps = BASE.replace("            command: [python, t.py]\n", "") + (
        "    PS:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
        "          - {name: tensorflow, image: i}\n"
        "    Worker:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
        "          - {name: tensorflow, image: i}\n"
    )
    spec, notes = _one(ps)
    assert spec["workload"] == "jobset" and spec["command"] == []
    assert any("runs as one JobSet (workload: jobset; needs JobSet installed)" in n for n in notes), notes
    with pytest.raises(SpecError, match="set workload: jobset"):
        load_text(yaml.safe_dump({**spec, "workload": "jobs"}))


def test_other_objects_of_the_file_are_named_not_dropped():
    claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\n"
    [imported] = import_text(claim + "---\n" + BASE, "tfjob.yaml")
    assert imported.notes[0] == "tfjob.yaml:2: PersistentVolumeClaim data: not a TFJob, left out: apply it yourself"
    assert load_text(imported.text).name == "r"


def test_a_file_without_a_tfjob_is_refused():
    with pytest.raises(SpecError, match=r"no TFJob \(kubeflow.org/v1\) in the file"):
        import_text(textwrap.dedent("apiVersion: v1\nkind: ConfigMap\n"), "cm.yaml")


def _one(text: str) -> tuple[dict, tuple[str, ...]]:
    [imported] = import_text(text, "tfjob.yaml", make_name=lambda prefix: prefix + "abcde")
    return load_text(imported.text).model_dump(mode="json", by_alias=True, exclude_none=True), imported.notes


@pytest.mark.parametrize("version", ["kubeflow.org/v1beta1", "kubeflow.org/v1beta2", "kubeflow.org/v1alpha2"])
def test_the_old_api_versions_and_the_layout_before_run_policy_are_read_as_v1(version):
    text = BASE.replace("kubeflow.org/v1", version).replace(
        "spec:\n  tfReplicaSpecs:", "spec:\n  cleanPodPolicy: None\n  backoffLimit: 2\n  tfReplicaSpecs:"
    )
    assert version in text and "  cleanPodPolicy: None" in text
    spec, notes = _one(text.replace("      replicas: 1\n", "      replicas: 1\n      restartPolicy: OnFailure\n"))
    assert spec["backoffLimit"] == 2
    assert any(f"apiVersion: {version} read as kubeflow.org/v1" in n for n in notes), notes
    assert any("spec.backoffLimit, spec.cleanPodPolicy: read as spec.runPolicy's" in n for n in notes), notes


def test_generate_name_gives_a_name_as_kubectl_create_does_and_generated_fields_are_ignored():
    text = BASE.replace("  name: r\n", "  generateName: mnist-\n").replace(
        "      template:\n", "      template:\n        metadata: {creationTimestamp: null}\n"
    )
    assert "generateName" in text and "creationTimestamp" in text
    spec, notes = _one(text)
    assert spec["name"] == "mnist-abcde"
    assert any("the name mnist-abcde was made from it" in n for n in notes), notes
    [imported] = import_text(text, "tfjob.yaml")  # the default: random, as the API server makes it
    name = load_text(imported.text).name
    assert name.startswith("mnist-") and len(name) == len("mnist-") + 5 and name != "mnist-abcde"


def test_restart_policy_never_fails_the_cluster_at_the_first_failure_and_no_limit_is_said():
    spec, notes = _one(BASE)  # no restartPolicy: TFJob's default, Never
    assert spec["restartPolicy"] == "Never" and spec["backoffLimit"] == 0
    assert any("the first failed pod fails the cluster, as under TFJob" in n for n in notes), notes
    spec, notes = _one(BASE.replace("      replicas: 1\n", "      replicas: 1\n      restartPolicy: OnFailure\n"))
    assert spec["restartPolicy"] == "OnFailure" and spec["backoffLimit"] == 6
    assert any("TFJob restarted failed pods without a limit" in n for n in notes), notes


def test_an_untagged_image_keeps_kubernetes_pull_policy_and_a_tagged_one_its_own():
    spec, notes = _one(BASE)
    assert spec["imagePullPolicy"] == "Always"  # image `i`: no tag
    assert any("i has no tag: pulled Always" in n for n in notes), notes
    spec, _ = _one(BASE.replace("image: i\n", "image: i:2.1\n"))
    assert spec["imagePullPolicy"] == "IfNotPresent"


def test_the_written_yaml_has_no_anchors_where_worker_0_became_the_chief():
    ps = BASE + (
        "    Worker:\n      replicas: 3\n      template:\n        spec:\n          containers:\n"
        "          - {name: tensorflow, image: i, command: [python, t.py], resources: {limits: {cpu: '1'}}}\n"
        "    PS:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
        "          - {name: tensorflow, image: i, command: [python, t.py]}\n"
    )
    ps = ps.replace(
        "    Chief:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
        "          - name: tensorflow\n            image: i\n            command: [python, t.py]\n",
        "",
    )
    assert "Chief" not in ps
    [imported] = import_text(ps, "tfjob.yaml")
    assert "&id" not in imported.text and "*id" not in imported.text, imported.text
    spec = load_text(imported.text)
    assert spec.roles.chief.replicas == 1 and spec.roles.worker.replicas == 2


def test_working_dir_is_carried():
    spec, _ = _one(
        BASE.replace(
            "            command: [python, t.py]\n",
            "            command: [python, t.py]\n            workingDir: /app\n",
        )
    )
    assert spec["workingDir"] == "/app"
    job = next(d for d in render.render(plan(load_text(yaml.safe_dump(spec)))) if d["kind"] == "Job")
    [container] = [c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "tensorflow"]
    assert container["workingDir"] == "/app"


def test_every_refusal_comes_in_one_round_each_at_its_tfjob_line():
    text = BASE.replace(
        "  tfReplicaSpecs:", "  runPolicy: {suspend: true}\n  enableDynamicWorker: true\n  tfReplicaSpecs:"
    ).replace("          containers:\n", "          hostNetwork: true\n          containers:\n")
    with pytest.raises(SpecError) as caught:
        import_text(text, "tfjob.yaml")
    paths = {p.path for p in caught.value.problems}
    assert paths == {
        "spec.enableDynamicWorker",
        "spec.tfReplicaSpecs.Chief.template.spec.hostNetwork",
        "spec.runPolicy.suspend",
    }, [str(p) for p in caught.value.problems]
    assert all(p.line for p in caught.value.problems), [str(p) for p in caught.value.problems]


def test_a_command_of_your_own_with_an_evaluator_and_no_shared_claim_imports_with_one_warning(capsys):
    text = BASE + (
        "    Evaluator:\n      replicas: 1\n"
        "      template: {spec: {containers: [{name: tensorflow, image: i, command: [e]}]}}\n"
    )
    [imported] = import_text(text, "tfjob.yaml")
    spec = load_text(imported.text)
    assert storage.unshared_warning(spec).startswith("checkpoint.volume: without a volume each pod gets its own")
    assert "Where your program keeps its checkpoints is its business" in storage.ephemeral_warning(spec)


def test_a_tfjob_alias_bomb_is_refused_before_it_expands():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    text = BASE.replace(
        "spec:\n  tfReplicaSpecs:", "spec:\n  x:\n" + textwrap.indent(bomb, "    ") + "  tfReplicaSpecs:"
    )
    with pytest.raises(SpecError, match="YAML aliases"):
        import_text(text, "tfjob.yaml")
    with pytest.raises(SpecError, match="over the 256 KiB"):
        import_text(BASE + "#" * (300 * 1024), "tfjob.yaml")
