"""Why a task's container or pod ended, in Kubernetes' words first and the task's own second
(pure: pod dicts in, one line out).

Kubernetes records the causes a process cannot write down itself: the kernel's OOM kill (the
container's `terminated.reason`), the kubelet's eviction and an active deadline (the pod's
`status.reason`), a pod deleted for a NoExecute taint or by the pod garbage collector after its
node went away (the `DisruptionTarget` condition). Those are the reason whenever present. Only
otherwise is the termination message read, by worker/exit_cause.py's rule: pods use
terminationMessagePolicy FallbackToLogsOnError, so a task that wrote none (a program of the
user's, a task killed by SIGKILL) leaves its log's tail there, whose last line may be TF's C++
logging, a Keras argument list or a tensor printout, never the cause.
"""

from __future__ import annotations

from launcher import k8s_contract
from launcher.status import node_loss
from worker import contract, exit_cause

# The exit codes that mean something of ours (docs/lifecycle.md, "Exit codes"): the built-in
# worker's (worker/contract.py EXIT_*, but 0, 1 and the signals') and the CLI's lost node. A
# command of the user's that exits with one of them is said to be the program's code: its 2 is
# no spec or configuration error of ours. Not the Keras check's 78 nor the exception check's 70,
# which our checks give inside the program's process, with their own line.
OUR_EXIT_CODES = frozenset(
    code
    for name, code in vars(contract).items()
    if name.startswith("EXIT_") and 1 < code < 128 and code not in contract.COMMAND_CHECK_EXIT_CODES
) | {node_loss.EXIT_NODE_LOST}
PROGRAM_EXIT_NOTE = "your program's exit code"


def exited(code: int, own_program: bool, *notes: str) -> str:
    """'exited 2', or for a command of the user's exiting with one of our codes 'exited 2 (your
    program's exit code)'; `notes` join the parenthesis."""
    said = ([PROGRAM_EXIT_NOTE] if own_program and code in OUR_EXIT_CODES else []) + list(notes)
    return f"exited {code}" + (f" ({'; '.join(said)})" if said else "")


def runs_own_program(pod: dict) -> bool:
    """Whether the pod's task is a command of the user's: only the built-in worker's task is
    told its program module (launcher/plan/plan.py task_env), except the data service's
    servers, which always run the built-in worker (their role is the pod's component label)."""
    role = ((pod.get("metadata") or {}).get("labels") or {}).get(k8s_contract.LABEL_COMPONENT)
    if role in contract.DATA_SERVICE_ROLES:
        return False
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == k8s_contract.CONTAINER:
            return all(env.get("name") != contract.PROGRAM for env in container.get("env") or [])
    return False


# Container terminations whose `reason` is the whole story: the message, if any, is the log tail.
CONTAINER_REASONS = {
    "OOMKilled": "killed by the kernel for exceeding its memory",
    "ContainerCannotRun": "the container could not run",
    "StartError": "the container could not start",
}
# Pod-level `status.reason`s set by the kubelet when it ends the pod.
POD_REASONS = {
    "Evicted",
    "DeadlineExceeded",
    "UnexpectedAdmissionError",
    "NodeAffinity",
    "OutOfcpu",
    "OutOfmemory",
    "NodeShutdown",
    "Terminated",
}


def memory_limit(pod: dict) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == k8s_contract.CONTAINER:
            return ((container.get("resources") or {}).get("limits") or {}).get("memory")
    return None


def recorded_by_kubernetes(pod: dict, term: dict | None) -> str | None:
    """What Kubernetes says ended this pod's task, or None when it recorded nothing beyond an
    exit code (then the task's own words count)."""
    reason = (term or {}).get("reason")
    if reason == "OOMKilled":
        limit = memory_limit(pod)
        where = (
            f"its memory limit {limit}"
            if limit
            else "the node's memory (no memory limit set: raise resources.limits.memory or pick a bigger node)"
        )
        return f"OOMKilled: exit code {term.get('exitCode')}, the task exceeded {where}"
    if reason in CONTAINER_REASONS:
        detail = (term or {}).get("message") or ""
        return f"{reason}: {CONTAINER_REASONS[reason]}" + (f" ({detail.strip()})" if detail else "")
    status = pod.get("status") or {}
    if status.get("reason") in POD_REASONS:
        return f"{status['reason']}: {status.get('message') or 'no message from the kubelet'}"
    for cond in status.get("conditions") or []:
        # DeletionByTaintManager, DeletionByPodGC, PreemptionByScheduler, TerminationByKubelet...
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return f"{cond.get('reason')}: {cond.get('message', '')}".rstrip(": ")
    return None


def failure_reason(pod: dict, term: dict | None) -> str | None:
    """Why the task ended, for `status`: Kubernetes' record, else the task's own words for a
    non-zero exit, else None."""
    recorded = recorded_by_kubernetes(pod, term)
    if recorded is not None:
        return recorded
    if term is None or not term.get("exitCode"):
        return None
    code = term["exitCode"]
    said = exit_cause.exit_cause(term.get("message") or "", code)
    if not said:  # a task that said nothing: its exit code is the cause (as --local says it)
        return exited(code, runs_own_program(pod))
    if not runs_own_program(pod) or code not in OUR_EXIT_CODES:
        return said
    return exited(code, True) + f": {said}"


def said_once(said: list[tuple[str, str]], separator: str = ": ") -> list[str]:
    """Each distinct cause once, after every task that gave it, in the order first given:
    [("worker-0", "R"), ("worker-1", "R")] -> ["worker-0 and worker-1: R"]. MWMS workers fail
    alike (one shape error fails every replica), and the cause is long."""
    tasks_by_cause: dict[str, list[str]] = {}
    for task, cause in said:
        tasks_by_cause.setdefault(cause, []).append(task)
    return [f"{_listed(tasks)}{separator}{cause}" for cause, tasks in tasks_by_cause.items()]


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
