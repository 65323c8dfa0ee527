"""A real Prometheus in the kind cluster watches a PS training (#38), for test_e2e.py's PS test:
it finds the pods through Kubernetes service discovery (their scrape annotation and named
`metrics` port), scrapes them through the NetworkPolicies in force, and answers every
dashboard panel's PromQL with the training's namespace and name; the chief's step rises to the
target, and loss, steps/s, the last checkpoint step and the evaluator's final metric are there,
also after the training ended; the stalled alert stays quiet on the healthy training; from the
monitoring namespace the metrics port answers and the gRPC port does not. (The alert firing on a
SIGSTOPped chief, and resolving, is tests/worker/test_prometheus.py's, against a real
Prometheus that scrapes real TensorFlow tasks: the rule is the same text.)

Prometheus runs as nobody in namespace `monitoring`, the default scraper, from an image the
toolchain builds and preloads into the test node image (TFK8S_PROMETHEUS_IMAGE): Prometheus 3
built with Kubernetes service discovery only (Debian's package, which the process tier uses,
has none).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse
from typing import Callable

import pytest
import yaml
from conftest import _env_file_vars, make_restricted_pod
from port_probe import PROBE, probe_results
from support import wait_until

from launcher.monitoring import alerts, dashboard

MONITORING = "monitoring"  # the spec's default scraper namespace (metrics.scrapers)
SCRAPE = "2s"
# The test's threshold (the shipped default is 600). A start-up longer than it is stalled too (the
# rule's promise), so whether the alert may fire at start-up is judged from the run's own measured
# start-up (its first task's start to its first progress, from its own series): about 21 s quiet,
# and on a loaded machine it has taken longer than this.
STALLED_SECONDS = 120
STALLED = alerts.Thresholds(stalled_seconds=STALLED_SECONDS, hold="0s")


def wait_for(predicate, timeout: float, what: str, interval: float = 2.0):
    return wait_until(predicate, timeout, what, interval)


def prometheus_image() -> str:
    image = os.environ.get("TFK8S_PROMETHEUS_IMAGE") or _env_file_vars().get("TFK8S_PROMETHEUS_IMAGE")
    if not image:
        pytest.fail("no Prometheus image: run tests/kind/toolchain.sh (TFK8S_PROMETHEUS_IMAGE)", pytrace=False)
    return image


def prometheus_objects(image: str, training_namespace: str) -> list[dict]:
    """Prometheus in `monitoring`, allowed to list the pods of one namespace and nothing else."""
    config = {
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE, "scrape_timeout": "1500ms"},
        "rule_files": ["/etc/prometheus/rules.yaml"],
        "scrape_configs": [
            {
                "job_name": "tfk8s",
                "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [training_namespace]}}],
                # One target per pod: the port named `metrics` of a pod annotated for scraping.
                "relabel_configs": [
                    {
                        "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
                        "regex": "true",
                        "action": "keep",
                    },
                    {
                        "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                        "regex": "metrics",
                        "action": "keep",
                    },
                    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                ],
            }
        ],
    }
    rules = alerts.rules_yaml(STALLED)
    meta = {"namespace": MONITORING, "labels": {"app": "prometheus"}}
    reader = {"kind": "ServiceAccount", "name": "prometheus", "namespace": MONITORING}
    command = ["/bin/prometheus", "--config.file=/etc/prometheus/prometheus.yaml", "--storage.tsdb.path=/prometheus"]
    pod = make_restricted_pod("prometheus", image, command, restartPolicy="Always")
    pod["metadata"].update(meta)
    pod["spec"]["serviceAccountName"] = "prometheus"
    pod["spec"]["securityContext"] = {
        **pod["spec"]["securityContext"],
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "fsGroup": 65534,
    }
    container = pod["spec"]["containers"][0]
    container["ports"] = [{"name": "web", "containerPort": 9090}]
    container["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/prometheus"},
        {"name": "data", "mountPath": "/prometheus"},
    ]
    pod["spec"]["volumes"] = [{"name": "config", "configMap": {"name": "prometheus"}}, {"name": "data", "emptyDir": {}}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "prometheus", **meta}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "prometheus", **meta},
            "data": {"prometheus.yaml": yaml.safe_dump(config), "rules.yaml": rules},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "prometheus-reads-pods", "namespace": training_namespace},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "prometheus-reads-pods", "namespace": training_namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus-reads-pods"},
            "subjects": [reader],
        },
        pod,
    ]


class InClusterPrometheus:
    """Queries through the API server's proxy to the pod: no port-forward, no Service."""

    def __init__(self, cluster):
        self.cluster = cluster

    def get(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        raw = f"/api/v1/namespaces/{MONITORING}/pods/prometheus:9090/proxy{path}{query}"
        result = self.cluster.kubectl("get", "--raw", raw, check=False)
        if result.returncode != 0:
            raise AssertionError(f"Prometheus {path}: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def ready(self) -> bool:
        return (
            self.cluster.kubectl(
                "get", "--raw", f"/api/v1/namespaces/{MONITORING}/pods/prometheus:9090/proxy/-/ready", check=False
            ).returncode
            == 0
        )

    def query(self, expr: str) -> list[dict]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def firing(self, alert: str, selector: str) -> list[dict]:
        return self.query(f'ALERTS{{alertname="{alert}", alertstate="firing", {selector}}}')


@pytest.fixture
def prometheus(kind_cluster, namespace):
    image = prometheus_image()
    if not any(ref.endswith(image) for ref in kind_cluster.node_images()):
        kind_cluster.load_image(image)  # a node image without the toolchain's preload
    created_monitoring = kind_cluster.kubectl("get", "namespace", MONITORING, check=False).returncode != 0
    if created_monitoring:
        kind_cluster.kubectl("create", "namespace", MONITORING)
    try:
        for obj in prometheus_objects(image, namespace):
            kind_cluster.apply(obj, namespace=obj["metadata"]["namespace"])
        server = InClusterPrometheus(kind_cluster)
        try:
            wait_for(server.ready, 180, "Prometheus ready", interval=1)
        except AssertionError as exc:  # say why: its state and its last log lines
            pod = kind_cluster.kubectl("-n", MONITORING, "get", "pod", "prometheus", "-o", "wide", check=False)
            logs = kind_cluster.kubectl("-n", MONITORING, "logs", "prometheus", "--tail", "5", check=False)
            raise AssertionError(f"{exc}\n{pod.stdout}{pod.stderr}\n{logs.stdout}{logs.stderr}") from None
        yield server
    finally:
        if created_monitoring:
            kind_cluster.kubectl("delete", "namespace", MONITORING, "--wait=false", check=False)
        else:
            kind_cluster.kubectl(
                "-n", MONITORING, "delete", "pod,configmap,serviceaccount", "-l", "app=prometheus", check=False
            )


def stalled_expr() -> str:
    """TFK8sTrainingStalled's expression as loaded into the test's Prometheus."""
    [rule] = [r for r in alerts.rules(STALLED)["groups"][0]["rules"] if r["alert"] == "TFK8sTrainingStalled"]
    return rule["expr"]


class TrainingWatch(threading.Thread):
    """While `running()` holds, every 2 s, from the chief's first step scraped on: the chief's
    step as scraped, the dashboard panels that have not answered yet, and the stalled rule quiet
    on the healthy training. The rule's expression is evaluated at each look, on the data then:
    its ALERTS series is the rule's last evaluation, up to an evaluation interval behind the first
    step (a start-up longer than the threshold may still show there as firing, which
    check_the_startup judges)."""

    def __init__(self, prometheus: InClusterPrometheus, namespace: str, name: str, running: Callable[[], bool]):
        super().__init__(daemon=True, name=f"prometheus-watch-{name}")
        self.prometheus, self.running = prometheus, running
        self.namespace, self.name = namespace, name
        self.selector = f'training_namespace="{namespace}", training="{name}"'
        self.steps_seen: list[float] = []
        # no sweep's trial: tests/worker/test_prometheus.py answers the sweep panel
        self.silent = {expr: title for title, expr in dashboard.panel_queries(namespace, name, sweep=None)}
        self.error: BaseException | None = None

    def stalled_now(self) -> list[dict]:
        ours = {"training_namespace": self.namespace, "training": self.name}
        return [r for r in self.prometheus.query(stalled_expr()) if ours.items() <= r["metric"].items()]

    def run(self) -> None:
        try:
            while self.running():
                stalled = self.stalled_now()
                assert not stalled, f"the stalled rule holds for a healthy training after its first step: {stalled}"
                step = self.prometheus.value(f'tfk8s_global_step{{{self.selector}, role="chief"}}')
                if step is not None and (not self.steps_seen or step > self.steps_seen[-1]):
                    self.steps_seen.append(step)
                self.silent = {expr: title for expr, title in self.silent.items() if not self.prometheus.query(expr)}
                time.sleep(2)
        except BaseException as exc:  # raised again in the test by check()
            self.error = exc

    def check(self) -> None:
        self.join(120)
        if self.error is not None:
            raise self.error
        # how many steps a 2 s look catches depends on the machine's speed; the step reaching the
        # target is check_the_finished_training's
        assert self.steps_seen, "the chief's step was never seen while the training ran"
        assert not self.silent, f"panels with no data while the training ran: {sorted(self.silent.values())}"
        check_the_startup(self.prometheus, self.selector)


def check_the_startup(prometheus: InClusterPrometheus, selector: str) -> None:
    """The stalled alert never fired if the run's own start-up (its first task's start to its
    first progress, as scraped) stayed clearly below the threshold; above it, firing then was
    the rule's promise, and the test says so."""
    window = "[1h]"
    first_start = prometheus.value(f"min(min_over_time(tfk8s_task_start_timestamp_seconds{{{selector}}}{window}))")
    first_progress = prometheus.value(f"min(min_over_time(tfk8s_progress_timestamp_seconds{{{selector}}}{window}))")
    assert first_start is not None and first_progress is not None, (first_start, first_progress)
    startup = first_progress - first_start
    fired = prometheus.query(
        f'max_over_time(ALERTS{{alertname="TFK8sTrainingStalled", alertstate="firing", {selector}}}{window})'
    )
    # a scrape and an evaluation interval each way: the rule sees the series that late
    margin = 2 * 2 * float(SCRAPE.rstrip("s"))
    if startup < STALLED_SECONDS - margin:
        assert not fired, f"TFK8sTrainingStalled fired on a healthy training whose start-up took {startup:.0f} s"
    print(
        f"MEASURE stalled alert: start-up {startup:.0f} s (first task start -> first progress), threshold "
        f"{STALLED_SECONDS} s: {'fired' if fired else 'quiet'}"
        + (
            " (the start-up was not clearly below the threshold: either is right)"
            if startup >= STALLED_SECONDS - margin
            else ""
        )
    )


def check_the_finished_training(prometheus: InClusterPrometheus, namespace: str, name: str, steps: int) -> float:
    """The last values through the windows the dashboard uses, and the rule file loaded; returns
    the final accuracy."""
    selector = f'training_namespace="{namespace}", training="{name}"'
    last = "[10m]"
    assert prometheus.value(f'max_over_time(tfk8s_global_step{{{selector}, role="chief"}}{last})') == steps
    assert prometheus.value(f'max_over_time(tfk8s_target_steps{{{selector}, role="chief"}}{last})') == steps
    assert prometheus.value(f'max_over_time(tfk8s_checkpoint_step{{{selector}, role="chief"}}{last})') == steps
    assert prometheus.value(f'max_over_time(tfk8s_loss{{{selector}, role="chief"}}{last})') is not None
    assert prometheus.value(f'max_over_time(tfk8s_steps_per_second{{{selector}, role="chief"}}{last})') > 0
    accuracy = prometheus.value(
        f'max_over_time(tfk8s_evaluation{{{selector}, role="evaluator", metric="accuracy"}}{last})'
    )
    assert accuracy is not None and 0 < accuracy <= 1
    assert prometheus.value(f"max_over_time(tfk8s_evaluation_final{{{selector}}}{last})") == 1
    rules = prometheus.get("/api/v1/rules")["data"]["groups"]
    assert {r["name"] for g in rules for r in g["rules"]} == {r["alert"] for r in alerts.rules()["groups"][0]["rules"]}
    assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules
    return accuracy


def probe_from_monitoring(
    cluster, image: str, pods: dict[str, dict], port: int, grpc_port: int
) -> dict[str, dict[str, dict]]:
    """Real TCP connects from pods in `monitoring` to each pod's metrics and gRPC ports, one
    probe pod per target pod, all started before any is awaited (a training goes on meanwhile).
    The metrics port first, tried until kube-router admits the new probe pod (up to 30 s): the
    gRPC port's refusal then is the policy's, not a probe not admitted yet."""
    for name, pod in pods.items():
        ip = pod["status"]["podIP"]
        targets = [("metrics", ip, port, 10), ("grpc", ip, grpc_port)]
        probe = make_restricted_pod(f"probe-{name}", image, ["python3", "-c", PROBE, json.dumps(targets), "3"])
        cluster.apply(probe, namespace=MONITORING)
    # each waited for, and deleted
    return {name: probe_results(cluster, MONITORING, f"probe-{name}") for name in pods}
