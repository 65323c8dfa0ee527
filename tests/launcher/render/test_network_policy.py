"""The cluster's NetworkPolicies: TF's gRPC port admits only the cluster's own training pods,
the evaluator admits nothing, in both projections; networkPolicy: false renders none. Every pod
also admits the metrics scrapers on the metrics port, and only there (`<name>-metrics`, whose
own rules test_metrics_objects.py checks)."""

import json

import pytest
from support import example_specs

from launcher import k8s_contract
from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

PS = (
    "name: c\nstrategy: parameter_server\nroles: {chief: {replicas: 1}, worker: {replicas: 2}, "
    "ps: {replicas: 1}, evaluator: {replicas: 1}}\ncheckpoint: {dir: gs://b/m}\n"
)
MWMS = (
    "name: c\nstrategy: multi_worker_mirrored\n"
    "roles: {worker: {replicas: 3}, evaluator: {replicas: 1}}\ncheckpoint: {dir: gs://b/m}\n"
)
MIRRORED = "name: c\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n"
WORKLOADS = ["jobs", "jobset"]
CLUSTER_PODS = {"app.kubernetes.io/name": "tfk8s", "app.kubernetes.io/instance": "c"}


def _spec(text: str, workload: str = "jobs", **changes):
    data = load_text(text).model_dump(by_alias=True, mode="json")
    return load_text(json.dumps({**data, "workload": workload, **changes}))


def _policies(spec) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"] for o in render.render(plan(spec)) if o["kind"] == "NetworkPolicy"}


def _pods_of(roles: list[str]) -> dict:
    return {
        "matchLabels": CLUSTER_PODS,
        "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In", "values": roles}],
    }


def _pod_labels(objects: list[dict]) -> dict[str, dict]:
    """Each role's pod labels, from the Jobs or the JobSet's replicatedJobs."""
    templates = [o["spec"]["template"] for o in objects if o["kind"] == "Job"]
    templates += [
        rj["template"]["spec"]["template"]
        for o in objects
        if o["kind"] == "JobSet"
        for rj in o["spec"]["replicatedJobs"]
    ]
    return {t["metadata"]["labels"][k8s_contract.LABEL_COMPONENT]: t["metadata"]["labels"] for t in templates}


