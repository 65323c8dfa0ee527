"""LocalBackend's rules with bring-your-own commands (plain Python, no TensorFlow): restarts,
backoff, the evaluator grace, status/logs/list/delete, and that no process outlives its run.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from local_clusters import (
    REPO_ROOT,
    LocalBackend,
    LocalProcessBackendConfig,
    Submission,
    assert_no_task_processes,
    kill_task,
    make_spec,
    run_files,
    wait_until,
)

from launcher import cli
from launcher.backends.local import policy
from launcher.backends.local.files import ATTEMPT_HEADER_START
from launcher.backends.local.preflight import WorkerEnvironmentError
from launcher.errors import SubmitRefused
from worker.contract import EXIT_DETERMINISTIC_EXCEPTION
from worker.errors import EXIT_CONFIG, EXIT_PREEMPTED

# A task that prints its TF_CONFIG, then fails on its first `fail_times` attempts.
FLAKY = """
import json, os, sys, pathlib
marker = pathlib.Path(os.environ["TFK8S_MODEL_DIR"]) / ("attempts-" + os.environ["TFK8S_TASK_INDEX"])
count = int(marker.read_text()) + 1 if marker.exists() else 1
marker.write_text(str(count))
print("TF_CONFIG=" + os.environ["TF_CONFIG"], flush=True)
sys.exit(3 if count <= int(sys.argv[1]) else 0)
"""
SLEEP = "import time; print('sleeping', flush=True); time.sleep(600)"


def byo_spec(name, command, *, evaluator_command=None, **fields):
    """A mirrored spec whose chief (and evaluator) run `command` instead of the worker."""
    spec = make_spec(name, "mirrored", [], evaluator=evaluator_command is not None, image="example.com/byo:1", **fields)
    data = spec.model_dump(by_alias=True)
    data.pop("program")
    data["command"] = [sys.executable, "-c", command[0]]
    data["args"] = command[1:]
    if evaluator_command is not None:
        # Same command for every role, like a real image: the script branches on TF_CONFIG.
        data["command"] = [sys.executable, "-c", _by_role(command[0], evaluator_command)]
    return type(spec).model_validate(data)


def _by_role(chief_code: str, evaluator_code: str) -> str:
    return (
        "import json, os\n"
        "role = json.loads(os.environ['TF_CONFIG'])['task']['type']\n"
        f"exec({evaluator_code!r} if role == 'evaluator' else {chief_code!r})\n"
    )


def test_failed_task_restarts_in_place_with_the_same_tf_config(backend, workdir):
    spec = byo_spec("flaky", [FLAKY, "2"], restartPolicy="OnFailure", backoffLimit=2)
    backend.submit(spec)
    assert backend.wait(spec.name) == 0
    log = run_files(backend, "flaky").log_path("chief", 0).read_text()
    configs = [line for line in log.splitlines() if line.startswith("TF_CONFIG=")]
    assert len(configs) == 3 and len(set(configs)) == 1
    assert log.count("=== tfk8s: chief-0 attempt") == 3
    status = backend.status("flaky")
    assert status.phase == "Succeeded" and status.exit_code == 0
    assert status.roles[0].failed == 2 and status.roles[0].succeeded == 1


def test_backoff_limit_exhausted_fails_with_the_chief_exit_code(backend, workdir):
    spec = byo_spec("broken", [FLAKY, "99"], restartPolicy="OnFailure", backoffLimit=1)
    backend.submit(spec)
    assert backend.wait(spec.name) == 3
    status = backend.status("broken")
    assert status.phase == "Failed" and "chief-0 exited 3" in status.message
    assert status.roles[0].failed == 2  # the first attempt and one restart


def test_never_replaces_a_failed_task_counted_against_backoff_limit(backend, workdir, tmp_path):
    # restartPolicy Never: like a Job, a failed pod is replaced and counted against backoffLimit.
    spec = byo_spec("never", [FLAKY, "1"], restartPolicy="Never", backoffLimit=1)
    backend.submit(spec)
    assert backend.wait(spec.name) == 0
    status = backend.status("never")
    assert status.phase == "Succeeded" and status.roles[0].failed == 1
    log = (tmp_path / "cluster-output.log").read_text()
    assert (
        "chief-0 exited 3 (your program's exit code); replacing it (restartPolicy Never: a new pod, failure 1 of "
        "backoffLimit 1 for role chief)" in log
    )


def test_never_with_backoff_limit_0_fails_on_the_first_failure(backend, workdir):
    spec = byo_spec("never0", [FLAKY, "1"], restartPolicy="Never", backoffLimit=0)
    backend.submit(spec)
    assert backend.wait(spec.name) == 3
    status = backend.status("never0")
    assert status.phase == "Failed" and status.roles[0].failed == 1


# Preempted on its first attempt: SIGTERM arrives, the task saves and exits 143 (EXIT_PREEMPTED).
PREEMPTED_ONCE = """
import os, pathlib, signal, sys, time
marker = pathlib.Path(os.environ["TFK8S_MODEL_DIR"]) / "attempts"
count = int(marker.read_text()) + 1 if marker.exists() else 1
marker.write_text(str(count))
if count > 1:
    print("resumed", flush=True)
    sys.exit(0)
