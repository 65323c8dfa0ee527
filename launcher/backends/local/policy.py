"""The local Job-controller rules, pure: what to do about an exit, and when the run is over.

The supervisor (supervisor.py) feeds these functions immutable snapshots of its tasks and the
clock; they start, stop and signal nothing, so every rule is tested without processes
(tests/launcher/backends/local/test_policy.py), like launcher.status.lifecycle.compute_status on
Kubernetes.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from launcher import k8s_contract
from launcher.backends.local.types import FAILURE_GRACE_SECONDS
from launcher.plan.plan import ClusterPlan, FailurePolicy
from launcher.status import failure_reasons, verdicts
from launcher.status.status import Phase
from worker import contract
from worker.contract import Role, Strategy

PEER_EXIT_GRACE_SECONDS = 60.0  # MWMS: other workers finish after worker 0
FATAL_NOTE = f"deterministic: {contract.NOT_RETRIED}"


class TaskState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING_RESTART = "waiting-restart"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # for good: it may not restart
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


LIVE = (TaskState.RUNNING, TaskState.WAITING_RESTART)


# --- one task's exit -----------------------------------------------------------------------


@dataclass(frozen=True)
class RestartDecision:
    restart: bool  # start the task again (same TF_CONFIG)
    counted: bool  # a failure counted against backoffLimit
    reason: str  # the task's state, e.g. "exited 3"
    message: str  # what happens next, for the log


def restart_decision(
    failure: FailurePolicy,
    role: str,
    code: int,
    restarts_used: int,
    training_over: bool = False,
    last_words: str | None = None,
    *,
    verdict_said: bool = False,
) -> RestartDecision:
    """What Kubernetes would do about a task (pod) that exited with `code` (Popen's
    returncode, non-zero), given `restarts_used` counted restarts of its budget so far. `role`
    names that budget (FailurePolicy.budget): the role, or the task under backoffLimitPerIndex.

    restartPolicy Never (plan.failure_policy, rendered as the Jobs' podFailurePolicy): an exit
    in ignored_exit_codes (a preemption) replaces the pod without counting; one in
    fatal_exit_codes (the built-in worker's configuration error, a command's fatalExitCodes) fails the role at once;
    anything else replaces the pod, counted against backoffLimit. OnFailure: every failure
    restarts in place, counted, preemptions included (no podFailurePolicy there).
    `last_words`, the task's own reason (its output's last line), ends the reason.
    """
    status = shell_status(code)
    limit = failure.backoff_limit
    in_place = failure.restart_policy == "OnFailure"
    own_program = not failure.builtin
    described = describe_exit(code, own_program)
    if last_words:
        said = contract.NOT_RETRIED in last_words  # the task's cause gives the verdict itself
        decision = restart_decision(failure, role, code, restarts_used, training_over, verdict_said=said)
        return _with_last_words(decision, last_words)
    # A preemption only for the built-in worker, whose SIGTERM comes from outside; a command of
    # your own may send it to itself (`trap 'kill 0' EXIT`), and no DisruptionTarget says
    # otherwise on a machine: counted, as its pod's would be (podFailurePolicy).
    preempted = status == contract.EXIT_PREEMPTED and not own_program
    if preempted:
        described = f"was preempted ({described}: SIGTERM)"
    elif status == contract.EXIT_PREEMPTED:
        described = f"{described} ({OWN_SIGTERM})"
    if training_over:
        return RestartDecision(False, True, described, f"{described}; not restarting it (training is over)")
    if status in failure.ignored_exit_codes:
        why = "a preemption" if preempted else "a peer lost after this task had saved"
        return RestartDecision(
            True,
            False,
            described,
            (
                f"{described}; replacing it like a replaced pod ({why} is not counted against "
                f"backoffLimit; {restarts_used} of {limit} used for {_budget(role)})"
            ),
        )
    if status in failure.fatal_exit_codes:
        return RestartDecision(
            False,
            True,
            describe_exit(code, own_program, *(() if verdict_said else (FATAL_NOTE,))),
            (
                f"{described}, {failure.why_fatal(status)}; not restarting it, a retry would fail alike "
                "(podFailurePolicy FailJob)"
            ),
        )
    if restarts_used >= limit:
        return RestartDecision(
            False,
            True,
            described,
            (f"{described}; not restarting it (backoffLimit {limit} reached for {_budget(role)})"),
        )
    if not in_place:
        how = f"replacing it (restartPolicy {failure.restart_policy}: a new pod"
    elif preempted:
        how = (
            f"restarting it in place (restartPolicy {failure.restart_policy} has no "
            "podFailurePolicy, so a preemption counts"
        )
    else:
        how = f"restarting it in place (restartPolicy {failure.restart_policy}"
    return RestartDecision(
        True,
        True,
        described,
        (f"{described}; {how}, failure {restarts_used + 1} of backoffLimit {limit} for {_budget(role)})"),
    )


def _budget(name: str) -> str:
    """'role worker', or 'worker-3 (backoffLimitPerIndex)': role names have no '-', tasks do."""
    return f"{name} (backoffLimitPerIndex)" if "-" in name else f"role {name}"


def explains_itself(code: int, own_program: bool = False) -> bool:
    """Whether an exit status is the task's own (its output's last line then says why), not a
    signal's or a preemption's. A command of your own's SIGTERM may be its own (a trap that
    kills its process group after a bug): its output says why."""
    return 0 < code != contract.EXIT_PREEMPTED or (own_program and shell_status(code) == contract.EXIT_PREEMPTED)


# Why a command of your own's SIGTERM (143) is counted: docs/verdicts.md.
OWN_SIGTERM = "no DisruptionTarget: its own SIGTERM, not a preemption, counted"


def _with_last_words(decision: RestartDecision, last_words: str) -> RestartDecision:
    return RestartDecision(
        decision.restart,
        decision.counted,
        f"{decision.reason}: {last_words}",
        f"{decision.message}. It said: {last_words}",
    )


# --- the run as a whole --------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSnapshot:
    """One task as the supervisor sees it at one poll."""

    role: Role
    index: int
    state: TaskState
    exit_code: int | None = None  # Popen's returncode of the last attempt (-N: signal N)
    reason: str = ""  # e.g. "exited 3", "was killed by SIGKILL"
    ended_at: float | None = None  # monotonic time it succeeded or failed for good

    @property
    def name(self) -> str:
        return contract.task_name(self.role, self.index)


@dataclass(frozen=True)
class Stop:
    """A task to stop now, and the state it is left in."""

    role: Role
    index: int
    state: TaskState
    reason: str | None = None  # None: "stopped (<Decision.stop_reason>)" if it was running


@dataclass(frozen=True)
class Decision:
    phase: Phase  # RUNNING, FINISHING (training succeeded), SUCCEEDED or FAILED
    message: str = ""
    exit_code: int | None = None  # once finished: the CLI's exit code
    stop: tuple[Stop, ...] = ()
    stop_reason: str = ""  # for the log: "stopping worker-1 (training is over)"
    notes: tuple[str, ...] = ()  # for the log; the supervisor says each distinct note once

    @property
    def finished(self) -> bool:
        return self.phase.finished


def decide(
    plan: ClusterPlan,
    tasks: Sequence[TaskSnapshot],
    now: float,
    *,
    failure_grace_seconds: float = FAILURE_GRACE_SECONDS,
    peer_exit_grace_seconds: float = PEER_EXIT_GRACE_SECONDS,
) -> Decision:
    """The run's phase after a poll, and what to stop. `now` and every `ended_at` come from one
    monotonic clock.

    - the chief (MWMS: worker 0) failed for good: Failed with its exit code (signal N: 128+N).
    - another task of a role the training needs (verdicts.ROLE_OUT_OF_RETRIES) failed for good:
      a running chief gets `failure_grace_seconds` to exit with its own error, then Failed with
      that task's exit code (verdicts.failed_exit_code).
    - the chief exited 0: MWMS peers get `peer_exit_grace_seconds` to finish, the evaluator
      (see evaluator_outcome) its grace; then Succeeded, and what still runs is stopped:
      supervised tasks (ps, PS workers, the evaluator) count as succeeded.
    """
    chief = next(t for t in tasks if (t.role, t.index) == (plan.success_role, contract.SUCCESS_INDEX))
    # The roles the training cannot go on without (the data service's servers too: one that
    # cannot restart stalls the trainers): verdicts.ROLE_OUT_OF_RETRIES, as on Kubernetes.
    training = [t for t in tasks if t.role in verdicts.needed_roles()]
    dead_peers = sorted(
        (t for t in training if t.state is TaskState.FAILED and t is not chief), key=lambda t: t.ended_at or 0.0
    )
    if chief.state is TaskState.FAILED:
        return _failed(
            tasks, _chief_failed(chief, dead_peers), verdicts.failed_exit_code(shell_status(chief.exit_code))
        )
    if dead_peers and chief.state is not TaskState.SUCCEEDED:
        first = dead_peers[0]
        if chief.state is TaskState.RUNNING and now - first.ended_at < failure_grace_seconds:
            note = f"{first.name} cannot restart; giving {chief.name} {failure_grace_seconds:g} s to exit by itself"
            return Decision(Phase.RUNNING, note, notes=(note,))
        return _failed(
            tasks,
            f"{first.name} {first.reason}; {chief.name} was stopped",
            verdicts.failed_exit_code(shell_status(first.exit_code)),
        )
    if chief.state is not TaskState.SUCCEEDED:
        return Decision(Phase.RUNNING)
    ended = f"training ended: {chief.name} exited 0"
    elapsed = now - chief.ended_at
    # MWMS: the other workers finish on their own shortly after worker 0.
    supervised = plan.supervised
    peers = [t for t in training if t.role not in supervised and t is not chief and t.state in LIVE]
    if peers and elapsed < peer_exit_grace_seconds:
        return Decision(
            Phase.FINISHING,
            (
                f"training succeeded; waiting up to {peer_exit_grace_seconds:g} s for "
                + ", ".join(t.name for t in peers)
                + " to exit"
            ),
            notes=(ended,),
        )
    evaluator_note = evaluator_outcome(plan, _find(tasks, Role.EVALUATOR), elapsed)
    if evaluator_note is None:
        grace = plan.role(Role.EVALUATOR).supervision.grace_seconds
        return Decision(
            Phase.FINISHING,
            (f"training succeeded; waiting up to {grace} s (evaluatorGraceSeconds) for the evaluator"),
            notes=(ended,),
        )
    stop = tuple(
        Stop(t.role, t.index, TaskState.SUCCEEDED, "stopped after training (never exits)")
        if t.role in supervised
        else Stop(t.role, t.index, TaskState.STOPPED)
        for t in tasks
        if t.state in LIVE
    )
    return Decision(Phase.SUCCEEDED, evaluator_note, 0, stop, "training is over", (ended,))


def _chief_failed(chief: TaskSnapshot, dead_peers: list[TaskSnapshot]) -> str:
    """'worker-0 exited 4 after ps-0 was killed by SIGKILL'; peers that failed as the chief
    did are named with it instead: 'worker-0 and worker-1 exited 1: ValueError: ...'."""
    if not dead_peers:
        return f"{chief.name} {chief.reason}"
    if dead_peers[0].reason != chief.reason:
        return f"{chief.name} {chief.reason} after {dead_peers[0].name} {dead_peers[0].reason}"
    alike = [chief, *(t for t in dead_peers if t.reason == chief.reason)]
    return failure_reasons.said_once([(t.name, t.reason) for t in alike], separator=" ")[0]


def evaluator_outcome(plan: ClusterPlan, evaluator: TaskSnapshot | None, elapsed: float) -> str | None:
    """'' or a note once the evaluator is done with, `elapsed` s after training ended; None
    while it is still needed. The built-in evaluator exits 0 by itself once it has evaluated
    the final checkpoint; a bring-your-own one is stopped after evaluatorGraceSeconds."""
    if evaluator is None:
        return ""
    builtin = plan.spec.builtin
    grace = plan.role(Role.EVALUATOR).supervision.grace_seconds
    if evaluator.state is TaskState.SUCCEEDED:
        return "" if builtin else "evaluator exited by itself"
    if evaluator.state is TaskState.FAILED:
        return f"training succeeded; the evaluator failed ({evaluator.reason})"
    if elapsed < grace:
        return None
    if builtin:
        return (
            f"training succeeded; the evaluator had not evaluated the final checkpoint "
            f"{grace} s (evaluatorGraceSeconds) after training ended and was stopped"
        )
    return f"evaluator stopped {grace} s (evaluatorGraceSeconds) after training ended"


def interrupted(tasks: Sequence[TaskSnapshot], signum: int) -> Decision:
    """Ctrl-C or SIGTERM to the supervisor: every task is stopped, the run failed."""
    name = signal.Signals(signum).name
    return _failed(tasks, f"interrupted by {name}", 128 + signum)


def _failed(tasks: Sequence[TaskSnapshot], message: str, exit_code: int) -> Decision:
    stop = tuple(Stop(t.role, t.index, TaskState.STOPPED) for t in tasks if t.state in LIVE)
    return Decision(Phase.FAILED, message, exit_code, stop, "cluster ended")


def _find(tasks: Sequence[TaskSnapshot], role: Role) -> TaskSnapshot | None:
    return next((t for t in tasks if t.role == role), None)


# --- small rules ---------------------------------------------------------------------------


def sees_gpus(strategy: str, role: str) -> bool:
    """Up to five TF processes share this host's GPUs, and each would take nearly all of their
    memory at start-up: only the tasks that compute see the GPUs, and grow their share as
    needed. ps, the PS coordinator and the evaluator run on the CPU."""
    return k8s_contract.computes(Strategy(strategy), Role(role))


def gpu_env(strategy: str, role: str) -> dict[str, str]:
    """What shares this host's GPUs among a run's tasks (sees_gpus)."""
    return {"TF_FORCE_GPU_ALLOW_GROWTH": "true"} if sees_gpus(strategy, role) else {"CUDA_VISIBLE_DEVICES": ""}


def describe_exit(code: int, own_program: bool = False, *notes: str) -> str:
    """'was killed by SIGKILL', 'exited 2', or for a command of the user's 'exited 2 (your
    program's exit code)' (failure_reasons.exited)."""
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return failure_reasons.exited(code, own_program, *notes)


def shell_status(code: int | None) -> int:
    """A process's return code as a shell exit status (killed by signal N -> 128 + N)."""
    if code is None:
        return 1
    return 128 - code if code < 0 else code
