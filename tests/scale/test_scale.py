"""A PS cluster of N = 10, 100 and 1000 workers on KWOK's simulated nodes: API load per pod.

The cluster is rendered and submitted by the real launcher (KubernetesBackend); its pods are
placed on the simulated nodes by the spec's nodeSelector/tolerations. No container runs there,
so each ps/worker pod's end-of-job supervisor is simulated faithfully: the REAL watch code of
launcher/pod/job_watch.py (`wait_for_end`) runs in a thread on the host per supervised pod, as the
pod's service account (a token from the TokenRequest API), reading the Job the pod's own
TFK8S_WATCH_JOB names. When it decides the task is over it marks its pod exited (annotation ->
KWOK's stage sets it Succeeded), as the container's exit would. The audit log counts the
service account's requests.

Measured (MEASURE lines, docs/benchmarks.md): submit, all pods Running, `status` latency, the
pods' API requests per minute while "training", chief success -> every Job Complete, delete;
at N = 100 also the old design's rate (one request per pod every TFK8S_POLL_SECONDS = 5 s).
"""

from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import ssl
import subprocess
import sys
import threading
import time
import uuid

import pytest
import yaml
from local_clusters import MEASUREMENTS

from launcher.backends.kubernetes import KubernetesBackend, KubernetesBackendConfig
from launcher.backends.kubernetes.api import instance_selector
from launcher.cluster_spec.spec import ClusterSpec
from launcher.pod import job_watch, supervise

pytestmark = pytest.mark.scale

EXITED_ANNOTATION = "tfk8s.scale/exited"  # kwok-stages.yaml: the pod's task exited with 0
# How long "training" is measured: two polls of the old design per pod, none of the watch's
# (20 s before: 40 s of the tier's idle waiting went)
WINDOW_SECONDS = 10.0
OLD_POLL_SECONDS = 5.0  # the removed design: each supervisor asked every TFK8S_POLL_SECONDS
SIMULATED_IMAGE = "tfk8s/simulated:none"  # never pulled: KWOK runs no container


def spec_for(workers: int, namespace: str, placement: dict) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": f"scale-{workers}",
            "namespace": namespace,
            "image": SIMULATED_IMAGE,
            "strategy": "parameter_server",
            "command": ["sleep", "infinity"],
            "roles": {
                "chief": {"replicas": 1, **placement},
                "worker": {"replicas": workers, **placement},
                "ps": {"replicas": max(1, workers // 100), **placement},
            },
        }
    )


class Cluster:
    """Raw reads of one training cluster (JSON, not the client's models: 1000 pods)."""

    def __init__(self, client, namespace: str, name: str):
        from kubernetes import client as k8s

        self.core = k8s.CoreV1Api(client)
        self.batch = k8s.BatchV1Api(client)
        self.namespace = namespace
        self.selector = instance_selector(name)

    def pods(self, field_selector: str = "") -> list[dict]:
        r = self.core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, field_selector=field_selector, _preload_content=False
        )
        return json.loads(r.data)["items"]

    def jobs(self) -> list[dict]:
        r = self.batch.list_namespaced_job(self.namespace, label_selector=self.selector, _preload_content=False)
        return json.loads(r.data)["items"]

    def mark_exited(self, pod: str) -> None:
        self.core.patch_namespaced_pod(pod, self.namespace, {"metadata": {"annotations": {EXITED_ANNOTATION: "0"}}})