if sys.argv[1] == "save":  # else it dies of SIGTERM, like a ps/worker server
    signal.signal(signal.SIGTERM, lambda *_: (print("saved", flush=True), sys.exit(143)))
print("training", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("handles_sigterm", [True, False], ids=["exits-143", "killed-by-sigterm"])
def test_a_commands_sigterm_is_counted_as_its_pods_would_be(backend, workdir, tmp_path, handles_sigterm):
    """restartPolicy Never, backoffLimit 1: a command of your own that ends by SIGTERM (143, or
    dying of it) may have sent it itself (`trap 'kill 0' EXIT` after a bug): only a pod's
    DisruptionTarget makes it a preemption, and a local task has none. Replaced, counted: it
    used to be 'preempted', never counted, so such a program restarted without end."""
    spec = byo_spec(
        "preempt", [PREEMPTED_ONCE, "save" if handles_sigterm else "die"], restartPolicy="Never", backoffLimit=1
    )
    run = Submission(backend, spec)
    wait_until(
        lambda: (
            run_files(backend, "preempt").log_path("chief", 0).exists()
            and "training" in run_files(backend, "preempt").log_path("chief", 0).read_text()
        ),
        60,
        "the chief to train",
    )
    kill_task(backend, "preempt", "chief", 0, signal.SIGTERM)
    assert run.wait(60) == 0
    status = backend.status("preempt")
    assert status.phase == "Succeeded" and status.roles[0].failed == 1
    log = run_files(backend, "preempt").log_path("chief", 0).read_text()
    assert log.count("=== tfk8s: chief-0 attempt") == 2 and "resumed" in log
    assert ("saved" in log) == handles_sigterm
    said = (tmp_path / "cluster-output.log").read_text()
    how = "exited 143" if handles_sigterm else "was killed by SIGTERM"
    assert f"chief-0 {how} ({policy.OWN_SIGTERM})" in said and "preempted" not in said
    assert "replacing it (restartPolicy Never: a new pod, failure 1 of backoffLimit 1 for role chief)" in said


def test_preemption_counts_under_on_failure(backend, workdir):
    # OnFailure has no podFailurePolicy on Kubernetes: a preemption is an ordinary failure.
    spec = byo_spec("preempt-of", [PREEMPTED_ONCE, "save"], restartPolicy="OnFailure", backoffLimit=0)
    run = Submission(backend, spec)
    wait_until(
        lambda: (
            run_files(backend, "preempt-of").log_path("chief", 0).exists()
            and "training" in run_files(backend, "preempt-of").log_path("chief", 0).read_text()
        ),
        60,
        "the chief to train",
    )
    kill_task(backend, "preempt-of", "chief", 0, signal.SIGTERM)
    assert run.wait(60) == EXIT_PREEMPTED
    status = backend.status("preempt-of")
    assert status.phase == "Failed" and "SIGTERM" in status.message
    assert status.roles[0].failed == 1


def test_a_declared_fatal_exit_code_fails_at_once_and_another_is_retried(backend, workdir):
    """Real processes: FLAKY exits 3 on its first attempt. Listed in fatalExitCodes, 3 fails the
    run at that attempt despite backoffLimit 6; with only 1 listed, 3 is retried and succeeds."""

    def flaky_spec(name, fatal_exit_codes):
        spec = byo_spec(name, [FLAKY, "1"], restartPolicy="Never", backoffLimit=6)
        return type(spec).model_validate({**spec.model_dump(by_alias=True), "fatalExitCodes": fatal_exit_codes})

    fatal = flaky_spec("fatal", [3])
    backend.submit(fatal)
    assert backend.wait(fatal.name) == 3
    status = backend.status("fatal")
    assert status.phase == "Failed" and status.message.startswith(
        "chief-0 exited 3 (your program's exit code; deterministic: not retried)"
    )
    assert status.roles[0].failed == 1
    assert run_files(backend, "fatal").log_path("chief", 0).read_text().count("=== tfk8s: chief-0 attempt") == 1

    retried = flaky_spec("retried", [1])
    backend.submit(retried)
    assert backend.wait(retried.name) == 0
    status = backend.status("retried")
    assert status.phase == "Succeeded" and status.roles[0].failed == 1


BUG_AT_STEP_3 = """
import pathlib, os, sys
marker = pathlib.Path(os.environ["TFK8S_MODEL_DIR"]) / "attempts"
marker.write_text(str(int(marker.read_text()) + 1 if marker.exists() else 1))
for step in range(1, 4):
    print(f"step {step}", flush=True)
raise getattr(__builtins__, sys.argv[1])("step 3 went wrong")
"""


def test_a_deterministic_exception_fails_at_once_another_is_retried(backend, workdir):
    """Real processes under --local, backoffLimit 2: a ValueError at step 3 fails the run at its
    first attempt with exit 70 and the rule in the message; a RuntimeError is retried to the
    limit, its message saying how to make it fatal. Before: both exited 1, 3 attempts each."""
    fatal = byo_spec("bug", [BUG_AT_STEP_3, "ValueError"], restartPolicy="Never", backoffLimit=2)
    assert Submission(backend, fatal).wait(60) == EXIT_DETERMINISTIC_EXCEPTION
    status = backend.status("bug")
    assert status.phase == "Failed" and status.roles[0].failed == 1
    assert status.message == (
        "chief-0 exited 70: ValueError: step 3 went wrong (a ValueError is "
        "deterministic: not retried; retriedExceptions: [ValueError] retries it)"
    ), status.message
    assert run_files(backend, "bug").default_model_dir.joinpath("attempts").read_text() == "1"

    retried = byo_spec("bug-again", [BUG_AT_STEP_3, "RuntimeError"], restartPolicy="Never", backoffLimit=2)
    assert Submission(backend, retried).wait(60) == 1
    status = backend.status("bug-again")
    assert status.phase == "Failed" and status.roles[0].failed == 3
    assert "fatalExceptions: [RuntimeError] fails the training at once" in status.message, status.message
    assert run_files(backend, "bug-again").default_model_dir.joinpath("attempts").read_text() == "3"


def test_built_in_worker_config_error_fails_at_once(backend, workdir, tmp_path):
    """The built-in worker exits EXIT_CONFIG (2) on a bad environment value: the Job's FailJob
    rule, so no retry even with backoffLimit 6 (no TensorFlow: the environment is checked
    before it loads), and its one-line reason is the status message."""
    spec = make_spec("badenv", "mirrored", ["--steps", "3"], evaluator=False, restartPolicy="Never", backoffLimit=6)
    data = spec.model_dump(by_alias=True)
    data["roles"]["chief"]["env"] = {"TFK8S_PEER_TIMEOUT": "soon"}
    spec = type(spec).model_validate(data)
    started = time.monotonic()
    backend.submit(spec)
    assert backend.wait(spec.name) == EXIT_CONFIG
    assert time.monotonic() - started < 60
    status = backend.status("badenv")
    reason = "TFK8S_PEER_TIMEOUT='soon' must be a positive number of seconds"
    assert status.phase == "Failed"
    assert status.message == f"chief-0 exited 2 (deterministic: not retried): {reason}"
    assert status.roles[0].reason == f"chief-0: exited 2 (deterministic: not retried): {reason}"
    assert status.roles[0].failed == 1
    log = run_files(backend, "badenv").log_path("chief", 0).read_text()
    assert log.count("=== tfk8s: chief-0 attempt") == 1


def test_bad_program_args_are_refused_before_any_task_starts(backend, workdir):
    """A local run parses the built-in worker's arguments as the worker would: a usage error
    is one line from submit, exit 2, and nothing is created or started."""
    spec = make_spec("badarg", "mirrored", ["--steps", "nope"], evaluator=False)
    with pytest.raises(WorkerEnvironmentError) as raised:
        backend.submit(spec)
    assert str(raised.value) == (
        "program.args ['--steps', 'nope']: argument --steps: 'nope' is not an integer (see python -m worker --help)"
    )
    assert raised.value.exit_code == EXIT_CONFIG
    assert not run_files(backend, "badarg").dir.exists()


def test_a_task_exit_reason_is_its_last_output_line(backend, workdir):
    """Like a pod's FallbackToLogsOnError: a bring-your-own task that exits non-zero is
    explained in `status` by its output's last line (here a traceback's), progress lines
    skipped; and a BYO exit 2 is retried like any failure (only the built-in worker's is
    fatal), and said to be the program's code (the CLI's 2 is a spec error)."""
    crash = (
        "import sys; print('loading', flush=True); "
        "sys.stderr.write('Traceback...\\nValueError: bad shard 7\\n'); sys.stderr.flush(); "
        "print('tfk8s-progress {}', flush=True); sys.exit(2)"
    )
    spec = byo_spec("byo-crash", [crash], restartPolicy="Never", backoffLimit=1)
    backend.submit(spec)
    assert backend.wait(spec.name) == 2
    status = backend.status("byo-crash")
    assert status.message == "chief-0 exited 2 (your program's exit code): ValueError: bad shard 7"
    assert status.roles[0].failed == 2


# Keras 3's message for a layer's error: a wrapper line, the cause, then the call's arguments.
KERAS_LIKE_CRASH = """
def call(inputs):
    raise ValueError(
        "Exception encountered when calling Sequential.call().\\n\\n"
        "Input 0 of layer dense is incompatible with the layer: expected axis -1 of input shape "
        "to have value 784, but received input with shape (32, 28, 28)\\n\\n"
        "Arguments received by Sequential.call():\\n  - inputs=tf.Tensor(shape=(32, 28, 28))\\n"
        "  - kwargs=<class 'inspect._empty'>"
    )
print("epoch 1/3", flush=True)
call(None)
"""


def test_a_programs_cause_is_its_exception_not_the_tail_of_the_message(backend, workdir):
    """A program of the user's that dies of an exception with a multi-line message is
    explained by the exception's informative line (worker/exit_cause.py), in the run's message
    and the role's reason, not by the message's last line; a ValueError, deterministic, exits 70
    (worker/exception_check.py) with the rule after it."""
    spec = byo_spec("byo-keras", [KERAS_LIKE_CRASH], restartPolicy="Never", backoffLimit=0)
    backend.submit(spec)
    assert backend.wait(spec.name) == EXIT_DETERMINISTIC_EXCEPTION
    status = backend.status("byo-keras")
    cause = (
        "ValueError: Input 0 of layer dense is incompatible with the layer: expected axis -1 of input "
        "shape to have value 784, but received input with shape (32, 28, 28) (a ValueError is "
        "deterministic: not retried; retriedExceptions: [ValueError] retries it)"
    )
    # the cause gives the verdict: said once
    assert status.message == f"chief-0 exited 70: {cause}"
    assert status.roles[0].reason == f"chief-0: exited 70: {cause}"


def test_list_and_status_print_json_and_yaml_in_one_key_casing(backend, workdir, capsys):
    spec = byo_spec("byo-listed", ["import sys; sys.exit(3)"], restartPolicy="Never", backoffLimit=0)
    backend.submit(spec)
    assert backend.wait(spec.name) == 3
    where = ["--local", "--workdir", str(workdir)]
    assert cli.main(["list", *where, "-o", "json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == "byo-listed" and listed["phase"] == "Failed" and listed["exitCode"] == 3
    assert listed["roles"] == [
        {
            "role": "chief",
            "replicas": 1,
            "active": 0,
            "succeeded": 0,
            "failed": 1,
            "lastExitCode": 3,
            "reason": "chief-0: exited 3 (your program's exit code)",
        }
    ]
    assert cli.main(["list", *where, "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == [listed]
    assert cli.main(["status", "byo-listed", *where, "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == listed


@pytest.mark.process
def test_built_in_evaluator_ends_when_training_fails(backend, workdir):
    """The built-in evaluator exits by itself only after the final checkpoint: when the chief
    fails (here: a program module that does not exist, found after TensorFlow loaded), the
    evaluator is stopped with the cluster instead of waiting forever."""
    spec = make_spec("evalfail", "mirrored", ["--steps", "20"], evaluator=True, roles={"chief": 1})
    data = spec.model_dump(by_alias=True)
    data["roles"]["chief"]["env"] = {"TFK8S_PROGRAM": "no.such.module"}
    spec = type(spec).model_validate(data)
    run = Submission(backend, spec)
    wait_until(lambda: run_files(backend, "evalfail").read_pid("evaluator", 0), 60, "the evaluator to start")
    assert run.wait(600) == EXIT_CONFIG
    status = backend.status("evalfail")
    assert (
        status.phase == "Failed" and "no.such.module" in run_files(backend, "evalfail").log_path("chief", 0).read_text()
    )
    record = json.loads((workdir / "evalfail" / "status.json").read_text())
    evaluator = next(t for t in record["tasks"] if t["task"] == "evaluator-0")
    assert evaluator["state"] == "stopped" and evaluator["pid"] is None, evaluator
    assert_no_task_processes(workdir)


def test_bring_your_own_evaluator_is_stopped_after_the_grace(backend, workdir):
    spec = byo_spec("grace", ["print('trained')"], evaluator_command=SLEEP, evaluatorGraceSeconds=2)
    started = time.monotonic()
    backend.submit(spec)
    assert backend.wait(spec.name) == 0
    assert time.monotonic() - started < 30
    status = backend.status("grace")
    assert status.phase == "Succeeded" and "evaluatorGraceSeconds" in status.message
    assert "sleeping" in run_files(backend, "grace").log_path("evaluator", 0).read_text()


def test_evaluator_failure_does_not_fail_training(backend, workdir):
    spec = byo_spec(
        "evalfails", ["print('trained')"], evaluator_command="import sys; sys.exit(7)", restartPolicy="Never"
    )
    backend.submit(spec)
    assert backend.wait(spec.name) == 0
    status = backend.status("evalfails")
    assert status.phase == "Succeeded" and "evaluator failed" in status.message


def test_submit_starts_the_tasks_and_returns_and_wait_waits(backend):
    """The same meaning as on Kubernetes: in the foreground too, the tasks run once submit()
    returns, and status/watch see them before anyone waits."""
    backend.submit(byo_spec("started", ["import time; print('up', flush=True); time.sleep(2)"]))
    assert run_files(backend, "started").read_pid("chief", 0) is not None
    assert backend.status("started").phase == "Running"
    assert backend.wait("started") == 0
    assert backend.status("started").phase == "Succeeded"


def test_delete_stops_a_run_this_process_supervises(backend, workdir):
    backend.submit(byo_spec("stopped", [SLEEP]))
    wait_until(
        lambda: "sleeping" in run_files(backend, "stopped").log_path("chief", 0).read_text(), 60, "the chief to run"
    )
    backend.delete("stopped")
    assert_no_task_processes(workdir)
    assert backend.list() == []


def test_every_task_log_exists_once_submit_returns(backend, workdir):
    """submit() returns once the tasks have started; `logs` right after it finds each task's log
    (its header written by then), not a file the copying thread has yet to create (a CI run
    read the chief's log right after submit and found none)."""
    backend.submit(byo_spec("logged", [SLEEP], evaluator_command=SLEEP))
    files = run_files(backend, "logged")
    for role in ("chief", "evaluator"):
        assert files.log_path(role, 0).read_text().startswith(ATTEMPT_HEADER_START), role
    backend.delete("logged")
    assert_no_task_processes(workdir)


@pytest.fixture
def detached(workdir, tmp_path):
    """A backend whose runs are supervised by a detached process (the CLI without --wait)."""
    with (tmp_path / "waiter-output.log").open("w") as stream:
        yield LocalBackend(LocalProcessBackendConfig(workdir=workdir), stream=stream)
    assert_no_task_processes(workdir)


def test_detached_wait_polls_until_the_end_and_returns_the_chief_exit_code(detached, tmp_path):
    detached.submit(byo_spec("bg-ok", ["print('trained')"]))
    assert detached.wait("bg-ok") == 0
    detached.submit(byo_spec("bg-fails", [FLAKY, "99"], restartPolicy="Never", backoffLimit=0))
    assert detached.wait("bg-fails") == 3
    shown = (tmp_path / "waiter-output.log").read_text().splitlines()
    assert shown[-1].startswith("[Failed] chief 0/1 (1 failed) - chief-0 exited 3"), shown
    assert "[Succeeded] chief 0/1 (1 done)" in shown
    # A foreground backend that did not submit it only reads how it ended.
    foreground = LocalProcessBackendConfig(workdir=detached.config.workdir, foreground=True)
    assert LocalBackend(foreground, stream=io.StringIO()).wait("bg-fails") == 3
    assert "chief-0 exited 3" in run_files(detached, "bg-fails").supervisor_log.read_text()


def test_detached_run_status_logs_list_delete_leave_no_process(detached, workdir):
    backend = detached
    spec = byo_spec("detached", [SLEEP])
    backend.submit(spec)
    pid = wait_until(lambda: run_files(backend, "detached").read_pid("chief", 0), 60, "the chief to start")
    wait_until(lambda: backend.status("detached").phase == "Running", 30, "Running")
    wait_until(
        lambda: "sleeping" in run_files(backend, "detached").log_path("chief", 0).read_text(),
        30,
        "the chief's output in its log",
    )
    assert [c.name for c in backend.list()] == ["detached"]
    assert "sleeping\n" in list(backend.logs("detached", "chief", 0))
    # the same spec again: a no-op, as on Kubernetes; another spec: refused
    out = io.StringIO()
    LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True), stream=out).submit(spec)
    assert "local cluster 'detached' is unchanged (Running); nothing started" in out.getvalue()
    assert run_files(backend, "detached").read_pid("chief", 0) == pid
    with pytest.raises(SubmitRefused, match="is running with another spec"):
        LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True)).submit(
            byo_spec("detached", [SLEEP, "--other"])
        )
    (workdir / "detached" / "model" / "keep-me").write_text("checkpoint")
    backend.delete("detached")
    assert_no_task_processes(workdir)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert (workdir / "detached" / "model" / "keep-me").exists(), "delete removed model/"
    assert backend.list() == []


def test_sigterm_to_the_launcher_stops_every_task(tmp_path):
    """The CLI's path: submit() and wait() in the main thread of a process that gets SIGTERM."""
    workdir = tmp_path / "work"
    script = f"""
import sys
sys.path[:0] = [{str(REPO_ROOT / "tests")!r}, {str(Path(__file__).parent)!r}]
from test_backend import byo_spec, SLEEP
from launcher.backends.local import LocalBackend, LocalProcessBackendConfig
backend = LocalBackend(LocalProcessBackendConfig(workdir={str(workdir)!r}, foreground=True))
backend.submit(byo_spec("sigterm", [SLEEP]))
sys.exit(backend.wait("sigterm"))
"""
    launcher = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir))
    wait_until(
        lambda: (
            (workdir / "sigterm" / "logs" / "chief-0.log").exists()
            and "sleeping" in run_files(backend, "sigterm").log_path("chief", 0).read_text()
        ),
        60,
        "the chief to run",
    )
    launcher.send_signal(signal.SIGTERM)
    output, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signal.SIGTERM, output
    assert_no_task_processes(workdir)
    status = json.loads((workdir / "sigterm" / "status.json").read_text())
    assert status["phase"] == "Failed" and "SIGTERM" in status["message"]


# A program that, like TensorFlow under MWMS, catches SIGTERM and trains on.
IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, lambda signum, frame: print("ignoring SIGTERM", flush=True))
print("training", flush=True)
while True:
    time.sleep(1)
