"""The cluster spec (cluster.yaml): one pydantic model, camelCase keys like Kubernetes objects.

Validation here is structural and cross-field; where a problem sits in the YAML file is added by
`launcher.cluster_spec.loader`, which maps pydantic's field paths back to line numbers.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from launcher import k8s_contract
from launcher.cluster_spec import names, pod_fields
from launcher.cluster_spec.checkpoints import (
    DEFAULT_MOUNT_PATH,
    EMPTYDIR_PER_POD,
    HOSTPATH_PER_NODE,
    MWMS_UNSHARED,
    default_model_dir,
)
from launcher.cluster_spec.role_spec import (
    ENV_DESCRIPTION,
    DataService,
    EnvList,
    RolePodFields,
    Roles,
    SpecModel,
    check_env,
    env_entries,
)
from launcher.code_shipping.code_bundle import CodeSpec
from launcher.k8s_contract import Workload  # noqa: F401 (re-exported)
from worker import contract
from worker.args import DATA_SERVICE_FLAG
from worker.contract import COUNTED_ROLES, ROLES, Role, Strategy  # noqa: F401 (re-exported)

DEFAULT_IMAGE = "tfk8s/worker:dev"
DEFAULT_METRICS_PORT = 9401
MONITORING_NAMESPACE = {"kubernetes.io/metadata.name": "monitoring"}
METRICS_ON_GRPC_PORT = "{port} is the gRPC port (port): give the metrics another one"
POD_MONITOR_WITHOUT_PORT = "a PodMonitor needs metrics.port: set one, or podMonitor: false"
# `submit` and the chart refuse a PodMonitor the cluster cannot store with this.
POD_MONITOR_WITHOUT_CRD = (
    "the cluster serves no monitoring.coreos.com/v1 PodMonitor (the Prometheus Operator's CRDs are "
    "not installed): install them, or set metrics.podMonitor: false and scrape by the pods' annotations"
)
# fatalExitCodes' refusals (str.format; the chart fills the same ones: scripts/chart_schema.py).
FATAL_CODES_NEED_COMMAND = (
    "the built-in worker's exit codes have fixed meanings (docs/lifecycle.md); "
    "fatalExitCodes is for a command of your own: remove it"
)
FATAL_CODES_NEED_NEVER = (
    "needs restartPolicy: Never (Kubernetes allows no podFailurePolicy with OnFailure): "
    "set restartPolicy: Never, or remove fatalExitCodes"
)
IMAGE_ENTRYPOINT_NEEDS_JOBSET = (
    "[] runs the image's ENTRYPOINT, which tfk8s's supervisor cannot wrap, and under workload jobs it ends "
    "the {roles} when training is over: set workload: jobset (the JobSet's success policy ends them; needs "
    "JobSet installed), or write the entrypoint as command (docker image inspect IMAGE shows it)"
)
FATAL_CODE_RESERVED = "{code} is {meaning}, not your program's: remove it from fatalExitCodes"
FATAL_CODE_TWICE = "{code} is listed twice: list each code once"
# fatalExceptions' and retriedExceptions' refusals
EXCEPTIONS_NEED_COMMAND = (
    "the built-in worker judges its own exceptions (docs/lifecycle.md); {key} is for a command of your own: remove it"
)
EXCEPTIONS_NEED_NEVER = (
    "needs restartPolicy: Never (Kubernetes allows no podFailurePolicy with OnFailure): "
    "set restartPolicy: Never, or remove {key}"
)
EXCEPTION_IN_BOTH = "{name} is in fatalExceptions too: keep it in one of them"
# A Python class name, with an optional dotted prefix (`tf.errors.InvalidArgumentError`).
EXCEPTION_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
DATA_SERVICE_FLAG_WITHOUT_SERVICE = (
    f"{DATA_SERVICE_FLAG} reads the training input through the cluster's tf.data service, which this spec "
    f"does not have: add dataService (with its workers), or remove {DATA_SERVICE_FLAG}"
)
_MODULE_NAME = re.compile(k8s_contract.MODULE_NAME_PATTERN)


class Program(SpecModel):
    """The built-in worker's training program: a module with builders (see worker/program.py)."""

    module: str = Field(
        contract.BUILTIN_PROGRAM,
        description="the built-in worker's training program: a module with builders (docs/worker.md); a script "
        "of your own runs by `command: [python, train.py]` instead",
    )
    args: list[str] = Field(default_factory=list, description="its arguments (`python -m worker --help`)")

    @field_validator("module")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if value.endswith(".py") or "/" in value:  # a script: what a program of your own is run by
            raise ValueError(
                f"{value!r} is a script, not a module: a program of your own runs by command, e.g. "
                f"`command: [python, {value}]` (its dir shipped with code:, docs/spec.md); program.module is a "
                "module with builders for the built-in worker (docs/worker.md)"
            )
        if not _MODULE_NAME.match(value):
            raise ValueError(f"{value!r} is not a dotted Python module name")
        return value


