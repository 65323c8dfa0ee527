"""End-of-job supervisor for tasks that never exit by themselves (stdlib only).

TensorFlow ps and worker servers block in `server.join()` forever, and a user's evaluator may
poll for checkpoints forever. Kubernetes would keep their Jobs running after training ended.
This script is shipped in the cluster's ConfigMap and wraps such a task:

    python3 /var/run/tfk8s/supervise.py -- <task command...>

It runs the task as a child and watches the training Job (one long-lived watch request per pod,
renewed every TFK8S_WATCH_SECONDS, so the API server's load does not grow with how quickly the
end is noticed; the pod's service account may only `list`/`watch` that Job, by name) until it
has finished. Then it stops the child and exits 0, so the task's Job completes instead of
running forever. After a success the child may run TFK8S_GRACE_SECONDS more (the evaluator,
evaluating the final checkpoint); after a failure, or when the Job is gone, it is stopped at
once (there is no final checkpoint to wait for).

A child that exits on its own leaves with its code; one killed by signal N with 128 + N, as a
shell reports it. Pod deletion sends SIGTERM to us (PID 1): it is passed on, so a server that
dies of it exits 143, the code the Jobs' podFailurePolicy does not count as a failure.

Environment:
  TFK8S_WATCH_JOB          the Job whose end ends this task (the chief's, or worker's under MWMS)
  TFK8S_NAMESPACE          its namespace
  TFK8S_GRACE_SECONDS      how long the child may keep running after training succeeded (default 0)
  TFK8S_POD_GRACE_SECONDS  the pod's terminationGracePeriodSeconds (default 30): stopping the
                           child, SIGKILL follows SIGTERM within it, before the kubelet's own
  TFK8S_WATCH_SECONDS      how long one watch request lasts before it is renewed (default 300)
  TFK8S_RESTART_ATTEMPT    in a JobSet: this pod's restart attempt (JobSet's annotation). A
                           watched Job of an earlier attempt is not ours: as if not created yet.
                           (A JobSet restart may recreate this pod while the last attempt's
                           failed Job is still there: acting on it would stop the evaluator of
                           the new attempt at once.)
"""
from __future__ import annotations

import json
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable, Iterator

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# This script's interface (it runs alone in the pod, so it cannot import the contract; the
# renderer imports these names from here).
WATCH_JOB_ENV = "TFK8S_WATCH_JOB"
NAMESPACE_ENV = "TFK8S_NAMESPACE"
GRACE_ENV = "TFK8S_GRACE_SECONDS"
POD_GRACE_ENV = "TFK8S_POD_GRACE_SECONDS"
WATCH_SECONDS_ENV = "TFK8S_WATCH_SECONDS"
RESTART_ATTEMPT_ENV = "TFK8S_RESTART_ATTEMPT"
# JobSet stamps its Jobs and pods with the set's restart attempt, as a label and an annotation.
RESTART_ATTEMPT_KEY = "jobset.sigs.k8s.io/restart-attempt"
DEFAULT_WATCH_SECONDS = 300.0
RETRY_SECONDS = 5.0  # after an API error, before asking again
SUCCEEDED = {"Complete", "SuccessCriteriaMet"}
TERMINAL = SUCCEEDED | {"Failed", "FailureTarget"}
RUNNING = "running"
ABSENT = "absent"
STALE = "stale"  # the watched Job belongs to an earlier JobSet attempt than this pod


def log(message: str) -> None:
    print(f"[tfk8s-supervise] {message}", file=sys.stderr, flush=True)


class ApiServer:
    """Where the API server is and who we are: a base URL, a token source, a TLS context."""

    def __init__(self, base_url: str, token: Callable[[], str], context: ssl.SSLContext):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.context = context

    @classmethod
    def in_cluster(cls) -> "ApiServer":
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        if not host:
            raise RuntimeError("KUBERNETES_SERVICE_HOST is not set: not in a pod, or the pod's "
                               "service links are off; the supervisor needs the API server")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"

        def token() -> str:
            with open(f"{SA_DIR}/token") as f:  # re-read: projected tokens rotate
                return f.read().strip()

        return cls(f"https://{host}:{port}", token,
                   ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt"))

    def open(self, path: str, timeout: float):
        request = urllib.request.Request(
            self.base_url + path,
            headers={"Authorization": f"Bearer {self.token()}", "Accept": "application/json"})
        return urllib.request.urlopen(request, context=self.context, timeout=timeout)


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def jobs_path(namespace: str, name: str, **params: str) -> str:
    """The Jobs collection narrowed to one name: RBAC authorizes a list/watch with the field
    selector metadata.name=<name> against a Role's resourceNames."""
    query = urllib.parse.urlencode({"fieldSelector": f"metadata.name={name}", **params})
    return f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}"


def restart_attempt(obj: dict) -> int | None:
    """The JobSet restart attempt an object (Job, pod) carries; None outside a JobSet."""
    metadata = obj.get("metadata") or {}
    for where in ("labels", "annotations"):
        value = (metadata.get(where) or {}).get(RESTART_ATTEMPT_KEY)
        if value not in (None, ""):
            return int(value)
    return None


def job_condition(job: dict, attempt: int | None = None) -> str:
    """A Job's TERMINAL condition type once it has ended, else RUNNING; STALE when it is of a
    JobSet attempt before `attempt` (this pod's)."""
    job_attempt = restart_attempt(job)
    if attempt is not None and job_attempt is not None and job_attempt < attempt:
        return STALE
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in TERMINAL and condition.get("status") == "True":
            return condition["type"]
    return RUNNING