"""


def test_a_second_ctrl_c_kills_tasks_that_ignore_sigterm_at_once_and_names_them(tmp_path):
    """`submit --local --wait` (the CLI, foreground) of a program whose workers ignore SIGTERM:
    the first Ctrl-C sends SIGTERM and says a second one kills; the second SIGKILLs both workers
    at once, naming them. Before: the second Ctrl-C was ignored, the workers ran on until the
    grace (here 600 s) ended, and nothing said why."""
    workdir = tmp_path / "work"
    program = tmp_path / "stubborn.py"
    program.write_text(IGNORES_SIGTERM)
    spec = tmp_path / "stubborn.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "stubborn",
                "strategy": "multi_worker_mirrored",
                "image": "example.com/byo:1",
                "command": [sys.executable, str(program)],
                "roles": {"worker": {"replicas": 2}},
                "terminationGracePeriodSeconds": 600,  # only the second Ctrl-C ends them within the test
                "checkpoint": {"dir": "/ckpt/model", "volume": {"persistentVolumeClaim": {"claimName": "unused"}}},
            }
        )
    )
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "launcher",
            "submit",
            str(spec),
            "--local",
            "--wait",
            "--raw",
            "--workdir",
            str(workdir),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        files = run_files(LocalBackend(LocalProcessBackendConfig(workdir=workdir)), "stubborn")

        def logs_say(text):
            return all(
                files.log_path("worker", i).exists() and text in files.log_path("worker", i).read_text() for i in (0, 1)
            )

        wait_until(lambda: logs_say("training"), 60, "both workers to run")
        pids = [files.read_pid("worker", i) for i in (0, 1)]
        launcher.send_signal(signal.SIGINT)
        wait_until(lambda: logs_say("ignoring SIGTERM"), 30, "both workers to get (and ignore) SIGTERM")
        assert all(runner_alive(pid) for pid in pids)  # the grace runs: 600 s
        launcher.send_signal(signal.SIGINT)
        output, _ = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:  # before the fix: it waits out the grace; its tasks die with it
            launcher.kill()
            launcher.communicate()
    wait_until(lambda: not any(runner_alive(pid) for pid in pids), 10, "the workers to be gone")
    assert launcher.returncode == 128 + signal.SIGINT, output
    assert (
        "stopping: sent SIGTERM to 2 tasks (worker-0, worker-1); Ctrl-C again to kill them now "
        "(else SIGKILL after 600 s, terminationGracePeriodSeconds)"
    ) in output, output
    assert (
        "SIGKILL sent (Ctrl-C again): the program ignored SIGTERM: worker-0, worker-1 "
        "(TensorFlow's MultiWorkerMirroredStrategy installs its own SIGTERM handler)"
    ) in output, output
    assert_no_task_processes(workdir)


def test_a_second_sigterm_to_a_detached_supervisor_kills_a_task_that_ignores_sigterm(detached, workdir):
    """The detached supervisor (submit without --wait) does as the foreground one: a second
    SIGTERM (a second `kill`) SIGKILLs at once, naming the task. Before: ignored until the grace."""
    detached.submit(byo_spec("bg-stubborn", [IGNORES_SIGTERM], terminationGracePeriodSeconds=600))
    files = run_files(detached, "bg-stubborn")
    wait_until(lambda: "training" in files.log_path("chief", 0).read_text(), 60, "the chief to run")
    supervisor, chief = files.read_status()["supervisor_pid"], files.read_pid("chief", 0)
    os.kill(supervisor, signal.SIGTERM)
    wait_until(lambda: "ignoring SIGTERM" in files.log_path("chief", 0).read_text(), 30, "the chief to ignore SIGTERM")
    os.kill(supervisor, signal.SIGTERM)
    wait_until(lambda: not runner_alive(supervisor) and not runner_alive(chief), 60, "supervisor and chief to be gone")
    said = files.supervisor_log.read_text()
    assert "stopping: sent SIGTERM to 1 task (chief-0); SIGTERM again to kill it now" in said, said
    assert "SIGKILL sent (SIGTERM again): the program ignored SIGTERM: chief-0\n" in said, said
    assert detached.status("bg-stubborn").phase == "Failed"


def runner_alive(pid) -> bool:
    from launcher.backends.local import runner

    return runner.alive(pid)


def test_sigkill_to_the_launcher_takes_its_tasks_along(tmp_path):
    """Linux PR_SET_PDEATHSIG: even a launcher that cannot clean up leaves no task behind."""
    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signal is Linux-only")
    workdir = tmp_path / "work"
    script = f"""
