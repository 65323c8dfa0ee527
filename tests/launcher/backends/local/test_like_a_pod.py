"""`--local` does what a pod does: $(VAR) references expanded as the kubelet expands them, a closed
terminal (SIGHUP) stops the tasks with SIGTERM as a pod's are stopped, one submit of a name at a
time, and a run that cannot fit this machine's process limits refused before anything starts."""

from __future__ import annotations

import fcntl
import io
import json
import os
import resource
import select
import signal
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest
from local_clusters import (
    REPO_ROOT,
    LocalBackend,
    LocalProcessBackendConfig,
    assert_no_task_processes,
    run_files,
    wait_until,
    worker_args,
)

sys.path.insert(0, str(Path(__file__).parent))  # as test_backend.py's own scripts import it
from test_backend import SLEEP, byo_spec  # noqa: E402

from launcher.backends.local.preflight import ResourceLimitError
from launcher.backends.local.tasks import expand, expand_command, expand_env
from launcher.cluster_spec.spec import ClusterSpec
from launcher.errors import SubmitRefused
from worker.contract import EXIT_PREEMPTED

# --- $(VAR) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)", "x"),
        ("pre-$(A)-post", "pre-x-post"),
        ("$(A)$(A)", "xx"),
        ("$$(A)", "$(A)"),  # escaped: the reference itself
        ("$$$(A)", "$x"),
        ("$$", "$"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),  # left as written
        ("$()", "$()"),
        ("$(A", "$(A"),  # never closed
        ("$A", "$A"),  # shell syntax is not a reference
        ("a$", "a$"),
        ("$(A)$", "x$"),
        ("$(EMPTY)|", "|"),
    ],
)
def test_a_reference_expands_as_kubernetes_expands_it(text, expanded):
    assert expand(text, {"A": "x", "EMPTY": ""}) == expanded


def test_an_env_value_sees_only_the_variables_defined_before_it():
    env = expand_env([("A", "1"), ("B", "$(A)-$(C)"), ("C", "3"), ("D", "$(B)+$(C)")])
    assert env == {"A": "1", "B": "1-$(C)", "C": "3", "D": "1-$(C)+3"}
    assert expand_command(["run", "$(D)", "$(HOME)"], env) == ["run", "1-$(C)+3", "$(HOME)"]


# Prints what its argument and its env OUT became.
PRINT_REFERENCES = "import os, sys; print('ARG=' + sys.argv[1]); print('OUT=' + os.environ['OUT'])"


def test_model_dir_reference_in_args_and_env_is_the_runs_model_dir(backend, workdir):
    """examples/byo.yaml's `$(TFK8S_MODEL_DIR)` in args: the pod's model dir on Kubernetes,
    the run's model/ here (it was passed literally, and the task wrote to /ckpt/... ). A
    reference to a variable the container does not define (the host's HOME) stays as written."""
    spec = byo_spec(
        "refs",
        [PRINT_REFERENCES, "$(TFK8S_MODEL_DIR)/export"],
        env={"OUT": "$(TFK8S_MODEL_DIR)/out:$$(TFK8S_MODEL_DIR):$(HOME)"},
    )
    backend.submit(spec)
    assert backend.wait("refs") == 0
    model = run_files(backend, "refs").dir / "model"
    log = run_files(backend, "refs").log_path("chief", 0).read_text().splitlines()
    assert f"ARG={model}/export" in log
    assert f"OUT={model}/out:$(TFK8S_MODEL_DIR):$(HOME)" in log


def test_env_entries_reach_the_process_in_order_each_from_the_ones_before(backend, workdir):
    """A=1, B=$(A)-x as a list: B is 1-x in the running process, as in a pod (tests/kind/
    test_cluster_smoke.py checks the pod); C, written before D, does not see it."""
    spec = byo_spec(
        "order",
        ["import os; print('B=' + os.environ['B']); print('C=' + os.environ['C'])"],
        env=[
            {"name": "A", "value": "1"},
            {"name": "C", "value": "$(D)"},
            {"name": "B", "value": "$(A)-x"},
            {"name": "D", "value": "d"},
        ],
    )
    backend.submit(spec)
    assert backend.wait("order") == 0
    log = run_files(backend, "order").log_path("chief", 0).read_text().splitlines()
    assert "B=1-x" in log
    assert "C=$(D)" in log


# --- SIGHUP ----------------------------------------------------------------------------------

