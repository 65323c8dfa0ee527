"""End-of-job supervisor for tasks that never exit by themselves (stdlib only).

TensorFlow ps and worker servers block in `server.join()` forever, and a user's evaluator may
poll for checkpoints forever. Kubernetes would keep their Jobs running after training ended.
This script is shipped in the cluster's ConfigMap and wraps such a task:

    python3 /var/run/tfk8s/supervise.py -- <task command...>

It runs the task as a child and polls the API server (the pod's service account may only `get`
the watched Job, by name) until the training Job has finished. Then it stops the child and exits
0, so the task's Job completes instead of running forever. After a success the child may run
TFK8S_GRACE_SECONDS more (the evaluator, evaluating the final checkpoint); after a failure, or
when the Job is gone, it is stopped at once (there is no final checkpoint to wait for).

A child that exits on its own leaves with its code; one killed by signal N with 128 + N, as a
shell reports it. Pod deletion sends SIGTERM to us (PID 1): it is passed on, so a server that
dies of it exits 143, the code the Jobs' podFailurePolicy does not count as a failure.

Environment:
  TFK8S_WATCH_JOB          the Job whose end ends this task (the chief's, or worker's under MWMS)
  TFK8S_NAMESPACE          its namespace
  TFK8S_GRACE_SECONDS      how long the child may keep running after training succeeded (default 0)
  TFK8S_POD_GRACE_SECONDS  the pod's terminationGracePeriodSeconds (default 30): stopping the
                           child, SIGKILL follows SIGTERM within it, before the kubelet's own
  TFK8S_POLL_SECONDS       how often to ask the API server (default 5)
"""
from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# This script's interface (it runs alone in the pod, so it cannot import the contract; the
# renderer imports these names from here).
WATCH_JOB_ENV = "TFK8S_WATCH_JOB"
NAMESPACE_ENV = "TFK8S_NAMESPACE"
GRACE_ENV = "TFK8S_GRACE_SECONDS"
POD_GRACE_ENV = "TFK8S_POD_GRACE_SECONDS"
POLL_ENV = "TFK8S_POLL_SECONDS"
SUCCEEDED = {"Complete", "SuccessCriteriaMet"}
TERMINAL = SUCCEEDED | {"Failed", "FailureTarget"}


def log(message: str) -> None:
    print(f"[tfk8s-supervise] {message}", file=sys.stderr, flush=True)


def job_state(namespace: str, name: str) -> str | None:
    """'Complete'/'Failed'-like condition type once the Job has ended, 'running', or 'absent'."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    with open(f"{SA_DIR}/token") as f:  # re-read: projected tokens rotate
        token = f.read().strip()
    request = urllib.request.Request(
        f"https://{host}:{port}/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )
    context = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            job = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "absent"
        raise
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in TERMINAL and condition.get("status") == "True":
            return condition["type"]
    return "running"


def exit_status(returncode: int) -> int:
    """Popen's returncode as the shell reports it: killed by signal N -> 128 + N.

    A ps/worker server killed by the SIGTERM of a pod deletion must exit 143 (128 + 15), the
    code the Jobs' podFailurePolicy ignores, like the built-in worker's own EXIT_PREEMPTED; as
    sys.exit(-15) it would be 241, a failure counted against backoffLimit.
    """
    return 128 - returncode if returncode < 0 else returncode


def grace_after(state: str, grace: float) -> float:
    """Seconds the child may go on once the watched Job reached `state` (a TERMINAL condition
    type, or 'absent' when it was deleted): the grace after a success, none otherwise."""
    return grace if state in SUCCEEDED else 0.0


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


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        log("usage: supervise.py -- <command...>")
        return 2
    command = argv[argv.index("--") + 1:]
    watched = os.environ[WATCH_JOB_ENV]
    namespace = os.environ[NAMESPACE_ENV]
    grace = float(os.environ.get(GRACE_ENV, "0"))
    timeout = stop_timeout(float(os.environ.get(POD_GRACE_ENV, "30")))
    poll = float(os.environ.get(POLL_ENV, "5"))

    child = subprocess.Popen(command)

    # Pod deletion sends SIGTERM to PID 1 (us): pass it on and leave with the child's code.
    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    seen = False
    ended_at = None
    while True:
        try:
            code = exit_status(child.wait(timeout=poll))
            log(f"task exited with code {code}")
            return code
        except subprocess.TimeoutExpired:
            pass
        if ended_at is None:
            try:
                state = job_state(namespace, watched)
            except Exception as exc:  # API hiccups must never kill a healthy server
                log(f"cannot read job {namespace}/{watched} yet: {exc}")
                continue
            if state == "running":
                seen = True
                continue
            if state == "absent" and not seen:
                continue  # not created yet (e.g. Helm applies Jobs one by one)
            ended_at = time.monotonic()
            grace = grace_after(state, grace)
            log(f"job {watched} ended ({state}); stopping the task"
                + (f" within {grace:.0f}s" if grace else ""))
        if time.monotonic() - ended_at >= grace:
            stop(child, timeout)
            log("task stopped after training ended; exiting 0")
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
