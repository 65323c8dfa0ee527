"""The Kubernetes side of `code:` (launcher/code_shipping/code_bundle.py), for launcher/render/render.py.

The archive travels in one immutable ConfigMap named by its digest; every pod of the cluster
unpacks it with an init container (the same image, the same restricted securityContext) into
an emptyDir, which the main container mounts read-only at code_bundle.CODE_DIR, its working dir
and first on PYTHONPATH (plan.task_env). An init container, not a wrapper around the command:
the main command stays the task's own (the built-in worker, or the user's `command:`, under
the supervisor where there is one), signals reach it directly, and a bad archive shows as
Init:Error before anything trains. Under a JobSet (the root, applied first) the ConfigMap
follows it at once; a pod that gets to its volumes before that waits for it (FailedMount,
retried by the kubelet), as for any missing ConfigMap.
"""

from __future__ import annotations

import base64

from launcher.code_shipping import code_bundle
from launcher.code_shipping.code_bundle import ARCHIVE_DIR, ARCHIVE_KEY, UNPACK
from launcher.plan.plan import ClusterPlan

SHA256_ANNOTATION = "tfk8s.io/code-sha256"
BYTES_ANNOTATION = "tfk8s.io/code-bytes"
INIT_CONTAINER = "code"
CODE_VOLUME = "code"
ARCHIVE_VOLUME = "code-archive"
# The main container's (manifests/job.yaml.j2), for the init container: restricted Pod Security.
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def code_objects(cluster: ClusterPlan, context: dict) -> list[dict]:
    """The code ConfigMap (none without `code:`), labelled like the cluster's other objects."""
    code, spec = cluster.code, cluster.spec
    if code is None:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": code.object_name,
                "namespace": spec.namespace,
                "labels": dict(context["labels"]),
                "annotations": {
                    **context["annotations"],
                    SHA256_ANNOTATION: code.digest,
                    BYTES_ANNOTATION: str(code.size),
                },
            },
            # Content-addressed: never changed in place (changed code is a new object).
            "immutable": True,
            "binaryData": {ARCHIVE_KEY: base64.b64encode(code.bundle.archive).decode()},
        }
    ]


# The unpacking init container: python3 and tarfile over an archive of at most 1 MiB (about
# 15 MiB resident, measured in tests/kind/test_code.py's pods). ResourceQuota admission checks
# init containers too: without requests and limits, a namespace with a cpu or memory quota
# refused every pod of a cluster with `code:`. Small, so the pod's effective request (the larger
# of the biggest init container and the sum of the others) stays the role's own.
UNPACK_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}


def after_root(cluster: ClusterPlan, context: dict, objects: list[dict]) -> list[dict]:
    """The rendered objects with the code ConfigMap right after the root (its owner)."""
    return objects[:1] + code_objects(cluster, context) + objects[1:]


def pod_code(cluster: ClusterPlan, container_security: dict | None = None) -> dict:
    """What a pod template adds for the code: initContainers, mounts, volumes (empty without)."""
    code = cluster.code
    if code is None:
        return {"init_containers": [], "mounts": [], "volumes": []}
    spec = cluster.spec
    init = {
        "name": INIT_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["python3", "-c", UNPACK, f"{ARCHIVE_DIR}/{ARCHIVE_KEY}", code.dir],
        "resources": UNPACK_RESOURCES,
        "securityContext": container_security or CONTAINER_SECURITY,
        "volumeMounts": [
            {"name": ARCHIVE_VOLUME, "mountPath": ARCHIVE_DIR, "readOnly": True},
            {"name": CODE_VOLUME, "mountPath": code.dir},
        ],
    }
    return {
        "init_containers": [init],
        "mounts": [{"name": CODE_VOLUME, "mountPath": code.dir, "readOnly": True}],
        "volumes": [
            {"name": CODE_VOLUME, "emptyDir": {}},
            {"name": ARCHIVE_VOLUME, "configMap": {"name": code.object_name}},
        ],
    }


def code_values(code: code_bundle.Bundle | None, values: dict) -> dict:
    """Helm values with `code:` as codeArchive, the packed dir in base64."""
    if code is not None:
        values.pop("code")
        values["codeArchive"] = base64.b64encode(code.archive).decode()
    return values
