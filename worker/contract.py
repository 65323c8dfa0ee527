"""What every task reads or prints, and the rules it checks itself against (standard library only).

Every pod imports this, so it stays free of pydantic, jinja2 and the Kubernetes client: the
environment the launcher sets, progress lines, exit codes, which roles a strategy runs and who
decides success. The launcher and scripts/gen_chart.py (the chart's templates/_contract.tpl)
read it too; the rules no task reads (Kubernetes objects, spec values) are in
launcher/k8s_contract.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum


class Strategy(str, Enum):
    PARAMETER_SERVER = "parameter_server"
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
    MIRRORED = "mirrored"

    def __str__(self) -> str:  # the value in f-strings and messages on every Python version
        return self.value


class Role(str, Enum):
    """TF_CONFIG task types. Declaration order is the order objects are created and listed in."""

    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"
    # The tf.data service (the spec's dataService): a dispatcher and the data workers that run
    # the trainers' input pipelines. Named with '-': the role is part of Job and pod hostnames.
    DISPATCHER = "dispatcher"
    DATA_WORKER = "data-worker"

    def __str__(self) -> str:
        return self.value


ROLES: tuple[Role, ...] = tuple(Role)
# TF_CONFIG's `cluster`: never the evaluator, or a PSv2 coordinator waits for it forever
# (tensorflow/tensorflow#46169); the evaluator needs no peers.
# Only these roles listen, on the gRPC port, and TF's gRPC servers accept any caller,
# unauthenticated and in plaintext: the cluster's NetworkPolicy admits ingress to their pods
# only from the same cluster's pods of these roles, on that port, and none at all to the pods of
# any other role (the evaluator only connects out).
TRAINING_ROLES: tuple[Role, ...] = (Role.CHIEF, Role.WORKER, Role.PS)
# The tf.data service's servers: never in TF_CONFIG's training cluster (their TF_CONFIG lists
# the service's own tasks instead), they serve the trainers' input pipelines until training is
# over, under every strategy. Their gRPC ports are fenced like the training roles' (the
# dispatcher's admits trainers and data workers, the data workers' only trainers).
DATA_SERVICE_ROLES: tuple[Role, ...] = (Role.DISPATCHER, Role.DATA_WORKER)
# The trainers, which read their input through the data service (the PS chief registers it).
DATA_READERS: tuple[Role, ...] = (Role.CHIEF, Role.WORKER)
# The roles of the spec's `roles:`, whose replica counts each strategy rules (TRAITS counts); the
# data service's come from dataService and run under every strategy.
COUNTED_ROLES: tuple[Role, ...] = tuple(r for r in Role if r not in DATA_SERVICE_ROLES)

# --- environment ---------------------------------------------------------------------------
TF_CONFIG = "TF_CONFIG"
TASK_INDEX = "TFK8S_TASK_INDEX"  # the pod's index; TF_CONFIG refers to it as $(TFK8S_TASK_INDEX)
# Without it a PS coordinator stalls on a dead worker instead of moving its closures to the
# survivors (TF PS tutorial); every task gets it.
GRPC_FAIL_FAST = "GRPC_FAIL_FAST"
GRPC_FAIL_FAST_VALUE = "use_caller"
STRATEGY = "TFK8S_STRATEGY"
MODEL_DIR = "TFK8S_MODEL_DIR"
PROGRAM = "TFK8S_PROGRAM"
PEER_TIMEOUT = "TFK8S_PEER_TIMEOUT"
CODE_DIGEST = "TFK8S_CODE_DIGEST"  # sha256 of the shipped code (`code:`), when there is one
# One id per submission, the same in every task of the run and in each restart of a task (the
# local backend: one per submit; Kubernetes: the root object's UID, set by submit). FINAL.json
# records it, so a run's evaluator takes only its own run's final checkpoint as final, not a
# FINAL.json an earlier run left in a kept model dir (worker/model_dir/layout.py). Unset (the
# chart, a pod run by hand): any FINAL.json for the same --steps and --loop counts.
RUN = "TFK8S_RUN"
# The dispatcher of the cluster's tf.data service, `grpc://host:port`, in every trainer's (and data
# worker's) environment when the spec has a dataService: a program of your own passes it to
# tf.data.experimental.service.distribute(service=...); the built-in one with --data-service.
DATA_SERVICE = "TFK8S_DATA_SERVICE"
CLUSTER_NAME = "TFK8S_CLUSTER"
SWEEP = "TFK8S_SWEEP"  # a sweep's trial: the sweep's name (the tfk8s.io/sweep label), its series' `sweep`
NAMESPACE = "TFK8S_NAMESPACE"  # the spec's namespace (and the supervisor's, launcher/pod/supervise.py)
# Which platform runs the tasks: a Kubernetes cluster (`kubernetes:ca-<digest of its CA>`, set by
# submit and helm install: launcher/k8s_contract.py kubernetes_platform) or a machine
# (`local:<hostname>`). With the name and namespace it tells two clusters of one name apart in
# OWNER.json (worker/model_dir/ownership.py); unset, it is compared as unnamed.
PLATFORM = "TFK8S_PLATFORM"
# The node the pod runs on (the downward API's spec.nodeName), which a node fault names; a local
# task, or a pod run without the launcher's env, names its hostname instead (worker/errors.py).
NODE_NAME = "TFK8S_NODE_NAME"
NODE_NAME_FIELD_PATH = "spec.nodeName"
# How many GPUs the role's pods are given (its nvidia.com/gpu limit), set only when it has some:
# a task that sees fewer is on a node whose GPUs or driver are broken (a node fault).
GPUS = "TFK8S_GPUS"
# How long a PS server (ps, PS worker) keeps serving after SIGTERM while the chief is still up:
# when the whole cluster is preempted at once (a JobSet suspended by Kueue, a drained node) the
# chief is saving the current step and reads the variables from the ps. The launcher sets it
# from the pod's grace period (server_linger_seconds); the default is for a server run by hand.
SERVER_LINGER = "TFK8S_SERVER_LINGER_SECONDS"
DEFAULT_SERVER_LINGER_SECONDS = 10.0
SERVER_LINGER_MARGIN_SECONDS = 5


def server_linger_seconds(grace_seconds: int) -> int:
    """A server's linger in a pod with terminationGracePeriodSeconds `grace_seconds`: as long as
    the chief may still be saving (its own grace), less a margin to exit in before the kubelet's
    SIGKILL (at most half the grace). It still leaves as soon as the chief's port stops answering."""
    return grace_seconds - min(SERVER_LINGER_MARGIN_SECONDS, grace_seconds // 2)


# --- progress lines ------------------------------------------------------------------------
# Tasks print `tfk8s-progress {json}` lines on stdout; the launcher reads them from the success
# role's and the evaluator's logs for `status`, `submit --wait` and `status --watch`. A
# bring-your-own script that prints the same lines gets the same view (docs/watching.md).
PROGRESS_PREFIX = "tfk8s-progress "
# {"event": "step", "step": int, "target": int, "loss": float, "steps_per_s": float}: training
# progress, every PROGRESS_SECONDS while steps run and once when training ends.
EVENT_STEP = "step"
# {"event": "evaluated", "step": int, "checkpoint": str, <metric>: float...}: one evaluation.
EVENT_EVALUATED = "evaluated"
# {"event": "final", "step": int, "checkpoint": str}: training is done; this is its checkpoint.
EVENT_FINAL = "final"
# Fields of an `evaluated` event that describe it rather than measure the model.
EVALUATION_META_FIELDS = ("event", "t", "wall", "step", "checkpoint", "final", "examples", "evaluated_at", "seconds")
PROGRESS_SECONDS = "TFK8S_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 5.0
# Prometheus metrics of the built-in worker (worker/metrics.py): the port each task serves them
# on (unset or 0: none) and the address it binds (the pod's every address unless set; the local
# backend sets 127.0.0.1). The same progress events feed them.
METRICS_PORT = "TFK8S_METRICS_PORT"
METRICS_HOST = "TFK8S_METRICS_HOST"
METRICS_PATH = "/metrics"  # the only path served (any other is 404)


def parse_progress_line(line: str) -> dict | None:
    """The record of one log line, or None if it is no (well-formed) progress line.

    Accepts a launcher prefix such as `[chief-0] tfk8s-progress {...}`. A user's script may
    print anything: a malformed record is skipped, never an error.
    """
    at = line.find(PROGRESS_PREFIX)
    if at < 0:
        return None
    try:
        record = json.loads(line[at + len(PROGRESS_PREFIX) :])
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("event"), str) else None


