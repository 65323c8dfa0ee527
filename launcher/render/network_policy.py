"""The cluster's NetworkPolicies (manifests/networkpolicy.yaml.j2), as template context.

TF's gRPC servers accept any caller, unauthenticated and in plaintext: any pod that reaches a
ps or worker could read or overwrite the model's variables. The training pods (contract
TRAINING_ROLES present in the cluster) admit ingress only from each other, on the gRPC port;
the evaluator, outside the training cluster and listening on nothing, admits none. MWMS workers
that get GPUs also admit every TCP port from each other, and from nothing else: NCCL listens on
ephemeral ports (k8s_contract.nccl_roles). Every pod admits the metrics scrapers
(metrics.scrapers: the monitoring namespace by default) on the metrics port, and only there:
policies add up, so the gRPC port stays fenced from them. The data service's dispatcher admits
the trainers and the data workers on the gRPC port, a data worker only the trainers
(k8s_contract.data_service_clients); nothing else reaches them:
Egress stays open (DNS, the API server, gs://). The
chart writes the same objects (charts/tfk8s/templates/networkpolicy.yaml); local runs have none.
"""

from __future__ import annotations

from typing import Iterable

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.plan.plan import ClusterPlan, RolePlan


def network_policies(cluster: ClusterPlan, selector: dict[str, str]) -> dict | None:
    """{"grpc": {name, pods}, "collective": {name, pods} or None, "no_ingress": {name, pods} or
    None, "metrics": {name, pods, scrapers} or None}; None when the spec says networkPolicy:
    false. `selector`: the labels every pod of the cluster carries."""
    spec = cluster.spec
    if not spec.network_policy:
        return None
    outside = [r for r in cluster.roles if not r.listens]
    nccl = [r for r in cluster.roles if r.role in cluster.nccl_roles]
    return {
        "grpc": {"name": names.grpc_policy(spec.name), "pods": pod_selector(selector, cluster.training_roles)},
        "collective": {"name": names.collective_policy(spec.name), "pods": pod_selector(selector, nccl)}
        if nccl
        else None,
        "no_ingress": {"name": names.no_ingress_policy(spec.name), "pods": pod_selector(selector, outside)}
        if outside
        else None,
        "data_service": [
            {
                "name": names.data_service_policy(spec.name, role.role),
                "pods": pod_selector(selector, [role]),
                "from": pod_selector(
                    selector, [r for r in cluster.roles if r.role in k8s_contract.data_service_clients(role.role)]
                ),
            }
            for role in cluster.data_service_roles
        ],
        "metrics": metrics_policy(cluster, selector),
    }


def metrics_policy(cluster: ClusterPlan, selector: dict[str, str]) -> dict | None:
    """Every task's pod admits the scrapers on the metrics port; None without metrics or
    scrapers (then nothing reaches the port: the other policies select every task's pod)."""
    spec = cluster.spec
    scrapers = [s.model_dump(by_alias=True, exclude_none=True) for s in spec.metrics.scrapers]
    if spec.metrics.port is None or not scrapers:
        return None
    pods = pod_selector(selector, cluster.roles)
    return {"name": names.metrics_policy(spec.name), "pods": pods, "scrapers": scrapers}


def pod_selector(selector: dict[str, str], roles: Iterable[RolePlan]) -> dict:
    """A podSelector for the cluster's pods of `roles`: every pod carries its role in the
    component label, under workload jobs and jobset alike."""
    return {
        "matchLabels": dict(selector),
        "matchExpressions": [
            {"key": k8s_contract.LABEL_COMPONENT, "operator": "In", "values": [r.role.value for r in roles]}
        ],
    }
