"""A real Prometheus in the cluster watches a PS training (#38): it finds the pods through
Kubernetes service discovery (their scrape annotation and named `metrics` port), scrapes them
through the NetworkPolicies in force, and answers every dashboard panel's and alert's PromQL.

* the chief's step rises to the target; loss, steps/s, the last checkpoint step and the
  evaluator's final metric are there, also after the training ended;
* TFK8sTrainingStalled fires when the chief is SIGSTOPped (from the node: inside its pod it is
  PID 1, which ignores a SIGSTOP sent from its own PID namespace), resolves after SIGCONT, and
  stays quiet while the training is healthy;
* from the monitoring namespace the metrics port answers and the gRPC port does not.

Prometheus runs as nobody in namespace `monitoring`, the default scraper, from an image the
toolchain builds and preloads into the test node image (TFK8S_PROMETHEUS_IMAGE): Prometheus 3
built with Kubernetes service discovery only (Debian's package, which the process tier uses,
has none).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.parse

import pytest
import yaml
from conftest import _env_file_vars, make_restricted_pod
from local_clusters import measure
from test_e2e import submit_in_background, wait_for, write_spec
from test_network import PROBE, probe_results

from launcher.monitoring import alerts, dashboard

pytestmark = pytest.mark.kind

MONITORING = "monitoring"  # the spec's default scraper namespace (metrics.scrapers)
SCRAPE = "2s"
STALLED_SECONDS = 15  # the test's threshold; the shipped default is 600
NAME = "watched"
STEPS = 800


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
    rules = alerts.rules_yaml(alerts.Thresholds(stalled_seconds=STALLED_SECONDS, hold="0s"))
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


def chief_pod(cluster, namespace: str) -> dict | None:
    pods = cluster.get_json(
        "pods", "-n", namespace, "-l", f"app.kubernetes.io/instance={NAME},app.kubernetes.io/component=chief"
    )["items"]
    running = [p for p in pods if p["status"].get("phase") == "Running" and p["status"].get("podIP")]
    return running[0] if running else None


def signal_from_the_node(cluster, pod: dict, signal_name: str) -> None:
    """Signal the task container's PID 1 from its node (the host side of its PID namespace)."""
    [status] = [c for c in pod["status"]["containerStatuses"] if c["name"] == "tensorflow"]
    container_id = status["containerID"].split("://", 1)[1]
    node = pod["spec"]["nodeName"]

    def on_node(*command: str) -> str:
        done = subprocess.run(
            ["docker", "exec", node, *command], capture_output=True, text=True, env=cluster.env, timeout=60
        )
        assert done.returncode == 0, f"{command} on {node}: {done.stderr}"
        return done.stdout.strip()

    pid = on_node("crictl", "inspect", "-o", "go-template", "--template", "{{.info.pid}}", container_id)
    on_node("kill", f"-{signal_name}", pid)


def probe_from_monitoring(cluster, image: str, pod: dict, port: int, grpc_port: int) -> dict[str, dict]:
    """Real TCP connects from a pod in `monitoring` to the chief's metrics and gRPC ports."""
    ip = pod["status"]["podIP"]
    targets = [("metrics", ip, port), ("grpc", ip, grpc_port)]
    probe = make_restricted_pod("probe", image, ["python3", "-c", PROBE, json.dumps(targets), "3"])
    cluster.apply(probe, namespace=MONITORING)
    return probe_results(cluster, MONITORING, "probe")  # waits for it, and deletes it