def _selects(selector: dict, labels: dict) -> bool:
    """Kubernetes' LabelSelector semantics, for the two parts the policies use."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


@pytest.mark.parametrize("workload", WORKLOADS)
def test_grpc_port_admits_only_the_clusters_training_pods(workload):
    policies = _policies(_spec(PS, workload))
    assert set(policies) == {"c-grpc", "c-no-ingress", "c-metrics"}
    grpc = policies["c-grpc"]
    assert grpc["podSelector"] == _pods_of(["chief", "worker", "ps"])
    assert grpc["policyTypes"] == ["Ingress"]  # egress stays open: DNS, API server, gs://
    assert grpc["ingress"] == [
        {"from": [{"podSelector": _pods_of(["chief", "worker", "ps"])}], "ports": [{"protocol": "TCP", "port": 2222}]}
    ]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_evaluator_admits_no_ingress_at_all(workload):
    policy = _policies(_spec(PS, workload))["c-no-ingress"]
    # Ingress is governed and no rule admits anything: deny all.
    assert policy == {"podSelector": _pods_of(["evaluator"]), "policyTypes": ["Ingress"]}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_a_non_default_port_is_the_one_admitted(workload):
    objects = render.render(plan(_spec(PS, workload, port=40123)))
    [grpc] = [o for o in objects if o["metadata"]["name"] == "c-grpc"]
    assert grpc["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 40123}]
    # ... the very port the training pods listen on
    for job_name, job_spec in render.job_specs(objects):
        container = job_spec["template"]["spec"]["containers"][0]
        grpc_ports = [p["containerPort"] for p in container.get("ports", []) if p["name"] == "tf-grpc"]
        assert grpc_ports in ([40123], []), job_name


@pytest.mark.parametrize("workload", WORKLOADS)
def test_mwms_has_workers_only(workload):
    policies = _policies(_spec(MWMS, workload))
    assert policies["c-grpc"]["podSelector"] == _pods_of(["worker"])
    assert policies["c-grpc"]["ingress"][0]["from"] == [{"podSelector": _pods_of(["worker"])}]
    assert policies["c-no-ingress"]["podSelector"] == _pods_of(["evaluator"])


@pytest.mark.parametrize("workload", WORKLOADS)
def test_without_evaluator_no_deny_all_policy(workload):
    policies = _policies(_spec(MIRRORED, workload))
    assert list(policies) == ["c-grpc", "c-metrics"]
    assert policies["c-grpc"]["podSelector"] == _pods_of(["chief"])


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("text", [PS, MWMS, MIRRORED], ids=["ps", "mwms", "mirrored"])
def test_network_policy_false_renders_none(workload, text):
    spec = _spec(text, workload, networkPolicy=False)
    assert not [o for o in render.render(plan(spec)) if o["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("text", [PS, MWMS], ids=["ps", "mwms"])
def test_every_pod_is_selected_by_exactly_its_policy(workload, text):
    """The selectors match the labels the pods really carry, in both projections."""
    objects = render.render(plan(_spec(text, workload)))
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    pods = _pod_labels(objects)
    assert set(pods) >= {"worker", "evaluator"}
    for role, labels in pods.items():
        selected = [name for name, p in policies.items() if _selects(p["podSelector"], labels)]
        in_training = contract.Role(role) in contract.TRAINING_ROLES
        # and the metrics policy, which admits nothing but the scrapers on the metrics port
        assert selected == (["c-grpc", "c-metrics"] if in_training else ["c-no-ingress", "c-metrics"]), role
        assert policies["c-metrics"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 9401}]
        admitted = _selects(policies["c-grpc"]["ingress"][0]["from"][0]["podSelector"], labels)
        assert admitted == in_training, role
    # Another cluster's pods (another instance label) are neither selected nor admitted.
    stranger = {**pods["worker"], k8s_contract.LABEL_INSTANCE: "other"}
    assert not any(_selects(p["podSelector"], stranger) for p in policies.values())
    assert not _selects(policies["c-grpc"]["ingress"][0]["from"][0]["podSelector"], stranger)


@pytest.mark.parametrize("example", example_specs(), ids=lambda p: p.stem)
def test_policies_are_in_place_before_any_job(example):
    """workload jobs: the policies come before the Jobs, so no pod starts unprotected."""
    spec = _spec(example.read_text(), "jobs", queue=None)
    kinds = [o["kind"] for o in render.render(plan(spec))]
    assert "NetworkPolicy" in kinds
    assert max(i for i, k in enumerate(kinds) if k == "NetworkPolicy") < kinds.index("Job")


MWMS_GPU = MWMS.replace("worker: {replicas: 3}", "worker: {replicas: 3, resources: {limits: {nvidia.com/gpu: 1}}}")


@pytest.mark.parametrize("workload", WORKLOADS)
def test_mwms_workers_with_gpus_admit_every_tcp_port_from_each_other_only(workload):
    """NCCL's bootstrap and socket transport listen on ephemeral ports nothing can pin."""
    policies = _policies(_spec(MWMS_GPU, workload))
    assert set(policies) == {"c-grpc", "c-collective", "c-no-ingress", "c-metrics"}
    collective = policies["c-collective"]
    assert collective == {
        "podSelector": _pods_of(["worker"]),
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": _pods_of(["worker"])}], "ports": [{"protocol": "TCP"}]}],
    }  # no port: all of TCP
    # the gRPC policy is unchanged, the evaluator still admits nothing
    assert policies["c-grpc"] == _policies(_spec(MWMS, workload))["c-grpc"]
    objects = render.render(plan(_spec(MWMS_GPU, workload)))
    evaluator = {**_pod_labels(objects)["evaluator"]}
    assert not _selects(collective["ingress"][0]["from"][0]["podSelector"], evaluator)
    stranger = {**_pod_labels(objects)["worker"], k8s_contract.LABEL_INSTANCE: "other"}
    assert not _selects(collective["ingress"][0]["from"][0]["podSelector"], stranger)


@pytest.mark.parametrize(
    "text",
    [
        MWMS,  # no GPU: ring all-reduce over TF's gRPC port
        MWMS.replace("worker: {replicas: 3}", "worker: {replicas: 3, resources: {limits: {nvidia.com/gpu: 0}}}"),
        PS.replace("worker: {replicas: 2}", "worker: {replicas: 2, resources: {limits: {nvidia.com/gpu: 1}}}"),
        MIRRORED.replace("chief: {replicas: 1}", "chief: {replicas: 1, resources: {limits: {nvidia.com/gpu: 2}}}"),
    ],
    ids=["mwms-cpu", "mwms-zero-gpus", "ps-gpu", "mirrored-gpu"],
)
def test_only_mwms_with_gpus_opens_the_collective_ports(text):
    assert "c-collective" not in _policies(_spec(text))


def test_no_collective_policy_without_network_policies():
    assert not _policies(_spec(MWMS_GPU, networkPolicy=False))
