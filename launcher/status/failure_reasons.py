"""Why a task's container or pod ended, in Kubernetes' words first and the task's own second
(pure: pod dicts in, one line out).

Kubernetes records the causes a process cannot write down itself: the kernel's OOM kill (the
container's `terminated.reason`), the kubelet's eviction and an active deadline (the pod's
`status.reason`), a pod deleted for a NoExecute taint or by the pod garbage collector after its
node went away (the `DisruptionTarget` condition). Those are the reason whenever present. Only
otherwise is the termination message read, and its TF start-up noise skipped: pods use
terminationMessagePolicy FallbackToLogsOnError, so a task killed before writing its one-line
error (SIGKILL) leaves its log's tail there, whose last line is typically TF's C++ logging
("To enable the following instructions: AVX2 ... rebuild TensorFlow"), never a reason.
"""

from __future__ import annotations

import re

from launcher import k8s_contract
from worker import contract

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

# TF's C++ logging (absl/glog prefix), e.g. `I0000 00:00:1732461234.567890   12 port.cc:153] ...`
# and the older `2024-11-24 16:49:37.123456: W tensorflow/core/...cc:210] ...`.
_TF_CPP_LOG = re.compile(
    r"^([IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\])"
)
# Continuation lines of TF's multi-line start-up notices, which carry no prefix of their own.
_TF_NOTICES = (
    "To enable the following instructions:",
    "rebuild TensorFlow with the appropriate compiler flags",
    "oneDNN custom operations are on",
    "TF_ENABLE_ONEDNN_OPTS",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "This TensorFlow binary is optimized to use available CPU instructions",
)


def is_tf_log_noise(line: str) -> bool:
    line = line.strip()
    return bool(_TF_CPP_LOG.match(line)) or any(notice in line for notice in _TF_NOTICES)


def said_by_task(message: str) -> str | None:
    """The task's own last words: the last line of its termination message that is neither a
    progress line nor TF's logging (contract.exit_reason does the rest)."""
    kept = "\n".join(line for line in message.splitlines() if not is_tf_log_noise(line))
    return contract.exit_reason(kept)


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
    return said_by_task(term.get("message") or "")
