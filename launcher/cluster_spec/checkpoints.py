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

from worker.contract import Strategy

DEFAULT_MOUNT_PATH = "/ckpt"
FIX = "set checkpoint.volume.persistentVolumeClaim.claimName (or hostPath) or a gs:// checkpoint.dir"

# The messages, str.format strings (the chart fills the same ones: scripts/chart_schema.py).
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