# Trains until SIGTERM, then "saves" and exits 143, as the built-in worker does.
SAVES_ON_SIGTERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print("saved on SIGTERM", flush=True), sys.exit(143)))
print("training", flush=True)
time.sleep(600)
"""


def test_closing_the_terminal_of_a_foreground_run_stops_its_tasks_with_sigterm(tmp_path):
    """The user's case: `submit --local --wait` in a terminal that is closed. The kernel sends
    SIGHUP to the launcher (the terminal's session leader) and its writes to the terminal fail;
    the tasks (sessions of their own) must get the SIGTERM a pod gets, and save, not the
    parent-death SIGKILL of a launcher that died of SIGHUP."""
    workdir = tmp_path / "work"
    spec = "byo_spec('hangup', [SAVES_ON_SIGTERM])"
    launcher = close_the_terminal_of_a_run(workdir, spec, "hangup", lambda shown: b"[chief-0] training" in shown)
    log = (workdir / "hangup" / "logs" / "chief-0.log").read_text()
    assert "saved on SIGTERM" in log, log
    status = json.loads((workdir / "hangup" / "status.json").read_text())
    assert status["phase"] == "Failed" and "SIGHUP" in status["message"], status
    assert launcher.returncode == 128 + signal.SIGHUP
    assert_no_task_processes(workdir)


@pytest.mark.process
def test_closing_the_terminal_of_a_real_training_saves_the_step_it_reached(tmp_path, backend):
    """The built-in worker (mirrored custom loop, the small program, no periodic checkpoint
    before step 100000): the terminal closed mid-training, the chief saves the step it had
    reached and exits 143; that save is the model dir's only checkpoint."""
    workdir = tmp_path / "work"
    args = worker_args(200000, 100000, batch=16)
    program = {"module": "worker.examples.digits", "args": args}
    progress_every_second = {"TFK8S_PROGRESS_SECONDS": "1"}
    spec = f"make_spec('hupt', 'mirrored', [], evaluator=False, program={program!r}, env={progress_every_second!r})"

    def past_the_first_step(shown: bytes) -> bool:
        return shown.count(b'"event": "step"') >= 3  # progress lines, a second apart

    launcher = close_the_terminal_of_a_run(workdir, spec, "hupt", past_the_first_step, backend.config.task_python)
    assert launcher.returncode == 128 + signal.SIGHUP
    log = (workdir / "hupt" / "logs" / "chief-0.log").read_text()
    records = [json.loads(line.split(" ", 1)[1]) for line in log.splitlines() if line.startswith("tfk8s-progress ")]
    reached = max(r["step"] for r in records if r["event"] == "step")
    [preempted] = [r for r in records if r["event"] == "preempted"]
    [exited] = [r for r in records if r["event"] == "exit"]
    checkpoints = sorted(p.name for p in (workdir / "hupt" / "model" / "checkpoints").glob("ckpt-*.index"))
    print(f"SIGHUP of a real training: reached step {reached}, saved {preempted}, checkpoints {checkpoints}")
    assert exited["code"] == EXIT_PREEMPTED and preempted["step"] >= reached > 1, records[-5:]
    assert checkpoints == [f"ckpt-{preempted['step']}.index"] and preempted["checkpoint"].endswith(
        f"ckpt-{preempted['step']}"
    ), (preempted, checkpoints)
    # the checkpoint holds the optimizer at that step, not only that step's name
    read = (
        "import sys, tensorflow as tf; r = tf.train.load_checkpoint(sys.argv[1]); "
        "print(*[int(r.get_tensor(k)) for k in r.get_variable_to_shape_map() if 'iterations/' in k])"
    )
    done = subprocess.run(
        [backend.config.task_python, "-c", read, preempted["checkpoint"]], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [str(preempted["step"])], done.stdout
    assert_no_task_processes(workdir)


def close_the_terminal_of_a_run(workdir, spec: str, name: str, until, python: str | None = None):
    """Runs `submit --local --wait` of `spec` (an expression over this module's and
    local_clusters' names) as a launcher in a terminal of its own, closes the terminal once what
    it shows passes `until`, and returns the ended launcher."""
    script = f"""
import sys
sys.path[:0] = [{str(REPO_ROOT / "tests")!r}, {str(Path(__file__).parent)!r}]
from test_like_a_pod import byo_spec, SAVES_ON_SIGTERM
from local_clusters import make_spec
from launcher.backends.local import LocalBackend, LocalProcessBackendConfig
config = LocalProcessBackendConfig(workdir={str(workdir)!r}, foreground=True, echo_tasks=True, python={python!r})
backend = LocalBackend(config, stream=sys.stdout)  # the CLI's: the library's own default is logging
backend.submit({spec})
sys.exit(backend.wait({name!r}))
"""
    terminal, terminal_side = os.openpty()

    def take_the_terminal():  # as a login shell's terminal: this session's controlling tty
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    launcher = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        stdin=terminal_side,
        stdout=terminal_side,
        stderr=terminal_side,
        start_new_session=True,
        preexec_fn=take_the_terminal,
    )
    os.close(terminal_side)
    shown = bytearray()

    def passed() -> bool:
        while select.select([terminal], [], [], 0)[0]:  # read what it shows: a full terminal blocks it
            shown.extend(os.read(terminal, 65536))
        return until(bytes(shown))

    try:
        wait_until(passed, 90, f"the terminal to show what {name} waits for")
    finally:
        os.close(terminal)  # the terminal window closes
    launcher.wait(timeout=90)
    return launcher


# --- one submit at a time --------------------------------------------------------------------


def test_a_second_submit_of_a_name_while_the_first_submits_is_refused_naming_its_pid(workdir):
    """Two launchers submitting one name at once started two clusters in one dir (shared logs
    and model dir, then a FileNotFoundError between their status writes). The second is refused
    in one line; the first runs. Here the first is another process that holds the submit lock
    (as a submit does while it checks and starts the run)."""
    lock_path = run_files(LocalBackend(LocalProcessBackendConfig(workdir=workdir)), "twice").submit_lock_path
    holder_script = f"""
import sys
sys.path.insert(0, {str(REPO_ROOT)!r})
from launcher.backends.local.files import RunFiles
from pathlib import Path
with RunFiles(Path({str(workdir)!r}), "twice").submit_lock():
    print("holding", flush=True)
    sys.stdin.read()
"""
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        second = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True), stream=io.StringIO())
        with pytest.raises(SubmitRefused) as refused:
            second.submit(byo_spec("twice", [SLEEP]))
        assert str(refused.value) == (
            f"local cluster 'twice' is being submitted by another launcher (pid {holder.pid}, lock "
            f"{lock_path}); wait for that submit to return, then see `status`"
        )
        assert not (workdir / "twice" / "status.json").exists(), "the refused submit started a run"
    finally:
        holder.communicate("", timeout=30)


