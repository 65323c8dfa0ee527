"""The end-of-job supervisor (launcher/pod/supervise.py, launcher/pod/job_watch.py): its two modes as
real processes around a real child, and the watch's decisions, which are pure.

`run` (the task's container) is driven here through the shared directory as `watch` would drive
it. `watch` runs for real against an API server that never answers (a socket that accepts and
stays silent, or a closed port). Its answers from a real API server are exercised by the kind
tier (tests/kind/test_e2e.py::test_failed_chief_ends_every_pod) and by the scale tier
(tests/scale, the watch code of 1000 simulated pods).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path

import pytest
from support import wait_until

from launcher import k8s_contract
from launcher.plan import plan
from launcher.pod import job_watch, supervise
from launcher.render.job_failure import pod_failure_policy
from worker import contract, exit_cause
from worker.errors import EXIT_PREEMPTED

SUPERVISOR = Path(supervise.__file__)
WAIT_FOR_TERM = "import time; print('up', flush=True); time.sleep(120)"


def supervisor_env(state_dir: Path, **env: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "TFK8S_"))}
    environment.update(
        {
            "TFK8S_WATCH_JOB": "c-chief",
            "TFK8S_NAMESPACE": "ns",
            "TFK8S_SUPERVISOR_STATE_DIR": str(state_dir),
            "TFK8S_TERMINATION_LOG": str(state_dir / "termination-log-run"),
            **env,
        }
    )
    return environment


@pytest.fixture
def state_dir(tmp_path) -> Path:
    (tmp_path / "state").mkdir()
    return tmp_path / "state"


def start(code: str, state_dir: Path, **env) -> subprocess.Popen:
    """`supervise.py run -- python -c CODE`, the task container's PID 1."""
    return subprocess.Popen(
        [sys.executable, str(SUPERVISOR), "run", "--", sys.executable, "-c", code],
        env=supervisor_env(state_dir, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_up(process: subprocess.Popen) -> None:
    assert process.stdout.readline() == "up\n"


def test_pod_deletion_sigterm_exits_143_like_a_preempted_task(state_dir):
    """A server killed by the forwarded SIGTERM: 143 (128 + 15), which the podFailurePolicy
    ignores, not sys.exit(-15) = 241, which would count against backoffLimit."""
    process = start(WAIT_FOR_TERM, state_dir)
    wait_until_up(process)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM == EXIT_PREEMPTED, err
    assert "task exited with code 143" in err
    # and `watch` is told, so that the pod completes
    assert (state_dir / supervise.TASK_EXITED_FILE).read_text() == "143\n"


@pytest.mark.parametrize("attempt", range(3))  # a race: before the fix, lost 7 times in 8
def test_sigterm_the_moment_the_task_exists_still_reaches_it(attempt, state_dir):
    """Pod deletion right after start-up: the signal is passed on, not lost in the gap between
    starting the task and taking over SIGTERM (there the supervisor died and left the task
    running, holding its pipes)."""
    process = start(WAIT_FOR_TERM, state_dir)
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    deadline = time.monotonic() + 30
    while not (task_pids := children.read_text().split()):
        assert time.monotonic() < deadline, "the supervisor never started its task"
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=30)
    finally:
        for pid in task_pids:  # an orphaned task must not outlive the test
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert process.returncode == EXIT_PREEMPTED, err
    assert "task exited with code 143" in err


def test_child_that_saves_and_exits_143_itself(state_dir):
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
        "print('up', flush=True); time.sleep(120)\n"
    )
    process = start(code, state_dir)
    wait_until_up(process)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert process.returncode == EXIT_PREEMPTED


@pytest.mark.parametrize(
    "code,expected",
    [
        ("import sys; sys.exit(3)", 3),
        ("import sys; sys.exit(0)", 0),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + signal.SIGKILL),
    ],
)
def test_child_exit_status_passes_through(code, expected, state_dir):
    process = start(code, state_dir)
    _, err = process.communicate(timeout=30)
    assert process.returncode == expected, err