# --- defaults ------------------------------------------------------------------------------
BUILTIN_PROGRAM = "worker.examples.fashion_mnist"
DEFAULT_PEER_TIMEOUT_SECONDS = 300
DEFAULT_CLUSTER_NAME = "tfk8s"

# --- exit codes of `python -m worker` (and what the launcher makes of them) -----------------
EXIT_OK = 0
EXIT_UNEXPECTED = 1  # an unexpected exception; its traceback is in the log
EXIT_CONFIG = 2  # bad arguments, environment, TF_CONFIG or program module: a retry fails alike
EXIT_PEERS_UNREACHABLE = 3  # a peer never answered within TFK8S_PEER_TIMEOUT
EXIT_LOST_PARAMETER_SERVER = 4  # a ps died during training; restart the chief to resume
EXIT_DIVERGED_RESTORE = 5  # MWMS workers restored different steps: would train a wrong model
# A peer (a ps, an MWMS worker) was lost after this attempt had saved a step beyond the one it
# restored (worker/progress.saved_step): the peer's own failure counts against its own Job or
# index, so this task's is not counted (podFailurePolicy Ignore). Without such a save the task
# exits with its counted code (4, or 1 under MWMS): every ignored restart follows saved
# progress, so a loop of them ends with training.
EXIT_PEER_LOST = 6
# The node, not the program, is at fault: a GPU the run expects and TF does not see, a shared
# library that does not load, this task's own port taken by another process. Retried in a new pod
# and counted against backoffLimit: an environment broken on every node must still end.
EXIT_NODE_FAULT = 9
# Another writer took the model dir's lease (worker/model_dir/writer_lease.py): this task was replaced
# while it still ran (its node declared lost during a partition). It stops without saving.
EXIT_SUPERSEDED = 8
# A program of your own used Keras 3 where it cannot train (worker/keras_check.py): a retry fails
# alike, so it fails the cluster at once, whatever the spec's fatalExitCodes (78: sysexits'
# EX_CONFIG, which programs seldom use; a spec may not list it).
EXIT_KERAS_REFUSED = 78
# A cause line whose rule gives the verdict says it in these words (worker/exit_cause.py), so
# the launcher does not say it again (launcher/backends/local/policy.py).
NOT_RETRIED = "not retried"
# A program of your own died of an uncaught Python exception of a kind a retry fails alike
# (ValueError, TypeError, ...: worker/exit_cause.py EXCEPTION_KINDS; worker/exception_check.py
# sets the code): it fails the cluster at once, as 78 does. 70: sysexits' EX_SOFTWARE; a spec
# may not list it in fatalExitCodes, and names exception classes instead (fatalExceptions,
# retriedExceptions), which reach the task in these variables, comma-separated.
EXIT_DETERMINISTIC_EXCEPTION = 70
# The codes our checks give inside the process of a program of your own, with their own line.
COMMAND_CHECK_EXIT_CODES = (EXIT_KERAS_REFUSED, EXIT_DETERMINISTIC_EXCEPTION)
FATAL_EXCEPTIONS = "TFK8S_FATAL_EXCEPTIONS"
RETRIED_EXCEPTIONS = "TFK8S_RETRIED_EXCEPTIONS"
# SIGTERM (pod deletion, node drain, spot reclaim) after the current step was checkpointed; the
# same code a process killed by SIGTERM reports (128 + 15), so ps/worker servers that simply die
# of the signal read alike. Not a failure: the task is replaced without counting it.
EXIT_PREEMPTED = 143
# Where a container's one-line reason for exiting goes, for `status` (Kubernetes' default
# terminationMessagePath; the pod also falls back to its log's tail, FallbackToLogsOnError).
TERMINATION_MESSAGE_PATH = "/dev/termination-log"