def wait_for(predicate, timeout: float, what: str, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def env_of(pod: dict) -> dict[str, str]:
    """Every container's env (a supervised pod's job-watch container has the watched Job)."""
    return {e["name"]: e.get("value", "") for c in pod["spec"]["containers"] for e in c.get("env") or []}


def service_account_api(kubeconfig: str, core, namespace: str, account: str) -> job_watch.ApiServer:
    """The API server as the pods see it: their service account's token, the cluster's CA."""
    config = yaml.safe_load(open(kubeconfig))
    server = config["clusters"][0]["cluster"]
    context = ssl.create_default_context(cadata=base64.b64decode(server["certificate-authority-data"]).decode())
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token(account, namespace, request)
    value = token.status.token
    return job_watch.ApiServer(server["server"], lambda: value, context)


class SupervisorStopped(BaseException):
    """Raised into a simulated supervisor's next request once its test has ended. A
    BaseException: the supervisor retries every Exception (a hiccup must not kill a server),
    and a thread left retrying against a deleted cluster prints into later tests' stderr."""


class StoppableApi(job_watch.ApiServer):
    """The pods' ApiServer; every request after `over` is set raises SupervisorStopped."""

    def __init__(self, api: job_watch.ApiServer, over: threading.Event):
        super().__init__(api.base_url, api.token, api.context)
        self.over = over

    def open(self, path: str, timeout: float):
        if self.over.is_set():
            raise SupervisorStopped()
        return super().open(path, timeout)


def poll_the_old_way(api: job_watch.ApiServer, namespace: str, job: str, stop: threading.Event):
    """The removed design's request pattern: one request for the Job per pod every 5 s."""
    while not stop.wait(OLD_POLL_SECONDS):
        try:
            job_watch.list_job(api, namespace, job)
        except Exception:  # noqa: BLE001 - the old loop also went on after an API error
            pass


def cli_status(kubeconfig: str, namespace: str, name: str) -> tuple[float, dict]:
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "launcher", "status", name, "-n", namespace, "--kubeconfig", kubeconfig, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    return elapsed, json.loads(r.stdout)


@pytest.mark.parametrize("workers", [10, 100, 1000])
def test_ps_cluster_on_simulated_nodes(scale_cluster, workers):
    kind = scale_cluster.kind
    namespace = f"scale-{workers}-{uuid.uuid4().hex[:6]}"
    kind.kubectl("create", "namespace", namespace)
    spec = spec_for(workers, namespace, scale_cluster.placement)
    client = kind.api_client()
    client.configuration.connection_pool_maxsize = 32
    cluster = Cluster(client, namespace, spec.name)
    backend = KubernetesBackend(
        KubernetesBackendConfig(
            kubeconfig=kind.kubeconfig, context=kind.context, namespace=namespace, delete_timeout=600
        ),
        out=io.StringIO(),
    )
    stop_polling = threading.Event()
    test_over, supervisors, kubelet = threading.Event(), [], None
    try:
        t0 = time.monotonic()
        backend.submit(spec)
        submit_s = time.monotonic() - t0
        expected_pods = 1 + workers + spec.roles.ps.replicas

        # every pod created (the Jobs' active counts) and none not Running: not 1000 pods listed
        # every second (the host has 2 cores)
        wait_for(
            lambda: (
                sum((j.get("status") or {}).get("active") or 0 for j in cluster.jobs()) == expected_pods
                and not cluster.pods("status.phase!=Running")
            ),
            600,
            f"{expected_pods} pods Running",
            interval=1,
        )
        running_s = time.monotonic() - t0
        pods = cluster.pods()
        assert [p["status"].get("phase") for p in pods] == ["Running"] * expected_pods

        supervised = [p for p in pods if supervise.WATCH_JOB_ENV in env_of(p)]
        chief = [p for p in pods if supervise.WATCH_JOB_ENV not in env_of(p)]
        assert len(supervised) == workers + spec.roles.ps.replicas and len(chief) == 1
        watched = {env_of(p)[supervise.WATCH_JOB_ENV] for p in supervised}
        accounts = {p["spec"]["serviceAccountName"] for p in supervised}
        assert len(watched) == 1 and len(accounts) == 1, (watched, accounts)
        job, account = watched.pop(), accounts.pop()
        api = StoppableApi(service_account_api(kind.kubeconfig, cluster.core, namespace, account), test_over)
        username = f"system:serviceaccount:{namespace}:{account}"

        # One thread per supervised pod runs the real supervisor's watch; a small pool plays the
        # kubelet reporting each task's exit.
        ended: dict[str, str] = {}
        kubelet = concurrent.futures.ThreadPoolExecutor(16)

        def simulated_supervisor(pod: str) -> None:
            try:
                ended[pod] = job_watch.wait_for_end(api, namespace, job)
            except SupervisorStopped:
                return
            if not test_over.is_set():
                kubelet.submit(cluster.mark_exited, pod)

        threading.stack_size(256 * 1024)
        watch_started = time.time()
        for pod in supervised:
            supervisors.append(
                threading.Thread(
                    target=simulated_supervisor,
                    args=(pod["metadata"]["name"],),
                    daemon=True,
                    name=f"supervise-{pod['metadata']['name']}",
                )
            )
            supervisors[-1].start()
        # each supervisor lists the Job once, then watches it
        wait_for(
            lambda: len(scale_cluster.audit.requests_by(username, watch_started, time.time())) >= 2 * len(supervised),
            300,
            "every simulated supervisor watching",
            interval=2,
        )
        connected_s = time.time() - watch_started

        status_s, status = cli_status(kind.kubeconfig, namespace, spec.name)
        assert status["phase"] == "Running", status

        window_start = time.time()
        time.sleep(WINDOW_SECONDS)
        window = scale_cluster.audit.requests_by(username, window_start, window_start + WINDOW_SECONDS)
        per_minute = len(window) * 60 / WINDOW_SECONDS

        old_line = ""
        polling = (0.0, 0.0)  # when the old design's pollers ran
        if workers == 100:
            polling = (time.time(), 0.0)
            for _ in supervised:
                threading.Thread(target=poll_the_old_way, args=(api, namespace, job, stop_polling), daemon=True).start()
            steady = polling[0] + OLD_POLL_SECONDS  # every poller has started its loop
            time.sleep(OLD_POLL_SECONDS + WINDOW_SECONDS)
            stop_polling.set()
            polling = (polling[0], time.time() + OLD_POLL_SECONDS)  # a last poll may be in flight
            old = scale_cluster.audit.requests_by(username, steady, steady + WINDOW_SECONDS)
            old_per_pod = len(old) * 60 / WINDOW_SECONDS / len(supervised)
            old_line = f"; old 5 s polling: {old_per_pod:.2f} req/min/pod"
            assert per_minute / len(supervised) < old_per_pod

        chief_success = time.monotonic()
        cluster.mark_exited(chief[0]["metadata"]["name"])

        def every_job_complete():
            jobs = cluster.jobs()
            return (
                all(
                    any(
                        c["type"] == "Complete" and c["status"] == "True"
                        for c in (j.get("status") or {}).get("conditions") or []
                    )
                    for j in jobs
                )
                and jobs
            )

        wait_for(every_job_complete, 600, "every Job Complete", interval=2)
        complete_s = time.monotonic() - chief_success
        # the supervisors' requests: all but the old design's polls (lists, not watches)
        whole_run = [
            e
            for e in scale_cluster.audit.requests_by(username, watch_started, time.time())
            if not polling[0] <= e["received"] < polling[1] or "watch=" in e["requestURI"]
        ]
        kubelet.shutdown(wait=True)
        assert len(ended) == len(supervised)
        assert set(ended.values()) <= job_watch.SUCCEEDED, set(ended.values())

        t1 = time.monotonic()
        backend.delete(spec.name)
        delete_s = time.monotonic() - t1
        per_pod_run = len(whole_run) / len(supervised)
        MEASUREMENTS.append(
            f"scale N={workers} ({expected_pods} pods, {len(supervised)} supervised): submit "
            f"{submit_s:.1f}s, all Running {running_s:.1f}s, supervisors watching "
            f"{connected_s:.1f}s, status {status_s:.2f}s, training API "
            f"{per_minute:.1f} req/min ({per_minute / len(supervised):.3f}/pod){old_line}, "
            f"chief success -> all Jobs Complete {complete_s:.1f}s, delete {delete_s:.1f}s, "
            f"requests per supervised pod over the run {per_pod_run:.2f}"
        )
        # O(1) per pod: one list and one watch each (a retry after an API error adds one)
        assert per_pod_run <= 4, per_pod_run
    finally:
        stop_polling.set()
        test_over.set()
        kind.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        # A failed test leaves supervisors watching: the Job's deletion ends their watch, and a
        # retry ends at its next request; none may outlive the test (see SupervisorStopped).
        deadline = time.monotonic() + 120
        for thread in supervisors:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = sum(thread.is_alive() for thread in supervisors)
        if kubelet is not None:
            kubelet.shutdown(wait=False, cancel_futures=True)
        assert not alive, f"{alive} simulated supervisors still running 120 s after the test"
