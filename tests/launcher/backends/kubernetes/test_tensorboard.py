"""`tensorboard`'s pod, from the rendered cluster: Pod Security `restricted`, the checkpoint
volume read-only, owned by the root, refused on an emptyDir, gs:// read directly; neither the
NetworkPolicies nor the status rules take it for a task."""

import json
from pathlib import Path

import pytest
from render.test_network_policy import _selects
from status.test_lifecycle import job, jobset, pod
from support import assert_pod_security_restricted

from launcher import k8s_contract
from launcher.backends.kubernetes.tensorboard import success_template
from launcher.cluster_spec.loader import load_file, load_text
from launcher.errors import LauncherError
from launcher.plan.plan import plan
from launcher.render import render, tensorboard
from launcher.status.lifecycle import compute_jobset_status, compute_status

PS_EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "ps.yaml"
ROOT_UID = "0b5e3c7e-1111-4d2a-9c55-4a5b6c7d8e9f"


def _cluster(spec) -> tuple[dict, dict, list[dict]]:
    """(root as the API server returns it, the chief Job's pod template, all objects)."""
    objects = render.render(plan(spec))
    root = {**objects[0], "metadata": {**objects[0]["metadata"], "uid": ROOT_UID}}
    [chief] = [
        o for o in objects if o["kind"] == "Job" and o["metadata"]["labels"][k8s_contract.LABEL_COMPONENT] == "chief"
    ]
    return root, chief["spec"]["template"], objects


def _pod(spec) -> dict:
    root, template, _ = _cluster(spec)
    return tensorboard.tensorboard_pod(spec.name, spec.namespace, template, root)


def _with(spec, **changes):
    data = spec.model_dump(by_alias=True, mode="json")
    return load_text(json.dumps({**data, **changes}))


def test_pod_passes_pod_security_restricted():
    pod_spec = _pod(load_file(PS_EXAMPLE))["spec"]
    assert_pod_security_restricted(pod_spec)
    assert pod_spec["securityContext"]["runAsUser"] == 1000
    [container] = pod_spec["containers"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["automountServiceAccountToken"] is False


def test_reads_the_clusters_claim_read_only_at_its_mount_path():
    spec = load_file(PS_EXAMPLE)
    pod_spec = _pod(spec)["spec"]
    [container] = pod_spec["containers"]
    assert container["image"] == spec.image
    assert container["command"] == [
        "python",
        "-m",
        "tensorboard.main",
        "--logdir",
        "/ckpt/default/mnist-ps",
        "--host",
        "127.0.0.1",
        "--port",
        "6006",
    ]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/ckpt"]["readOnly"] is True
    assert volumes[mounts["/ckpt"]["name"]]["persistentVolumeClaim"] == {"claimName": "tfk8s-checkpoints"}
    # Every writable path is its own emptyDir (the root filesystem is read-only).
    assert [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")] == ["/tmp"]
    assert pod_spec["activeDeadlineSeconds"] == tensorboard.DEADLINE_SECONDS


def test_owned_by_the_clusters_root_and_labelled_as_its_tensorboard():
    metadata = _pod(load_file(PS_EXAMPLE))["metadata"]
    assert metadata["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "mnist-ps", "uid": ROOT_UID, "blockOwnerDeletion": True}
    ]
    assert metadata["generateName"] == "mnist-ps-tensorboard-"
    assert metadata["namespace"] == "default"
    labels = metadata["labels"]
    assert labels[k8s_contract.LABEL_INSTANCE] == "mnist-ps"
    assert labels[k8s_contract.LABEL_COMPONENT] == "tensorboard"


def test_emptydir_checkpoint_dir_is_refused_with_the_fix():
    spec = _with(
        load_file(PS_EXAMPLE),
        checkpoint={"dir": "/ckpt/model"},
        roles={"chief": {"replicas": 1}, "worker": {"replicas": 1}, "ps": {"replicas": 1}},
    )
    with pytest.raises(LauncherError, match="emptyDir") as caught:
        _pod(spec)
    assert "persistentVolumeClaim" in str(caught.value) and "gs://" in str(caught.value)


def test_gs_dir_is_read_directly_with_the_clusters_service_account():
    spec = _with(load_file(PS_EXAMPLE), checkpoint={"dir": "gs://bucket/runs/m"}, serviceAccountName="trainer")
    pod_spec = _pod(spec)["spec"]
    [container] = pod_spec["containers"]
    assert container["command"][3:5] == ["--logdir", "gs://bucket/runs/m"]
    assert [v["name"] for v in pod_spec["volumes"]] == ["tmp"]
    assert pod_spec["serviceAccountName"] == "trainer"


def test_jobset_cluster_reads_the_chief_template_from_the_jobset():
    spec = _with(load_file(PS_EXAMPLE), workload="jobset")
    objects = render.render(plan(spec))
    [root] = [o for o in objects if o["kind"] == "JobSet"]
    template = success_template(None, spec.namespace, spec.name, root)  # no API call needed
    assert template["metadata"]["labels"][k8s_contract.LABEL_COMPONENT] == "chief"
    assert tensorboard.model_dir(template) == "/ckpt/default/mnist-ps"


def test_no_network_policy_selects_it():
    spec = load_file(PS_EXAMPLE)
    root, template, objects = _cluster(spec)
    labels = tensorboard.tensorboard_pod(spec.name, spec.namespace, template, root)["metadata"]["labels"]
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert len(policies) == 3  # gRPC, no-ingress (evaluator), metrics
    assert not any(_selects(p["spec"]["podSelector"], labels) for p in policies)


def test_status_ignores_a_tensorboard_pod():
    board = pod("tensorboard")
    pending = compute_status("c", "ns", [job("chief"), job("worker")], [board])
    assert pending.phase == "Pending"
    done = compute_jobset_status(
        "c",
        "ns",
        jobset(("Completed", "AllJobsCompleted", "")),
        [job("chief", condition="Complete")],
        [pod("chief", phase="Succeeded", exit_code=0), board],
        None,
    )
    assert done.phase == "Succeeded"
