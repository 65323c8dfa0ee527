"""The cluster spec (cluster.yaml): one pydantic model, camelCase keys like Kubernetes objects.

Validation here is structural and cross-field; where a problem sits in the YAML file is added by
`launcher.cluster_spec.loader`, which maps pydantic's field paths back to line numbers.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.cluster_spec.checkpoints import (
    DEFAULT_MOUNT_PATH,
    EMPTYDIR_PER_POD,
    HOSTPATH_PER_NODE,
    MWMS_UNSHARED,
    default_model_dir,
)
from launcher.cluster_spec.role_spec import Roles, SpecModel, check_env
from launcher.code_shipping.code_bundle import Bundle, CodeSpec
from launcher.k8s_contract import Workload  # noqa: F401 (re-exported)
from worker import contract
from worker.contract import ROLES, Role, Strategy  # noqa: F401 (re-exported)

DEFAULT_IMAGE = "tfk8s/worker:dev"
_MODULE_NAME = re.compile(k8s_contract.MODULE_NAME_PATTERN)


class Program(SpecModel):
    """The built-in worker's training program: a module with builders (see worker/program.py)."""

    module: str = contract.BUILTIN_PROGRAM
    args: list[str] = Field(default_factory=list)

    @field_validator("module")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if not _MODULE_NAME.match(value):
            raise ValueError(f"{value!r} is not a dotted Python module name")
        return value


class PVCSource(SpecModel):
    claim_name: str


class HostPathSource(SpecModel):
    path: str


class Volume(SpecModel):
    """Where the checkpoint directory lives: exactly one source."""

    persistent_volume_claim: PVCSource | None = None
    host_path: HostPathSource | None = None
    mount_path: str = DEFAULT_MOUNT_PATH

    @model_validator(mode="after")
    def _one_source(self) -> "Volume":
        if (self.persistent_volume_claim is None) == (self.host_path is None):
            raise ValueError("set exactly one of persistentVolumeClaim or hostPath")
        return self


# str.format strings (the chart fills the same ones: launcher/chart/chart_schema.py).
DIR_NOT_UNDER_MOUNT = "dir '{dir}' is not under the volume's mountPath '{mount_path}'"


class Checkpoint(SpecModel):
    # None: <mountPath>/<namespace>/<name> (ClusterSpec.model_dir), one dir per cluster, so
    # clusters sharing a volume never share a model dir by default.
    dir: str | None = None
    volume: Volume | None = None

    @property
    def is_remote(self) -> bool:
        return self.dir is not None and "://" in self.dir

    @model_validator(mode="after")
    def _dir_on_volume(self) -> "Checkpoint":
        if self.dir is None:
            return self
        if self.is_remote:
            if not self.dir.startswith("gs://"):
                raise ValueError(f"{self.dir!r}: only gs:// URLs are supported as remote storage")
            if self.volume is not None:
                raise ValueError("a gs:// checkpoint dir needs no volume; remove checkpoint.volume")
        elif not self.dir.startswith("/"):
            raise ValueError(f"{self.dir!r} must be an absolute path or a gs:// URL")
        elif self.volume is not None:
            mount = self.volume.mount_path.rstrip("/") + "/"
            if not (self.dir.rstrip("/") + "/").startswith(mount):
                raise ValueError(DIR_NOT_UNDER_MOUNT.format(dir=self.dir, mount_path=self.volume.mount_path))
        return self


class SecurityContext(SpecModel):
    run_as_user: int = Field(default=1000, ge=1)
    run_as_group: int = Field(default=1000, ge=1)
    fs_group: int = Field(default=1000, ge=1)


