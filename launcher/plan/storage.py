"""Where a cluster's model dir lives, decided once (pure): the path every task is told
(TFK8S_MODEL_DIR), and the `checkpoint` volume and mount every pod gets, or none for gs://.

render lays the volume out, `status` reads it back from the Jobs (storage_notes), and the CLI
warns from it (ephemeral_warning). The spec-level rules (the default dir, MWMS workers must
share it) are checked at load: launcher/cluster_spec/checkpoints.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.cluster_spec.checkpoints import EMPTYDIR_PER_POD, FIX, HOSTPATH_PER_NODE
from launcher.cluster_spec.spec import ClusterSpec
from worker.contract import Role

# the model dir's volume in every pod (render lays it out; tensorboard and status read it back)
VOLUME_NAME = "checkpoint"


@dataclass(frozen=True)
class StoragePlan:
    """The model dir and the volume that holds it: a claim, a hostPath (created if missing), or
    (neither) an emptyDir at the model dir, since the image's filesystem is not writable by the
    non-root user; no volume for gs:// (mount_path None). manifests/job.yaml.j2 lays it out."""

    model_dir: str  # what every task is told (TFK8S_MODEL_DIR)
    mount_path: str | None  # where the volume is mounted; None for gs://
    claim_name: str | None = None
    host_path: str | None = None

    @property
    def ephemeral(self) -> bool:
        """The model dir goes with its pod: a replaced pod trains from step 0."""
        return self.mount_path is not None and self.claim_name is None and self.host_path is None


def storage_plan(spec: ClusterSpec, model_dir: str | None = None) -> StoragePlan:
    """`model_dir` replaces the spec's (a local run keeps it in its own dir)."""
    model_dir = model_dir or spec.model_dir
    volume = spec.checkpoint.volume
    if volume is not None:
        if volume.persistent_volume_claim is not None:
            return StoragePlan(model_dir, volume.mount_path, claim_name=volume.persistent_volume_claim.claim_name)
        return StoragePlan(model_dir, volume.mount_path, host_path=volume.host_path.path)
    if spec.checkpoint.is_remote:
        return StoragePlan(model_dir, None)
    return StoragePlan(model_dir, model_dir)


def ephemeral_warning(spec: ClusterSpec) -> str | None:
    """The warning for `render` and `submit` on Kubernetes (field path, consequence, fix), or
    None. Local runs keep the model dir on the local disk, durable across restarts: no warning."""
    storage = storage_plan(spec)
    unshared = unshared_warning(spec)
    if unshared:
        return unshared
    if not storage.ephemeral:
        return None
    if spec.restart_policy == "Never":
        lost = (
            "a failed or preempted task is replaced by a new pod with an empty dir and "
            "trains from step 0 (restartPolicy Never)"
        )
    else:
        lost = (
            "a task restarted in place keeps it, but an evicted or preempted pod is "
            "replaced by a new one with an empty dir and trains from step 0"
        )
    return (
        f"checkpoint.volume: not set, so the model dir {storage.model_dir} is an emptyDir that "
        f"is deleted with its pod: {lost}. For restarts that resume, {FIX}"
    )


def unshared_warning(spec: ClusterSpec) -> str | None:
    """A command of your own with several MWMS workers or an evaluator and no checkpoint storage
    every task shares (the built-in worker is refused then): what tfk8s cannot check."""
    if spec.builtin or spec.checkpoint.is_remote:
        return None
    volume = spec.checkpoint.volume
    if volume is not None and volume.persistent_volume_claim:
        return None
    readers = []
    if spec.mwms_storage_problem():
        readers.append(f"the {spec.replicas(Role.WORKER)} workers")
    if spec.replicas(Role.EVALUATOR) and volume is None:
        readers.append("the evaluator")
    if not readers:
        return None
    where = HOSTPATH_PER_NODE if volume is not None else EMPTYDIR_PER_POD
    return (
        f"checkpoint.volume: {where}, so {' and '.join(readers)} do not share the model dir "
        f"{spec.model_dir}. Where your program keeps its checkpoints is its business: tfk8s cannot check "
        "that every worker restores the same one or that the evaluator sees them. If they are in that dir, "
        f"{FIX}"
    )


# What `status` says of a cluster whose Jobs keep the model dir in an emptyDir.
EPHEMERAL_NOTE = (
    f"the model dir is an emptyDir (no checkpoint.volume): a replaced pod trains from step 0; for restarts "
    f"that resume, {FIX}"
)


def storage_notes(job_specs: list[dict]) -> list[str]:
    """Notes for `status`, read back from the cluster's Job specs (a Helm install has no spec
    of ours to read)."""
    for job_spec in job_specs:
        volumes = ((job_spec.get("template") or {}).get("spec") or {}).get("volumes") or []
        if any(v.get("name") == VOLUME_NAME and "emptyDir" in v for v in volumes):
            return [EPHEMERAL_NOTE]
    return []
