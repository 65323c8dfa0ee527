"""The cluster's NetworkPolicies (manifests/networkpolicy.yaml.j2): which pods each one selects.

TF's gRPC servers accept any caller, unauthenticated and in plaintext: any pod that reaches a
ps or worker could read or overwrite the model's variables. The training pods (contract
TRAINING_ROLES present in the cluster) admit ingress only from each other, on the gRPC port;
the evaluator, outside the training cluster and listening on nothing, admits none. MWMS workers
that get GPUs also admit every TCP port from each other, and from nothing else: NCCL listens on
ephemeral ports (k8s_contract.nccl_roles). Every pod admits the metrics scrapers
(metrics.scrapers: the monitoring namespace by default) on the metrics port, and only there:
policies add up, so the gRPC port stays fenced from them. The data service's dispatcher admits
the trainers and the data workers on the gRPC port, a data worker only the trainers
(k8s_contract.data_service_clients); nothing else reaches them. Egress stays open (DNS, the API server, gs://). The
chart writes the same objects (charts/tfk8s/templates/networkpolicy.yaml); local runs have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.plan.plan import ClusterPlan, RolePlan


@dataclass(frozen=True)
class PolicyPods:
    """One policy's name and the roles whose pods it selects (every pod carries its role in the
    component label, under workload jobs and jobset alike)."""

    name: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class ClientsPolicy:
    """A data service role's pods (`pods`) and the roles whose pods may reach its gRPC port."""

    pods: PolicyPods
    clients: tuple[str, ...]


@dataclass(frozen=True)
class NetworkPolicies:
    grpc: PolicyPods
    collective: PolicyPods | None  # MWMS workers with GPUs (NCCL)
    no_ingress: PolicyPods | None  # the roles that listen on nothing (the evaluator)
    data_service: tuple[ClientsPolicy, ...]  # the dispatcher's and the data workers', if any
    metrics: PolicyPods | None  # None without metrics or scrapers (nothing reaches the port)
    scrapers: tuple[dict, ...]  # metrics.scrapers, as NetworkPolicy peers


def network_policies(cluster: ClusterPlan) -> NetworkPolicies | None:
    """None when the spec says networkPolicy: false."""
    spec = cluster.spec
    if not spec.network_policy:
        return None
    outside = [r for r in cluster.roles if not r.listens]
    nccl = [r for r in cluster.roles if r.role in cluster.nccl_roles]
    scrapers = tuple(s.model_dump(by_alias=True, exclude_none=True) for s in spec.metrics.scrapers)
    return NetworkPolicies(
        grpc=_pods(names.grpc_policy(spec.name), cluster.training_roles),
        collective=_pods(names.collective_policy(spec.name), nccl) if nccl else None,
        no_ingress=_pods(names.no_ingress_policy(spec.name), outside) if outside else None,
        data_service=tuple(
            ClientsPolicy(
                _pods(names.data_service_policy(spec.name, role.role), [role]),
                tuple(r.role.value for r in cluster.roles if r.role in k8s_contract.data_service_clients(role.role)),
            )
            for role in cluster.data_service_roles
        ),
        metrics=_pods(names.metrics_policy(spec.name), cluster.roles)
        if spec.metrics.port is not None and scrapers
        else None,
        scrapers=scrapers,
    )


def _pods(name: str, roles: Iterable[RolePlan]) -> PolicyPods:
    return PolicyPods(name, tuple(r.role.value for r in roles))
