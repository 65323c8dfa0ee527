"""What a failed task means (the plan's FailurePolicy), decided once (pure).

The local backend restarts processes by it; launcher/render/job_failure.py lays it out as the
Jobs' podFailurePolicy and retry budget, which scripts/gen_chart.py writes into the chart's
contract, so the chart never spells them out by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher import k8s_contract
from worker import contract
from worker.contract import Role, Strategy


@dataclass(frozen=True)
class FailurePolicy:
    """What a failed task means; Kubernetes: the Jobs' podFailurePolicy, local: the restarts.

    restartPolicy Never: a failed task is replaced (a new pod, same hostname), counted against
    backoffLimit, except exits in `ignored_exit_codes` and disruptions (eviction, drain,
    preemption: the pod's DisruptionTarget condition), which are not the task's fault; an exit in
    `fatal_exit_codes` fails the role at once (the built-in worker's configuration error, or the
    spec's fatalExitCodes for a command of your own); `counted_exit_codes` are counted, as any
    other exit is, and named so that the Job says so (a node fault, SIGKILL). Roles in
    `per_index_roles` have a budget of
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
    fatal_meaning: str = ""  # why an exit in fatal_exit_codes is not retried, for the log
    # The built-in worker, whose exit codes are ours (worker/contract.py); False: a command of
    # the user's, whose codes mean what its program says.
    builtin: bool = True

    def why_fatal(self, code: int) -> str:
        """Why exit `code` (one of fatal_exit_codes) is not retried, for the log."""
        return (CHECKS_FATAL.get(code) if not self.builtin else None) or self.fatal_meaning

    def per_index(self, role: str) -> bool:
        return Role(role) in self.per_index_roles

    def budget(self, role: str, index: int) -> str:
        """Whose backoffLimit a failure of task (role, index) uses: its index's, or its role's."""
        return contract.task_name(role, index) if self.per_index(role) else Role(role).value


# Why a fatal exit is not retried: the built-in worker's configuration error, or a user's code.
BUILTIN_FATAL = (
    "a deterministic failure of the built-in worker (bad arguments, a program that does not import or "
    "whose code raised a bug, a checkpoint that does not fit the model; see its log)"
)
USER_FATAL = "listed in fatalExitCodes"
KERAS_FATAL = "the Keras check's refusal (Keras 3 where it cannot train; docs/keras.md)"
# The codes our checks give a command of your own (worker/keras_check.py, worker/exception_check.py),
# fatal whatever its spec says.
CHECKS_FATAL = {
    contract.EXIT_KERAS_REFUSED: KERAS_FATAL,
    contract.EXIT_DETERMINISTIC_EXCEPTION: "an exception a retry would meet again (its line says which; "
    "fatalExceptions, retriedExceptions: docs/verdicts.md)",
}


def restart_rules(
    restart_policy: str,
    backoff_limit: int,
    strategy: Strategy,
    builtin: bool,
    user_fatal_exit_codes: tuple[int, ...] = (),
) -> FailurePolicy:
    """The failure rules of a cluster (scripts/gen_chart.py writes them into the chart).
    `user_fatal_exit_codes`: the spec's fatalExitCodes (a command of your own, restartPolicy Never:
    the spec refuses them elsewhere)."""
    if restart_policy != "Never":
        return FailurePolicy(restart_policy, backoff_limit, builtin=builtin)
    return FailurePolicy(
        restart_policy,
        backoff_limit,
        # The built-in worker's SIGTERM (it saved the current step first; a server, or the
        # supervisor around it, that died of SIGTERM reports the same code) and its loss of a
        # peer after saving: not failures. A command of your own may send itself SIGTERM (an
        # entrypoint's `trap 'kill 0' EXIT` after a bug) or exit 6 for anything: counted, and a
        # real preemption of its pod carries DisruptionTarget (the Ignore rule below).
        ignored_exit_codes=(contract.EXIT_PREEMPTED, contract.EXIT_PEER_LOST) if builtin else (),
        # The built-in worker's bad arguments or program: a retry fails the same way. A command of
        # your own: the Keras check's refusal, the exception check's deterministic exception, and
        # the codes its spec says a retry cannot mend (none by default: a program's exit 1 is as
        # often a lost peer, retried it resumes, as a bug).
        fatal_exit_codes=(contract.EXIT_CONFIG,) if builtin else (*CHECKS_FATAL, *user_fatal_exit_codes),
        fatal_meaning=BUILTIN_FATAL if builtin else USER_FATAL,
        # A node fault (the built-in worker's: a user's command may use 9 for anything) and
        # SIGKILL (128 + 9: OOM, nothing saved) are counted, so that an environment broken on
        # every node, or a task that keeps exceeding its memory, ends at backoffLimit.
        counted_exit_codes=((contract.EXIT_NODE_FAULT,) if builtin else ()) + (k8s_contract.SIGKILL_EXIT,),
        ignores_disruptions=True,
        per_index_roles=k8s_contract.per_index_roles(strategy),
        builtin=builtin,
    )