class ClusterSpec(SpecModel):
    name: str
    namespace: str = "default"
    image: str = DEFAULT_IMAGE
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    strategy: Strategy
    # jobs: one Indexed Job per role (nothing to install). jobset: one JobSet (needs JobSet in the
    # cluster), which Kueue admits as one unit: required for `queue`.
    workload: Workload = Workload.JOBS
    queue: str | None = None  # a Kueue LocalQueue in the cluster's namespace
    priority_class_name: str | None = None  # every pod's PriorityClass (Kueue reads it too)
    # Built-in worker program, or bring-your-own: command (+ args) run in `image` instead.
    program: Program | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    # Your own code, shipped to every pod without an image build (launcher/code_shipping/code_bundle.py).
    code: CodeSpec | None = None
    _code_bundle: Bundle | None = PrivateAttr(default=None)  # the packed code (the loader's)
    env: dict[str, str] = Field(default_factory=dict)
    roles: Roles = Field(default_factory=Roles)
    port: int = Field(default=2222, ge=1024, le=65535)
    # TF's gRPC servers accept any caller, unauthenticated and in plaintext: NetworkPolicies
    # admit ingress to the training pods (chief, workers, ps) only from each other, on `port`,
    # and none to the evaluator. Needs a CNI that enforces NetworkPolicy; false: no policies.
    network_policy: bool = Field(default=True, strict=True)
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    # Never: a failed task's pod is replaced (same hostname, Indexed Job), counted against
    # backoffLimit, and the Jobs get a podFailurePolicy that does not count preemptions.
    # OnFailure: restarts in place; Kubernetes allows no podFailurePolicy with it.
    restart_policy: Literal["OnFailure", "Never"] = "Never"
    backoff_limit: int = Field(default=6, ge=0, le=1000)
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    ttl_seconds_after_finished: int | None = Field(default=3600, ge=0)
    # Seconds between SIGTERM and SIGKILL for every pod: longer than a checkpoint save (the
    # built-in worker saves on SIGTERM and exits as soon as the save is done).
    termination_grace_period_seconds: int = Field(default=120, ge=1)
    # Seconds the evaluator may run after training succeeded before it is stopped (the
    # built-in one exits by itself once it has evaluated the final checkpoint). When training
    # fails the evaluator is stopped at once.
    evaluator_grace_seconds: int = Field(default=600, ge=0)
    # Seconds every pod stays bound to a node that stopped reporting (tolerationSeconds of the
    # not-ready/unreachable NoExecute taints) before Kubernetes evicts it. Unset: the cluster's
    # default (300). Shorter: a lost node's tasks are marked for deletion sooner; a node back
    # within it (a kubelet restart, a brief partition) keeps its tasks. docs/lifecycle.md, "Lost nodes".
    node_loss_toleration_seconds: int | None = Field(default=None, ge=0, le=86400)
    # Seconds the built-in chief waits for every peer's DNS name and port before failing.
    peer_timeout_seconds: int = Field(default=300, ge=1)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    service_account_name: str | None = Field(default=None, min_length=1)
    security_context: SecurityContext = Field(default_factory=SecurityContext)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        return check_env(value)

    @field_validator("name", "namespace", "queue", "priority_class_name")
    @classmethod
    def _kubernetes_names(cls, value: str | None, info: ValidationInfo) -> str | None:
        """`name` makes the Service, whose name must be DNS-1035; the others DNS-1123 labels."""
        rule = names.dns1035_problem if info.field_name == "name" else names.dns1123_label_problem
        problem = None if value is None else rule(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _cross_field(self, info: ValidationInfo) -> "ClusterSpec":
        problems: list[tuple[str, str]] = []
        # Validated for local processes (context SHARED_DISK): every task sees the same disk,
        # so the checkpoint storage rules, which are about pods on separate nodes, do not apply.
        shared_disk = bool((info.context or {}).get(SHARED_DISK))
        if self.command is None and self.args is not None:
            problems.append(("args", "args without command: set command too, or use program.args"))
        if self.command is not None and self.program is not None:
            problems.append(
                (
                    "command",
                    "set either program (the built-in worker) or command (your own image's entrypoint), not both",
                )
            )
        problems += _role_problems(self)
        if self.queue is not None and self.workload is not Workload.JOBSET:
            problems.append(("queue", QUEUE_NEEDS_JOBSET))
        replicas = {role: self.replicas(role) for role in ROLES}
        for role, kind, name in names.generated_names(self.name, self.workload, replicas):
            problem = names.dns1035_problem(name)
            if problem:
                problems.append(("name", names.GENERATED_NAME.format(kind=kind, name=name, role=role, problem=problem)))
                break
        if (
            self.replicas(Role.EVALUATOR)
            and self.checkpoint.volume is None
            and not self.checkpoint.is_remote
            and not shared_disk
        ):
            problems.append(
                (
                    "checkpoint.volume",
                    "the evaluator reads the chief's checkpoints: set checkpoint.volume "
                    "(persistentVolumeClaim or hostPath) or a gs:// checkpoint.dir",
                )
            )
        problem = None if shared_disk else self.mwms_storage_problem()
        if problem:
            problems.append(("checkpoint.volume", problem))
        if problems:
            raise CrossFieldProblems(problems)
        return self

    @property
    def builtin(self) -> bool:
        """True when pods run the built-in `python -m worker` (not a user's command)."""
        return self.command is None

    def mwms_storage_problem(self) -> str | None:
        """Why this multi_worker_mirrored spec's checkpoints are not shared by its workers, or None.

        Every MWMS worker restores the latest checkpoint it sees when it (re)starts. Workers that
        see different directories restore different steps and then all-reduce their gradients
        into different weights, silently. One worker, a PVC (ReadWriteMany when the pods may land
        on different nodes) and gs:// are safe; an emptyDir (no volume) is per pod, a hostPath
        per node.
        """
        workers = self.replicas(Role.WORKER)
        if self.strategy is not Strategy.MULTI_WORKER_MIRRORED or workers < 2:
            return None
        volume = self.checkpoint.volume
        if self.checkpoint.is_remote or (volume is not None and volume.persistent_volume_claim):
            return None
        return MWMS_UNSHARED.format(
            workers=workers, where=HOSTPATH_PER_NODE if volume is not None else EMPTYDIR_PER_POD
        )

    @property
    def model_dir(self) -> str:
        """checkpoint.dir as given, or this cluster's own dir on the volume (or emptyDir)."""
        if self.checkpoint.dir is not None:
            return self.checkpoint.dir
        volume = self.checkpoint.volume
        return default_model_dir(volume.mount_path if volume else DEFAULT_MOUNT_PATH, self.namespace, self.name)

    @property
    def code_bundle(self) -> Bundle | None:
        return self._code_bundle

    def attach_code(self, bundle: Bundle) -> None:
        self._code_bundle = bundle

    @property
    def effective_program(self) -> Program:
        return self.program or Program()

    def replicas(self, role: str) -> int:
        return self.roles.get(role).replicas

    def active_roles(self) -> list[Role]:
        return [r for r in ROLES if self.replicas(r) > 0]


# Validation context key: the spec runs as local processes on one disk (launcher.cluster_spec.loader).
SHARED_DISK = "shared_disk"

QUEUE_NEEDS_JOBSET = (
    "a queue needs workload: jobset. Kueue admits every batch/v1 Job as its own Workload, so "
    "the Jobs of one cluster would be admitted one by one: the chief could start while its ps "
    "wait for quota, and give up after peerTimeoutSeconds holding its resources. Set "
    "workload: jobset (needs JobSet installed in the cluster), or remove queue"
)


class CrossFieldProblems(ValueError):
    """Rules spanning several fields; each carries its field path so the loader finds the line."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in problems))


def _role_problems(spec: ClusterSpec) -> list[tuple[str, str]]:
    return k8s_contract.role_count_problems(spec.strategy, {r.value: spec.replicas(r) for r in ROLES})
