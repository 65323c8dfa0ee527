"""What a newcomer meets on a first local run: a pod's mount paths are dirs of the run (never
this machine's root), `delete` says what it removed and kept, and the same spec resubmitted
after a failure names --replace; a program that prints no progress lines shows its newest
checkpoint's step, and a training that says nothing for a while is said to, with the likely cause."""

from __future__ import annotations

import io
import os
import sys
import uuid

import pytest
from local_clusters import LocalBackend, LocalProcessBackendConfig, run_files, wait_until

from launcher import cli
from launcher.cluster_spec.spec import SHARED_DISK, ClusterSpec
from launcher.status import progress
from launcher.status.progress import SERVER_STARTED
from launcher.status.status import ClusterStatus, Phase, RoleStatus

# Writes a file under each path it is given: --model-dir's (an option's value), --out=<path>'s
# and $DATA_DIR's.
WRITER = """
import os, pathlib, sys
model_dir, out = sys.argv[2], sys.argv[3].split("=", 1)[1]
data_in = pathlib.Path(os.environ["DATA_DIR"]) / "seen"
for path in (pathlib.Path(model_dir) / "ckpt-1.index", pathlib.Path(out), data_in):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("written")
    print("wrote", path, flush=True)
"""


def writer_spec(name: str, mount: str, command: str = WRITER) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": name,
            "strategy": "mirrored",
            "image": "example.com/byo:1",
            "command": [sys.executable, "-c", command],
            "args": ["--model-dir", f"{mount}/model", f"--out={mount}/data/out.txt"],
            "env": {"DATA_DIR": f"{mount}/data/in"},
            "checkpoint": {"volume": {"persistentVolumeClaim": {"claimName": "train"}, "mountPath": mount}},
            "roles": {
                "chief": {
                    "replicas": 1,
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                    "volumeMounts": [{"name": "data", "mountPath": f"{mount}/data"}],
                }
            },
        }
    )


def test_a_pods_mount_paths_are_dirs_of_the_run_and_delete_keeps_them(backend, workdir, tmp_path):
    mount = f"/tfk8s-first-day-{uuid.uuid4().hex[:8]}"  # a dir of this machine's root, if it were written
    backend.submit(writer_spec("mounts", mount))
    assert backend.wait("mounts") == 0
    run = workdir / "mounts"
    mounts = run / "mounts"
    assert (mounts / mount.lstrip("/") / "model" / "ckpt-1.index").read_text() == "written"
    # the longest mount path wins: <mount>/data is the role's volumeMount, not the claim's dir
    data = mounts / mount.lstrip("/") / "data"
    assert (data / "out.txt").read_text() == "written" and (data / "in" / "seen").exists()
    assert not os.path.exists(mount), "a task wrote into this machine's root"
    said = (tmp_path / "cluster-output.log").read_text()
    assert (
        f"note: --local: checkpoint.volume.mountPath {mount} is {mounts / mount.lstrip('/')} here "
        f"(made empty at start, kept by delete): args and env values under {mount} name it, so nothing "
        f"is written to this machine's {mount}"
    ) in said
    assert f"note: --local: roles.chief.volumeMounts.0.mountPath {mount}/data is {data} here" in said
    assert "volumeMounts: the tasks see this machine's files" not in said

    out = io.StringIO()
    LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True), stream=out).delete("mounts")
    assert out.getvalue().splitlines() == [
        f"deleted local cluster 'mounts': logs/, metrics.json, pids/, spec.json, spec.sha256, status.json of {run}; "
        "kept model/ and mounts/ (the checkpoints a resubmitted spec resumes from; remove by hand to start from "
        "scratch)"
    ]
    assert (mounts / mount.lstrip("/") / "model" / "ckpt-1.index").exists()


