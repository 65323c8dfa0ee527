"""Local `delete`, `status`, `logs` stay inside the named run's own dir: a name no spec could have
is refused before any file is touched, a link is never followed, and `delete` signals only the
process it can prove is the run's supervisor (issue 61)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from local_clusters import LocalBackend, LocalProcessBackendConfig, run_files

from launcher import cli
from launcher.backends.local import runner
from launcher.cluster_spec.spec import ClusterSpec
from launcher.errors import LauncherError

ABSOLUTE = "<the victim dir, absolute>"
NOT_NAMES = ["", ".", "..", "../victim", ABSOLUTE, "a/b", "UPPER"]


def byo_spec(name: str, code: str) -> ClusterSpec:
    """A chief that runs `code` with this Python (no TensorFlow)."""
    return ClusterSpec.model_validate(
        {
            "name": name,
            "strategy": "mirrored",
            "command": [sys.executable, "-c", code],
            "roles": {"chief": {"replicas": 1}},
        }
    )


@pytest.fixture
def victim(tmp_path):
    """A dir beside the workdir, and a finished run in the workdir, each with a file that must stay."""
    outside = tmp_path / "victim"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    return outside


def finished_run(workdir, name: str) -> None:
    """A run's files as a finished run leaves them (spec.json, status.json, a log, model/)."""
    files = run_files(LocalBackend(LocalProcessBackendConfig(workdir=workdir)), name)
    files.prepare(byo_spec(name, "print('done')"), "hash")
    files.write_status({"phase": "Succeeded", "roles": [], "exit_code": 0})
    files.log_path("chief", 0).write_text("done\n")
    files.default_model_dir.mkdir()
    (files.default_model_dir / "ckpt").write_text("checkpoint")


@pytest.mark.parametrize("command", [["delete"], ["status"], ["logs", "--role", "chief"]])
@pytest.mark.parametrize("name", NOT_NAMES)
def test_a_name_no_spec_could_have_is_refused_in_one_line(command, name, workdir, victim, capsys):
    finished_run(workdir, "kept")
    name = str(victim) if name == ABSOLUTE else name
    argv = [command[0], name, *command[1:], "--local", "--workdir", str(workdir)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {name!r} is not a cluster name ("), err
    assert (victim / "precious").read_text() == "keep"
    assert sorted(p.name for p in (workdir / "kept").iterdir()) == [
        "logs",
        "model",
        "pids",
        "spec.json",
        "spec.sha256",
        "status.json",
    ]


def test_delete_never_follows_a_link(workdir, victim):
    """A run dir that is a link is refused; a link inside the run's dir is removed, not followed."""
    workdir.mkdir()
    finished_run(workdir, "kept")
    (workdir / "linked").symlink_to(victim)
    (victim / "status.json").write_text(json.dumps({"phase": "Succeeded"}))
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir))
    with pytest.raises(LauncherError, match="is a symbolic link, not a local run's dir; nothing deleted"):
        backend.delete("linked")
    assert sorted(p.name for p in victim.iterdir()) == ["precious", "status.json"]

    (workdir / "kept" / "logs-link").symlink_to(victim)
    backend.delete("kept")
    assert sorted(p.name for p in victim.iterdir()) == ["precious", "status.json"]
    assert sorted(p.name for p in (workdir / "kept").iterdir()) == ["model"]


def test_delete_signals_no_process_that_only_has_the_recorded_pid(workdir):
    """A run whose supervisor is gone and whose pid now belongs to another process (here: a
    sleep of the test's): `delete` removes the run and leaves that process alone, and `status`
    reports the supervisor gone."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        finished_run(workdir, "stale")
        files = run_files(LocalBackend(LocalProcessBackendConfig(workdir=workdir)), "stale")
        started = runner.start_time(stranger.pid)
        for recorded in (None, started - 1):  # a record without the start time, or another one
            files.write_status(
                {"phase": "Running", "roles": [], "supervisor_pid": stranger.pid, "supervisor_started": recorded}
            )
            backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, stop_grace_seconds=1))
            assert backend.status("stale").phase == "Unknown"
        backend.delete("stale")
        assert stranger.poll() is None, "delete signalled a process that was not the run's supervisor"
        assert sorted(p.name for p in (workdir / "stale").iterdir()) == ["model"]
    finally:
        stranger.kill()
        stranger.wait()


def test_delete_still_stops_the_supervisor_it_recorded(workdir):
    """The recorded (pid, start time) of a live detached supervisor: delete stops it."""
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir), stream=open("/dev/null", "w"))
    backend.submit(byo_spec("live", "import time; time.sleep(600)"))
    record = run_files(backend, "live").read_status()
    assert record["supervisor_started"] == runner.start_time(record["supervisor_pid"])
    backend.delete("live")
    assert not runner.alive(record["supervisor_pid"])
