"""The supervisor's Kubernetes API side: follow one Job until it has ended (stdlib only).

Shipped beside launcher/pod/supervise.py in the cluster's ConfigMap and run only in the job-watch
container of a supervised pod (`supervise.py watch`), the one container that mounts the pod's
service-account token. One list, then one long-lived watch request per pod, renewed every
TFK8S_WATCH_SECONDS, so the API server's load does not grow with how quickly the end is
noticed; the account may only `list`/`watch` that Job, by name. tests/scale runs this code for
1000 simulated pods.
"""

from __future__ import annotations

import json
import os
import random
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable, Iterator

# Where the kubelet would mount the token; the job-watch container mounts it there explicitly.
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SA_DIR_ENV = "TFK8S_SERVICE_ACCOUNT_DIR"  # elsewhere only in tests
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
            raise RuntimeError(
                "KUBERNETES_SERVICE_HOST is not set: not in a pod, or the pod's "
                "service links are off; the supervisor needs the API server"
            )
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"

        where = os.environ.get(SA_DIR_ENV, SA_DIR)

        def token() -> str:
            with open(f"{where}/token") as f:  # re-read: projected tokens rotate
                return f.read().strip()

        return cls(f"https://{host}:{port}", token, ssl.create_default_context(cafile=f"{where}/ca.crt"))

    def open(self, path: str, timeout: float):
        request = urllib.request.Request(
            self.base_url + path, headers={"Authorization": f"Bearer {self.token()}", "Accept": "application/json"}
        )
        return urllib.request.urlopen(request, context=self.context, timeout=timeout)


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


class ApiUnreachable(Exception):
    """The API server never answered within the give-up time; the message says what to fix."""


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


def list_job(
    api: ApiServer, namespace: str, name: str, attempt: int | None = None, timeout: float = 30.0
) -> tuple[str, str]:
    """The Job's state (ABSENT when there is none) and the list's resourceVersion."""
    with api.open(jobs_path(namespace, name), timeout=timeout) as response:
        jobs = json.load(response)
    items = jobs.get("items") or []
    state = job_condition(items[0], attempt) if items else ABSENT
    return state, jobs["metadata"]["resourceVersion"]


def watch_job(
    api: ApiServer, namespace: str, name: str, version: str, seconds: float, attempt: int | None = None
) -> Iterator[tuple[str | None, str | None]]:
    """apply_event of each event of one watch request from `version`, until the server ends it."""
    path = jobs_path(
        namespace,
        name,
        watch="1",
        resourceVersion=version,
        allowWatchBookmarks="true",
        timeoutSeconds=str(int(seconds)),
    )
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


