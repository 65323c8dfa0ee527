"""Deleting a cluster: every object with its instance label, then waiting until all are gone.

The label covers clusters installed by Helm too (they have no ownerReferences to the root).
Used by `delete`, by `submit --replace`, and by a failed submit taking back what it created.
"""

from __future__ import annotations

import time

from launcher.backends.kubernetes.api import JOBSET, KINDS, NETWORK_POLICY, OWNED_KINDS, Api, NodesUnreadable
from launcher.errors import LauncherError
from launcher.status import node_loss


class PodsOnLostNodes(LauncherError):
    """Deleted pods that stay Terminating because their node does not answer."""

    exit_code = node_loss.EXIT_NODE_LOST


def delete_cluster(api: Api, namespace: str, name: str, timeout: float) -> list[str]:
    """Delete cluster `name` and wait until nothing of it is left: the `Kind/name` of each object
    deleted (none: there was nothing), the NetworkPolicies last. They go once no pod is left:
    deleted pods run on for their grace period (a ps, a worker answering gRPC), and without a
    policy TF's port would be open to the whole cluster meanwhile. Owned by the root, the
    garbage collector would remove them with it: they are released from it first."""
    found = []
    policies = api.list(*NETWORK_POLICY, namespace, name)
    for policy in policies:
        if policy["metadata"].get("ownerReferences"):
            api.release(*NETWORK_POLICY, namespace, policy["metadata"]["name"])
    for api_version, kind in OWNED_KINDS:
        if (api_version, kind) == NETWORK_POLICY:
            continue
        for obj in api.list(api_version, kind, namespace, name):
            found.append(f"{kind}/{obj['metadata']['name']}")
            api.delete(api_version, kind, namespace, obj["metadata"]["name"])
    deadline = time.monotonic() + timeout
    _wait_until_gone(api, namespace, name, [k for k in KINDS if k != NETWORK_POLICY], deadline, timeout)
    for policy in api.list(*NETWORK_POLICY, namespace, name):
        found.append(f"{NETWORK_POLICY[1]}/{policy['metadata']['name']}")
        api.delete(*NETWORK_POLICY, namespace, policy["metadata"]["name"])
    _wait_until_gone(api, namespace, name, KINDS, deadline, timeout)
    return found


def _wait_until_gone(api: Api, namespace: str, name: str, kinds, deadline: float, timeout: float) -> None:
    while True:
        left = [
            f"{kind}/{o['metadata']['name']}"
            for api_version, kind in kinds
            for o in api.list(api_version, kind, namespace, name)
        ]
        if not left:
            return
        if all(kind == "Pod" for kind, _ in (entry.split("/", 1) for entry in left)):
            refuse_pods_on_lost_nodes(api, namespace, name)
        if time.monotonic() > deadline:
            raise LauncherError(
                f"cluster {namespace}/{name} not gone after {timeout:.0f}s; still present: " + ", ".join(left)
            )
        time.sleep(1.0)


def claims_of(api: Api, namespace: str, name: str) -> list[str]:
    """The PersistentVolumeClaims the cluster's Jobs (or JobSet) mount: `delete` keeps them, with
    the model dir on them, as a resubmitted spec resumes from its checkpoints."""
    found: dict[str, None] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            claim = node.get("persistentVolumeClaim")
            if isinstance(claim, dict) and isinstance(claim.get("claimName"), str):
                found[claim["claimName"]] = None
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for api_version, kind in (JOBSET, ("batch/v1", "Job")):
        walk(api.list(api_version, kind, namespace, name))
    return list(found)


def refuse_pods_on_lost_nodes(api: Api, namespace: str, name: str) -> None:
    """Raise PodsOnLostNodes, with the commands that finish the delete, when every pod left sits
    on a lost node: their deletion waits for a kubelet that will not answer, so waiting out the
    timeout would only fail later. Nodes unreadable (RBAC): keep waiting, as before."""
    pods = api.list("v1", "Pod", namespace, name)
    try:
        nodes = api.nodes({(p.get("spec") or {}).get("nodeName") for p in pods} - {None})
    except NodesUnreadable:
        return
    blocked = node_loss.delete_blocked(f"{namespace}/{name}", namespace, pods, nodes)
    if blocked:
        raise PodsOnLostNodes(blocked)
