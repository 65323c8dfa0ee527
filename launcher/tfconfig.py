"""TF_CONFIG as a pure function of the spec.

chief, workers and ps share one training cluster. The evaluator's TF_CONFIG does not list it:
a PSv2 coordinator that sees an evaluator in the cluster waits for it forever
(tensorflow/tensorflow#46169), and the evaluator needs no peers at all.
"""
from __future__ import annotations

import json
from typing import Callable

from launcher import names
from launcher.spec import ClusterSpec

# (role, index) -> "host:port"
AddressFn = Callable[[str, int], str]


def kubernetes_address(spec: ClusterSpec) -> AddressFn:
    """Stable per-pod DNS names from the headless Service (hostname + subdomain)."""

    def address(role: str, index: int) -> str:
        host = names.hostname(spec.name, role, index)
        return f"{host}.{names.service(spec.name)}.{spec.namespace}.svc:{spec.port}"

    return address


def cluster(spec: ClusterSpec, address: AddressFn) -> dict[str, list[str]]:
    """The training cluster shared by chief, workers and ps (never the evaluator)."""
    return {
        role: [address(role, i) for i in range(spec.replicas(role))]
        for role in spec.training_roles()
    }


def tf_config(spec: ClusterSpec, role: str, index: int, address: AddressFn) -> dict:
    """The TF_CONFIG one task sees."""
    if role == "evaluator":
        return {"cluster": {}, "task": {"type": "evaluator", "index": index}}
    return {"cluster": cluster(spec, address), "task": {"type": role, "index": index}}


def all_tf_configs(spec: ClusterSpec, address: AddressFn) -> dict[tuple[str, int], dict]:
    return {
        (role, i): tf_config(spec, role, i, address)
        for role in spec.active_roles()
        for i in range(spec.replicas(role))
    }


# Kubernetes expands $(VAR) in env values from variables defined earlier in the same list, so
# one pod template per role carries TF_CONFIG for every index: O(N) bytes, not O(N^2).
INDEX_PLACEHOLDER = f"$({names.INDEX_ENV})"
_SENTINEL = -987654321


def tf_config_template(spec: ClusterSpec, role: str, address: AddressFn) -> str:
    """TF_CONFIG JSON text with the task index left as `$(TFK8S_TASK_INDEX)` for Kubernetes."""
    text = json.dumps(tf_config(spec, role, _SENTINEL, address), separators=(",", ":"))
    return text.replace(str(_SENTINEL), INDEX_PLACEHOLDER)


def expand_template(template: str, index: int) -> dict:
    """What Kubernetes does to the template for the pod with this index (used by tests, CLI)."""
    return json.loads(template.replace(INDEX_PLACEHOLDER, str(index)))