def job_states(
    api: ApiServer,
    namespace: str,
    name: str,
    *,
    watch_seconds: float,
    retry_seconds: float = RETRY_SECONDS,
    attempt: int | None = None,
    give_up_seconds: float | None = None,
    refused_give_up_seconds: float | None = None,
) -> Iterator[str]:
    """The Job's state now and at every change: one list, then watches resumed from the last
    resourceVersion; list again after 410 Gone. API errors are logged and retried with a
    growing pause: a hiccup must not kill a healthy server. Only while the API server has never
    answered (an HTTP status counts as an answer, except 401/403), for `give_up_seconds` (None:
    never), ApiUnreachable is raised: that is a blocked egress or a missing credential, which no
    retry cures. While every attempt so far was a refused connection, the bound is
    `refused_give_up_seconds` (None: the same): an API server restarting refuses connections,
    and so does an egress policy that rejects; only the time tells them apart."""
    version, answered, started, last_error = None, False, time.monotonic(), None
    failures, only_refused = 0, True  # failures in a row: the pause grows with them

    def left_seconds() -> float | None:
        refused = only_refused and last_error is not None and refused_give_up_seconds
        bound = refused_give_up_seconds if refused else give_up_seconds
        return (started + bound - time.monotonic()) if bound else None

    while True:
        left = left_seconds()
        if not answered and left is not None and left <= 0:
            host = urllib.parse.urlsplit(api.base_url).netloc
            fix = (
                f"the job-watch container's service account must be allowed to list and watch job {name}"
                if _is_refusal(last_error)
                else f"the supervised pods need egress to the API server: {host}"
            )
            silence = (
                f"every connection to the API server {api.base_url} refused for "
                f"{time.monotonic() - started:.0f}s (an egress policy that rejects, or a control plane "
                "down that long)"
                if only_refused and last_error is not None
                else f"no answer from the API server {api.base_url} for {give_up_seconds:.0f}s"
            )
            raise ApiUnreachable(
                f"tfk8s supervisor: {silence} while watching job {namespace}/{name} (last error: "
                f"{str(last_error)[:160]}); {fix}; see docs/security.md"
            )
        try:
            if version is None:  # a list that would outlast the give-up time ends with it
                timeout = 30.0 if answered or left is None else max(1.0, min(30.0, left))
                state, version = list_job(api, namespace, name, attempt, timeout)
                answered, failures = True, 0
                yield state
            for state, new_version in watch_job(api, namespace, name, version, watch_seconds, attempt):
                version, failures = new_version or version, 0
                if state is not None:
                    yield state
        except WatchExpired as exc:
            log(f"watch of job {namespace}/{name} expired ({exc}); listing again")
            version = None
        except Exception as exc:  # noqa: BLE001 - see the docstring
            last_error, failures = exc, failures + 1
            only_refused = only_refused and _is_connection_refused(exc)
            # Any HTTP status but a refusal is the API server answering: reachable, only busy or
            # upgrading (429, 5xx), so an outage never stops a healthy server.
            answered = answered or (isinstance(exc, urllib.error.HTTPError) and not _is_refusal(exc))
            log(f"cannot watch job {namespace}/{name} yet: {exc}")
            # jittered: 1000 pods refused together (429 from the API server's flow control, seen
            # in tests/scale) must not all come back together; longer while it keeps failing
            pause = retry_pause(retry_seconds, failures, exc) * random.uniform(0.5, 1.5)
            left = left_seconds()
            time.sleep(pause if answered or left is None else max(0.0, min(pause, left)))


MAX_RETRY_SECONDS = 30.0  # a retrying supervisor notices a deleted Job within this


def _is_connection_refused(error: BaseException) -> bool:
    """Nothing listened at the API server's address (urllib wraps the socket error)."""
    return isinstance(getattr(error, "reason", error), ConnectionRefusedError)


def _is_refusal(error: BaseException | None) -> bool:
    """401/403: the token or the Role is wrong, which no retry cures."""
    return isinstance(error, urllib.error.HTTPError) and error.code in (401, 403)


def retry_pause(retry_seconds: float, failures: int, error: BaseException) -> float:
    """The pause before asking again: doubling with each failure in a row up to
    MAX_RETRY_SECONDS, and at least what a 429's or 503's Retry-After asks."""
    pause = min(retry_seconds * 2 ** max(failures - 1, 0), MAX_RETRY_SECONDS)
    headers = getattr(error, "headers", None)
    asked = headers.get("Retry-After") if headers is not None else None
    if asked and asked.strip().isdigit():
        pause = max(pause, min(float(asked), MAX_RETRY_SECONDS))
    return pause


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


def wait_for_end(
    api: ApiServer,
    namespace: str,
    name: str,
    *,
    watch_seconds: float = DEFAULT_WATCH_SECONDS,
    attempt: int | None = None,
    give_up_seconds: float | None = None,
    refused_give_up_seconds: float | None = None,
) -> str:
    """Block until the watched Job (of JobSet attempt `attempt`, if given) has ended; its
    TERMINAL condition type or ABSENT. ApiUnreachable: see job_states."""
    seen = False
    for state in job_states(
        api,
        namespace,
        name,
        watch_seconds=watch_seconds,
        attempt=attempt,
        give_up_seconds=give_up_seconds,
        refused_give_up_seconds=refused_give_up_seconds,
    ):
        seen, ended = training_ended(seen, state)
        if ended:
            return state
    raise AssertionError("job_states never ends")