import sys
sys.path[:0] = [{str(REPO_ROOT / "tests")!r}, {str(Path(__file__).parent)!r}]
from test_backend import byo_spec, SLEEP
from launcher.backends.local import LocalBackend, LocalProcessBackendConfig
backend = LocalBackend(LocalProcessBackendConfig(workdir={str(workdir)!r}, foreground=True))
backend.submit(byo_spec("sigkill", [SLEEP]))
backend.wait("sigkill")
"""
    launcher = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir))
    wait_until(lambda: run_files(backend, "sigkill").read_pid("chief", 0), 60, "the chief to start")
    launcher.kill()
    launcher.wait()
    wait_until(lambda: not _task_processes_left(workdir), 10, "the chief to die with the launcher")
    assert backend.status("sigkill").phase == "Unknown"


def _task_processes_left(workdir) -> bool:
    from local_clusters import task_processes

    return bool(task_processes(workdir))


def test_local_run_says_it_ignores_the_kubernetes_workload(tmp_path):
    """workload/queue/priorityClassName mean nothing to local processes: the run says so and
    plans plain tasks (PS servers supervised as under `workload: jobs`)."""
    import io

    from support import REPO

    from launcher.backends.local.preflight import as_processes
    from launcher.cluster_spec.loader import load_file
    from launcher.plan.plan import plan

    out = io.StringIO()
    spec = as_processes(load_file(REPO / "examples" / "ps-queued.yaml"), out)
    assert out.getvalue().startswith("note: --local ignores workload: jobset, queue: tfk8s-queue (Kubernetes only)")
    assert spec.workload.value == "jobs" and spec.queue is None
    assert set(plan(spec).supervised) == {"worker", "ps", "evaluator"}
    quiet = io.StringIO()
    as_processes(load_file(REPO / "examples" / "ps.yaml"), quiet)
    assert quiet.getvalue() == ""


def test_logs_all_tail_is_per_task_as_on_kubernetes(tmp_path):
    """`logs --all --tail N`: N lines of each task (Kubernetes reads each pod's tail), not N in
    all, which left the quieter tasks out."""
    from launcher.backends.local.logs import read_log

    combined = tmp_path / "all.log"
    combined.write_text(
        "".join(
            [f"[chief-0] step {n}\n" for n in range(5)]
            + ["[tfk8s] chief-0 started\n"]
            + [f"[worker-0] line {n}\n" for n in range(2)]
            + [f"[chief-0] step {n}\n" for n in (5, 6)]
        )
    )
    lines = list(read_log(combined, "all", lambda: True, False, tail=2, per_task=True))
    assert lines == [
        "[tfk8s] chief-0 started\n",
        "[worker-0] line 0\n",
        "[worker-0] line 1\n",
        "[chief-0] step 5\n",
        "[chief-0] step 6\n",
    ]