def test_the_same_spec_after_a_failure_names_replace(backend, workdir):
    spec = writer_spec("fails", "/train", command="import sys; sys.exit(3)").model_copy(update={"backoff_limit": 0})
    backend.submit(spec)
    assert backend.wait("fails") == 3
    out = io.StringIO()
    again = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True), stream=out)
    again.submit(spec)
    assert out.getvalue().splitlines()[-2:] == [
        "local cluster 'fails' is unchanged (Failed); nothing started",
        "cluster 'fails' ended Failed: submit --replace deletes it and runs this spec again (the model dir is kept: "
        f"it resumes from its checkpoints); `python -m launcher status fails --workdir {workdir}` says why it failed",
    ]


def test_logs_without_a_role_shows_the_chief_and_says_so(backend, workdir, capsys):
    spec = writer_spec("talks", "/train", command="print('from the chief', flush=True)")
    backend.submit(spec)
    assert backend.wait("talks") == 0
    assert cli.main(["logs", "talks", "--local", "--workdir", str(workdir)]) == 0
    shown = capsys.readouterr()
    assert "from the chief\n" in shown.out
    assert shown.err == (
        "chief-0's log (the chief; --role ROLE --index N for another task's, --all for every task's)\n"
    )


def test_without_a_chief_logs_shows_worker_0():
    mwms = ClusterStatus("m", "local", Phase.RUNNING, roles=[RoleStatus("worker", 2), RoleStatus("evaluator", 1)])
    assert cli.log_role(mwms) == "worker"
    ps = ClusterStatus("p", "local", Phase.RUNNING, roles=[RoleStatus("chief", 1), RoleStatus("worker", 2)])
    assert cli.log_role(ps) == "chief"


# A program of your own that saves a TF checkpoint (step 7) under the claim's mount path and then
# says nothing: its step is the checkpoint's.
SAVES_THEN_WAITS = """
import sys, time
import tensorflow as tf
step = tf.Variable(7, dtype=tf.int64)
manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), sys.argv[2], max_to_keep=1)
manager.save(checkpoint_number=7)
print("saved", flush=True)
time.sleep(600)
"""
# The TensorFlow tutorial's parameter-server shape: ps and workers serve, only a chief trains.
PS_PROGRAM = """
import tensorflow as tf
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if resolver.task_type in ("worker", "ps"):
    tf.distribute.Server(
        resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id, protocol="grpc"
    ).join()
"""


@pytest.mark.process
def test_a_quiet_program_shows_its_newest_checkpoints_step_and_says_it_is_quiet(backend, workdir, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_SECONDS", 3.0)
    backend.submit(writer_spec("saves", "/train", command=SAVES_THEN_WAITS))
    log = run_files(backend, "saves").log_path("chief", 0)
    wait_until(lambda: "saved" in log.read_text(), 120, "the checkpoint")
    wait_until(lambda: backend.status("saves").message, 30, "the quiet note")
    status = backend.status("saves")
    assert status.training.summary() == "step 7 (its newest checkpoint, mounts/train/model/ckpt-7)"
    assert status.message.startswith("no step and no checkpoint since ")
    assert status.message.endswith(
        " (over 3 s) (a program of your own shows its step by progress lines, docs/watching.md)"
    )
    backend.delete("saves")


@pytest.mark.process
def test_a_parameter_server_program_run_as_multi_worker_mirrored_is_said_to_wait_as_servers(
    backend, workdir, monkeypatch
):
    monkeypatch.setattr(progress, "QUIET_SECONDS", 3.0)
    spec = ClusterSpec.model_validate(
        {
            "name": "ps-as-mwms",
            "strategy": "multi_worker_mirrored",
            "command": [sys.executable, "-c", PS_PROGRAM],
            "roles": {"worker": {"replicas": 2}},
        },
        context={SHARED_DISK: True},
    )
    backend.submit(spec)
    files = run_files(backend, "ps-as-mwms")
    wait_until(
        lambda: all(SERVER_STARTED in files.log_path("worker", i).read_text() for i in (0, 1)), 180, "the servers"
    )
    wait_until(lambda: backend.status("ps-as-mwms").message, 30, "the quiet note")
    message = backend.status("ps-as-mwms").message
    assert "every task alive (worker-0, worker-1) ends its log with TF's 'Started server with target'" in message
    assert "needs strategy: parameter_server with a chief" in message
    backend.delete("ps-as-mwms")