@pytest.mark.parametrize("verdict", ["failed", "gone"])
def test_failed_or_gone_training_stops_the_task_at_once_and_exits_0(verdict, state_dir):
    process = start(WAIT_FOR_TERM, state_dir, TFK8S_GRACE_SECONDS="600")
    wait_until_up(process)
    started = time.monotonic()
    (state_dir / supervise.VERDICT_FILE).write_text(f"{verdict}\n")
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert time.monotonic() - started < 10  # no grace: no final checkpoint will come
    assert f"training ended ({verdict})" in err


def test_after_success_the_task_may_finish_within_the_grace(state_dir):
    """The evaluator, evaluating the final checkpoint: its own exit code counts."""
    code = (
        "import os, sys, time\nprint('up', flush=True)\n"
        f"while not os.path.exists({str(state_dir / 'verdict')!r}): time.sleep(0.1)\n"
        "time.sleep(1.5); sys.exit(0)\n"
    )
    process = start(code, state_dir, TFK8S_GRACE_SECONDS="60")
    wait_until_up(process)
    (state_dir / supervise.VERDICT_FILE).write_text("succeeded\n")
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0 and "task exited with code 0" in err, err


def test_exit_status():
    assert supervise.exit_status(-signal.SIGTERM) == 143
    assert supervise.exit_status(-signal.SIGKILL) == 137
    assert supervise.exit_status(4) == 4


def test_verdicts():
    # Complete / SuccessCriteriaMet: the evaluator may finish evaluating the final checkpoint.
    assert supervise.verdict_of("Complete") == supervise.verdict_of("SuccessCriteriaMet") == "succeeded"
    # Failed / FailureTarget / the Job deleted: no final checkpoint will come; stop at once.
    assert supervise.verdict_of("Failed") == supervise.verdict_of("FailureTarget") == "failed"
    assert supervise.verdict_of("absent") == "gone"


@pytest.mark.parametrize("pod_grace", [1, 2, 10, 30, 120, 3600])
def test_stop_timeout_fits_in_the_pod_grace(pod_grace):
    timeout = supervise.stop_timeout(pod_grace)
    assert 0 < timeout < pod_grace
    assert pod_grace - timeout <= 5


def test_stop_kills_a_child_that_ignores_sigterm_within_the_timeout():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            "print('up', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == "up\n"
    started = time.monotonic()
    supervise.stop(child, timeout=1.0)
    assert child.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 10


def job(*conditions: tuple[str, str], version: str = "7") -> dict:
    return {
        "metadata": {"name": "c-chief", "resourceVersion": version},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]},
    }


@pytest.mark.parametrize(
    "conditions, state",
    [
        ((), "running"),
        ((("Suspended", "True"),), "running"),
        ((("SuccessCriteriaMet", "True"), ("Complete", "True")), "SuccessCriteriaMet"),
        ((("FailureTarget", "False"), ("Failed", "True")), "Failed"),
    ],
)
def test_job_condition(conditions, state):
    assert job_watch.job_condition(job(*conditions)) == state


def test_watch_events_give_state_and_resume_version():
    assert job_watch.apply_event({"type": "ADDED", "object": job(version="3")}) == ("running", "3")
    assert job_watch.apply_event({"type": "MODIFIED", "object": job(("Complete", "True"), version="4")}) == (
        "Complete",
        "4",
    )
    assert job_watch.apply_event({"type": "DELETED", "object": job(version="5")}) == ("absent", "5")
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Job", "metadata": {"resourceVersion": "9"}}}
    assert job_watch.apply_event(bookmark) == (None, "9")


def test_watch_error_events():
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    with pytest.raises(job_watch.WatchExpired, match="too old"):
        job_watch.apply_event(gone)
    other = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "etcd"}}
    with pytest.raises(RuntimeError, match="watch error 500: etcd"):
        job_watch.apply_event(other)


def test_absent_before_seen_is_not_created_yet_and_after_seen_is_the_end():
    assert job_watch.training_ended(False, "absent") == (False, False)
    assert job_watch.training_ended(False, "running") == (True, False)
    assert job_watch.training_ended(True, "absent") == (True, True)
    assert job_watch.training_ended(False, "Failed") == (False, True)
    assert job_watch.training_ended(True, "Complete") == (True, True)


