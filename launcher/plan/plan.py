"""spec -> plan: what every task gets and which rules apply, decided once (pure, no I/O).

Every projection renders from a ClusterPlan: the Kubernetes Jobs (launcher/render/render.py), the
local processes (launcher/backends/local/), and the Helm values. A projection only adds its own
mechanics (pod templates, ports on 127.0.0.1, a supervisor process); it decides nothing: who is
supervised and watches which Job, how a Job and a JobSet succeed, fail and restart are here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.cluster_spec.role_spec import GPU, EnvVar
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.code_shipping.code_bundle import Bundle
from launcher.plan.job_failure import FailurePolicy, restart_rules  # noqa: F401 (re-exported)
from launcher.plan.spec_hash import spec_hash
from launcher.plan.storage import StoragePlan, storage_plan
from worker import contract
from worker.contract import Role, Strategy

# (role, index) -> "host:port"
AddressFn = Callable[[str, int], str]


@dataclass(frozen=True)
class Supervision:
    """A task that never ends by itself and is ended when training is over (launcher/pod/supervise.py)."""

    watch_job: str  # the Job whose end ends the task
    grace_seconds: int  # how long it may run on after training succeeded (0 after a failure)
    stop_grace_seconds: int  # SIGTERM -> SIGKILL when it is stopped
    # A JobSet recreates the watched Job on every restart: the pod must know its own attempt,
    # for a watched Job of an earlier one is not its own (launcher/pod/supervise.py).
    per_attempt: bool = False


@dataclass(frozen=True)
class CodePlan:
    """The spec's code: where tasks find it (first on PYTHONPATH, their working dir), the packed
    archive (plan()'s `code` input) and the object that carries it on Kubernetes."""

    dir: str  # code_bundle.CODE_DIR in pods; the run's unpacked copy for local processes
    object_name: str  # <name>-code-<sha256[:10]>
    bundle: Bundle = field(repr=False)

    @property
    def digest(self) -> str:
        return self.bundle.digest

    @property
    def size(self) -> int:
        return self.bundle.size  # compressed


@dataclass(frozen=True)
class RolePlan:
    role: Role
    replicas: int
    job_name: str
    command: tuple[str, ...]  # the task's own command line
    env: dict[str, str]  # the launcher's values (TF_CONFIG and index apart): first in the container
    supervision: Supervision | None
    service_account: str | None
    workdir: str | None = None  # the task's working dir (the code dir), None: the image's
    # The index whose success is the Job's (a Job successPolicy); None: every index must succeed.
    success_index: int | None = None
    tolerations: tuple[dict, ...] = ()  # the role's own, then nodeLossTolerationSeconds' taints
    builtin: bool = True  # runs the built-in worker (`python -m worker`), not a command of the user's
    entrypoint: bool = False  # `command` is the image ENTRYPOINT's args (`command: []`), not a command line
    # The user's env in the order written: the spec's `env`, then the role's (env_list puts it after ours).
    user_env: tuple[EnvVar, ...] = ()
    # What a failed task of this role means (failure_policy): the built-in worker's rules when
    # it runs the built-in worker, as the data service's servers always do; None: the cluster's.
    failure: FailurePolicy | None = None

    @property
    def in_training_cluster(self) -> bool:
        return self.role in contract.TRAINING_ROLES

    @property
    def in_data_service(self) -> bool:
        return self.role in contract.DATA_SERVICE_ROLES

    @property
    def listens(self) -> bool:
        """Whether its tasks serve on the gRPC port (and so have an address)."""
        return self.in_training_cluster or self.in_data_service


@dataclass(frozen=True)
class JobSetPlan:
    """How the one JobSet of workload jobset succeeds, fails and restarts (its own policies)."""

    success_roles: tuple[Role, ...]  # the set succeeds once all of these roles' Jobs have
    max_restarts: int  # restarts of every Job after one role's Job failed for good
    restart_strategy: str
    fatal_job_failure_reasons: tuple[str, ...]  # a Job failed for one of these: the set fails
    queue: str | None  # the Kueue LocalQueue: created suspended, Kueue resumes it once admitted
    ttl_seconds_after_finished: int | None  # the set's; its Jobs get none


@dataclass(frozen=True)
class ClusterPlan:
    spec: ClusterSpec
    strategy: Strategy
    success_role: Role
    roles: tuple[RolePlan, ...]  # roles with replicas, in contract.ROLES order
    failure: FailurePolicy
    # Whether to create the supervisor's service account (allowed to read the watched Job):
    # some role is supervised and the spec names no account of its own.
    create_service_account: bool
    supervisor_account: str  # the account supervised pods run as: the spec's, or the created one
    storage: StoragePlan  # the model dir: the path every task is told, the volume that holds it
    spec_hash: str  # what a resubmit compares (launcher/plan/spec_hash.py)
    # Roles whose pods connect to each other through NCCL on ports nobody can pin
    # (k8s_contract.nccl_roles): those that may use it and get GPUs (NCCL needs one).
    nccl_roles: tuple[Role, ...] = ()
    code: CodePlan | None = None
    jobset: JobSetPlan | None = None  # workload jobset only
    # The Jobs' own TTL; none in a JobSet, whose TTL governs (a child Job deleted before the set
    # had finished would be recreated).
    job_ttl_seconds_after_finished: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def workload(self) -> k8s_contract.Workload:
        return self.spec.workload

    def role(self, role: str) -> RolePlan:
        return next(r for r in self.roles if r.role == role)

    def failure_of(self, role: str) -> FailurePolicy:
        """The failure rules of `role`'s tasks (RolePlan.failure): its Job's podFailurePolicy,
        the local restarts of its tasks."""
        return self.role(role).failure or self.failure

    @property
    def supervised(self) -> tuple[Role, ...]:
        return tuple(r.role for r in self.roles if r.supervision is not None)

    @property
    def watched_jobs(self) -> tuple[str, ...]:
        """The Jobs the supervisor's account may read: those the supervised tasks watch."""
        return tuple(dict.fromkeys(r.supervision.watch_job for r in self.roles if r.supervision))

    @property
    def training_roles(self) -> tuple[RolePlan, ...]:
        return tuple(r for r in self.roles if r.in_training_cluster)

    @property
    def data_service_roles(self) -> tuple[RolePlan, ...]:
        return tuple(r for r in self.roles if r.in_data_service)

    @property
    def listening_roles(self) -> tuple[RolePlan, ...]:
        return tuple(r for r in self.roles if r.listens)

    def tf_config(self, role: str, index: int, address: AddressFn) -> dict:
        """The TF_CONFIG one task sees. The evaluator's lists no cluster: a PSv2 coordinator
        that sees an evaluator in the cluster waits for it forever (tensorflow#46169). The data
        service's tasks see the service's own tasks (a data worker registers its own address),
        never TF's resolver; the training cluster never sees them."""
        members: tuple[RolePlan, ...] = ()
        if Role(role) in contract.TRAINING_ROLES:
            members = self.training_roles
        elif Role(role) in contract.DATA_SERVICE_ROLES:
            members = self.data_service_roles
        cluster = {r.role.value: [address(r.role.value, i) for i in range(r.replicas)] for r in members}
        return {"cluster": cluster, "task": {"type": Role(role).value, "index": index}}

    def data_service_env(self, role: str, address: AddressFn) -> dict[str, str]:
        """TFK8S_DATA_SERVICE, the dispatcher's grpc:// address, for the trainers (which read
        through it) and the data workers (which register there); nothing without a dataService."""
        if not self.data_service_roles or Role(role) not in contract.DATA_READERS + (Role.DATA_WORKER,):
            return {}
        return {contract.DATA_SERVICE: f"grpc://{address(Role.DISPATCHER.value, 0)}"}

    def tasks(self):
        """(role, index) of every task, in creation order."""
        return [(r.role, i) for r in self.roles for i in range(r.replicas)]


def plan(
    spec: ClusterSpec, code: Bundle | None = None, *, model_dir: str | None = None, code_dir: str | None = None
) -> ClusterPlan:
    """The plan of `spec` with its code packed into `code` (loader.pack_code; required when the
    spec has `code:`, refused without); `model_dir` replaces spec.model_dir (local runs keep it
    in their dir), `code_dir` the pods' code dir (local runs unpack it into their dir)."""
    code = code_plan(spec, code, code_dir)
    storage = storage_plan(spec, model_dir)
    strategy = Strategy(spec.strategy)
    success = contract.success_role(strategy)
    workload = spec.workload
    has_evaluator = spec.replicas(Role.EVALUATOR) > 0
    has_data_service = spec.data_service is not None
    supervised = k8s_contract.supervised_roles(
        strategy, has_evaluator, workload, has_data_service, image_entrypoint=spec.image_entrypoint
    )
    in_jobset = workload is k8s_contract.Workload.JOBSET
    # MWMS: worker 0 is the chief, its success is the Job's.
    success_index = contract.SUCCESS_INDEX if k8s_contract.success_needs_index_policy(strategy) else None
    watch_job = names.job(spec.name, success, workload)
    supervisor_account = spec.service_account_name or names.supervisor_account(spec.name)
    roles = []
    for role in spec.active_roles():
        builtin = spec.builtin or role in contract.DATA_SERVICE_ROLES
        supervision = None
        if role in supervised:
            supervision = Supervision(
                watch_job=watch_job,
                grace_seconds=spec.evaluator_grace_seconds if role is Role.EVALUATOR else 0,
                stop_grace_seconds=spec.termination_grace_period_seconds,
                per_attempt=in_jobset,
            )
        roles.append(
            RolePlan(
                role=role,
                replicas=spec.replicas(role),
                job_name=names.job(spec.name, role, workload),
                command=tuple(task_command(spec, role)),
                builtin=builtin,
                failure=failure_policy(spec, builtin),
                entrypoint=spec.image_entrypoint
                and role not in contract.DATA_SERVICE_ROLES
                and spec.pods(role).command is None,
                env=task_env(spec, role, storage.model_dir, code.dir if code else None, code.digest if code else None),
                user_env=user_env(spec, role),
                workdir=code.dir if code else spec.working_dir,
                supervision=supervision,
                # The role's or the spec's account; otherwise only supervised pods need one.
                service_account=spec.pods(role).service_account_name
                or (supervisor_account if supervision or spec.service_account_name else None),
                success_index=success_index if role is success else None,
                tolerations=tuple(role_tolerations(spec, spec.pods(role))),
            )
        )
    return ClusterPlan(
        spec=spec,
        strategy=strategy,
        success_role=success,
        roles=tuple(roles),
        failure=failure_policy(spec),
        create_service_account=bool(supervised) and spec.service_account_name is None,
        supervisor_account=supervisor_account,
        storage=storage,
        spec_hash=spec_hash(spec, code.bundle if code else None),
        nccl_roles=tuple(
            r for r in k8s_contract.nccl_roles(strategy) if spec.replicas(r) > 0 and spec.pods(r).resources.gpus
        ),
        code=code,
        jobset=jobset_plan(spec, strategy, has_evaluator) if in_jobset else None,
        job_ttl_seconds_after_finished=None if in_jobset else spec.ttl_seconds_after_finished,
    )


def jobset_plan(spec: ClusterSpec, strategy: Strategy, has_evaluator: bool) -> JobSetPlan:
    return JobSetPlan(
        success_roles=k8s_contract.set_success_roles(strategy, has_evaluator),
        max_restarts=k8s_contract.set_max_restarts(strategy),
        restart_strategy=k8s_contract.JOBSET_RESTART_STRATEGY,
        fatal_job_failure_reasons=k8s_contract.FATAL_JOB_FAILURE_REASONS,
        queue=spec.queue,
        ttl_seconds_after_finished=spec.ttl_seconds_after_finished,
    )


def code_plan(spec: ClusterSpec, bundle: Bundle | None, code_dir: str | None = None) -> CodePlan | None:
    code_bundle.check_given(spec, bundle, "plan()")
    if bundle is None:
        return None
    return CodePlan(dir=code_dir or code_bundle.CODE_DIR, object_name=bundle.object_name(spec.name), bundle=bundle)


def failure_policy(spec: ClusterSpec, builtin: bool | None = None) -> FailurePolicy:
    """The spec's failure rules (launcher/plan/job_failure.py decides them) for tasks that run
    the built-in worker (`builtin`; None: the spec's program), whose exit codes are ours: the
    spec's fatalExitCodes judge only a command of your own, never the data service's servers."""
    builtin = spec.builtin if builtin is None else builtin
    return restart_rules(
        spec.restart_policy,
        spec.backoff_limit,
        Strategy(spec.strategy),
        builtin,
        () if builtin else tuple(spec.fatal_exit_codes),
    )


def task_env(
    spec: ClusterSpec,
    role: str,
    model_dir: str | None = None,
    code_dir: str | None = None,
    code_digest: str | None = None,
) -> dict[str, str]:
    """What the launcher gives every task process besides TF_CONFIG and its index, on Kubernetes
    and locally; the user's env comes after it (user_env, env_list)."""
    env = {
        contract.GRPC_FAIL_FAST: contract.GRPC_FAIL_FAST_VALUE,
        contract.STRATEGY: Strategy(spec.strategy).value,
        contract.MODEL_DIR: model_dir or spec.model_dir,
        contract.PEER_TIMEOUT: str(spec.peer_timeout_seconds),
        contract.CLUSTER_NAME: spec.name,
        contract.NAMESPACE: spec.namespace,  # with the name: whose model dir (worker/model_dir/ownership.py)
    }
    if spec.builtin:
        env[contract.PROGRAM] = spec.effective_program.module
    for name, classes in (
        (contract.FATAL_EXCEPTIONS, spec.fatal_exceptions),
        (contract.RETRIED_EXCEPTIONS, spec.retried_exceptions),
    ):
        if classes:  # for the exception check (worker/exception_check.py)
            env[name] = ",".join(classes)
    if spec.labels.get(k8s_contract.LABEL_SWEEP):  # a sweep's trial: its metrics say whose (worker/metrics.py)
        env[contract.SWEEP] = spec.labels[k8s_contract.LABEL_SWEEP]
    if code_dir is not None:  # the code dir first on the module path (an env PYTHONPATH replaces it)
        env["PYTHONPATH"] = code_dir
    if code_digest is not None:  # FINAL.json records it: a finished dir meets changed code
        env[contract.CODE_DIGEST] = code_digest
    resources = spec.pods(role).resources
    if spec.builtin and resources.gpus:  # fewer seen is the node's fault (worker/node_faults.py)
        env[contract.GPUS] = str(resources.limits[GPU])
    if contract.is_server(Strategy(spec.strategy), Role(role)):
        env[contract.SERVER_LINGER] = str(contract.server_linger_seconds(spec.termination_grace_period_seconds))
    return env


def user_env(spec: ClusterSpec, role: str) -> tuple[EnvVar, ...]:
    """The spec's `env`, then the role's, in the order written: a name in both takes the role's
    entry in the spec's place (pod_fields.merge's rule for a named list)."""
    merged = {entry.name: entry for entry in spec.env}
    merged.update((entry.name, entry) for entry in spec.pods(role).env)
    return tuple(merged.values())


def env_list(launcher: dict[str, str], user: tuple[EnvVar, ...]) -> list[EnvVar]:
    """A task container's env after its index and TF_CONFIG: the launcher's values first, then the
    user's in the user's order, so that Kubernetes, which expands a value's `$(NAME)` only from
    earlier entries, expands the user's references to ours and to the user's own earlier ones.
    A user's name that is one of ours takes ours's place with the user's entry (a user's
    PYTHONPATH replaces the code dir's: docs/code.md)."""
    merged = {name: EnvVar(name=name, value=value) for name, value in launcher.items()}
    merged.update((entry.name, entry) for entry in user)
    return list(merged.values())


def task_command(spec: ClusterSpec, role: str) -> list[str]:
    """The built-in worker with the program's args, or the user's own command: a role's own
    command with its own args only; a role's args with the spec's command. The data service's
    servers run the built-in worker whatever the trainers run: the spec's image must hold it
    (the stock image does; an image of your own built FROM it too)."""
    if not spec.builtin and role in contract.DATA_SERVICE_ROLES:
        return ["python", "-m", "worker"]
    if spec.builtin:
        return ["python", "-m", "worker", *spec.effective_program.args]
    own = spec.pods(role)
    if own.command is not None:
        return [*own.command, *(own.args or [])]
    return [*spec.command, *(own.args if own.args is not None else spec.args or [])]


def role_tolerations(spec: ClusterSpec, cfg) -> list[dict]:
    """The role's own tolerations, then nodeLossTolerationSeconds for the lost-node taints the
    role does not already tolerate itself."""
    own = [t.model_dump(by_alias=True, exclude_none=True) for t in cfg.tolerations]
    seconds = spec.node_loss_toleration_seconds
    if seconds is None:
        return own
    named = {t.get("key") for t in own}
    return own + [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        for key in k8s_contract.NODE_LOSS_TAINTS
        if key not in named
    ]
