"""The launcher's side of the contract: what no task reads (standard library only).

Kubernetes object labels, names and JobSet rules, and the rules for a spec's values; what a task
reads or prints is in worker/contract.py. The launcher renders and validates with these,
launcher/pod/supervise.py's pods never import them, and scripts/gen_chart.py writes them into the
chart (templates/_contract.tpl, values.schema.json) for Helm.
"""

from __future__ import annotations

import hashlib
from enum import Enum

from launcher.pod import job_watch, supervise
from worker.contract import (
    DATA_READERS,
    DATA_SERVICE_ROLES,
    EXIT_DETERMINISTIC_EXCEPTION,
    EXIT_KERAS_REFUSED,
    EXIT_PREEMPTED,
    GRPC_FAIL_FAST,
    NODE_NAME,
    ROLE_COUNTS,
    TASK_INDEX,
    TF_CONFIG,
    Role,
    Strategy,
    success_role,
    traits,
)
from worker.contract import (
    METRICS_PATH as METRICS_PATH,  # the path the worker serves, for the templates
)

# Which Kubernetes cluster runs a cluster's tasks (TFK8S_PLATFORM in OWNER.json,
# worker/model_dir/ownership.py): its CA certificate, which Kubernetes publishes in every
# namespace, so any user who may submit there can read it (kube-system is not readable by a
# namespace-scoped user); the chart reads it at install (templates/_helpers.tpl tfk8s.platform).
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
ROOT_CA_KEY = "ca.crt"
PLATFORM_PREFIX = "kubernetes:ca-"
PLATFORM_DIGITS = 16


def kubernetes_platform(root_ca: str) -> str:
    """The platform name of the Kubernetes cluster whose CA certificate is `root_ca`."""
    return PLATFORM_PREFIX + hashlib.sha256(root_ca.encode()).hexdigest()[:PLATFORM_DIGITS]


# The pod scripts run stdlib-only from a ConfigMap, so they define these; the launcher's layers
# read them here, the one door into launcher/pod (tests/test_layers.py).
RESTART_ATTEMPT_KEY = job_watch.RESTART_ATTEMPT_KEY
SA_DIR = job_watch.SA_DIR
JOB_SUCCEEDED = job_watch.SUCCEEDED
JOB_TERMINAL = job_watch.TERMINAL
EXIT_API_UNREACHABLE = supervise.EXIT_API_UNREACHABLE
GRACE_ENV = supervise.GRACE_ENV
NAMESPACE_ENV = supervise.NAMESPACE_ENV
POD_GRACE_ENV = supervise.POD_GRACE_ENV
POD_RESTART_POLICY_ENV = supervise.POD_RESTART_POLICY_ENV
RESTART_ATTEMPT_ENV = supervise.RESTART_ATTEMPT_ENV
SUPERVISOR_STATE_DIR = supervise.STATE_DIR
WATCH_JOB_ENV = supervise.WATCH_JOB_ENV

# Exit statuses a pod reports whatever program it runs, and what each means; a spec's
# fatalExitCodes may not take them (launcher/plan/job_failure.py has their rules).
SIGKILL_EXIT = 128 + 9
RESERVED_EXIT_CODES = {
    EXIT_API_UNREACHABLE: "the supervisor's (its job-watch never reached the API server)",
    SIGKILL_EXIT: "SIGKILL's (an OOM kill, or a drain whose grace ran out)",
    EXIT_PREEMPTED: "SIGTERM's (a preemption, never counted)",
    EXIT_KERAS_REFUSED: "the Keras check's (Keras 3 where it cannot train, always fatal)",
    EXIT_DETERMINISTIC_EXCEPTION: "the exception check's (a deterministic Python exception: name exception "
    "classes in fatalExceptions or retriedExceptions instead)",
}


class Workload(str, Enum):
    """How a cluster is projected onto Kubernetes: plain Indexed Jobs, or one JobSet (which Kueue
    admits as one unit)."""

    JOBS = "jobs"
    JOBSET = "jobset"

    def __str__(self) -> str:
        return self.value


def computes(strategy: Strategy, role: Role) -> bool:
    """Tasks that run the model's computation (and so want the GPUs): workers, and the chief
    unless it only coordinates (parameter_server)."""
    return Role(role) in traits(strategy).computes


