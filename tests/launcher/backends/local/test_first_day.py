"""What a newcomer meets on a first local run: a pod's mount paths are dirs of the run (never
this machine's root), `delete` says what it removed and kept, and the same spec resubmitted
after a failure names --replace."""

from __future__ import annotations

import io
import os
import sys
import uuid

from local_clusters import LocalBackend, LocalProcessBackendConfig

from launcher import cli
from launcher.cluster_spec.spec import ClusterSpec
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
