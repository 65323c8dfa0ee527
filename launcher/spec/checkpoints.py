"""Where a cluster's model dir lives and what its storage keeps (pure rules on a spec).

- The default model dir: `<mountPath>/<namespace>/<name>` when checkpoint.dir is not set, so
  two clusters on one volume never share a dir by accident (the worker also refuses a dir that
  another cluster owns: worker/model_dir/ownership.py).
- MWMS workers must share their checkpoints (a spec error otherwise).
- Without a volume the model dir is an emptyDir, which goes with its pod: a replaced pod
  (restartPolicy Never, or any eviction or preemption) trains from step 0. Allowed, since a
  quick experiment needs no storage, but said at render and submit and in `status`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from worker.contract import Role, Strategy

if TYPE_CHECKING:  # launcher.spec.spec imports this module
    from launcher.spec.spec import ClusterSpec

DEFAULT_MOUNT_PATH = "/ckpt"
FIX = ("set checkpoint.volume.persistentVolumeClaim.claimName (or hostPath) or a gs:// "
       "checkpoint.dir")

# The messages, str.format strings (the chart fills the same ones: launcher/chart/chart_schema.py).
MWMS_UNSHARED = (
    f"{Strategy.MULTI_WORKER_MIRRORED.value} with {{workers}} workers needs checkpoint storage "
    "that every worker shares ({where}): after a restart each worker would restore a different "
    "checkpoint and all-reduce gradients into different weights. Set "
    "checkpoint.volume.persistentVolumeClaim.claimName to a ReadWriteMany claim, or use a gs:// "
    "checkpoint.dir")
HOSTPATH_PER_NODE = "a hostPath is a different directory on each node"
EMPTYDIR_PER_POD = "without a volume each pod gets its own emptyDir"


def default_model_dir(mount_path: str, namespace: str, name: str) -> str:
    """A cluster's model dir when checkpoint.dir is not set: unique per namespace and name."""
    return f"{mount_path.rstrip('/')}/{namespace}/{name}"


def mwms_storage_problem(spec: ClusterSpec) -> str | None:
    """Why this multi_worker_mirrored spec's checkpoints are not shared by its workers, or None.

    Every MWMS worker restores the latest checkpoint it sees when it (re)starts. Workers that
    see different directories restore different steps and then all-reduce their gradients into
    different weights, silently. One worker, a PVC (ReadWriteMany when the pods may land on
    different nodes) and gs:// are safe; an emptyDir (no volume) is per pod, a hostPath per node.
    """
    workers = spec.replicas(Role.WORKER)
    if spec.strategy is not Strategy.MULTI_WORKER_MIRRORED or workers < 2:
        return None
    volume = spec.checkpoint.volume
    if spec.checkpoint.is_remote or (volume is not None and volume.persistent_volume_claim):
        return None
    return MWMS_UNSHARED.format(workers=workers,
                                where=HOSTPATH_PER_NODE if volume is not None else EMPTYDIR_PER_POD)


def ephemeral(spec: ClusterSpec) -> bool:
    """The model dir is an emptyDir: neither a volume nor gs://."""
    return spec.checkpoint.volume is None and not spec.checkpoint.is_remote


def ephemeral_warning(spec: ClusterSpec) -> str | None:
    """The warning for `render` and `submit` on Kubernetes (field path, consequence, fix), or
    None. Local runs keep the model dir on the local disk, durable across restarts: no warning."""
    if not ephemeral(spec):
        return None
    if spec.restart_policy == "Never":
        lost = ("a failed or preempted task is replaced by a new pod with an empty dir and "
                "trains from step 0 (restartPolicy Never)")
    else:
        lost = ("a task restarted in place keeps it, but an evicted or preempted pod is "
                "replaced by a new one with an empty dir and trains from step 0")
    return (f"checkpoint.volume: not set, so the model dir {spec.model_dir} is an emptyDir that "
            f"is deleted with its pod: {lost}. For restarts that resume, {FIX}")


# What `status` says of a cluster whose Jobs keep the model dir in an emptyDir.
EPHEMERAL_NOTE = ("the model dir is an emptyDir (no checkpoint.volume): a replaced pod trains "
                  f"from step 0; for restarts that resume, {FIX}")


def storage_notes(job_specs: list[dict]) -> list[str]:
    """Notes for `status`, read back from the cluster's Job specs (render names the model
    dir's volume `checkpoint`)."""
    for job_spec in job_specs:
        volumes = ((job_spec.get("template") or {}).get("spec") or {}).get("volumes") or []
        if any(v.get("name") == "checkpoint" and "emptyDir" in v for v in volumes):
            return [EPHEMERAL_NOTE]
    return []