class PVCSource(SpecModel):
    claim_name: str = Field(description="a PersistentVolumeClaim in the cluster's namespace")


class HostPathSource(SpecModel):
    path: str = Field(description="a directory on each node (one per node: not shared between nodes)")


class Volume(SpecModel):
    """Where the checkpoint directory lives: exactly one source."""

    persistent_volume_claim: PVCSource | None = Field(None, description="the volume is this claim")
    host_path: HostPathSource | None = Field(None, description="the volume is a node's directory")
    mount_path: str = Field(DEFAULT_MOUNT_PATH, description="where every pod mounts the volume")

    @model_validator(mode="after")
    def _one_source(self) -> "Volume":
        if (self.persistent_volume_claim is None) == (self.host_path is None):
            raise ValueError("set exactly one of persistentVolumeClaim or hostPath")
        return self


# str.format strings (the chart fills the same ones: scripts/chart_schema.py).
DIR_NOT_UNDER_MOUNT = "dir '{dir}' is not under the volume's mountPath '{mount_path}'"


class Checkpoint(SpecModel):
    # None: <mountPath>/<namespace>/<name> (ClusterSpec.model_dir), one dir per cluster, so
    # clusters sharing a volume never share a model dir by default.
    dir: str | None = Field(
        None,
        description="the model dir: a path on `checkpoint.volume`, or a `gs://` URL. Unset: "
        "`<mountPath>/<namespace>/<name>`, so clusters sharing a volume never share a model dir; one "
        "cluster's model dir is refused to any other (docs/worker.md#model-dir-ownership)",
    )
    volume: Volume | None = Field(
        None,
        description="set exactly one of `persistentVolumeClaim` and `hostPath`. Without a volume (and no "
        "`gs://` dir) the model dir is an emptyDir, deleted with its pod: every replaced pod trains from "
        "step 0 (`render` and `submit` warn); use a PVC or `gs://` for real work",
    )

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


class LocalObjectReference(SpecModel):
    name: str = Field(min_length=1, description="the Secret's name, in the cluster's namespace")


class SecurityContext(SpecModel):
    run_as_user: int = Field(default=1000, ge=1, description="every pod's uid (never root: Pod Security `restricted`)")
    run_as_group: int = Field(default=1000, ge=1, description="every pod's gid")
    fs_group: int = Field(default=1000, ge=1, description="the group that owns the mounted volumes")


class LabelSelector(SpecModel):
    match_labels: dict[str, str] = Field(default_factory=dict, description="labels the object must carry")


class Scraper(SpecModel):
    """Who may scrape the metrics port: a NetworkPolicy peer (both selectors: pods with these
    labels in namespaces with those; only namespaceSelector: every pod there)."""

    namespace_selector: LabelSelector | None = Field(None, description="namespaces, by their labels")
    pod_selector: LabelSelector | None = Field(None, description="pods in those namespaces, by their labels")

    @model_validator(mode="after")
    def _some_selector(self) -> "Scraper":
        if self.namespace_selector is None and self.pod_selector is None:
            raise ValueError("set namespaceSelector, podSelector or both")
        return self


class Metrics(SpecModel):
    """Every task's Prometheus metrics (docs/metrics.md): the built-in worker serves them."""

    port: int | None = Field(
        DEFAULT_METRICS_PORT,
        ge=1024,
        le=65535,
        description="every task's metrics port, named `metrics` (a program of your own may serve there: "
        "TFK8S_METRICS_PORT); null: no metrics, no port, no annotations",
    )
    scrape_annotations: bool = Field(
        True, strict=True, description="`prometheus.io/scrape`, `/port`, `/path` on every pod"
    )
    pod_monitor: bool = Field(
        False,
        strict=True,
        description="a PodMonitor (Prometheus Operator) for the cluster's pods; `submit` refuses it when the "
        "monitoring.coreos.com CRDs are not installed",
    )
    scrapers: list[Scraper] = Field(
        default_factory=lambda: [Scraper(namespace_selector=LabelSelector(match_labels=dict(MONITORING_NAMESPACE)))],
        description="who may reach the metrics port through the NetworkPolicy (the gRPC port stays fenced); "
        "default: every pod in namespace `monitoring`; empty: nobody",
    )