def test_jobs_path_narrows_to_the_one_name_rbac_allows():
    assert job_watch.jobs_path("ns", "c-chief", watch="1", resourceVersion="5") == (
        "/apis/batch/v1/namespaces/ns/jobs?fieldSelector=metadata.name%3Dc-chief&watch=1&resourceVersion=5"
    )


def attempt_job(attempt: int | None, *conditions: tuple[str, str], where: str = "labels") -> dict:
    obj = job(*conditions)
    if attempt is not None:
        obj["metadata"][where] = {job_watch.RESTART_ATTEMPT_KEY: str(attempt)}
    return obj


def test_a_previous_jobset_attempts_job_is_stale_never_the_end():
    """A JobSet restart recreates the evaluator while the last attempt's failed worker Job may
    still be there: its Failed must not stop the new evaluator."""
    old_failed = attempt_job(0, ("Failed", "True"))
    assert job_watch.job_condition(old_failed, attempt=1) == job_watch.STALE
    assert job_watch.apply_event({"type": "MODIFIED", "object": old_failed}, 1) == ("stale", "7")
    assert job_watch.training_ended(False, job_watch.STALE) == (False, False)
    # this attempt's own Job decides, from a label or (pods) an annotation
    assert job_watch.job_condition(attempt_job(1, ("Failed", "True")), attempt=1) == "Failed"
    assert job_watch.job_condition(attempt_job(1, where="annotations"), attempt=1) == "running"
    # outside a JobSet (no attempt on either side) nothing changes
    assert job_watch.job_condition(attempt_job(None, ("Failed", "True")), attempt=None) == "Failed"
    assert job_watch.job_condition(old_failed, attempt=None) == "Failed"


def test_an_evaluator_of_a_new_attempt_waits_out_the_old_job_then_follows_the_new_one():
    """The sequence a restarted evaluator's watch sees: the old attempt's failed Job, its
    deletion, the new Job running, then succeeding."""
    states = [
        job_watch.job_condition(attempt_job(0, ("Failed", "True")), 1),
        job_watch.ABSENT,  # deleted
        job_watch.job_condition(attempt_job(1), 1),
        job_watch.job_condition(attempt_job(1, ("Complete", "True")), 1),
    ]
    seen, ends = False, []
    for state in states:
        seen, ended = job_watch.training_ended(seen, state)
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
    api = _FakeApi(
        {"metadata": {"resourceVersion": "1"}, "items": [old]},
        [
            {"type": "DELETED", "object": old},
            {"type": "ADDED", "object": new_running},
            {"type": "MODIFIED", "object": new_done},
        ],
    )
    assert job_watch.wait_for_end(api, "ns", "c-worker-0", attempt=1) == "Complete"
    # without the attempt the old Job's Failed would have ended it at once
    assert job_watch.wait_for_end(api, "ns", "c-worker-0") == "Failed"


# ----------------------------------------------------------------- `watch` and its give-up
def ca_bundle() -> str:
    """Any PEM CA file: `watch` builds its TLS context from one before asking anything."""
    paths = ssl.get_default_verify_paths()
    for path in (paths.cafile, paths.openssl_cafile):
        if path and os.path.exists(path):
            return path
    import certifi

    return certifi.where()


@pytest.fixture
def service_account(tmp_path) -> Path:
    """What the projected volume gives the job-watch container: a token and the cluster's CA."""
    where = tmp_path / "serviceaccount"
    where.mkdir()
    (where / "token").write_text("not-a-real-token")
    (where / "ca.crt").write_text(Path(ca_bundle()).read_text())
    return where


