"""Every task's metrics on Kubernetes (spec `metrics`): a named port, the scrape annotations, the
NetworkPolicy that admits the scrapers there and only there, and the PodMonitor when asked for.
The chart renders the same (tests/charts/test_helm_parity.py); Prometheus scrapes them on kind
(tests/kind/prometheus_check.py)."""

import json

import pytest

from launcher import k8s_contract
from launcher.cluster_spec.loader import load_text
from launcher.errors import SpecError
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

PS = (
    "name: c\nstrategy: parameter_server\nroles: {chief: {replicas: 1}, worker: {replicas: 2}, "
    "ps: {replicas: 1}, evaluator: {replicas: 1}}\ncheckpoint: {dir: gs://b/m}\n"
)
CLUSTER_PODS = {"app.kubernetes.io/name": "tfk8s", "app.kubernetes.io/instance": "c"}


def _spec(workload: str = "jobs", **metrics):
    data = load_text(PS).model_dump(by_alias=True, mode="json")
    return load_text(json.dumps({**data, "workload": workload, "metrics": {**data["metrics"], **metrics}}))


def _pods(objects: list[dict]) -> dict[str, dict]:
    return {name: job["template"] for name, job in render.job_specs(objects)}


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_every_pod_serves_metrics_on_a_named_port_with_the_scrape_annotations(workload):
    pods = _pods(render.render(plan(_spec(workload))))
    assert len(pods) == 4  # the evaluator too: it is a task with progress of its own
    for name, pod in pods.items():
        container = pod["spec"]["containers"][0]
        assert {"name": "metrics", "containerPort": 9401, "protocol": "TCP"} in container["ports"], name
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[contract.METRICS_PORT] == "9401", name
        assert pod["metadata"]["annotations"] == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9401",
            "prometheus.io/path": "/metrics",
        }, name


def test_the_scrape_annotations_are_on_pods_only_and_can_be_turned_off():
    objects = render.render(plan(_spec(scrapeAnnotations=False)))
    assert all(pod["metadata"]["annotations"] == {} for pod in _pods(objects).values())
    on = render.render(plan(_spec()))
    assert all("prometheus.io/scrape" not in o["metadata"]["annotations"] for o in on)  # Jobs, Service, ...


def test_no_port_no_metrics_at_all():
    objects = render.render(plan(_spec(port=None)))
    for pod in _pods(objects).values():
        container = pod["spec"]["containers"][0]
        assert all(p["name"] != "metrics" for p in container.get("ports", []))
        assert contract.METRICS_PORT not in {e["name"] for e in container["env"]}
        assert pod["metadata"]["annotations"] == {}
    assert [o for o in objects if o["metadata"]["name"] == "c-metrics"] == []


def test_the_scrapers_reach_the_metrics_port_of_every_pod_and_nothing_else():
    [policy] = [o["spec"] for o in render.render(plan(_spec())) if o["metadata"]["name"] == "c-metrics"]
    assert policy == {
        "podSelector": {
            "matchLabels": CLUSTER_PODS,  # the tasks' pods (not a `tensorboard` pod of the cluster)
            "matchExpressions": [
                {
                    "key": "app.kubernetes.io/component",
                    "operator": "In",
                    "values": ["chief", "worker", "ps", "evaluator"],
                }
            ],
        },
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                "ports": [{"protocol": "TCP", "port": 9401}],
            }
        ],
    }
    scrapers = [{"namespaceSelector": {"matchLabels": {"team": "ops"}}, "podSelector": {"matchLabels": {"app": "p"}}}]
    [policy] = [
        o["spec"] for o in render.render(plan(_spec(scrapers=scrapers))) if o["metadata"]["name"] == "c-metrics"
    ]
    assert policy["ingress"][0]["from"] == scrapers
    # Nobody may scrape: no policy admits the port (the gRPC and no-ingress ones select every pod).
    assert [o for o in render.render(plan(_spec(scrapers=[]))) if o["metadata"]["name"] == "c-metrics"] == []


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_a_pod_monitor_selects_the_clusters_pods_on_the_named_port(workload):
    [monitor] = [o for o in render.render(plan(_spec(workload, podMonitor=True))) if o["kind"] == "PodMonitor"]
    assert monitor["apiVersion"] == k8s_contract.POD_MONITOR_API_VERSION
    assert monitor["spec"] == {
        "selector": {"matchLabels": CLUSTER_PODS},
        "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics"}],
    }
    assert [o for o in render.render(plan(_spec(workload))) if o["kind"] == "PodMonitor"] == []


@pytest.mark.parametrize(
    "metrics,message",
    [
        ({"port": 2222}, "metrics.port: 2222 is the gRPC port (port): give the metrics another one"),
        ({"port": None, "podMonitor": True}, "metrics.podMonitor: a PodMonitor needs metrics.port"),
        ({"scrapers": [{}]}, "set namespaceSelector, podSelector or both"),
    ],
)
def test_broken_metrics_are_refused_with_the_field(metrics, message):
    with pytest.raises(SpecError) as refused:
        _spec(**metrics)
    assert message in str(refused.value)
