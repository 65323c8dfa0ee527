"""A failed task as Kubernetes would show it: the pod the kubelet leaves, the action the Job
controller takes on it (its podFailurePolicy), the Job's status after it, and `status`'s verdict
on them (launcher/status/lifecycle.compute_status). The parity tests feed it what a real `--local`
task printed and exited with, so both backends judge one fault (issue 60)."""

from __future__ import annotations

import re

from launcher import k8s_contract
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


def _pod_of(job: dict, index: int, suffix: str) -> dict:
    """A pod's metadata and spec as `job`'s controller creates it for task `index`."""
    template = job["spec"]["template"]
    return {
        "metadata": {
            "name": f"{job['metadata']['name']}-{index}-{suffix}",
            "namespace": NAMESPACE,
            "labels": template["metadata"]["labels"],
            "annotations": {k8s_contract.INDEX_ANNOTATION: str(index)},
        },
        "spec": template["spec"],
    }


def failed_pod(job: dict, exit_code: int, message: str = "", conditions: tuple[dict, ...] = (), index: int = 0) -> dict:
    """A pod of `job` (its completion `index`) whose task container ended with `exit_code`, as
    the kubelet reports it (restartPolicy Never: phase Failed, the container terminated with
    reason Error)."""
    template = job["spec"]["template"]
    return {
        **_pod_of(job, index, "x7k2p"),
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


def _fail_job(job: dict, pod: dict, exit_code: int, index: int) -> dict:
    """The Failed condition the Job controller writes when a FailJob rule matched."""
    said = (
        f"Container tensorflow for pod {NAMESPACE}/{pod['metadata']['name']} failed with exit code {exit_code} "
        f"matching FailJob rule at index {index}"
    )
    return {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": said}


def running_pod(job: dict, index: int) -> dict:
    """A pod of `job`'s task `index` whose containers run, as the kubelet reports it."""
    template = job["spec"]["template"]
    return {
        **_pod_of(job, index, "r5t8q"),
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {"name": c["name"], "ready": True, "restartCount": 0, "image": c["image"], "state": {"running": {}}}
                for c in template["spec"]["containers"]
            ],
        },
    }


def _status(spec: ClusterSpec, jobs: dict[str, dict], pod: dict) -> ClusterStatus:
    """`status` with `pod` failed and every other task of the cluster running."""
    pods = [pod]
    for job in jobs.values():
        job.setdefault("status", {"active": job["spec"].get("parallelism", 1)})
        pods += [
            running_pod(job, index)
            for index in range(job["spec"].get("parallelism", 1))
            if _pod_of(job, index, "x7k2p")["metadata"]["name"] != pod["metadata"]["name"]
        ]
    return compute_status(spec.name, NAMESPACE, list(jobs.values()), pods)


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
        job["status"]["conditions"] = [_fail_job(job, pod, exit_code, index)]
    return action, _status(spec, jobs, pod)


def out_of_retries(
    spec: ClusterSpec, role: str, exit_code: int, message: str, index: int = 0
) -> tuple[list[str], ClusterStatus]:
    """The Job controller's action on each of the pods of `role`'s task `index` failing alike,
    until the Job fails (a FailJob rule at once; Count past its backoffLimit: BackoffLimitExceeded,
    or past the index's backoffLimitPerIndex: the index failed, MaxFailedIndexesExceeded), and
    `status` then; the other Jobs still active. A pod the policy ignores would be replaced
    without end: an AssertionError."""
    jobs = jobs_of(spec)
    job = jobs[role]
    pod = failed_pod(job, exit_code, message, index=index)
    per_index = job["spec"].get("backoffLimitPerIndex")
    limit = job["spec"]["backoffLimit"] if per_index is None else per_index
    actions: list[str] = []
    status: dict = {"active": 0}
    while True:
        rule, action = _matching_rule(job, pod)
        actions.append(action)
        assert action != "Ignore", f"{role}: exit {exit_code} is ignored by {job['spec'].get('podFailurePolicy')}"
        if action == "FailJob":
            condition = _fail_job(job, pod, exit_code, rule)
            break
        if actions.count("Count") > limit:
            if per_index is None:
                reason, said = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            else:
                status["failedIndexes"] = str(index)
                reason = "MaxFailedIndexesExceeded"
                said = "Job has exceeded the specified maximal number of failed indexes"
            condition = {"type": "Failed", "status": "True", "reason": reason, "message": said}
            break
    job["status"] = {**status, "failed": actions.count("Count"), "conditions": [condition]}
    return actions, _status(spec, jobs, pod)