@pytest.fixture
def silent_api_server():
    """Accepts connections and never answers: an API server behind a firewall that drops."""
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def start_watch(state_dir: Path, service_account: Path, port: int, **env) -> subprocess.Popen:
    environment = supervisor_env(
        state_dir,
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        KUBERNETES_SERVICE_PORT=str(port),
        TFK8S_SERVICE_ACCOUNT_DIR=str(service_account),
        TFK8S_TERMINATION_LOG=str(state_dir / "termination-log-watch"),
        **env,
    )
    return subprocess.Popen(
        [sys.executable, str(SUPERVISOR), "watch"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_pod_whose_api_server_never_answers_ends_within_the_bound(state_dir, service_account, silent_api_server):
    """Default-deny egress: before the bound, both containers ran forever (retrying). Now
    `watch` gives up, `run` stops the task and exits EXIT_API_UNREACHABLE with one line that
    says what failed and how to fix it, as its last log line and termination message."""
    task = start(WAIT_FOR_TERM, state_dir)
    wait_until_up(task)
    started = time.monotonic()
    watcher = start_watch(state_dir, service_account, silent_api_server, TFK8S_API_GIVE_UP_SECONDS="3")
    _, watch_err = watcher.communicate(timeout=60)
    _, task_err = task.communicate(timeout=60)
    took = time.monotonic() - started
    assert watcher.returncode == 0, watch_err  # the task's container decides the pod's outcome
    assert task.returncode == supervise.EXIT_API_UNREACHABLE == k8s_contract.EXIT_API_UNREACHABLE
    assert took < 3 + 10, took
    line = task_err.strip().splitlines()[-1]
    url = f"https://127.0.0.1:{silent_api_server}"
    assert f"no answer from the API server {url} for 3s while watching job ns/c-chief" in line
    assert "timed out" in line  # the last error
    assert (
        f"the supervised pods need egress to the API server: 127.0.0.1:{silent_api_server}; see docs/security.md"
    ) in line
    assert (state_dir / "termination-log-run").read_text() == line.removeprefix("[tfk8s-supervise] ") + "\n"
    # `status` shows it as the task's reason (launcher/status/failure_reasons.py keeps 400 characters)
    assert exit_cause.exit_cause(line.removeprefix("[tfk8s-supervise] ")) == line.removeprefix("[tfk8s-supervise] ")


def test_a_refused_connection_gives_up_with_the_last_error(service_account, monkeypatch):
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    monkeypatch.setenv(job_watch.SA_DIR_ENV, str(service_account))
    api = job_watch.ApiServer.in_cluster()
    started = time.monotonic()
    with pytest.raises(job_watch.ApiUnreachable, match="Connection refused") as raised:
        next(
            job_watch.job_states(
                api,
                "ns",
                "c-chief",
                watch_seconds=5,
                retry_seconds=0.2,
                give_up_seconds=0.5,
                refused_give_up_seconds=2.0,
            )
        )
    took = time.monotonic() - started
    assert 2.0 <= took < 6, took  # the refused bound, not the shorter one for silence
    assert "every connection to the API server" in str(raised.value)
    assert f"egress to the API server: 127.0.0.1:{port}" in str(raised.value)


class _RefusesThenAnswers:
    """Refuses `refusals` connections (an API server restarting), then lists the Job complete."""

    def __init__(self, refusals: int):
        self.refusals = refusals
        self.base_url = "https://api:443"

    def open(self, path: str, timeout: float):
        import io

        if self.refusals:
            self.refusals -= 1
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        return io.BytesIO(
            json.dumps({"metadata": {"resourceVersion": "1"}, "items": [job(("Complete", "True"))]}).encode()
        )


def test_a_control_plane_restart_longer_than_the_give_up_bound_costs_no_retry():
    """Refused connections past the bound for silence (an API server restarting as the pod
    starts) are waited out up to the longer refused bound; the watch then goes on."""
    api = _RefusesThenAnswers(refusals=6)
    started = time.monotonic()
    states = job_watch.job_states(
        api, "ns", "c-chief", watch_seconds=5, retry_seconds=0.1, give_up_seconds=0.2, refused_give_up_seconds=30
    )
    assert next(states) == "Complete"
    assert api.refusals == 0 and time.monotonic() - started > 0.2


def test_a_silence_after_refusals_gives_up_at_the_shorter_bound():
    """One timeout among the refusals is a dropping firewall, not a restart: the short bound."""

    class _RefusesThenTimesOut(_RefusesThenAnswers):
        def open(self, path: str, timeout: float):
            if self.refusals:
                return super().open(path, timeout)
            raise urllib.error.URLError(TimeoutError("timed out"))

    started = time.monotonic()
    with pytest.raises(job_watch.ApiUnreachable, match="no answer from the API server"):
        next(
            job_watch.job_states(
                _RefusesThenTimesOut(refusals=1),
                "ns",
                "c-chief",
                watch_seconds=5,
                retry_seconds=0.05,
                give_up_seconds=0.5,
                refused_give_up_seconds=30,
            )
        )
    assert time.monotonic() - started < 5


class _AnswersOnceThenFails:
    """Lists the Job once (running), then fails every watch `failures` times, then reports it
    complete: an API outage after a first answer."""

    def __init__(self, failures: int):
        self.failures = failures
        self.base_url = "https://api:443"

    def open(self, path: str, timeout: float):
        import io

        if "watch=1" not in path:
            return io.BytesIO(json.dumps({"metadata": {"resourceVersion": "1"}, "items": [job()]}).encode())
        if self.failures:
            self.failures -= 1
            raise urllib.error.URLError("connection reset")
        return io.BytesIO(json.dumps({"type": "MODIFIED", "object": job(("Complete", "True"))}).encode())


def test_after_a_first_answer_api_errors_are_retried_past_the_bound():
    """An outage of a reachable API server is no configuration error: a healthy server must
    not be stopped for it."""
    states = job_watch.job_states(
        _AnswersOnceThenFails(failures=5), "ns", "c-chief", watch_seconds=5, retry_seconds=0.05, give_up_seconds=0.01
    )
    assert [next(states), next(states)] == ["running", "Complete"]


def test_watch_ends_once_the_task_has_exited_for_good(state_dir, service_account, silent_api_server):
    """The task's container ended by itself: the pod completes only if `watch` ends too. With
    restartPolicy OnFailure a failed task is restarted in place, and `watch` stays for it."""
    (state_dir / supervise.TASK_EXITED_FILE).write_text("1\n")
    staying = start_watch(state_dir, service_account, silent_api_server, TFK8S_POD_RESTART_POLICY="OnFailure")
    ending = start_watch(state_dir, service_account, silent_api_server)  # Never
    assert ending.wait(timeout=30) == 0
    with pytest.raises(subprocess.TimeoutExpired):
        staying.wait(timeout=3)
    (state_dir / supervise.TASK_EXITED_FILE).write_text("0\n")
    assert staying.wait(timeout=30) == 0
    assert "the task exited (0); nothing left to watch" in staying.communicate()[1]


def test_watch_ends_0_on_pod_deletion(state_dir, service_account, silent_api_server):
    """PID 1 without a handler ignores SIGTERM: the kubelet would wait out the grace period."""
    watcher = start_watch(state_dir, service_account, silent_api_server)
    wait_for_sigterm_handler(watcher)
    watcher.send_signal(signal.SIGTERM)
    assert watcher.wait(timeout=30) == 0


def wait_for_sigterm_handler(process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until `process` catches SIGTERM (its SigCgt mask in /proc): a fixed sleep is too short
    on a busy machine, and a SIGTERM before the handler kills the process instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{process.pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {process.pid} installed no SIGTERM handler in {timeout:.0f}s")


def test_the_api_unreachable_exit_is_counted_by_the_pod_failure_policy():
    """Counted, neither ignored (a blocked egress would replace pods forever) nor fatal (one
    node's broken network, or an API server down at the pod's start, fails no run at once):
    backoffLimit bounds the retries. No worker exit code may mean something else by it."""
    assert supervise.EXIT_API_UNREACHABLE not in {v for k, v in vars(contract).items() if k.startswith("EXIT_")}
    for builtin in (True, False):
        rules = pod_failure_policy(plan.restart_rules("Never", 3, contract.Strategy.PARAMETER_SERVER, builtin))["rules"]
        for rule in rules:
            if "onExitCodes" in rule and rule["action"] != "Count":
                assert supervise.EXIT_API_UNREACHABLE not in rule["onExitCodes"]["values"], rule


class _Forbidden:
    base_url = "https://api:443"

    def open(self, path: str, timeout: float):
        raise urllib.error.HTTPError(self.base_url + path, 403, "Forbidden", {}, None)


def test_a_refusal_is_not_blamed_on_egress():
    """403 on every request: the API server is reachable, the Role or the token is wrong."""
    with pytest.raises(job_watch.ApiUnreachable) as raised:
        next(
            job_watch.job_states(
                _Forbidden(), "ns", "c-chief", watch_seconds=5, retry_seconds=0.05, give_up_seconds=0.2
            )
        )
    assert "HTTP Error 403: Forbidden" in str(raised.value)
    assert "service account must be allowed to list and watch job c-chief" in str(raised.value)
    assert "egress" not in str(raised.value)


# ------------------------------------------------- the shared directory: the task's container writes there too
@pytest.mark.parametrize("planted", ["link", "fifo", "words"])
def test_watch_reads_no_link_fifo_or_text_the_task_container_plants(
    planted, state_dir, service_account, silent_api_server
):
    """`task-exited` as a link to the token (shown on kind: the token was printed into the
    job-watch log), a FIFO (the reader blocked for good) or words: refused, said once, not
    printed, and `watch` goes on until a real exit code comes."""
    planted_file = state_dir / supervise.TASK_EXITED_FILE
    if planted == "link":
        planted_file.symlink_to(service_account / "token")
    elif planted == "fifo":
        os.mkfifo(planted_file)
    else:
        planted_file.write_text("not-a-real-token\n")
    watcher = start_watch(state_dir, service_account, silent_api_server)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(watcher.stderr), daemon=True)
    reader.start()
    why = {"link": "a symbolic link", "fifo": "not a regular file", "words": "not an exit code"}[planted]
    refusal = f"ignoring {planted_file}: {why}; only a regular file"
    # however slowly `watch` starts on a loaded machine: it reads the planted file, says so once, goes on
    wait_until(lambda: any(refusal in line for line in said), 60, "watch to refuse the planted file")
    assert watcher.poll() is None, "".join(said)
    planted_file.unlink()
    (state_dir / supervise.TASK_EXITED_FILE).write_text("0\n")
    assert watcher.wait(timeout=30) == 0
    reader.join(timeout=10)
    err = "".join(said)
    assert refusal in err and err.count("ignoring") == 1, err
    assert "not-a-real-token" not in err
    assert "the task exited (0); nothing left to watch" in err


def test_the_verdict_is_written_through_no_planted_link(state_dir, service_account, silent_api_server, tmp_path):
    """A link planted where `watch` writes its verdict: replaced, the file it points to untouched
    (the old `verdict.tmp` was opened for writing through a link)."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for name in (supervise.VERDICT_FILE, f"{supervise.VERDICT_FILE}.tmp"):
        (state_dir / name).symlink_to(victim)
    watcher = start_watch(state_dir, service_account, silent_api_server, TFK8S_API_GIVE_UP_SECONDS="1")
    assert watcher.wait(timeout=60) == 0
    verdict = state_dir / supervise.VERDICT_FILE
    assert not verdict.is_symlink() and verdict.read_text().startswith(supervise.API_UNREACHABLE_VERDICT + "\n")
    assert victim.read_text() == "precious\n"
    assert oct(verdict.stat().st_mode & 0o777) == "0o644"


def test_every_request_reads_the_token_again(service_account, monkeypatch):
    """The projected token lives 600 s (manifests/job.yaml.j2) and the kubelet rotates it: each
    list and each watch renewal must carry the file's current token, as client-go does."""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv(job_watch.SA_DIR_ENV, str(service_account))
    sent = []
    monkeypatch.setattr(
        job_watch.urllib.request, "urlopen", lambda request, **_: sent.append(request.get_header("Authorization"))
    )
    api = job_watch.ApiServer.in_cluster()
    api.open("/apis/batch/v1/namespaces/ns/jobs", timeout=1)
    (service_account / "token").write_text("rotated-token\n")
    api.open("/apis/batch/v1/namespaces/ns/jobs?watch=1", timeout=1)
    assert sent == ["Bearer not-a-real-token", "Bearer rotated-token"]
