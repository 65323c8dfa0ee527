"""The model dir's rules checked on a spec at load (pure); what storage the pods get is decided
in launcher/plan/storage.py.

- The default model dir: `<mountPath>/<namespace>/<name>` when checkpoint.dir is not set, so
  two clusters on one volume never share a dir by accident (the worker also refuses a dir that
  another cluster owns: worker/model_dir/ownership.py).
- MWMS workers must share their checkpoints (a spec error otherwise).
- Without a volume the model dir is an emptyDir, which goes with its pod: allowed, since a quick
  experiment needs no storage, but said at render and submit and in `status` (plan/storage.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.contract import Role, Strategy

if TYPE_CHECKING:  # launcher.spec.spec imports this module
    from launcher.spec.spec import ClusterSpec

DEFAULT_MOUNT_PATH = "/ckpt"
FIX = "set checkpoint.volume.persistentVolumeClaim.claimName (or hostPath) or a gs:// checkpoint.dir"

# The messages, str.format strings (the chart fills the same ones: launcher/chart/chart_schema.py).
MWMS_UNSHARED = (
    f"{Strategy.MULTI_WORKER_MIRRORED.value} with {{workers}} workers needs checkpoint storage "
    "that every worker shares ({where}): after a restart each worker would restore a different "
    "checkpoint and all-reduce gradients into different weights. Set "
    "checkpoint.volume.persistentVolumeClaim.claimName to a ReadWriteMany claim, or use a gs:// "
    "checkpoint.dir"
)
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
    return MWMS_UNSHARED.format(workers=workers, where=HOSTPATH_PER_NODE if volume is not None else EMPTYDIR_PER_POD)