class ClusterSpec(SpecModel):
    """cluster.yaml. Each field's description is its entry in docs/spec.md (generated:
    scripts/generate.py) and in the chart's values.schema.json."""

    name: str = Field(
        description="DNS-1035 label; every generated name (`<name>-<role>-<index>`) must fit 63 characters"
    )
    namespace: str = Field("default", description="where every object is created")
    image: str = Field(
        DEFAULT_IMAGE,
        description="every role's image (a role's own `image` wins); the supervisor's and code unpacker's always",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="every container's"
    )
    image_pull_secrets: list[LocalObjectReference] = Field(
        default_factory=list, description="every pod's imagePullSecrets: `[{name: <Secret>}]`"
    )
    strategy: Strategy = Field(description="`parameter_server`, `multi_worker_mirrored` or `mirrored`")
    workload: Workload = Field(
        Workload.JOBS,
        description="`jobs`: one Indexed Job per role, nothing to install. `jobset`: one JobSet (JobSet must "
        "be installed), which Kueue admits as one unit (docs/shared-clusters.md)",
    )
    queue: str | None = Field(
        None, description="a Kueue LocalQueue that admits the whole cluster at once (needs `workload: jobset`)"
    )
    priority_class_name: str | None = Field(
        None, description="every pod's PriorityClass (Kueue orders and preempts by it)"
    )
    program: Program | None = Field(None, description="the built-in worker (the default when `command` is unset)")
    command: list[str] | None = Field(
        None,
        description="bring your own script instead of `program`, run in `image`; `[]`: the image's ENTRYPOINT "
        "with `args` (needs `workload: jobset` where the supervisor would wrap it: parameter_server, an evaluator)",
    )
    args: list[str] | None = Field(None, description="the arguments of `command`")
    working_dir: str | None = Field(
        None,
        alias="workingDir",
        description="the working dir of `command` (an absolute path in the image); with `code:` it is the code dir",
    )
    code: CodeSpec | None = Field(
        None,
        description="a local dir (relative to the spec file) shipped to every pod without an image build, "
        "first on `PYTHONPATH` (docs/code.md); a string is its `path`",
    )
    env: EnvList = Field(default_factory=list, description="environment for every role: " + ENV_DESCRIPTION)
    roles: Roles = Field(default_factory=Roles)
    data_service: DataService | None = Field(
        None,
        description="a tf.data service the trainers' input pipelines run on: one `dispatcher` and `workers` "
        "`data-worker` tasks, under every strategy; trainers get `TFK8S_DATA_SERVICE` (docs/data-service.md)",
    )
    port: int = Field(default=2222, ge=1024, le=65535, description="the gRPC port of every task")
    network_policy: bool = Field(
        default=True,
        strict=True,
        description="NetworkPolicies that admit ingress to the gRPC port only from the cluster's own training "
        "pods, and none to the evaluator: TF's gRPC servers accept any caller, unauthenticated and in "
        "plaintext (docs/security.md). Needs a CNI that enforces them; `false`: none",
    )
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    metrics: Metrics = Field(default_factory=Metrics)
    restart_policy: Literal["OnFailure", "Never"] = Field(
        "Never",
        description="`Never`: a failed pod is replaced, counted against `backoffLimit`, except preemptions and "
        "a built-in task's loss of a peer after it saved (docs/lifecycle.md). `OnFailure`: restarts in place, "
        "and preemptions count too (Kubernetes allows no `podFailurePolicy` with it)",
    )
    backoff_limit: int = Field(
        default=6, ge=0, le=1000, description="per Job (MWMS workers under `Never`: per worker, `backoffLimitPerIndex`)"
    )
    fatal_exit_codes: list[Annotated[int, Field(ge=1, le=255)]] = Field(
        default_factory=list,
        description="a command of your own: its exit codes that fail the cluster at once, never retried "
        "(podFailurePolicy FailJob; `--local` alike), e.g. `[1]` for Python's uncaught exception when a retry "
        "would fail the same way. Unset: every failure is retried up to `backoffLimit` "
        "(docs/lifecycle.md#a-program-of-your-own). Needs `command` and restartPolicy `Never`; "
        "7, 137 and 143 are reserved",
    )
    fatal_exceptions: list[Annotated[str, Field(pattern=EXCEPTION_NAME_PATTERN)]] = Field(
        default_factory=list,
        description="a command of your own (Python): exception classes that fail the cluster at once when "
        "uncaught, besides the deterministic kinds (ValueError, TypeError, KeyError, ...; "
        "docs/verdicts.md#exceptions-of-a-program-of-your-own), e.g. `[RuntimeError]`; a class or any of its "
        "bases, by name (`tf.errors.` ignored). Needs `command` and restartPolicy `Never`",
    )
    retried_exceptions: list[Annotated[str, Field(pattern=EXCEPTION_NAME_PATTERN)]] = Field(
        default_factory=list,
        description="a command of your own (Python): exception classes retried up to `backoffLimit` though "
        "of a deterministic kind, e.g. `[KeyError]`, or `[Exception]` for every one. Needs `command` and "
        "restartPolicy `Never`",
    )
    active_deadline_seconds: int | None = Field(default=None, ge=1, description="per Job")
    ttl_seconds_after_finished: int | None = Field(default=3600, ge=0, description="per Job")
    termination_grace_period_seconds: int = Field(
        default=120,
        ge=1,
        description="every pod: seconds between SIGTERM and SIGKILL. Longer than a checkpoint save: on SIGTERM "
        "the built-in worker saves the current step and exits as soon as the save is done",
    )
    evaluator_grace_seconds: int = Field(
        default=600,
        ge=0,
        description="how long the evaluator may run after training succeeded (the built-in one exits by itself "
        "after the final checkpoint); after a failure it is stopped at once",
    )
    node_loss_toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        le=86400,
        description="every pod's `tolerationSeconds` for the `not-ready`/`unreachable` NoExecute taints of a node "
        "that stopped reporting; unset: the cluster's 300; a role's own toleration wins "
        "(docs/lost-nodes.md)",
    )
    peer_timeout_seconds: int = Field(
        default=300, ge=1, description="how long the built-in chief waits for every peer's DNS name and port"
    )
    labels: dict[str, str] = Field(default_factory=dict, description="added to every object")
    annotations: dict[str, str] = Field(default_factory=dict, description="added to every object")
    service_account_name: str | None = Field(
        default=None,
        min_length=1,
        description="every pod's service account (its token only in a supervised pod's job-watch container)",
    )
    security_context: SecurityContext = Field(default_factory=SecurityContext)

    @field_validator("env", mode="before", json_schema_input_type=dict[str, str] | EnvList)
    @classmethod
    def _env_as_list(cls, value: object) -> object:
        return env_entries(value)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: EnvList) -> EnvList:
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
        if self.working_dir is not None and (self.command is None or self.code is not None):
            problems.append(
                (
                    "workingDir",
                    "workingDir is for a command of your own without code: (the built-in worker and shipped "
                    "code run in the code dir): remove it",
                )
            )
        elif self.working_dir is not None and not self.working_dir.startswith("/"):
            problems.append(("workingDir", f"{self.working_dir!r} is not an absolute path: give one"))
        problems += self._image_entrypoint_problems()
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
        problems += self._pod_field_problems()
        if self.queue is not None and self.workload is not Workload.JOBSET:
            problems.append(("queue", QUEUE_NEEDS_JOBSET))
        replicas = {role: self.replicas(role) for role in ROLES}
        for role, kind, name in names.generated_names(self.name, self.workload, replicas):
            problem = names.dns1035_problem(name)
            if problem:
                problems.append(("name", names.GENERATED_NAME.format(kind=kind, name=name, role=role, problem=problem)))
                break
        # A command of your own keeps its checkpoints where it chooses (as under TFJob): render
        # and submit warn instead (plan/storage.py unshared_warning); the built-in worker's are ours.
        if (
            self.builtin
            and self.replicas(Role.EVALUATOR)
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
        problem = None if shared_disk or not self.builtin else self.mwms_storage_problem()
        if problem:
            problems.append(("checkpoint.volume", problem))
        if self.metrics.port == self.port:
            problems.append(("metrics.port", METRICS_ON_GRPC_PORT.format(port=self.port)))
        if self.metrics.pod_monitor and self.metrics.port is None:
            problems.append(("metrics.podMonitor", POD_MONITOR_WITHOUT_PORT))
        problems += [("fatalExitCodes", problem) for problem in fatal_exit_code_problems(self)]
        problems += exception_problems(self)
        if self.builtin and DATA_SERVICE_FLAG in self.effective_program.args and self.data_service is None:
            problems.append(("program.args", DATA_SERVICE_FLAG_WITHOUT_SERVICE))
        if problems:
            raise CrossFieldProblems(problems)
        return self

    @property
    def image_entrypoint(self) -> bool:
        """`command: []`: the trainers run their image's ENTRYPOINT (with `args`), as a
        Kubernetes container without a command does."""
        return self.command == []

    def _image_entrypoint_problems(self) -> list[tuple[str, str]]:
        if not self.image_entrypoint or self.workload is Workload.JOBSET:
            return []
        wrapped = [
            role.value
            for role in k8s_contract.supervised_roles(self.strategy, self.replicas(Role.EVALUATOR) > 0, self.workload)
            if self.replicas(role) and role not in contract.DATA_SERVICE_ROLES and self.pods(role).command is None
        ]
        if not wrapped:
            return []
        return [
            (
                "command",
                IMAGE_ENTRYPOINT_NEEDS_JOBSET.format(roles=", ".join(wrapped)),
            )
        ]

    def _pod_field_problems(self) -> list[tuple[str, str]]:
        supervised = k8s_contract.supervised_roles(self.strategy, self.replicas(Role.EVALUATOR) > 0, self.workload)
        mount = self.checkpoint.volume.mount_path if self.checkpoint.volume else DEFAULT_MOUNT_PATH
        return [
            problem
            for role in COUNTED_ROLES
            for problem in pod_fields.role_problems(
                role.value,
                self.roles.get(role).model_dump(by_alias=True),
                role in supervised,
                self.command is not None,
                mount.rstrip("/"),
                tuple(entry.name for entry in self.env),
            )
        ]

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
    def effective_program(self) -> Program:
        return self.program or Program()

    def replicas(self, role: str) -> int:
        if role == Role.DISPATCHER:
            return 0 if self.data_service is None else 1
        if role == Role.DATA_WORKER:
            return 0 if self.data_service is None else self.data_service.workers
        return self.roles.get(role).replicas

    def pods(self, role: str) -> RolePodFields:
        """What the role's pods get: roles.<role>, or for the data service's roles
        dataService.dispatcher / dataService.worker (resources, env, nodeSelector, tolerations)
        with none of a training role's own fields: they run the spec's image and account."""
        if role in contract.DATA_SERVICE_ROLES:
            if self.data_service is None:
                raise ValueError(f"role {role}: the spec has no dataService")
            service = self.data_service.dispatcher if role == Role.DISPATCHER else self.data_service.worker
            return RolePodFields(**dict(service))
        return self.roles.get(role)

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


def fatal_exit_code_problems(spec: ClusterSpec) -> list[str]:
    """Why the spec's fatalExitCodes cannot be a podFailurePolicy FailJob rule (the first problem)."""
    codes = spec.fatal_exit_codes
    if not codes:
        return []
    if spec.builtin:
        return [FATAL_CODES_NEED_COMMAND]
    if spec.restart_policy != "Never":
        return [FATAL_CODES_NEED_NEVER]
    for position, code in enumerate(codes):
        if code in k8s_contract.RESERVED_EXIT_CODES:
            return [FATAL_CODE_RESERVED.format(code=code, meaning=k8s_contract.RESERVED_EXIT_CODES[code])]
        if code in codes[:position]:
            return [FATAL_CODE_TWICE.format(code=code)]
    return []


def exception_problems(spec: ClusterSpec) -> list[tuple[str, str]]:
    """Why the spec's fatalExceptions and retriedExceptions cannot judge its tasks (field, problem)."""
    problems = []
    for key, classes in (("fatalExceptions", spec.fatal_exceptions), ("retriedExceptions", spec.retried_exceptions)):
        if classes and spec.builtin:
            problems.append((key, EXCEPTIONS_NEED_COMMAND.format(key=key)))
        elif classes and spec.restart_policy != "Never":
            problems.append((key, EXCEPTIONS_NEED_NEVER.format(key=key)))
    fatal = {name.rsplit(".", 1)[-1] for name in spec.fatal_exceptions}
    problems += [
        ("retriedExceptions", EXCEPTION_IN_BOTH.format(name=name))
        for name in spec.retried_exceptions
        if name.rsplit(".", 1)[-1] in fatal
    ]
    return problems


def _role_problems(spec: ClusterSpec) -> list[tuple[str, str]]:
    return k8s_contract.role_count_problems(
        spec.strategy, {r.value: spec.replicas(r) for r in contract.COUNTED_ROLES}, own_command=not spec.builtin
    )
