"""End-of-job supervisor for tasks that never exit by themselves (stdlib only).

TensorFlow ps and worker servers block in `server.join()` forever, and a user's evaluator may
poll for checkpoints forever: Kubernetes would keep their Jobs running after training ended.
This script is shipped in the cluster's ConfigMap and runs in two containers of such a pod:

    python3 /var/run/tfk8s/supervise.py run -- <task command...>   # the task's container
    python3 /var/run/tfk8s/supervise.py watch                       # the job-watch container

`watch` alone holds the pod's service-account token: TF's gRPC server is unauthenticated and
can read any file of its own container, so the task's container mounts no credential. `watch`
follows the training Job (one long-lived watch request, renewed every TFK8S_WATCH_SECONDS; the
account may only list/watch that Job, by name) and once it has ended writes the verdict
(succeeded, failed, gone) into the directory both containers share, then exits 0. `run` runs
the task as a child and reads the verdict each second: after a success the child may run
TFK8S_GRACE_SECONDS more (the evaluator, evaluating the final checkpoint); after a failure, or
when the Job is gone, it is stopped at once; then `run` exits 0 and the task's Job completes.
A child that exits on its own leaves with its code (killed by signal N: 128 + N, as a shell
says it); `run` records the code in the shared directory and `watch` ends too, so the pod
completes (unless the pod restarts failed containers, OnFailure: then `watch` stays). SIGTERM
(pod deletion) is passed on: a server dying of it exits 143, which podFailurePolicy ignores.

No answer at all from the API server for TFK8S_API_GIVE_UP_SECONDS (egress to it blocked, the
token missing, a 401/403): `watch` gives up with the verdict api-unreachable and one line saying
why; `run` stops the task and exits EXIT_API_UNREACHABLE with that line as the termination
message. Any other HTTP status (429, 5xx: an overloaded or upgrading API server) is an answer,
and once it has answered, errors are retried without end with a growing pause: an outage must
not kill a healthy server. While every connection is refused (an API server restarting, or an
egress policy that rejects: the same TCP answer), the bound is TFK8S_API_REFUSED_GIVE_UP_SECONDS
instead. A restarted `run` (OnFailure) ignores an earlier give-up.

Environment (TFK8S_...): WATCH_JOB, the Job whose end ends the task; NAMESPACE, its namespace;
WATCH_SECONDS (300); API_GIVE_UP_SECONDS (300); API_REFUSED_GIVE_UP_SECONDS (900);
POD_RESTART_POLICY, the pod's (Never);
RESTART_ATTEMPT, in a JobSet this pod's restart attempt: a watched Job of an earlier attempt is
not ours, as if not created yet (acting on it would stop a new attempt's evaluator at once).
For `run`: GRACE_SECONDS (0) after a success; POD_GRACE_SECONDS, the pod's grace period (30),
within which SIGKILL follows SIGTERM when stopping the child. Both: SUPERVISOR_STATE_DIR.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading

try:  # in the pod both scripts lie side by side in the ConfigMap's directory
    from job_watch import ABSENT, DEFAULT_WATCH_SECONDS, SUCCEEDED, ApiServer, ApiUnreachable, log, wait_for_end
except ImportError:  # imported as launcher.pod.supervise (the renderer, tests)
    from launcher.pod.job_watch import (
        ABSENT,
        DEFAULT_WATCH_SECONDS,
        SUCCEEDED,
        ApiServer,
        ApiUnreachable,
        log,
        wait_for_end,
    )

# This script's interface (it runs alone in the pod, so it cannot import the contract; the
# renderer and launcher/k8s_contract.py import these names from here).
WATCH_JOB_ENV = "TFK8S_WATCH_JOB"
NAMESPACE_ENV = "TFK8S_NAMESPACE"
GRACE_ENV = "TFK8S_GRACE_SECONDS"
POD_GRACE_ENV = "TFK8S_POD_GRACE_SECONDS"
WATCH_SECONDS_ENV = "TFK8S_WATCH_SECONDS"
RESTART_ATTEMPT_ENV = "TFK8S_RESTART_ATTEMPT"
GIVE_UP_ENV = "TFK8S_API_GIVE_UP_SECONDS"
REFUSED_GIVE_UP_ENV = "TFK8S_API_REFUSED_GIVE_UP_SECONDS"
POD_RESTART_POLICY_ENV = "TFK8S_POD_RESTART_POLICY"
STATE_DIR_ENV = "TFK8S_SUPERVISOR_STATE_DIR"
STATE_DIR = "/var/run/tfk8s-state"  # an emptyDir both containers mount
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_LOG_ENV = "TFK8S_TERMINATION_LOG"  # elsewhere only in tests
# `run`'s exit when `watch` never reached the API server: counted by the Jobs' podFailurePolicy
# like any unlisted code (plan.restart_rules says why). No worker exit code may take it.
EXIT_API_UNREACHABLE = 7
DEFAULT_GIVE_UP_SECONDS = 300.0
# While every connection is refused: a control-plane restart (an upgrade, a crashed API server)
# refuses for minutes, and is no reason to spend a retry of the training.
DEFAULT_REFUSED_GIVE_UP_SECONDS = 900.0
# Verdicts `watch` writes for `run` (the file's first line; a reason may follow).
VERDICT_FILE, TASK_EXITED_FILE = "verdict", "task-exited"
SUCCEEDED_VERDICT, FAILED_VERDICT, GONE_VERDICT = "succeeded", "failed", "gone"
API_UNREACHABLE_VERDICT = "api-unreachable"


def exit_status(returncode: int) -> int:
    """Popen's returncode as the shell reports it: killed by signal N -> 128 + N.

    A ps/worker server killed by the SIGTERM of a pod deletion must exit 143 (128 + 15), the
    code the Jobs' podFailurePolicy ignores, like the built-in worker's own EXIT_PREEMPTED; as
    sys.exit(-15) it would be 241, a failure counted against backoffLimit.
    """
    return 128 - returncode if returncode < 0 else returncode


def stop_timeout(pod_grace: float) -> float:
    """SIGTERM -> SIGKILL wait when stopping the child: inside the pod's grace period, with up
    to 5 s left for us to exit, so that the kubelet never has to kill the pod itself."""
    return max(pod_grace - min(5.0, pod_grace / 2), 0.5)


def stop(child: subprocess.Popen, timeout: float = 20.0) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"task did not stop within {timeout:.0f}s of SIGTERM; sending SIGKILL")
        child.kill()
        child.wait()


# What either container reads from the shared directory: a verdict line and its reason.
MAX_STATE_FILE_BYTES = 4096
_refused: set[str] = set()  # files already said to be refused (the directory is polled each second)


def write_file(path: str, text: str) -> None:
    """Whole or not at all: the other container polls the file. Written to a new file of a
    fresh name (O_EXCL, no link followed), then renamed over `path` (a rename replaces a link
    planted there, never writes through it): the task's container shares the directory."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
    try:
        os.fchmod(fd, 0o644)  # the other container may run as another uid of the pod's group
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


