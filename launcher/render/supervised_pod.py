"""What a supervised pod adds to its task (pure): the job-watch container, the volumes it and
the task's container share, and the token only it mounts.

Why two containers (docs/security.md): TF's gRPC server accepts any caller that reaches
its port and can read any file of its container (a `ReadFile` op), so the task's container must
hold no Kubernetes credential. Every pod has automountServiceAccountToken false; a supervised
pod's job-watch container alone mounts the token, through the same projected volume the kubelet
would have mounted at the same path. The two containers share only an emptyDir, through which
`supervise.py watch` hands `supervise.py run` the verdict and `run` says when its task exited
(launcher/pod/supervise.py). Not shareProcessNamespace: with it the task's container could read the
token through /proc/<the watcher's pid>/root, as the same user.

render.py adds image, pull policy and env; the chart's templates/_job.tpl writes the same
(tests/charts keep them equal).
"""

from __future__ import annotations

from launcher import k8s_contract

SCRIPTS = ("supervise.py", "job_watch.py")  # both in the root ConfigMap, side by side
SCRIPTS_VOLUME = "supervisor"
STATE_VOLUME = "supervisor-state"
TOKEN_VOLUME = "kube-api-access"
# The kubelet's own choice for its automounted token (a bound token, rotated by the kubelet
# before expiry; job_watch.ApiServer reads it again for every request).
TOKEN_EXPIRATION_SECONDS = 3607
# Enough for python3 with ssl and json (about 20 MiB resident); a namespace with a ResourceQuota
# needs requests and limits on every container.
WATCHER_RESOURCES = {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"cpu": "100m", "memory": "96Mi"}}


def scripts_volume(configmap: str) -> dict:
    return {"name": SCRIPTS_VOLUME, "configMap": {"name": configmap, "items": [{"key": s, "path": s} for s in SCRIPTS]}}


def shared_volumes() -> list[dict]:
    """The supervised pod's volumes besides the scripts' ConfigMap."""
    return [
        {"name": STATE_VOLUME, "emptyDir": {}},
        {
            "name": TOKEN_VOLUME,
            "projected": {
                "defaultMode": 0o644,
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_EXPIRATION_SECONDS}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ],
            },
        },
    ]


def task_mounts() -> list[dict]:
    """What the task's container mounts for supervision: the scripts and the shared state."""
    return [
        {"name": SCRIPTS_VOLUME, "mountPath": k8s_contract.SUPERVISOR_DIR, "readOnly": True},
        {"name": STATE_VOLUME, "mountPath": k8s_contract.SUPERVISOR_STATE_DIR},
    ]


def task_command(command: list[str]) -> list[str]:
    return ["python3", f"{k8s_contract.SUPERVISOR_DIR}/supervise.py", "run", "--", *command]


def watcher() -> dict:
    """The job-watch container without image, imagePullPolicy and env (same image as the task:
    it is on the node already, and has python3)."""
    return {
        "name": k8s_contract.WATCHER_CONTAINER,
        "command": ["python3", f"{k8s_contract.SUPERVISOR_DIR}/supervise.py", "watch"],
        "resources": WATCHER_RESOURCES,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [*task_mounts(), {"name": TOKEN_VOLUME, "mountPath": k8s_contract.SA_DIR, "readOnly": True}],
    }
