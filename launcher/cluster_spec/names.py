"""Every name the launcher generates, in one place, so validation checks exactly what is created."""

from __future__ import annotations

import re
from typing import Iterator, Mapping

from launcher.k8s_contract import DNS1035_PATTERN, DNS1123_LABEL_PATTERN, JOBSET_JOB_INDEX, MAX_LABEL, Workload
from worker.contract import Role, task_name

_DNS1035 = re.compile(DNS1035_PATTERN)
_DNS1123 = re.compile(DNS1123_LABEL_PATTERN)


# The messages, str.format strings (the chart fills the same ones: scripts/chart_schema.py).
DNS1035_TOO_LONG = f"{{length}} characters; a DNS-1035 label has at most {MAX_LABEL}"
DNS1123_TOO_LONG = DNS1035_TOO_LONG.replace("DNS-1035", "DNS-1123")
NOT_DNS1035 = (
    "not a DNS-1035 label: use lowercase letters, digits and '-', start with a letter, end with a letter or digit"
)
NOT_DNS1123 = "not a DNS-1123 label: use lowercase letters, digits and '-'"
GENERATED_NAME = "generated {kind} name '{name}' for role {role}: {problem}; shorten name"


def dns1035_problem(value: str) -> str | None:
    if len(value) > MAX_LABEL:
        return DNS1035_TOO_LONG.format(length=len(value))
    return None if _DNS1035.match(value) else NOT_DNS1035


def dns1123_label_problem(value: str) -> str | None:
    if len(value) > MAX_LABEL:
        return DNS1123_TOO_LONG.format(length=len(value))
    return None if _DNS1123.match(value) else NOT_DNS1123


def service(name: str) -> str:
    """Headless Service that gives every pod `<job>-<index>.<service>` as DNS name."""
    return name


def job(name: str, role: str, workload: Workload = Workload.JOBS) -> str:
    """A role's Job: ours is `<name>-<role>`; a JobSet names its child `<set>-<replicatedJob>-0`
    (one Job per role, the replicatedJob named after the role)."""
    if Workload(workload) is Workload.JOBSET:
        return f"{name}-{Role(role).value}-{JOBSET_JOB_INDEX}"
    return f"{name}-{Role(role).value}"


def hostname(name: str, role: str, index: int, workload: Workload = Workload.JOBS) -> str:
    """Indexed Job pods get hostname `<job>-<index>` from the Job controller (JobSet's too)."""
    if Workload(workload) is Workload.JOBSET:
        return f"{job(name, role, workload)}-{index}"
    return f"{name}-{task_name(role, index)}"


def root(name: str) -> str:
    """The ConfigMap that owns every other object of a cluster."""
    return name


def supervisor_account(name: str) -> str:
    return f"{name}-supervisor"


def grpc_policy(name: str) -> str:
    """NetworkPolicy: the training pods admit ingress on the gRPC port only from each other."""
    return f"{name}-grpc"


def collective_policy(name: str) -> str:
    """NetworkPolicy: MWMS workers with GPUs admit every TCP port from each other (NCCL)."""
    return f"{name}-collective"


def data_service_policy(name: str, role: str) -> str:
    """NetworkPolicy: a data service role's pods admit its clients (k8s_contract.data_service_clients)."""
    return f"{name}-{Role(role).value}-grpc"


def metrics_policy(name: str) -> str:
    """NetworkPolicy: every pod admits the metrics scrapers (metrics.scrapers) on the metrics port."""
    return f"{name}-metrics"


def no_ingress_policy(name: str) -> str:
    """NetworkPolicy: the pods outside the training cluster (the evaluator) admit no ingress."""
    return f"{name}-no-ingress"


def tensorboard_pod_prefix(name: str) -> str:
    """generateName of `tensorboard`'s pod: one per session, so two sessions never collide."""
    return f"{name}-tensorboard-"


def generated_names(name: str, workload: Workload, replicas: Mapping[Role, int]) -> Iterator[tuple[str, str, str]]:
    """(role, kind, name) for every generated name that must be a DNS-1035 label, for the
    cluster `name` with `replicas` per role (roles without any make no objects)."""
    yield ("-", "Service", service(name))
    yield ("-", "ServiceAccount/Role", supervisor_account(name))
    for role, count in replicas.items():
        if count > 0:
            yield (role, "Job", job(name, role, workload))
            # The longest hostname is the one with the highest index.
            yield (role, "pod hostname", hostname(name, role, count - 1, workload))
