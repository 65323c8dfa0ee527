"""A failed task as Kubernetes would show it: the pod the kubelet leaves, the action the Job
controller takes on it (its podFailurePolicy), the Job's status after it, and `status`'s verdict
on them (launcher/status/lifecycle.compute_status). The parity tests feed it what a real `--local`
task printed and exited with, so both backends judge one fault (issue 60)."""

from __future__ import annotations

import re

from launcher.cluster_spec.spec import ClusterSpec
from launcher.plan.plan import plan
from launcher.render import render
from launcher.status.lifecycle import compute_status
from launcher.status.status import ClusterStatus
from worker.contract import ERROR_LINE_PATTERN

NAMESPACE = "team"


def jobs_of(spec: ClusterSpec) -> dict[str, dict]:
    """The rendered Jobs by role."""
    return {
        o["metadata"]["labels"]["app.kubernetes.io/component"]: o
        for o in render.render(plan(spec))
        if o["kind"] == "Job"
    }


def failed_pod(job: dict, exit_code: int, message: str = "", conditions: tuple[dict, ...] = ()) -> dict:
    """A pod of `job` whose task container ended with `exit_code`, as the kubelet reports it
    (restartPolicy Never: phase Failed, the container terminated with reason Error)."""
    template = job["spec"]["template"]
    return {
        "metadata": {
            "name": f"{job['metadata']['name']}-0-x7k2p",
            "namespace": NAMESPACE,
            "labels": template["metadata"]["labels"],
        },
        "spec": template["spec"],
        "status": {
            "phase": "Failed",
            "conditions": [
                *conditions,
                {"type": "PodReadyToStartContainers", "status": "False"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "PodFailed"},
                {"type": "ContainersReady", "status": "False", "reason": "PodFailed"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "ready": False,
                    "restartCount": 0,
                    "image": c["image"],
                    "state": {
                        "terminated": {
                            "exitCode": exit_code if c["name"] == "tensorflow" else 0,
                            "reason": "Error" if c["name"] == "tensorflow" else "Completed",
                            "message": message,
                            "startedAt": "2026-11-24T16:38:05Z",
                            "finishedAt": "2026-11-24T16:39:40Z",
                            "containerID": "containerd://0f3a",
                        }
                    },
                }
                for c in template["spec"]["containers"]
            ],
        },
    }


def job_controller_action(job: dict, pod: dict) -> str:
    """What the Job controller does with a failed pod of `job`: its podFailurePolicy's first
    matching rule's action, else Count."""
    return _matching_rule(job, pod)[1]


def _matching_rule(job: dict, pod: dict) -> tuple[int | None, str]:
    """(index, action) of the first podFailurePolicy rule that matches the pod, as
    pkg/controller/job/pod_failure_policy.go applies them (onExitCodes looks at the named
    container's terminated state, exit code 0 never matching; onPodConditions at the pod's
    conditions); (None, "Count") when none does."""
    for index, rule in enumerate((job["spec"].get("podFailurePolicy") or {}).get("rules", [])):
        on_codes = rule.get("onExitCodes")
        if on_codes:
            for status in pod["status"]["containerStatuses"]:
                code = (status["state"].get("terminated") or {}).get("exitCode", 0)
                named = on_codes.get("containerName") in (None, status["name"])
                if named and code != 0 and (code in on_codes["values"]) == (on_codes["operator"] == "In"):
                    return index, rule["action"]
        for wanted in rule.get("onPodConditions", []):
            if any(
                c["type"] == wanted["type"] and c["status"] == wanted.get("status", "True")
                for c in pod["status"]["conditions"]
            ):
                return index, rule["action"]
    return None, "Count"


def termination_message(output: str) -> str:
    """What the built-in worker wrote to /dev/termination-log: the message of its last
    `tfk8s <task>: error: <message>` line (worker/__main__._say_cause writes both)."""
    lines = [line for line in output.splitlines() if re.match(ERROR_LINE_PATTERN, line)]
    assert lines, f"no error line in the task's output: {output[-2000:]}"
    return re.sub(ERROR_LINE_PATTERN, "", lines[-1])


def first_pod_failure(spec: ClusterSpec, role: str, exit_code: int, message: str) -> tuple[str, ClusterStatus]:
    """The Job controller's action on `role`'s first failed pod, and `status` after it: a FailJob
    fails the Job (its condition as the controller writes it); any other action leaves the Job
    active, its replacement pod not yet created."""
    jobs = jobs_of(spec)
    job = jobs[role]
    pod = failed_pod(job, exit_code, message)
    index, action = _matching_rule(job, pod)
    job["status"] = {"failed": int(action == "Count"), "active": 0}
    if action == "FailJob":
        job["status"]["conditions"] = [
            {
                "type": "Failed",
                "status": "True",
                "reason": "PodFailurePolicy",
                "message": f"Container tensorflow for pod {NAMESPACE}/{pod['metadata']['name']} failed with exit "
                f"code {exit_code} matching FailJob rule at index {index}",
            }
        ]
    for other in jobs.values():
        other.setdefault("status", {"active": 1})
    return action, compute_status(spec.name, NAMESPACE, list(jobs.values()), [pod])