# The worker's one-line error in its log; the local backend reads the message back for `status`
# (worker/exit_cause.py: why any task exited).
ERROR_LINE = "tfk8s {task}: error: {message}"
ERROR_LINE_PATTERN = r"^tfk8s [-a-z0-9]+: error: "


# --- what the built-in worker needs installed -----------------------------------------------
# Missing, each is a deterministic start-up failure (EXIT_CONFIG): the worker says how to install
# it, and a local run checks them before starting any task. tf-keras must match TensorFlow's
# version and be installed with --no-deps (scripts/setup.sh, Dockerfile).
_INSTALL_WORKER_EXTRA = "pip install '.[worker]' (from a tfk8s checkout)"
_INSTALL_TF_KERAS = "pip install --no-deps 'tf-keras==<your TensorFlow major.minor>.*' (--no-deps keeps tensorflow-cpu)"
WORKER_REQUIREMENTS: dict[str, str] = {  # top-level module -> how to install it
    "tensorflow": _INSTALL_WORKER_EXTRA,
    "numpy": _INSTALL_WORKER_EXTRA,
    "tf_keras": _INSTALL_TF_KERAS,
}


def worker_needs(uses_legacy_keras: bool) -> tuple[str, ...]:
    """The modules every built-in task imports; tf_keras only for the fit loop and under
    parameter_server (worker/args.py Options.uses_legacy_keras)."""
    return ("tensorflow", "numpy") + (("tf_keras",) if uses_legacy_keras else ())


