"""The end-of-job supervisor (launcher/supervise.py): exit codes, grace after success/failure.

The supervisor runs as a real process around a real child here. Its API-server side (which Job
state ends the task) is exercised on a real cluster by the kind tier
(tests/kind/test_e2e.py::test_failed_chief_ends_every_pod) and by the scale tier (tests/scale, the
watch code of 1000 simulated pods); here, without an API server, it keeps its child running and
reports that it cannot follow the Job. The watch's decisions are pure and tested here.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher import supervise
from worker.errors import EXIT_PREEMPTED

SUPERVISOR = Path(supervise.__file__)
WAIT_FOR_TERM = "import time; print('up', flush=True); time.sleep(120)"


def start(code: str, **env) -> subprocess.Popen:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    environment.update({"TFK8S_WATCH_JOB": "c-chief", "TFK8S_NAMESPACE": "ns",
                        **env})
    return subprocess.Popen([sys.executable, str(SUPERVISOR), "--", sys.executable, "-c", code],
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_until_up(process: subprocess.Popen) -> None:
    assert process.stdout.readline() == "up\n"


def test_pod_deletion_sigterm_exits_143_like_a_preempted_task():
    """A server killed by the forwarded SIGTERM: 143 (128 + 15), which the podFailurePolicy
    ignores, not sys.exit(-15) = 241, which would count against backoffLimit."""
    process = start(WAIT_FOR_TERM)
    wait_until_up(process)
    # No API server here: it says so and keeps its child serving.
    assert "cannot follow job ns/c-chief: KUBERNETES_SERVICE_HOST is not set" in process.stderr.readline()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM == EXIT_PREEMPTED, err
    assert "task exited with code 143" in err


def test_child_that_saves_and_exits_143_itself():
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
            "print('up', flush=True); time.sleep(120)\n")
    process = start(code)
    wait_until_up(process)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert process.returncode == EXIT_PREEMPTED


@pytest.mark.parametrize("code,expected", [
    ("import sys; sys.exit(3)", 3),
    ("import sys; sys.exit(0)", 0),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + signal.SIGKILL),
])
def test_child_exit_status_passes_through(code, expected):
    process = start(code)
    _, err = process.communicate(timeout=30)
    assert process.returncode == expected, err


def test_exit_status():
    assert supervise.exit_status(-signal.SIGTERM) == 143
    assert supervise.exit_status(-signal.SIGKILL) == 137
    assert supervise.exit_status(4) == 4


def test_grace_only_after_success():
    # Complete / SuccessCriteriaMet: the evaluator may finish evaluating the final checkpoint.
    assert supervise.grace_after("Complete", 600) == 600
    assert supervise.grace_after("SuccessCriteriaMet", 600) == 600
    # Failed / FailureTarget / the Job deleted: no final checkpoint will come; stop at once.
    for state in ("Failed", "FailureTarget", "absent"):
        assert supervise.grace_after(state, 600) == 0


@pytest.mark.parametrize("pod_grace", [1, 2, 10, 30, 120, 3600])
def test_stop_timeout_fits_in_the_pod_grace(pod_grace):
    timeout = supervise.stop_timeout(pod_grace)
    assert 0 < timeout < pod_grace
    assert pod_grace - timeout <= 5


def test_stop_kills_a_child_that_ignores_sigterm_within_the_timeout():
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                              "print('up', flush=True); time.sleep(120)"],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "up\n"
    started = time.monotonic()
    supervise.stop(child, timeout=1.0)
    assert child.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 10


def job(*conditions: tuple[str, str], version: str = "7") -> dict:
    return {"metadata": {"name": "c-chief", "resourceVersion": version},
            "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


@pytest.mark.parametrize("conditions, state", [
    ((), "running"),
    ((("Suspended", "True"),), "running"),
    ((("SuccessCriteriaMet", "True"), ("Complete", "True")), "SuccessCriteriaMet"),
    ((("FailureTarget", "False"), ("Failed", "True")), "Failed"),
])
def test_job_condition(conditions, state):
    assert supervise.job_condition(job(*conditions)) == state


def test_watch_events_give_state_and_resume_version():
    assert supervise.apply_event({"type": "ADDED", "object": job(version="3")}) == ("running", "3")
    assert supervise.apply_event(
        {"type": "MODIFIED", "object": job(("Complete", "True"), version="4")}) == ("Complete", "4")
    assert supervise.apply_event({"type": "DELETED", "object": job(version="5")}) == ("absent", "5")
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Job", "metadata": {"resourceVersion": "9"}}}
    assert supervise.apply_event(bookmark) == (None, "9")


def test_watch_error_events():
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    with pytest.raises(supervise.WatchExpired, match="too old"):
        supervise.apply_event(gone)
    other = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "etcd"}}
    with pytest.raises(RuntimeError, match="watch error 500: etcd"):
        supervise.apply_event(other)


def test_absent_before_seen_is_not_created_yet_and_after_seen_is_the_end():
    assert supervise.training_ended(False, "absent") == (False, False)
    assert supervise.training_ended(False, "running") == (True, False)
    assert supervise.training_ended(True, "absent") == (True, True)
    assert supervise.training_ended(False, "Failed") == (False, True)
    assert supervise.training_ended(True, "Complete") == (True, True)


def test_jobs_path_narrows_to_the_one_name_rbac_allows():
    assert supervise.jobs_path("ns", "c-chief", watch="1", resourceVersion="5") == (
        "/apis/batch/v1/namespaces/ns/jobs?fieldSelector=metadata.name%3Dc-chief"
        "&watch=1&resourceVersion=5")



def attempt_job(attempt: int | None, *conditions: tuple[str, str], where: str = "labels") -> dict:
    obj = job(*conditions)
    if attempt is not None:
        obj["metadata"][where] = {supervise.RESTART_ATTEMPT_KEY: str(attempt)}
    return obj


def test_a_previous_jobset_attempts_job_is_stale_never_the_end():
    """A JobSet restart recreates the evaluator while the last attempt's failed worker Job may
    still be there: its Failed must not stop the new evaluator."""
    old_failed = attempt_job(0, ("Failed", "True"))
    assert supervise.job_condition(old_failed, attempt=1) == supervise.STALE
    assert supervise.apply_event({"type": "MODIFIED", "object": old_failed}, 1) == ("stale", "7")
    assert supervise.training_ended(False, supervise.STALE) == (False, False)
    # this attempt's own Job decides, from a label or (pods) an annotation
    assert supervise.job_condition(attempt_job(1, ("Failed", "True")), attempt=1) == "Failed"
    assert supervise.job_condition(attempt_job(1, where="annotations"), attempt=1) == "running"
    # outside a JobSet (no attempt on either side) nothing changes
    assert supervise.job_condition(attempt_job(None, ("Failed", "True")), attempt=None) == "Failed"
    assert supervise.job_condition(old_failed, attempt=None) == "Failed"


def test_an_evaluator_of_a_new_attempt_waits_out_the_old_job_then_follows_the_new_one():
    """The sequence a restarted evaluator's watch sees: the old attempt's failed Job, its
    deletion, the new Job running, then succeeding."""
    states = [supervise.job_condition(attempt_job(0, ("Failed", "True")), 1),
              supervise.ABSENT,  # deleted
              supervise.job_condition(attempt_job(1), 1),
              supervise.job_condition(attempt_job(1, ("Complete", "True")), 1)]
    seen, ends = False, []
    for state in states:
        seen, ended = supervise.training_ended(seen, state)
        ends.append(ended)
    assert ends == [False, False, False, True]


class _FakeApi:
    """Answers the supervisor's list and watch requests from canned JSON."""

    def __init__(self, listed: dict, events: list[dict]):
        self.listed, self.events = listed, events

    def open(self, path: str, timeout: float):
        import io
        if "watch=1" in path:
            return io.BytesIO(b"".join(json.dumps(e).encode() + b"\n" for e in self.events))
        return io.BytesIO(json.dumps(self.listed).encode())


def test_wait_for_end_ignores_the_old_attempt_through_list_and_watch():
    old = attempt_job(0, ("Failed", "True"))
    new_running, new_done = attempt_job(1), attempt_job(1, ("Complete", "True"))
    api = _FakeApi({"metadata": {"resourceVersion": "1"}, "items": [old]},
                   [{"type": "DELETED", "object": old},
                    {"type": "ADDED", "object": new_running},
                    {"type": "MODIFIED", "object": new_done}])
    assert supervise.wait_for_end(api, "ns", "c-worker-0", attempt=1) == "Complete"
    # without the attempt the old Job's Failed would have ended it at once
    assert supervise.wait_for_end(api, "ns", "c-worker-0") == "Failed"
