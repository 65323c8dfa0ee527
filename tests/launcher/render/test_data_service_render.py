"""dataService on Kubernetes: the dispatcher and data workers as Indexed Jobs (replicatedJobs
in a JobSet) with the gRPC port, sized, supervised like ps, told the dispatcher's stable address,
and fenced: the dispatcher's port admits trainers and data workers, a data worker's trainers."""

import json

import pytest
from support import assert_pod_security_restricted

from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

SPEC = """\
name: c
strategy: parameter_server
roles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}, evaluator: {replicas: 1}}
checkpoint: {dir: gs://b/m}
dataService:
  workers: 2
  worker: {resources: {requests: {cpu: '2'}, limits: {memory: 2Gi}}, nodeSelector: {pool: cpu}}
"""
CLUSTER_PODS = {"app.kubernetes.io/name": "tfk8s", "app.kubernetes.io/instance": "c"}


def _spec(workload: str = "jobs"):
    return load_text(SPEC + f"workload: {workload}\n")


def _pods_of(roles: list[str]) -> dict:
    return {
        "matchLabels": CLUSTER_PODS,
        "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In", "values": roles}],
    }


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_only_the_clients_reach_the_data_services_ports(workload):
    policies = {
        o["metadata"]["name"]: o["spec"] for o in render.render(plan(_spec(workload))) if o["kind"] == "NetworkPolicy"
    }
    port = [{"protocol": "TCP", "port": 2222}]
    assert policies["c-dispatcher-grpc"] == {
        "podSelector": _pods_of(["dispatcher"]),
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": _pods_of(["chief", "worker", "data-worker"])}], "ports": port}],
    }
    assert policies["c-data-worker-grpc"] == {
        "podSelector": _pods_of(["data-worker"]),
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": _pods_of(["chief", "worker"])}], "ports": port}],
    }
    # neither is in the training pods' policy, nor in the evaluator's deny-all
    assert policies["c-grpc"]["podSelector"] == _pods_of(["chief", "worker", "ps"])
    assert policies["c-no-ingress"]["podSelector"] == _pods_of(["evaluator"])


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_data_pods_listen_are_sized_and_trainers_get_the_dispatchers_stable_address(workload):
    objects = render.render(plan(_spec(workload)))
    jobs = dict(render.job_specs(objects))
    suffix = "-0" if workload == "jobset" else ""  # a JobSet's child Job is <set>-<role>-0
    dispatcher = f"grpc://c-dispatcher{suffix}-0.c.default.svc:2222"
    data_worker = jobs[f"c-data-worker{suffix}"]
    assert data_worker["completions"] == 2 and data_worker["completionMode"] == "Indexed"
    pod = data_worker["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "tf-grpc", "containerPort": 2222, "protocol": "TCP"} in container["ports"]
    assert container["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "2Gi"}}
    assert pod["nodeSelector"] == {"pool": "cpu"} and pod["subdomain"] == "c"
    assert_pod_security_restricted(pod)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[contract.DATA_SERVICE] == dispatcher
    tf_config = render.pod_tf_configs(_spec(workload), objects)
    host = f"c-data-worker{suffix}-1"
    assert tf_config[host]["cluster"]["data-worker"][1] == f"{host}.c.default.svc:2222"
    for role in ("chief", "worker"):
        trainer = {
            e["name"]: e.get("value") for e in jobs[f"c-{role}{suffix}"]["template"]["spec"]["containers"][0]["env"]
        }
        assert trainer[contract.DATA_SERVICE] == dispatcher
    ps_env = {e["name"] for e in jobs[f"c-ps{suffix}"]["template"]["spec"]["containers"][0]["env"]}
    assert contract.DATA_SERVICE not in ps_env


def test_data_roles_are_ended_by_the_supervisor_like_ps():
    objects = render.render(plan(_spec()))
    jobs = dict(render.job_specs(objects))
    for name in ("c-dispatcher", "c-data-worker", "c-ps"):
        containers = [c["name"] for c in jobs[name]["template"]["spec"]["containers"]]
        assert containers == ["tensorflow", "job-watch"], name
    [role] = [o for o in objects if o["kind"] == "Role"]
    assert json.dumps(role).count("c-chief") >= 1