# --- labels and names on Kubernetes objects -------------------------------------------------
MANAGED_BY = "tfk8s"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_STRATEGY = "tfk8s.io/strategy"
# A sweep's trial (launcher/sweep/): the sweep's name and the trial's number, on every object.
LABEL_SWEEP = "tfk8s.io/sweep"
LABEL_SWEEP_TRIAL = "tfk8s.io/sweep-trial"
SPEC_HASH_ANNOTATION = "tfk8s.io/spec-hash"
# The Job controller stamps each Indexed Job pod with its index in this annotation.
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
CONTAINER = "tensorflow"
# A supervised pod's second container, the only one with the service-account token
# (manifests/job.yaml.j2); the Jobs' podFailurePolicy reads CONTAINER's exit code only.
WATCHER_CONTAINER = "job-watch"
# `tfk8s tensorboard`'s pod: the cluster's labels with this component (never a Role: status and
# the NetworkPolicies, which select pods by role, leave it alone).
TENSORBOARD_COMPONENT = "tensorboard"
# Kueue admits a JobSet that carries this label through the named LocalQueue, all or nothing.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
# A JobSet names its child Jobs <set>-<replicatedJob>-<jobIndex>; every role is one Job.
JOBSET_JOB_INDEX = 0
# A JobSet restart deletes every Job of the attempt, then creates the next attempt's. With
# JobSet's default (Recreate) each Job comes back as soon as its own old one is gone: a new
# evaluator could start while the old attempt's failed worker Job was still there, and stop at
# once; the set's success policy (worker + evaluator) then held without the final checkpoint
# evaluated. (The supervisor also ignores an earlier attempt's Job: launcher/pod/supervise.py.)
JOBSET_RESTART_STRATEGY = "BlockingRecreate"
# Job failure reasons no restart of a JobSet can cure: the worker's configuration error (the
# podFailurePolicy's FailJob rule) and activeDeadlineSeconds. They fail the set at once.
FATAL_JOB_FAILURE_REASONS = ("PodFailurePolicy", "DeadlineExceeded")
SUPERVISOR_DIR = "/var/run/tfk8s"
# Prometheus' conventional pod annotations (its kubernetes_sd examples, most Helm charts' scrape
# configs); the path the built-in worker serves is worker.contract's METRICS_PATH (imported).
SCRAPE_ANNOTATION = "prometheus.io/scrape"
SCRAPE_PORT_ANNOTATION = "prometheus.io/port"
SCRAPE_PATH_ANNOTATION = "prometheus.io/path"
METRICS_PORT_NAME = "metrics"
POD_MONITOR_API_VERSION = "monitoring.coreos.com/v1"
# The node lifecycle controller's NoExecute taints on a node that stopped reporting: the spec's
# nodeLossTolerationSeconds is how long the pods tolerate them (launcher/status/node_loss.py reads them).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NODE_LOSS_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT)

# --- what a spec may say -------------------------------------------------------------------
DNS1035_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_LABEL = 63
MODULE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# Set by the launcher for every pod; a user value would silently break the cluster (or, for
# the node's name, misname the node a node fault blames).
RESERVED_ENV = (TF_CONFIG, TASK_INDEX, GRPC_FAIL_FAST, NODE_NAME)


def role_count_problems(strategy: Strategy, counts: dict[str, int], own_command: bool = False) -> list[tuple[str, str]]:
    """(field path, message) for each replica count `strategy` cannot run with (own_command: a
    command of your own, which some counts allow fewer of: worker.contract.Count)."""
    return [
        (f"roles.{role.value}.replicas", rule.message.format(n=counts.get(role.value, 0)))
        for role, rule in ROLE_COUNTS[Strategy(strategy)].items()
        if not rule.allows(counts.get(role.value, 0), own_command)
    ]


def success_needs_index_policy(strategy: Strategy) -> bool:
    """Whether the success role may have several replicas, so that its Job must succeed when
    index SUCCESS_INDEX does (a Job's successPolicy), not when every index does: MWMS workers."""
    strategy = Strategy(strategy)
    return ROLE_COUNTS[strategy][success_role(strategy)].maximum != 1


