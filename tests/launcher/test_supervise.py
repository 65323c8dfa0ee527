"""The end-of-job supervisor (launcher/supervise.py): exit codes, grace after success/failure.

The supervisor runs as a real process around a real child here. Its API-server side (which Job
state ends the task) is exercised on a real cluster by the kind tier
(tests/kind/test_e2e.py::test_failed_chief_ends_every_pod); here, without an API server, it
keeps its child running and reports that it cannot read the Job.
"""
from __future__ import annotations

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
                        "TFK8S_POLL_SECONDS": "0.2", **env})
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
    assert "cannot read job ns/c-chief yet" in process.stderr.readline()
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