def test_two_parallel_submits_of_one_name_start_one_run(workdir):
    """The race itself: two submits in parallel; exactly one starts the run, the other is
    refused (by the lock, or by the run the first recorded), and one supervisor runs it."""
    start = threading.Barrier(2)
    results: list[object] = []

    def submit():
        backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir), stream=io.StringIO())
        spec = byo_spec("race", [SLEEP], env={"WHO": str(threading.get_ident())})  # two different specs
        start.wait()
        try:
            backend.submit(spec)
            results.append("started")
        except SubmitRefused as exc:
            results.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir))
    try:
        assert results.count("started") == 1, results
        wait_until(lambda: run_files(backend, "race").read_pid("chief", 0), 60, "the chief to start")
        log = run_files(backend, "race").log_path("chief", 0).read_text()
        assert log.count("=== tfk8s: chief-0 attempt") == 1, log
    finally:
        backend.delete("race")
    assert_no_task_processes(workdir)


# --- process limits ----------------------------------------------------------------------------


def ps_spec(name: str, workers: int) -> ClusterSpec:
    """A parameter-server cluster of stand-in tasks: one chief, `workers` workers, one ps."""
    return ClusterSpec.model_validate(
        {
            "name": name,
            "strategy": "parameter_server",
            "image": "example.com/byo:1",
            "command": [sys.executable, "-c", SLEEP],
            "roles": {"chief": {"replicas": 1}, "worker": {"replicas": workers}, "ps": {"replicas": 1}},
        }
    )


def test_ten_thousand_replicas_are_refused_before_anything_starts(workdir):
    """The spec's most replicas: each TF_CONFIG lists 10,000 addresses, over what one variable
    may hold (execve: Argument list too long), and 10,000 tasks' pipes and logs are over the
    open files allowed. Refused in one line; no dir, no Unknown cluster for a resubmit to meet."""
    spec = ps_spec("huge", workers=10000)
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True), stream=io.StringIO())
    with pytest.raises(ResourceLimitError) as refused:
        backend.submit(spec)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("local cluster 'huge' does not fit this machine: ")
    assert "chief-0's env TF_CONFIG is " in message
    assert "over the 131072 Linux allows one variable or argument (it lists every task's address: run fewer" in message
    assert message.endswith("(nothing was started)")
    assert not (workdir / "huge").exists()
    assert backend.list() == []


@pytest.fixture
def open_files_limit():
    """Lowers this process's open-files limit (the soft one, which ulimit -n sets) for a test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield lambda limit: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_more_tasks_than_open_files_allow_are_refused_in_one_line(workdir, open_files_limit):
    open_now = len(os.listdir("/proc/self/fd"))
    open_files_limit(open_now + 100)
    spec = ps_spec("many", workers=60)
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True), stream=io.StringIO())
    with pytest.raises(ResourceLimitError) as refused:
        backend.submit(spec)
    message = str(refused.value)
    assert "62 tasks need about " in message and f"open files, over the limit of {open_now + 100} " in message
    assert "(raise it with `ulimit -n " in message and "\n" not in message
    assert not (workdir / "many").exists()
