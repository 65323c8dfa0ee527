"""Rendering: golden files per example, Pod Security `restricted`, ownership, O(N) size."""
import json
import os
from pathlib import Path

import pytest
import yaml

from launcher import render
from launcher.loader import load_file, load_text

GOLDEN = Path(__file__).parent / "golden"
EXAMPLES = sorted(Path("examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_golden(example):
    text = render.to_yaml(render.render(load_file(example)))
    golden = GOLDEN / f"{example.stem}.yaml"
    if os.environ.get("TFK8S_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert golden.exists(), f"no golden file; run with TFK8S_UPDATE_GOLDEN=1 to create {golden}"
    assert text == golden.read_text(), (
        f"render of {example} changed; review and rerun with TFK8S_UPDATE_GOLDEN=1")


def _pods(objects):
    return [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Job"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_pods_pass_pod_security_restricted(example):
    for pod in _pods(render.render(load_file(example))):
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
        # restricted allows only these volume types
        allowed = {"configMap", "emptyDir", "persistentVolumeClaim", "secret", "projected",
                   "downwardAPI", "csi", "ephemeral"}
        for v in pod["volumes"]:
            assert set(v) - {"name"} <= allowed, v


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_labels_and_valid_json_tf_config(example):
    spec = load_file(example)
    objects = render.render(spec)
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == spec.name
        assert labels["app.kubernetes.io/managed-by"] == "tfk8s"
        assert obj["metadata"]["namespace"] == spec.namespace
    for cfg in render.pod_tf_configs(spec, objects).values():
        json.dumps(cfg)  # expanded per pod, it is plain JSON


def test_rbac_is_least_privilege():
    objects = render.render(load_file("examples/ps.yaml"))
    [role] = [o for o in objects if o["kind"] == "Role"]
    assert role["rules"] == [{"apiGroups": ["batch"], "resources": ["jobs"],
                              "resourceNames": ["mnist-ps-chief"], "verbs": ["get"]}]
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    # Only the supervised pods (workers, ps) get a token at all.
    tokens = {n: j["spec"]["template"]["spec"]["automountServiceAccountToken"] for n, j in jobs.items()}
    assert tokens == {"mnist-ps-chief": False, "mnist-ps-worker": True, "mnist-ps-ps": True,
                      "mnist-ps-evaluator": False}


def test_supervisor_wraps_only_servers():
    objects = render.render(load_file("examples/ps.yaml"))
    commands = {o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["command"]
                for o in objects if o["kind"] == "Job"}
    assert commands["mnist-ps-chief"][:3] == ["python", "-m", "worker"]
    assert commands["mnist-ps-ps"][:3] == ["python3", "/var/run/tfk8s/supervise.py", "--"]


def test_mwms_success_is_worker_zero():
    objects = render.render(load_file("examples/mwms.yaml"))
    [job] = [o for o in objects if o["kind"] == "Job"]
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding", "ServiceAccount")]


def _spec_with_workers(n: int):
    return load_text(
        f"name: big\nstrategy: parameter_server\nroles: {{chief: {{replicas: 1}}, "
        f"worker: {{replicas: {n}}}, ps: {{replicas: 2}}}}\n")


def test_object_count_is_constant_and_bytes_grow_linearly():
    sizes = {}
    for n in (10, 100, 1000):
        objects = render.render(_spec_with_workers(n))
        assert len(objects) == 8  # root, service, sa, role, binding, 3 Jobs
        sizes[n] = len(json.dumps(objects))
    # Linear: 10x the workers costs about 10x the bytes of the per-worker part, not 100x.
    per_worker_100 = (sizes[100] - sizes[10]) / 90
    per_worker_1000 = (sizes[1000] - sizes[100]) / 900
    assert per_worker_1000 == pytest.approx(per_worker_100, rel=0.1)


def test_yaml_output_round_trips():
    objects = render.render(load_file("examples/ps.yaml"))
    assert list(yaml.safe_load_all(render.to_yaml(objects))) == objects
    assert json.loads(render.to_json(objects))["items"] == objects


def test_checkpoint_dir_without_volume_is_an_empty_dir():
    # The image's filesystem is not writable by the non-root user: without a volume the
    # checkpoint dir gets an emptyDir, which survives the chief's restarts in place.
    spec = load_text("name: one\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n"
                     "checkpoint: {dir: /ckpt/run}\n")
    [pod] = _pods(render.render(spec))
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "checkpoint"]
    assert mount["mountPath"] == "/ckpt/run"
    assert {"name": "checkpoint", "emptyDir": {}} in pod["volumes"]
    remote = load_text("name: one\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n"
                       "checkpoint: {dir: gs://bucket/run}\n")
    [pod] = _pods(render.render(remote))
    assert all(v["name"] != "checkpoint" for v in pod["volumes"])
