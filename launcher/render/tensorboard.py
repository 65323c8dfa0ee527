"""`tensorboard NAME`: the TensorBoard pod of a Kubernetes cluster (pure), and the local port
both backends serve on.

What to read and how to reach it is taken from the cluster itself, from the pod template of its
success role's Job (the chief; worker 0 under MWMS): the image, TFK8S_MODEL_DIR, the volume
that holds it, the pod's user. So it works for any cluster the launcher or the chart made,
without the spec file. The pod:
- runs `python -m tensorboard.main` from the cluster's own image (the worker image has it),
  listening on 127.0.0.1 only: the port-forward connects inside the pod's network namespace,
  so no other pod can reach it and no NetworkPolicy has to admit anything;
- mounts the checkpoint volume read-only at the cluster's mount path (a gs:// model dir is
  read directly, with the pod's service account, as the training pods do);
- passes Pod Security `restricted` (not with a hostPath volume, like the cluster's own pods),
  with a read-only root filesystem and its own /tmp;
- carries the cluster's labels with component `tensorboard` (never a role: status and the
  NetworkPolicies select pods by role) and is owned by the cluster's root, so deleting the
  cluster removes it; activeDeadlineSeconds ends it should the CLI die without cleaning up.
"""

from __future__ import annotations

import socket

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.errors import LauncherError
from launcher.plan import storage
from worker import contract

TENSORBOARD_PORT = 6006  # inside the pod; the local port is the CLI's --port
# The safety net: a TensorBoard pod whose CLI was killed (no Ctrl-C cleanup) ends after this.
DEADLINE_SECONDS = 6 * 3600
CHECKPOINT_MOUNT = storage.VOLUME_NAME


def model_dir(template: dict) -> str:
    """TFK8S_MODEL_DIR of the Job's pod template (every role has the same one)."""
    for env in _container(template).get("env") or []:
        if env.get("name") == contract.MODEL_DIR and "value" in env:
            return env["value"]
    raise LauncherError(
        f"the cluster's pods have no {contract.MODEL_DIR}: not made by tfk8s, so there is no model dir to show"
    )


def checkpoint_volume(template: dict, logdir: str) -> tuple[dict, dict] | None:
    """(volume, mount) that holds `logdir` in the cluster's pods; None for a gs:// dir.

    Refuses an emptyDir: each pod has its own, so there is nothing another pod could read."""
    if logdir.startswith("gs://"):
        return None
    container = _container(template)
    mounts = [m for m in container.get("volumeMounts") or [] if _under(logdir, m.get("mountPath", ""))]
    if not mounts:
        raise LauncherError(f"model dir {logdir} is on no volume of the cluster's pods (not made by tfk8s?)")
    mount = max(mounts, key=lambda m: len(m["mountPath"]))  # the innermost mount holds it
    volume = next(v for v in (template.get("spec") or {}).get("volumes") or [] if v.get("name") == mount["name"])
    if "emptyDir" in volume:
        raise LauncherError(
            f"checkpoint.dir {logdir} is an emptyDir inside each training pod: nothing is shared "
            "that a TensorBoard pod could read. Give the cluster a shared checkpoint dir "
            "(checkpoint.volume: persistentVolumeClaim or hostPath, or a gs:// checkpoint.dir) "
            "and resubmit"
        )
    source = {k: v for k, v in volume.items() if k != "name"}
    return (
        {"name": CHECKPOINT_MOUNT, **source},
        {"name": CHECKPOINT_MOUNT, "mountPath": mount["mountPath"], "readOnly": True},
    )


def tensorboard_pod(name: str, namespace: str, template: dict, owner: dict) -> dict:
    """The TensorBoard pod (to create with generateName) for cluster `name`.

    template: the success role Job's pod template; owner: the cluster's root object."""
    logdir = model_dir(template)
    found = checkpoint_volume(template, logdir)
    container = _container(template)
    pod_spec = template.get("spec") or {}
    security = pod_spec.get("securityContext") or {}
    labels = {
        k: v
        for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()
        if k != k8s_contract.LABEL_COMPONENT
    }
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict] = [{"name": "tmp", "emptyDir": {}}]
    if found is not None:
        volume, mount = found
        volumes.append(volume)
        mounts.append(mount)
    spec = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": security.get("runAsUser", 1000),
            "runAsGroup": security.get("runAsGroup", 1000),
            "fsGroup": security.get("fsGroup", 1000),
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": k8s_contract.TENSORBOARD_COMPONENT,
                "image": container["image"],
                "imagePullPolicy": container.get("imagePullPolicy", "IfNotPresent"),
                "command": [
                    "python",
                    "-m",
                    "tensorboard.main",
                    "--logdir",
                    logdir,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(TENSORBOARD_PORT),
                ],
                "env": [{"name": "HOME", "value": "/tmp"}],
                "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT, "protocol": "TCP"}],
                # limits too: a namespace with a ResourceQuota on limits refuses a pod without them
                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "runAsNonRoot": True,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
    # Where the cluster's pods may run, this one may too (a PVC bound to one node's storage);
    # their service account is what reads a gs:// dir (Workload Identity needs no token mount).
    for key in ("nodeSelector", "tolerations", "serviceAccountName"):
        if pod_spec.get(key):
            spec[key] = pod_spec[key]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": names.tensorboard_pod_prefix(name),
            "namespace": namespace,
            "labels": {**labels, k8s_contract.LABEL_COMPONENT: k8s_contract.TENSORBOARD_COMPONENT},
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def local_listener(port: int) -> socket.socket:
    """The CLI's end, 127.0.0.1:port (a port taken is the user's to change, never another)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
    except OSError as exc:
        listener.close()
        raise LauncherError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror} (choose another --port)") from None
    listener.listen(16)
    return listener


def _container(template: dict) -> dict:
    containers = (template.get("spec") or {}).get("containers") or []
    found = next((c for c in containers if c.get("name") == k8s_contract.CONTAINER), None)
    if found is None:
        raise LauncherError(
            f"the cluster's pods have no {k8s_contract.CONTAINER!r} container: "
            "not made by tfk8s, so there is no model dir to show"
        )
    return found


def _under(path: str, mount_path: str) -> bool:
    mount_path = mount_path.rstrip("/")
    return bool(mount_path) and (path == mount_path or path.startswith(mount_path + "/"))