def missing_module_message(module: str) -> str | None:
    """How to fix a missing top-level module the built-in worker needs; None for other modules."""
    top = module.split(".")[0]
    fix = WORKER_REQUIREMENTS.get(top)
    if fix is None:
        return None
    return f"{top} is not installed in this Python environment: {fix}"


# --- which roles a strategy runs -----------------------------------------------------------


@dataclass(frozen=True)
class Count:
    """How many replicas of a role a strategy allows; `message` says why, `{n}` the count given."""

    minimum: int
    maximum: int | None  # None: no upper bound
    message: str
    # The least for a command of your own, where it may be fewer (None: `minimum`).
    own_command_minimum: int | None = None

    def allows(self, n: int, own_command: bool = False) -> bool:
        least = self.own_command_minimum if own_command and self.own_command_minimum is not None else self.minimum
        return n >= least and (self.maximum is None or n <= self.maximum)


_ONE_EVALUATOR = Count(0, 1, "at most one evaluator is supported, got {n}")


@dataclass(frozen=True)
class StrategyTraits:
    """What a strategy means for its tasks, in one place: the launcher (k8s_contract, plan,
    local policy) and the worker read these instead of asking `strategy is X`."""

    counts: dict[Role, Count]  # how many replicas of each role it allows
    success_role: Role  # whose index 0 decides success and writes the model dir
    awaits: dict[Role, tuple[Role, ...]]  # role -> the roles its tasks wait for before TensorFlow
    servers: tuple[Role, ...] = ()  # only serve the PS coordinator: tf.distribute.Server().join()
    computes: tuple[Role, ...] = (Role.CHIEF, Role.WORKER)  # run the model (want the GPUs)
    # All-reduce in lockstep: one crashed task fails every peer's collective, so retries are
    # counted per index, the JobSet restarts as a whole, and with GPUs NCCL's ephemeral ports
    # are admitted between them (launcher/k8s_contract.py).
    lockstep: tuple[Role, ...] = ()


