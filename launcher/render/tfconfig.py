"""TF_CONFIG on Kubernetes: per-pod DNS addresses, and one template per role for every index.

What TF_CONFIG contains is the plan's (launcher/plan/plan.py ClusterPlan.tf_config: roles, indices,
the port); this module only says where tasks live on Kubernetes and how the index reaches the
text. The local backend gives the plan 127.0.0.1 ports instead (launcher/backends/local/tasks.py).
"""

from __future__ import annotations

import json

from launcher.cluster_spec import names
from launcher.plan.plan import AddressFn, ClusterPlan
from worker import contract


def kubernetes_address(plan: ClusterPlan) -> AddressFn:
    """Stable per-pod DNS names from the headless Service (hostname + subdomain)."""
    spec = plan.spec

    def address(role: str, index: int) -> str:
        host = names.hostname(spec.name, role, index, spec.workload)
        return f"{host}.{names.service(spec.name)}.{spec.namespace}.svc:{spec.port}"

    return address


# Kubernetes expands $(VAR) in env values from variables defined earlier in the same list, so
# one pod template per role carries TF_CONFIG for every index: O(N) bytes, not O(N^2).
INDEX_PLACEHOLDER = f"$({contract.TASK_INDEX})"
_SENTINEL = -987654321


def tf_config_template(plan: ClusterPlan, role: str, address: AddressFn) -> str:
    """TF_CONFIG JSON text with the task index left as `$(TFK8S_TASK_INDEX)` for Kubernetes."""
    text = json.dumps(plan.tf_config(role, _SENTINEL, address), separators=(",", ":"))
    return text.replace(str(_SENTINEL), INDEX_PLACEHOLDER)


def expand_template(template: str, index: int) -> dict:
    """What Kubernetes does to the template for the pod with this index (used by tests, CLI)."""
    return json.loads(template.replace(INDEX_PLACEHOLDER, str(index)))
