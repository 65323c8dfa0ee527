"""spec -> plan: what every task gets and which rules apply, decided once (pure, no I/O).

Every projection renders from a ClusterPlan: the Kubernetes Jobs (launcher/render.py), the
local processes (launcher/backends/local/), and the Helm values. A projection only adds its own
mechanics (pod templates, ports on 127.0.0.1, a supervisor process); it decides nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from launcher import code_bundle, k8s_contract, names
from launcher.spec import ClusterSpec
from worker import contract
from worker.contract import Role, Strategy

# (role, index) -> "host:port"
AddressFn = Callable[[str, int], str]


@dataclass(frozen=True)
class FailurePolicy:
    """What a failed task means; Kubernetes: the Jobs' podFailurePolicy, local: the restarts.

    restartPolicy Never: a failed task is replaced (a new pod, same hostname), counted against
    backoffLimit, except exits in `ignored_exit_codes` and disruptions (eviction, drain,
    preemption), which are not the task's fault; an exit in `fatal_exit_codes` fails the role at
    once; an exit in `counted_exit_codes` counts even on a disruption (killed before it could
    save: a node-pressure eviction has no grace). Roles in `per_index_roles` have a budget of
    backoffLimit per index (pod) instead of one per role, and their first index out of budget
    fails the role. OnFailure restarts in place and counts every failure per role (Kubernetes
    allows no podFailurePolicy and no per-index limit with it).
    """

    restart_policy: str  # Never | OnFailure
    backoff_limit: int
    ignored_exit_codes: tuple[int, ...] = ()
    fatal_exit_codes: tuple[int, ...] = ()
    counted_exit_codes: tuple[int, ...] = ()
    ignores_disruptions: bool = False
    per_index_roles: tuple[Role, ...] = ()

    def per_index(self, role: str) -> bool:
        return Role(role) in self.per_index_roles

    def budget(self, role: str, index: int) -> str:
        """Whose backoffLimit a failure of task (role, index) uses: its index's, or its role's."""
        return contract.task_name(role, index) if self.per_index(role) else Role(role).value


@dataclass(frozen=True)
class Supervision:
    """A task that never ends by itself and is ended when training is over (launcher/supervise.py)."""

    watch_job: str  # the Job whose end ends the task
    grace_seconds: int  # how long it may run on after training succeeded (0 after a failure)
    stop_grace_seconds: int  # SIGTERM -> SIGKILL when it is stopped


@dataclass(frozen=True)
class CodePlan:
    """The spec's code: where tasks find it (first on PYTHONPATH, their working dir) and, once
    packed, the object that carries it (Kubernetes) and what it holds."""

    dir: str  # code_bundle.CODE_DIR in pods; the code dir itself for local processes
    object_name: str | None = None  # <name>-code-<sha256[:10]>; None when not packed
    digest: str | None = None
    files: int = 0
    size: int = 0  # compressed


@dataclass(frozen=True)
class RolePlan:
    role: Role
    replicas: int
    job_name: str
    command: tuple[str, ...]  # the task's own command line
    env: dict[str, str]  # launcher values first, then the user's (TF_CONFIG and index apart)
    supervision: Supervision | None
    service_account: str | None
    workdir: str | None = None  # the task's working dir (the code dir), None: the image's

    @property
    def in_training_cluster(self) -> bool:
        return self.role in contract.TRAINING_ROLES


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
    # Roles whose pods connect to each other through NCCL on ports nobody can pin
    # (k8s_contract.nccl_roles): those that may use it and get GPUs (NCCL needs one).
    nccl_roles: tuple[Role, ...] = ()
    code: CodePlan | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def workload(self) -> contract.Workload:
        return self.spec.workload

    def role(self, role: str) -> RolePlan:
        return next(r for r in self.roles if r.role == role)

    @property
    def supervised(self) -> tuple[Role, ...]:
        return tuple(r.role for r in self.roles if r.supervision is not None)

    @property
    def training_roles(self) -> tuple[RolePlan, ...]:
        return tuple(r for r in self.roles if r.in_training_cluster)

    def tf_config(self, role: str, index: int, address: AddressFn) -> dict:
        """The TF_CONFIG one task sees. The evaluator's lists no cluster: a PSv2 coordinator
        that sees an evaluator in the cluster waits for it forever (tensorflow#46169)."""
        if Role(role) not in contract.TRAINING_ROLES:
            return {"cluster": {}, "task": {"type": Role(role).value, "index": index}}
        cluster = {r.role.value: [address(r.role.value, i) for i in range(r.replicas)]
                   for r in self.training_roles}
        return {"cluster": cluster, "task": {"type": Role(role).value, "index": index}}

    def tasks(self):
        """(role, index) of every task, in creation order."""
        return [(r.role, i) for r in self.roles for i in range(r.replicas)]


def plan(spec: ClusterSpec, model_dir: str | None = None, code_dir: str | None = None) -> ClusterPlan:
    """The plan of `spec`; `model_dir` replaces spec.model_dir (local runs keep it in their dir),
    `code_dir` the pods' code dir (local runs use the spec's code dir in place)."""
    code = code_plan(spec, code_dir)
    strategy = Strategy(spec.strategy)
    success = contract.success_role(strategy)
    workload = spec.workload
    supervised = k8s_contract.supervised_roles(strategy, spec.replicas(Role.EVALUATOR) > 0, workload)
    watch_job = names.job(spec.name, success, workload)
    supervisor_account = spec.service_account_name or names.supervisor_account(spec.name)
    roles = []
    for role in spec.active_roles():
        supervision = None
        if role in supervised:
            supervision = Supervision(
                watch_job=watch_job,
                grace_seconds=spec.evaluator_grace_seconds if role is Role.EVALUATOR else 0,
                stop_grace_seconds=spec.termination_grace_period_seconds,
            )
        roles.append(RolePlan(
            role=role, replicas=spec.replicas(role), job_name=names.job(spec.name, role, workload),
            command=tuple(task_command(spec)),
            env=task_env(spec, role, model_dir, code.dir if code else None),
            workdir=code.dir if code else None,
            supervision=supervision,
            # The spec's account for every pod; otherwise only supervised pods need one.
            service_account=supervisor_account if supervision or spec.service_account_name else None,
        ))
    return ClusterPlan(
        spec=spec, strategy=strategy, success_role=success, roles=tuple(roles),
        failure=failure_policy(spec),
        create_service_account=bool(supervised) and spec.service_account_name is None,
        supervisor_account=supervisor_account,
        nccl_roles=tuple(r for r in k8s_contract.nccl_roles(strategy)
                         if spec.replicas(r) > 0 and spec.roles.get(r).resources.gpus),
        code=code,
    )


def code_plan(spec: ClusterSpec, code_dir: str | None = None) -> CodePlan | None:
    if spec.code is None:
        return None
    where = code_dir or code_bundle.CODE_DIR
    bundle = spec.code_bundle
    if bundle is None:
        return CodePlan(dir=where)
    return CodePlan(dir=where, object_name=bundle.object_name(spec.name), digest=bundle.digest,
                    files=len(bundle.files), size=bundle.size)


def failure_policy(spec: ClusterSpec) -> FailurePolicy:
    return restart_rules(spec.restart_policy, spec.backoff_limit, Strategy(spec.strategy),
                         spec.builtin)


def restart_rules(restart_policy: str, backoff_limit: int, strategy: Strategy,
                  builtin: bool) -> FailurePolicy:
    """The failure rules of a cluster (scripts/gen_chart.py writes them into the chart)."""
    if restart_policy != "Never":
        return FailurePolicy(restart_policy, backoff_limit)
    return FailurePolicy(
        restart_policy, backoff_limit,
        # SIGTERM: the built-in worker saved the current step first; a server (or the
        # supervisor around it) that died of SIGTERM reports the same code. Not a failure.
        # EXIT_PEER_LOST: the built-in worker lost a peer after saving (its own code, which a
        # user's command may use for anything: only the built-in worker's is trusted).
        ignored_exit_codes=(contract.EXIT_PREEMPTED,)
        + ((contract.EXIT_PEER_LOST,) if builtin else ()),
        # The built-in worker's bad arguments or program: a retry fails the same way.
        fatal_exit_codes=(contract.EXIT_CONFIG,) if builtin else (),
        # SIGKILL (128 + 9): nothing was saved, also when a disruption did it (a kubelet's
        # node-pressure eviction kills at once; a grace period that ran out): counted, so
        # evictions repeated without progress end at backoffLimit. Kubernetes' podFailurePolicy
        # sees a DisruptionTarget condition's type, never its reason (TerminationByKubelet).
        counted_exit_codes=(128 + 9,),
        ignores_disruptions=True,
        per_index_roles=k8s_contract.per_index_roles(strategy),
    )


def task_env(spec: ClusterSpec, role: str, model_dir: str | None = None,
             code_dir: str | None = None) -> dict[str, str]:
    """What every task process gets besides TF_CONFIG and its index, on Kubernetes and locally.

    User values last, so they cannot be mistaken for ours; sorted, because Helm values are maps
    and the chart can only emit them in name order too.
    """
    env = {
        contract.GRPC_FAIL_FAST: contract.GRPC_FAIL_FAST_VALUE,
        contract.STRATEGY: Strategy(spec.strategy).value,
        contract.MODEL_DIR: model_dir or spec.model_dir,
        contract.PEER_TIMEOUT: str(spec.peer_timeout_seconds),
        contract.CLUSTER_NAME: spec.name,
        contract.NAMESPACE: spec.namespace,  # with the name: whose model dir (worker/ownership.py)
    }
    if spec.builtin:
        env[contract.PROGRAM] = spec.effective_program.module
    if code_dir is not None:  # the code dir first on the module path (an env PYTHONPATH replaces it)
        env["PYTHONPATH"] = code_dir
    if contract.is_server(Strategy(spec.strategy), Role(role)):
        env[contract.SERVER_LINGER] = str(
            contract.server_linger_seconds(spec.termination_grace_period_seconds))
    env.update(sorted(spec.env.items()))
    env.update(sorted(spec.roles.get(role).env.items()))
    return env


def task_command(spec: ClusterSpec) -> list[str]:
    """The built-in worker with the program's args, or the user's own command."""
    if spec.builtin:
        return ["python", "-m", "worker", *spec.effective_program.args]
    return [*spec.command, *(spec.args or [])]


def role_tolerations(spec: ClusterSpec, cfg) -> list[dict]:
    """The role's own tolerations, then nodeLossTolerationSeconds for the lost-node taints the
    role does not already tolerate itself."""
    own = [t.model_dump(by_alias=True, exclude_none=True) for t in cfg.tolerations]
    seconds = spec.node_loss_toleration_seconds
    if seconds is None:
        return own
    named = {t.get("key") for t in own}
    return own + [{"key": key, "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": seconds}
                  for key in k8s_contract.NODE_LOSS_TAINTS if key not in named]