def read_file(path: str) -> str | None:
    """The file's text (its first MAX_STATE_FILE_BYTES), None when there is none. Only a
    regular file, opened without following a link: the task's container could plant in the
    shared directory a link to the job-watch container's token, or a FIFO that blocks the
    reader; either is refused, said once, and read as absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _refuse(path, "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _refuse(path, "not a regular file")
        if info.st_nlink != 1:
            return _refuse(path, f"a file with {info.st_nlink} links")
        return f.read(MAX_STATE_FILE_BYTES).decode("utf-8", "replace")


def _refuse(path: str, why: str) -> None:
    if path not in _refused:
        _refused.add(path)
        log(f"ignoring {path}: {why}; only a regular file written by the other container is read")
    return None


def say_last(message: str) -> None:
    """Why the pod ends, as its last log line and its termination message (for `status`)."""
    log(message)
    path = os.environ.get(TERMINATION_LOG_ENV, TERMINATION_LOG)
    try:
        with open(path, "w") as f:
            f.write(message + "\n")
    except OSError as exc:
        log(f"cannot write the termination message {path}: {exc}")


def verdict_of(state: str) -> str:
    """The verdict for a wait_for_end result: a TERMINAL condition type or ABSENT."""
    return SUCCEEDED_VERDICT if state in SUCCEEDED else GONE_VERDICT if state == ABSENT else FAILED_VERDICT


def leave_now(*_signal) -> None:
    """Exit 0 at once. Not sys.exit: interpreter shutdown while the watch thread waits in a
    socket read crashed the process with SIGSEGV (exit -11) in 4 of 6 runs of
    test_watch_ends_0_on_pod_deletion here; there is nothing to clean up but the output."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def watch(state_dir: str) -> int:
    """The job-watch container: follow the Job, write the verdict, exit 0. Ends (0) as soon as
    the task's container will not run again: its task exited, successfully or for good."""
    watched, namespace = os.environ[WATCH_JOB_ENV], os.environ[NAMESPACE_ENV]
    attempt_text = os.environ.get(RESTART_ATTEMPT_ENV, "")
    restarts = os.environ.get(POD_RESTART_POLICY_ENV, "Never") != "Never"
    # PID 1 ignores signals it has no handler for: pod deletion must end us (0: the pod's
    # outcome is the task container's, the only one podFailurePolicy looks at).
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, leave_now)
    verdict: list[str] = []

    def follow() -> None:
        try:
            state = wait_for_end(
                ApiServer.in_cluster(),
                namespace,
                watched,
                watch_seconds=float(os.environ.get(WATCH_SECONDS_ENV, DEFAULT_WATCH_SECONDS)),
                attempt=int(attempt_text) if attempt_text else None,
                give_up_seconds=float(os.environ.get(GIVE_UP_ENV, DEFAULT_GIVE_UP_SECONDS)),
                refused_give_up_seconds=float(os.environ.get(REFUSED_GIVE_UP_ENV, DEFAULT_REFUSED_GIVE_UP_SECONDS)),
            )
            verdict.append(verdict_of(state))
            log(f"job {namespace}/{watched} ended ({state}): verdict {verdict[0]}")
        except ApiUnreachable as exc:
            verdict.append(f"{API_UNREACHABLE_VERDICT}\n{exc}")
        except Exception as exc:  # noqa: BLE001 - no credential, no API address: no retry cures
            verdict.append(
                f"{API_UNREACHABLE_VERDICT}\ntfk8s supervisor: cannot follow job {namespace}/{watched}: {exc}"
            )

    thread = threading.Thread(target=follow, name="watch", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(1.0)
        exited = task_exit_code(state_dir)
        if exited is not None and (exited == 0 or not restarts):
            log(f"the task exited ({exited}); nothing left to watch")
            return 0
    kind, _, reason = verdict[0].partition("\n")
    if reason:
        say_last(reason)
    write_file(f"{state_dir}/{VERDICT_FILE}", verdict[0] + "\n")
    # Under OnFailure the task's container is restarted in place after its exit 7: this one
    # must be too (exit 1), or the restarted task would run with nobody watching the Job.
    return 1 if kind == API_UNREACHABLE_VERDICT and restarts else 0


def task_exit_code(state_dir: str) -> int | None:
    """The code `run` recorded when its task exited; None before, or for anything but a number
    (the task's container can write the file: only a code is believed, and logged)."""
    text = read_file(f"{state_dir}/{TASK_EXITED_FILE}")
    if text is None:
        return None
    if not re.fullmatch(r"-?[0-9]{1,4}", text.strip()):
        _refuse(f"{state_dir}/{TASK_EXITED_FILE}", "not an exit code")
        return None
    return int(text.strip())


def forget_an_earlier_attempts_give_up(state_dir: str) -> None:
    """Under OnFailure this container restarts in place after exiting EXIT_API_UNREACHABLE, and
    the shared directory keeps that verdict: read again, it would stop the new attempt at once,
    every time, until backoffLimit. It belongs to the earlier attempt; the restarted `watch`
    decides anew. The Job's own end (succeeded, failed, gone) stays: it holds for every attempt."""
    path = f"{state_dir}/{VERDICT_FILE}"
    verdict = read_file(path)
    if verdict is not None and verdict.startswith(API_UNREACHABLE_VERDICT):
        log("an earlier attempt gave up on the API server; watching the Job again")
        os.remove(path)


def run(command: list[str], state_dir: str) -> int:
    """The task's container: run the task, stop it on the verdict, leave with the task's code."""
    grace = float(os.environ.get(GRACE_ENV, "0"))
    timeout = stop_timeout(float(os.environ.get(POD_GRACE_ENV, "30")))
    # Pod deletion sends SIGTERM to PID 1 (us): pass it on and leave with the child's code. The
    # handlers go in before the child starts: a signal in between would otherwise be ignored
    # (PID 1 in a pod) or end us and orphan the task (elsewhere). One that comes before the child
    # exists is held and passed on once it does.
    child: subprocess.Popen | None = None
    held: list[int] = []

    def forward(signum, _frame=None):
        if child is None:
            held.append(signum)
        elif child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    forget_an_earlier_attempts_give_up(state_dir)
    child = subprocess.Popen(command)
    for signum in held:
        forward(signum)

    def exited(code: int) -> int:
        log(f"task exited with code {code}")
        write_file(f"{state_dir}/{TASK_EXITED_FILE}", f"{code}\n")  # `watch` may end now
        return code

    while True:
        try:
            return exited(exit_status(child.wait(timeout=1.0)))
        except subprocess.TimeoutExpired:
            pass
        verdict = read_file(f"{state_dir}/{VERDICT_FILE}")
        if verdict:
            break
    kind, _, reason = verdict.strip().partition("\n")
    if kind == API_UNREACHABLE_VERDICT:
        stop(child, timeout)
        say_last(reason)
        return EXIT_API_UNREACHABLE
    grace = grace if kind == SUCCEEDED_VERDICT else 0.0
    log(f"training ended ({kind}); stopping the task" + (f" within {grace:.0f}s" if grace else ""))
    try:
        return exited(exit_status(child.wait(timeout=grace)))
    except subprocess.TimeoutExpired:
        pass
    stop(child, timeout)
    log("task stopped after training ended; exiting 0")
    return 0


def main(argv: list[str]) -> int:
    state_dir = os.environ.get(STATE_DIR_ENV, STATE_DIR)
    if argv[:1] == ["watch"] and len(argv) == 1:
        return watch(state_dir)
    if argv[:2] == ["run", "--"] and len(argv) > 2:
        return run(argv[2:], state_dir)
    log("usage: supervise.py watch | supervise.py run -- <command...>")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