def apply_event(event: dict, attempt: int | None = None) -> tuple[str | None, str | None]:
    """One watch event -> (the Job's state or None when it says nothing about it, the
    resourceVersion to resume from or None). An ERROR event raises: WatchExpired for 410 Gone
    (list again), RuntimeError otherwise (retry)."""
    kind = event.get("type")
    obj = event.get("object") or {}
    version = (obj.get("metadata") or {}).get("resourceVersion")
    if kind in ("ADDED", "MODIFIED"):
        return job_condition(obj, attempt), version
    if kind == "DELETED":
        return ABSENT, version
    if kind == "BOOKMARK":
        return None, version
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise WatchExpired(obj.get("message", "410 Gone"))
        raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
    raise RuntimeError(f"unknown watch event type {kind!r}")


def list_job(api: ApiServer, namespace: str, name: str,
             attempt: int | None = None) -> tuple[str, str]:
    """The Job's state (ABSENT when there is none) and the list's resourceVersion."""
    with api.open(jobs_path(namespace, name), timeout=30) as response:
        jobs = json.load(response)
    items = jobs.get("items") or []
    state = job_condition(items[0], attempt) if items else ABSENT
    return state, jobs["metadata"]["resourceVersion"]


def watch_job(api: ApiServer, namespace: str, name: str, version: str, seconds: float,
              attempt: int | None = None) -> Iterator[tuple[str | None, str | None]]:
    """apply_event of each event of one watch request from `version`, until the server ends it."""
    path = jobs_path(namespace, name, watch="1", resourceVersion=version,
                     allowWatchBookmarks="true", timeoutSeconds=str(int(seconds)))
    try:  # the socket timeout only catches a dead connection: the server ends the watch first
        response = api.open(path, timeout=seconds + 60)
    except urllib.error.HTTPError as exc:
        if exc.code == 410:
            raise WatchExpired(f"HTTP 410 for resourceVersion {version}") from exc
        raise
    with response:
        for line in response:
            if line.strip():
                yield apply_event(json.loads(line), attempt)


def job_states(api: ApiServer, namespace: str, name: str, *, watch_seconds: float,
               retry_seconds: float = RETRY_SECONDS, attempt: int | None = None) -> Iterator[str]:
    """The Job's state now and at every change: one list, then watches resumed from the last
    resourceVersion; list again after 410 Gone. API errors are logged and retried, never raised:
    a hiccup must not kill a healthy server."""
    version = None
    while True:
        try:
            if version is None:
                state, version = list_job(api, namespace, name, attempt)
                yield state
            for state, new_version in watch_job(api, namespace, name, version, watch_seconds,
                                                attempt):
                version = new_version or version
                if state is not None:
                    yield state
        except WatchExpired as exc:
            log(f"watch of job {namespace}/{name} expired ({exc}); listing again")
            version = None
        except Exception as exc:  # noqa: BLE001 - see the docstring
            log(f"cannot watch job {namespace}/{name} yet: {exc}")
            # jittered: 1000 pods refused together (429 from the API server's flow control, seen
            # in tests/scale) must not all come back together
            time.sleep(retry_seconds * random.uniform(0.5, 1.5))


def training_ended(seen: bool, state: str) -> tuple[bool, bool]:
    """(seen, ended) after the watched Job was observed in `state`. ABSENT before it was ever
    seen means not created yet (Helm applies Jobs one by one); after, that it was deleted.
    STALE (an earlier JobSet attempt's Job, soon deleted) is never ours: it changes nothing."""
    if state == RUNNING:
        return True, False
    if state == STALE:
        return seen, False
    if state == ABSENT and not seen:
        return False, False
    return seen, True


def wait_for_end(api: ApiServer, namespace: str, name: str, *,
                 watch_seconds: float = DEFAULT_WATCH_SECONDS, attempt: int | None = None) -> str:
    """Block until the watched Job (of JobSet attempt `attempt`, if given) has ended; its
    TERMINAL condition type or ABSENT."""
    seen = False
    for state in job_states(api, namespace, name, watch_seconds=watch_seconds, attempt=attempt):
        seen, ended = training_ended(seen, state)
        if ended:
            return state
    raise AssertionError("job_states never ends")


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
    watch_seconds = float(os.environ.get(WATCH_SECONDS_ENV, DEFAULT_WATCH_SECONDS))
    attempt_text = os.environ.get(RESTART_ATTEMPT_ENV, "")
    attempt = int(attempt_text) if attempt_text else None

    child = subprocess.Popen(command)

    # Pod deletion sends SIGTERM to PID 1 (us): pass it on and leave with the child's code.
    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    # The watch blocks, so it runs beside the main thread, which waits for the child and
    # handles signals.
    ended: list[str] = []
    done = threading.Event()

    def follow() -> None:
        try:
            ended.append(wait_for_end(ApiServer.in_cluster(), namespace, watched,
                                      watch_seconds=watch_seconds, attempt=attempt))
        except Exception as exc:  # noqa: BLE001 - the task runs on; said once, here
            log(f"cannot follow job {namespace}/{watched}: {exc}; the task ends only by itself")
            return
        done.set()

    threading.Thread(target=follow, name="watch", daemon=True).start()
    while True:
        try:
            code = exit_status(child.wait(timeout=1.0))
            log(f"task exited with code {code}")
            return code
        except subprocess.TimeoutExpired:
            pass
        if done.is_set():
            break
    state = ended[0]
    grace = grace_after(state, grace)
    log(f"job {watched} ended ({state}); stopping the task" + (f" within {grace:.0f}s" if grace else ""))
    try:
        code = exit_status(child.wait(timeout=grace))
        log(f"task exited with code {code}")
        return code
    except subprocess.TimeoutExpired:
        pass
    stop(child, timeout)
    log("task stopped after training ended; exiting 0")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