def test_prometheus_in_the_cluster_watches_a_ps_training(
    kind_cluster, worker_image, probe_image, namespace, checkpoint_pvc, prometheus, tmp_path
):
    selector = f'training_namespace="{namespace}", training="{NAME}"'
    spec = write_spec(
        tmp_path,
        NAME,
        namespace,
        checkpoint_pvc.claim_name,
        worker_image,
        steps=STEPS,
        checkpoint_every=STEPS // 4,
        env={"TFK8S_PROGRESS_SECONDS": "1"},
    )
    submitted = time.monotonic()
    proc = submit_in_background(kind_cluster, spec)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(lambda: proc.poll() is None and proc.kill())
        first = wait_for(
            lambda: prometheus.value(f'tfk8s_global_step{{{selector}, role="chief"}} > 0'),
            600,
            "the chief's first step",
        )
        first_seen = time.monotonic() - submitted
        chief = chief_pod(kind_cluster, namespace)
        assert chief is not None

        # The NetworkPolicies: the scrapers' namespace reaches the metrics port, not TF's gRPC port.
        results = probe_from_monitoring(kind_cluster, probe_image, chief, 9401, 2222)
        assert results["metrics"]["connected"], results
        assert not results["grpc"]["connected"], results

        # Healthy so far: no stall. Then the chief stops; its endpoint stops answering with it.
        assert prometheus.query(f'ALERTS{{alertname="TFK8sTrainingStalled", {selector}}}') == []
        signal_from_the_node(kind_cluster, chief, "STOP")
        stopped = time.monotonic()
        try:
            fired = wait_for(lambda: prometheus.firing("TFK8sTrainingStalled", selector), 120, "the stalled alert", 1)
            fired_after = time.monotonic() - stopped
        finally:
            signal_from_the_node(kind_cluster, chief, "CONT")
        wait_for(lambda: not prometheus.firing("TFK8sTrainingStalled", selector), 120, "the alert resolved", 1)

        # Healthy again until the end: the alert stays quiet, the step keeps rising, and every
        # panel of the dashboard (its variables set to this training) answers while it runs (a
        # task's series go stale as soon as its pod is gone from discovery).
        steps_seen = [first]
        silent = {expr: title for title, expr in dashboard.panel_queries(namespace, NAME)}
        while proc.poll() is None:
            assert not prometheus.firing("TFK8sTrainingStalled", selector), "stalled alert on a healthy training"
            step = prometheus.value(f'tfk8s_global_step{{{selector}, role="chief"}}')
            if step is not None and step > steps_seen[-1]:
                steps_seen.append(step)
            silent = {expr: title for expr, title in silent.items() if not prometheus.query(expr)}
            time.sleep(2)
        output = proc.stdout.read()
    assert proc.returncode == 0, output[-2000:]
    assert len(steps_seen) >= 3, f"the step was seen rising only at {steps_seen}"

    # After the end: the last values, through the windows the dashboard uses.
    last = "[10m]"
    assert prometheus.value(f'max_over_time(tfk8s_global_step{{{selector}, role="chief"}}{last})') == STEPS
    assert prometheus.value(f'max_over_time(tfk8s_target_steps{{{selector}, role="chief"}}{last})') == STEPS
    assert prometheus.value(f'max_over_time(tfk8s_checkpoint_step{{{selector}, role="chief"}}{last})') == STEPS
    assert prometheus.value(f'max_over_time(tfk8s_loss{{{selector}, role="chief"}}{last})') is not None
    assert prometheus.value(f'max_over_time(tfk8s_steps_per_second{{{selector}, role="chief"}}{last})') > 0
    accuracy = prometheus.value(
        f'max_over_time(tfk8s_evaluation{{{selector}, role="evaluator", metric="accuracy"}}{last})'
    )
    assert accuracy is not None and 0 < accuracy <= 1
    assert prometheus.value(f"max_over_time(tfk8s_evaluation_final{{{selector}}}{last})") == 1

    assert not silent, f"panels with no data while the training ran: {sorted(silent.values())}"
    rules = prometheus.get("/api/v1/rules")["data"]["groups"]
    assert {r["name"] for g in rules for r in g["rules"]} == {r["alert"] for r in alerts.rules()["groups"][0]["rules"]}
    assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules
    measure(
        f"kind: in-cluster Prometheus (pod SD, scrape {SCRAPE}) watched a PS training (chief, 2 workers, ps, "
        f"evaluator): first step scraped {first_seen:.0f} s after submit; steps seen {steps_seen[:3]}... -> {STEPS}; "
        f"final accuracy {accuracy:.3f}; TFK8sTrainingStalled (threshold {STALLED_SECONDS} s) fired "
        f"{fired_after:.1f} s after SIGSTOP of the chief ({fired[0]['metric'].get('training')}); gRPC port "
        f"refused from {MONITORING}, metrics port open"
    )
