"""Model dirs on a shared volume, with real TF clusters through LocalBackend: default dirs keep
clusters apart, and a dir another cluster (or another training) owns is refused with one line.

A local run keeps its model dir in <workdir>/<name>/model. To put two clusters on one volume
the way Kubernetes does, each run's model/ is a link into one shared directory, at the path
the spec's model dir has under its volume's mountPath.
"""

from __future__ import annotations

import json
import posixpath
import socket
from pathlib import Path

import pytest
from local_clusters import Submission, attempts, make_spec, run_files

from worker.errors import EXIT_CONFIG

pytestmark = pytest.mark.process

ARGS = ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "32", "--data", "digits"]
TIMEOUT = 300
VOLUME = {"persistentVolumeClaim": {"claimName": "shared"}, "mountPath": "/ckpt"}


def on_shared_volume(backend, spec, shared: Path) -> Path:
    """Link the run's model/ to where spec.model_dir lies on the shared volume."""
    place = shared / posixpath.relpath(spec.model_dir, spec.checkpoint.volume.mount_path)
    place.mkdir(parents=True, exist_ok=True)
    link = run_files(backend, spec.name).dir / "model"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(place)
    return place


def spec_of(name, program_args=ARGS, evaluator=False, **checkpoint):
    return make_spec(
        name, "mirrored", program_args, evaluator=evaluator, checkpoint={"volume": VOLUME, **checkpoint}, backoffLimit=3
    )


def log(backend, name, role="chief") -> str:
    return run_files(backend, name).log_path(role, 0).read_text()


def assert_refused(backend, name, code, role="chief"):
    """Exit 2 at once, no retry, and the one line in `status`."""
    status = backend.status(name)
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    chief = next(r for r in status.roles if r.role == role)
    assert chief.failed == 1 and len(attempts(backend, name, role, 0)) == 1, status.roles
    assert "already finished" not in log(backend, name, role)
    return chief.reason


def test_clusters_on_one_volume_get_their_own_dirs_and_refuse_each_others(backend, tmp_path):
    shared = tmp_path / "volume"
    first, second = spec_of("first"), spec_of("second")
    places = [on_shared_volume(backend, s, shared) for s in (first, second)]
    assert places == [shared / "default" / "first", shared / "default" / "second"]
    runs = [Submission(backend, first), Submission(backend, second)]  # at once
    assert [run.wait(TIMEOUT) for run in runs] == [0, 0]
    for spec, place in zip((first, second), places):
        owner = json.loads((place / "OWNER.json").read_text())
        assert (owner["namespace"], owner["cluster"]) == ("default", spec.name)
        assert json.loads((place / "FINAL.json").read_text())["step"] == 20
        assert "already finished" not in log(backend, spec.name)

    # A third cluster pointed at the first's dir: refused, not "already finished".
    third = spec_of("third", evaluator=True, dir="/ckpt/default/first")
    assert on_shared_volume(backend, third, shared) == places[0]
    code = Submission(backend, third).wait(TIMEOUT)
    reason = assert_refused(backend, "third", code)
    print(f"refusal in status: {reason}")
    # `status` keeps MAX_CAUSE_CHARS of it: whose dir it is comes first.
    assert reason.startswith("chief-0: exited 2 (deterministic: not retried): model dir "), reason
    assert "belongs to cluster default/first (OWNER.json of " in reason
    line = [x for x in log(backend, "third").splitlines() if "error:" in x]
    assert len(line) == 1 and line[0].startswith("tfk8s chief-0: error: model dir "), line
    assert line[0].endswith(
        f"or delete {run_files(backend, 'third').dir}/model if default/first's training is no longer needed"
    )
    print(f"refusal line: {line[0]}")
    assert json.loads((places[0] / "OWNER.json").read_text())["cluster"] == "first"


def test_a_rerun_of_the_same_cluster_resumes_and_another_training_is_refused(backend):
    spec = make_spec("again", "mirrored", ARGS, evaluator=False, backoffLimit=3)
    assert Submission(backend, spec).wait(TIMEOUT) == 0
    # Same cluster, same training: a no-op, and with more steps it continues.
    assert Submission(backend, spec, replace=True).wait(TIMEOUT) == 0
    assert "training already finished" in log(backend, "again")
    longer = make_spec(
        "again", "mirrored", [*ARGS[:-2], "--data", "digits", "--steps", "30"], evaluator=False, backoffLimit=3
    )
    assert Submission(backend, longer, replace=True).wait(TIMEOUT) == 0
    starts = [r for r in attempts(backend, "again", "chief", 0)[-1] if r["event"] == "start"]
    assert starts and starts[0]["step"] == 20, starts
    # Another batch size in the same dir: refused, not "already finished".
    other = make_spec(
        "again",
        "mirrored",
        [*ARGS[:4], "--global-batch-size", "16", "--data", "digits", "--steps", "30"],
        evaluator=False,
        backoffLimit=3,
    )
    code = Submission(backend, other, replace=True).wait(TIMEOUT)
    reason = assert_refused(backend, "again", code)
    print(f"refusal in status: {reason}")
    assert "holds another training of default/again (OWNER.json of " in reason
    assert "--global-batch-size 32 there, 16 now" in reason


def test_a_cluster_of_the_same_name_from_another_platform_is_refused_in_one_line(backend):
    """Two Kubernetes clusters (or machines) each running `default/twin` on one gs:// dir or
    shared volume. The first run's record is made to name another platform, as a twin's would;
    the resubmit (this machine, same name, same training) is refused at its first attempt."""
    spec = make_spec("twin", "mirrored", ARGS, evaluator=False, backoffLimit=3)
    assert Submission(backend, spec).wait(TIMEOUT) == 0
    owner_file = run_files(backend, "twin").dir / "model" / "OWNER.json"
    owner = json.loads(owner_file.read_text())
    assert owner["platform"] == f"local:{socket.gethostname()}"
    owner_file.write_text(json.dumps({**owner, "platform": "kubernetes:another-cluster"}))
    code = Submission(backend, spec, replace=True).wait(TIMEOUT)
    reason = assert_refused(backend, "twin", code)
    print(f"refusal in status: {reason}")
    assert "belongs to cluster default/twin on another platform (kubernetes:another-cluster there, " in reason
    line = [x for x in log(backend, "twin").splitlines() if "error:" in x]
    assert len(line) == 1 and line[0].endswith(f"delete {owner_file} (the checkpoints stay)"), line