TRAITS: dict[Strategy, StrategyTraits] = {
    Strategy.PARAMETER_SERVER: StrategyTraits(
        counts={
            Role.EVALUATOR: _ONE_EVALUATOR,
            Role.CHIEF: Count(1, 1, "parameter_server needs exactly 1 chief (the coordinator), got {n}"),
            # a program of your own may train in the chief itself (a TFJob's PS with one Worker
            # and no Chief: TF 1's worker 0 was the chief); the built-in coordinator needs workers
            Role.WORKER: Count(1, None, "parameter_server needs at least 1 worker, got 0", own_command_minimum=0),
            Role.PS: Count(1, None, "parameter_server needs at least 1 ps, got 0"),
        },
        success_role=Role.CHIEF,
        awaits={Role.CHIEF: (Role.WORKER, Role.PS)},
        servers=(Role.WORKER, Role.PS),
        computes=(Role.WORKER,),  # the chief only coordinates
    ),
    Strategy.MULTI_WORKER_MIRRORED: StrategyTraits(
        counts={
            Role.EVALUATOR: _ONE_EVALUATOR,
            Role.PS: Count(0, 0, "multi_worker_mirrored has no ps; set 0"),
            Role.CHIEF: Count(
                0,
                0,
                "multi_worker_mirrored uses worker 0 as chief (an explicit chief "
                "breaks checkpointing, tensorflow#35705); set 0 and add a worker",
            ),
            Role.WORKER: Count(1, None, "multi_worker_mirrored needs at least 1 worker"),
        },
        success_role=Role.WORKER,  # worker 0 is the chief
        awaits={Role.WORKER: (Role.WORKER,)},
        lockstep=(Role.WORKER,),
    ),
    Strategy.MIRRORED: StrategyTraits(
        counts={
            Role.EVALUATOR: _ONE_EVALUATOR,
            Role.CHIEF: Count(1, 1, "mirrored runs in one pod: set 1, got {n}"),
            Role.WORKER: Count(0, 0, "mirrored runs in one pod: set 0"),
            Role.PS: Count(0, 0, "mirrored runs in one pod: set 0"),
        },
        success_role=Role.CHIEF,
        awaits={},
    ),
}
ROLE_COUNTS: dict[Strategy, dict[Role, Count]] = {strategy: traits.counts for strategy, traits in TRAITS.items()}


def traits(strategy: Strategy) -> StrategyTraits:
    return TRAITS[Strategy(strategy)]


def allowed_roles(strategy: Strategy) -> tuple[Role, ...]:
    """Roles that may have replicas under `strategy`, in ROLES order."""
    rules = ROLE_COUNTS[Strategy(strategy)]
    return tuple(r for r in ROLES if r in DATA_SERVICE_ROLES or rules[r].maximum != 0)


# --- who decides, who writes, who must be ended --------------------------------------------

SUCCESS_INDEX = 0


def success_role(strategy: Strategy) -> Role:
    """The role whose index-0 exit decides success: chief, or worker 0 under MWMS."""
    return traits(strategy).success_role


def is_writer(strategy: Strategy, role: Role, index: int) -> bool:
    """The one task that writes the real checkpoints, SavedModel and FINAL marker."""
    return role == success_role(strategy) and index == SUCCESS_INDEX


def is_server(strategy: Strategy, role: Role) -> bool:
    """Tasks that only serve variables/ops to the PS coordinator: tf.distribute.Server().join()."""
    return Role(role) in traits(strategy).servers


def awaited_peers(strategy: Strategy, role: Role) -> tuple[Role, ...]:
    """Roles whose tasks this one waits for before starting TensorFlow."""
    return traits(strategy).awaits.get(Role(role), ())


def task_name(role: str, index: int) -> str:
    """`worker-1`: how logs, files and messages name a task."""
    return f"{Role(role).value}-{index}"
