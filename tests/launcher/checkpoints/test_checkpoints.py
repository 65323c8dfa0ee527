"""Where model dirs go by default (launcher/cluster_spec/checkpoints.py), the storage every pod gets, and
what an emptyDir model dir is told (launcher/plan/storage.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from launcher import cli, k8s_contract
from launcher.cluster_spec import loader
from launcher.cluster_spec.spec import ClusterSpec
from launcher.plan import storage
from launcher.plan.plan import plan, task_env
from launcher.pod import supervise
from launcher.render import render
from worker import contract

EXAMPLES = sorted((Path(__file__).parents[3] / "examples").glob("*.yaml"))


def spec(**fields) -> ClusterSpec:
    data = {"name": "run", "strategy": "mirrored", "roles": {"chief": {"replicas": 1}}, **fields}
    return ClusterSpec.model_validate(data)


def test_default_model_dir_is_the_clusters_own():
    assert spec().model_dir == "/ckpt/default/run"
    assert spec(namespace="team-a").model_dir == "/ckpt/team-a/run"
    pvc = {"persistentVolumeClaim": {"claimName": "c"}, "mountPath": "/data//"}
    assert spec(checkpoint={"volume": pvc}).model_dir == "/data/default/run"
    assert spec(checkpoint={"volume": pvc}).checkpoint.dir is None  # not spelled into the spec


def test_explicit_dirs_are_kept():
    assert spec(checkpoint={"dir": "gs://b/x"}).model_dir == "gs://b/x"
    assert spec(checkpoint={"dir": "/ckpt/mine"}).model_dir == "/ckpt/mine"


def test_every_task_gets_the_model_dir_and_whose_it_is():
    env = task_env(spec(namespace="ns1"), "chief")
    assert env[contract.MODEL_DIR] == "/ckpt/ns1/run"
    assert (env[contract.CLUSTER_NAME], env[contract.NAMESPACE]) == ("run", "ns1")
    # The supervisor script cannot import the contract: the same name, spelled twice.
    assert supervise.NAMESPACE_ENV == contract.NAMESPACE


def test_the_emptydir_is_mounted_at_the_default_dir():
    objects = render.render(plan(spec()))
    job = next(o for o in objects if o["kind"] == "Job")
    mounts = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "checkpoint", "mountPath": "/ckpt/default/run"} in mounts


@pytest.mark.parametrize(
    "checkpoint, source, mount",
    [
        ({}, {"emptyDir": {}}, "/ckpt/default/run"),
        (
            {"volume": {"persistentVolumeClaim": {"claimName": "c"}}},
            {"persistentVolumeClaim": {"claimName": "c"}},
            "/ckpt",
        ),
        (
            {"volume": {"hostPath": {"path": "/data"}, "mountPath": "/m"}},
            {"hostPath": {"path": "/data", "type": "DirectoryOrCreate"}},
            "/m",
        ),
        ({"dir": "gs://b/x"}, None, None),
    ],
    ids=["emptyDir", "claim", "hostPath", "gs"],
)
def test_every_pod_mounts_what_the_storage_plan_decided(checkpoint, source, mount):
    """One decision (plan/storage.py), laid out by render for every role, read back by status."""
    cluster_spec = spec(strategy="parameter_server", roles=PS_ROLES, checkpoint=checkpoint)
    decided = storage.storage_plan(cluster_spec)
    assert decided.mount_path == mount
    jobs = [o for o in render.render(plan(cluster_spec)) if o["kind"] == "Job"]
    assert len(jobs) == 3
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        [container] = [c for c in pod["containers"] if c["name"] == k8s_contract.CONTAINER]
        volumes = [] if source is None else [{"name": storage.VOLUME_NAME, **source}]
        mounts = [] if mount is None else [{"name": storage.VOLUME_NAME, "mountPath": mount}]
        assert [v for v in pod["volumes"] if v["name"] == storage.VOLUME_NAME] == volumes
        assert [m for m in container["volumeMounts"] if m["name"] == storage.VOLUME_NAME] == mounts
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[contract.MODEL_DIR] == decided.model_dir
    notes = storage.storage_notes([job["spec"] for job in jobs])
    assert notes == ([storage.EPHEMERAL_NOTE] if decided.ephemeral else [])


PS_ROLES = {"chief": {"replicas": 1}, "worker": {"replicas": 2}, "ps": {"replicas": 1}}


def test_no_two_examples_share_a_model_dir():
    specs = [loader.load_file(path) for path in EXAMPLES]
    default = resources.files("launcher").joinpath("default-cluster.yaml").read_text()
    specs.append(loader.load_text(default, filename="<embedded default>"))
    places = [(s.checkpoint.volume, s.model_dir) for s in specs]
    assert len(set(map(repr, places))) == len(places), places


def test_emptydir_warning_names_the_field_the_loss_and_the_fix():
    warning = storage.ephemeral_warning(spec())
    assert warning.startswith("checkpoint.volume: not set, so the model dir /ckpt/default/run is an emptyDir")
    assert "trains from step 0 (restartPolicy Never)" in warning
    assert "checkpoint.volume.persistentVolumeClaim.claimName" in warning
    assert "gs:// checkpoint.dir" in warning
    on_failure = storage.ephemeral_warning(spec(restartPolicy="OnFailure"))
    assert "restarted in place keeps it, but an evicted or preempted pod" in on_failure


@pytest.mark.parametrize(
    "checkpoint",
    [
        {"dir": "gs://b/run"},
        {"volume": {"persistentVolumeClaim": {"claimName": "c"}}},
        {"volume": {"hostPath": {"path": "/data"}}},
    ],
)
def test_durable_storage_gets_no_warning(checkpoint):
    durable = spec(checkpoint=checkpoint)
    assert storage.ephemeral_warning(durable) is None
    jobs = [job for _, job in render.job_specs(render.render(plan(durable)))]
    assert storage.storage_notes(jobs) == []


def test_status_notes_read_the_emptydir_back_from_the_jobs():
    jobs = [job for _, job in render.job_specs(render.render(plan(spec())))]
    assert storage.storage_notes(jobs) == [storage.EPHEMERAL_NOTE]


def test_render_warns_on_stderr_and_submit_local_does_not(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("name: run\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n")
    assert cli.main(["render", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == f"warning: {storage.ephemeral_warning(spec())}\n"
    assert "warning" not in out
    assert cli.main(["submit", str(path), "--dry-run", "client"]) == 0
    assert capsys.readouterr().err.startswith("warning: checkpoint.volume: not set")