# --- who must be ended, when a JobSet is done ----------------------------------------------


def supervised_roles(
    strategy: Strategy,
    has_evaluator: bool,
    workload: Workload = Workload.JOBS,
    has_data_service: bool = False,
    image_entrypoint: bool = False,
) -> tuple[Role, ...]:
    """Roles that never end by themselves and are ended by our supervisor when training is over.

    PS-strategy workers and ps block in server.join() forever; as Jobs they are ended by the
    supervisor, in a JobSet by its success policy (the set completes with the chief and deletes
    the Jobs still running). Any evaluator: a bring-your-own one may poll checkpoints forever,
    and the built-in one exits only after evaluating the final checkpoint, which a failed
    training never writes. After a success the evaluator gets evaluatorGraceSeconds; after a
    failure none. Under a JobSet the evaluator stays supervised: the set's success waits for it.
    The data service's dispatcher and data workers serve until killed, like ps.
    image_entrypoint (`command: []`): the trainers run their image's ENTRYPOINT, which the
    supervisor cannot wrap: allowed only where nothing of theirs needs it (a JobSet, whose
    evaluator must then end by itself: the spec says so).
    """
    if image_entrypoint and Workload(workload) is Workload.JOBSET:
        return ()
    servers = traits(strategy).servers + (DATA_SERVICE_ROLES if has_data_service else ())
    roles = servers if Workload(workload) is Workload.JOBS else ()
    return roles + ((Role.EVALUATOR,) if has_evaluator else ())


def set_success_roles(strategy: Strategy, has_evaluator: bool) -> tuple[Role, ...]:
    """The JobSet succeeds when all of these roles' Jobs have: the success role, and the
    evaluator, so that the final checkpoint is evaluated before JobSet deletes what still runs
    (TFJob's "final checkpoint never evaluated")."""
    return (success_role(strategy),) + ((Role.EVALUATOR,) if has_evaluator else ())


def set_max_restarts(strategy: Strategy) -> int:
    """How often a JobSet restarts every Job when one role's Job failed.

    MWMS workers all-reduce in lockstep: when one worker's Job has failed for good the others
    hang in a collective, and recreating the whole set (each worker restores the same
    checkpoint) is the recovery. Under parameter_server the coordinator already survives lost
    workers and restarts after a lost ps; a role that exhausted its backoffLimit ends the set.
    """
    return 1 if traits(strategy).lockstep else 0


def nccl_roles(strategy: Strategy) -> tuple[Role, ...]:
    """Roles whose pods all-reduce with each other through NCCL once they have GPUs: MWMS
    workers (the built-in worker's --collective auto picks NCCL when it sees a GPU).

    NCCL's bootstrap and its socket transport listen on ports the kernel picks (ephemeral), and
    no NCCL setting pins them (NVIDIA/nccl#388; NCCL_SOCKET_IFNAME picks the interface only):
    between these pods the NetworkPolicy must admit every TCP port, not only the gRPC port.
    """
    return traits(strategy).lockstep


def data_service_clients(role: Role) -> tuple[Role, ...]:
    """Who may reach a data service role's gRPC port (its NetworkPolicy): the trainers read from
    both; the data workers register at the dispatcher. Nothing else reaches either."""
    return DATA_READERS + ((Role.DATA_WORKER,) if Role(role) is Role.DISPATCHER else ())


# A per-index role fails with its first index out of retries: the others cannot go on without it.
MAX_FAILED_INDEXES = 0


def per_index_roles(strategy: Strategy) -> tuple[Role, ...]:
    """Roles whose retries are counted per index (Job backoffLimitPerIndex), and whose first
    index out of retries fails the role (maxFailedIndexes 0).

    MWMS workers all-reduce in lockstep: one crashed worker makes every peer's collective fail.
    With one backoffLimit for the role, one crash cost N retries (N workers), and with N >=
    backoffLimit one transient crash ended the run. Per index, each crash costs each index at
    most one retry (the peers' own exits are not counted at all once they had saved, exit
    EXIT_PEER_LOST), and one worker crashing again and again still fails the run at its limit.
    """
    return traits(strategy).lockstep
