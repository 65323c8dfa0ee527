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
from dataclasses import dataclass

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.errors import LauncherError
from launcher.plan import storage
from launcher.render import templating
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


def checkpoint_volume(template: dict, logdir: str) -> tuple[dict, str] | None:
    """(volume source, mount path) that holds `logdir` in the cluster's pods; None for a gs:// dir.

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
    return {k: v for k, v in volume.items() if k != "name"}, mount["mountPath"]


@dataclass(frozen=True)
class TensorBoardPod:
    """What manifests/tensorboard.yaml.j2 lays out, read from the cluster's own pod template."""

    generate_name: str
    namespace: str
    labels: dict[str, str]
    owner: dict  # the cluster's root object
    image: str
    image_pull_policy: str
    logdir: str
    run_as_user: int
    run_as_group: int
    fs_group: int
    checkpoint_source: dict | None  # None: a gs:// dir, read directly
    checkpoint_mount_path: str | None
    node_selector: dict | None
    tolerations: list | None
    service_account: str | None
    checkpoint_volume_name: str
    port: int  # TensorBoard's, inside the pod
    deadline_seconds: int


def tensorboard_pod(name: str, namespace: str, template: dict, owner: dict) -> dict:
    """The TensorBoard pod (to create with generateName) for cluster `name`.

    template: the success role Job's pod template; owner: the cluster's root object."""
    logdir = model_dir(template)
    source, mount_path = checkpoint_volume(template, logdir) or (None, None)
    container = _container(template)
    pod_spec = template.get("spec") or {}
    security = pod_spec.get("securityContext") or {}
    labels = {
        k: v
        for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()
        if k != k8s_contract.LABEL_COMPONENT
    }
    pod = TensorBoardPod(
        generate_name=names.tensorboard_pod_prefix(name),
        namespace=namespace,
        # the cluster's, with component tensorboard: never a role, which status and the
        # NetworkPolicies select pods by
        labels={**labels, k8s_contract.LABEL_COMPONENT: k8s_contract.TENSORBOARD_COMPONENT},
        owner=owner,
        image=container["image"],
        image_pull_policy=container.get("imagePullPolicy", "IfNotPresent"),
        logdir=logdir,
        run_as_user=security.get("runAsUser", 1000),
        run_as_group=security.get("runAsGroup", 1000),
        fs_group=security.get("fsGroup", 1000),
        checkpoint_source=source,
        checkpoint_mount_path=mount_path,
        node_selector=pod_spec.get("nodeSelector"),
        tolerations=pod_spec.get("tolerations"),
        service_account=pod_spec.get("serviceAccountName"),
        checkpoint_volume_name=CHECKPOINT_MOUNT,
        port=TENSORBOARD_PORT,
        deadline_seconds=DEADLINE_SECONDS,
    )
    [rendered] = templating.render_all(_Context(pod), [("tensorboard.yaml.j2", {})])
    return rendered


@dataclass(frozen=True)
class _Context:
    pod: TensorBoardPod


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
