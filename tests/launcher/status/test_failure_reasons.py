"""The true reason of a task's end, from pods shaped as the API server returns them: Kubernetes'
record (OOMKilled with the limit, Evicted, deadline, taint/GC deletion) before the task's words,
and TF's C++ logging never a reason."""

from pathlib import Path

import pytest

from launcher.status.failure_reasons import failure_reason
from launcher.status.lifecycle import compute_status
from worker.exit_cause import exit_cause, is_tf_log_noise

OUTPUTS = Path(__file__).resolve().parents[2] / "worker" / "outputs"
TF_START_UP_TAIL = (
    "2026-11-24 16:38:07.123456: I tensorflow/core/util/port.cc:153] oneDNN custom operations are "
    "on. You may see slightly different numerical results due to floating-point round-off errors "
    "from different computation orders. To turn them off, set the environment variable "
    "`TF_ENABLE_ONEDNN_OPTS=0`.\n"
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1764002287.345678      12 cpu_feature_guard.cc:210] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.\n"
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.\n"
    'tfk8s-progress {"event": "step", "step": 120, "loss": 0.4}\n'
)


def chief_pod(terminated=None, phase="Failed", limit="512Mi", program="worker.examples.fashion_mnist", **status):
    """The chief's pod; `program` None: a command of the user's (no TFK8S_PROGRAM in its env)."""
    container = {
        "name": "tensorflow",
        "image": "tfk8s/worker:dev",
        "env": [{"name": "TFK8S_PROGRAM", "value": program}] if program else [],
        "resources": {"limits": {"memory": limit}} if limit else {},
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    cs = {
        "name": "tensorflow",
        "restartCount": 0,
        "ready": False,
        "lastState": {},
        "state": {
            "terminated": {
                "containerID": "containerd://0f3a",
                "startedAt": "2026-11-24T16:38:05Z",
                "finishedAt": "2026-11-24T16:39:40Z",
                **terminated,
            }
        }
        if terminated
        else {"waiting": {"reason": "ContainerCreating"}},
    }
    return {
        "metadata": {
            "name": "c-chief-0-abcde",
            "namespace": "team",
            "creationTimestamp": "2026-11-24T16:38:00Z",
            "labels": {"app.kubernetes.io/component": "chief"},
            "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
        },
        "spec": {"nodeName": "tfk8s-worker", "containers": [container]},
        "status": {"phase": phase, "containerStatuses": [cs], **status},
    }


def failed_chief_job(reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit"):
    return {
        "metadata": {
            "name": "c-chief",
            "labels": {"app.kubernetes.io/component": "chief", "tfk8s.io/strategy": "mirrored"},
        },
        "spec": {"completions": 1},
        "status": {
            "failed": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": reason, "message": message}],
        },
    }


def test_tf_cpp_logging_is_noise_and_a_real_error_is_not():
    assert all(is_tf_log_noise(line) for line in TF_START_UP_TAIL.splitlines()[:4])
    assert not is_tf_log_noise("ValueError: bad shard")
    assert exit_cause(TF_START_UP_TAIL) is None
    assert exit_cause("Traceback:\nValueError: bad shard\n" + TF_START_UP_TAIL) == "ValueError: bad shard"


def test_an_oom_killed_chief_is_reported_as_oomkilled_with_its_limit():
    pod = chief_pod({"exitCode": 137, "reason": "OOMKilled", "message": TF_START_UP_TAIL})
    s = compute_status("c", "team", [failed_chief_job()], [pod])
    assert s.phase == "Failed" and s.exit_code == 137
    assert s.message == (
        "chief failed: OOMKilled: exit code 137, the task exceeded its memory "
        "limit 512Mi (BackoffLimitExceeded: Job has reached the specified backoff limit)"
    )
    assert s.roles[0].reason == "OOMKilled: exit code 137, the task exceeded its memory limit 512Mi"
    assert "AVX2" not in s.message
    unlimited = chief_pod({"exitCode": 137, "reason": "OOMKilled"}, limit=None)
    assert "no memory limit set" in failure_reason(
        unlimited, unlimited["status"]["containerStatuses"][0]["state"]["terminated"]
    )


def test_an_evicted_pod_gives_the_kubelets_message():
    kubelet = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
        "91360Ki. Container tensorflow was using 1834676Ki, request is 0, has larger "
        "consumption of memory. "
    )
    pod = chief_pod(
        {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
        },
        reason="Evicted",
        message=kubelet,
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": kubelet}
        ],
    )
    s = compute_status("c", "team", [failed_chief_job()], [pod])
    assert s.message.startswith("chief failed: Evicted: The node was low on resource: memory.")
    assert s.roles[0].reason.startswith("Evicted: The node was low on resource: memory.")


def test_deadline_taint_deletion_and_image_errors_are_named():
    deadline = chief_pod(
        {"exitCode": 143, "reason": "Error", "message": TF_START_UP_TAIL},
        reason="DeadlineExceeded",
        message="Pod was active on the node longer than the specified deadline",
    )
    assert failure_reason(deadline, None) == (
        "DeadlineExceeded: Pod was active on the node longer than the specified deadline"
    )
    gc = chief_pod(
        {"exitCode": 137, "reason": "ContainerStatusUnknown"},
        conditions=[
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists",
            }
        ],
    )
    assert failure_reason(gc, None) == "DeletionByPodGC: PodGC: node no longer exists"
    cannot_run = chief_pod(
        {"exitCode": 128, "reason": "StartError", "message": 'exec: "python": executable file not found in $PATH'}
    )
    s = compute_status("c", "team", [failed_chief_job()], [cannot_run])
    assert s.message.startswith('chief failed: StartError: the container could not start (exec: "python"')


def test_a_task_that_wrote_its_error_keeps_its_own_words():
    pod = chief_pod({"exitCode": 2, "reason": "Error", "message": "tfk8s chief-0: error: --data x.npz: no such file"})
    s = compute_status("c", "team", [failed_chief_job()], [pod])
    assert s.message.startswith("chief failed: --data x.npz: no such file")
    assert s.roles[0].reason == "Error: --data x.npz: no such file"


def test_a_programs_exit_2_is_said_to_be_its_own_and_the_built_in_workers_is_not():
    """The CLI's 2 is a spec error and the built-in worker's 2 a configuration error: a command
    of the user's that exits 2 is said to be the program's code (docs/lifecycle.md, Exit codes)."""
    said = {"exitCode": 2, "reason": "Error", "message": "bad input file\n"}
    own = compute_status("c", "team", [failed_chief_job()], [chief_pod(said, program=None)])
    assert own.message.startswith("chief failed: exited 2 (your program's exit code): bad input file (")
    assert own.exit_code == 2
    builtin = compute_status("c", "team", [failed_chief_job()], [chief_pod(said)])
    assert builtin.message.startswith("chief failed: bad input file (")
    # a signal's exit status (128 + N) is no code of the program's
    killed = compute_status(
        "c", "team", [failed_chief_job()], [chief_pod({"exitCode": 134, "reason": "Error"}, program=None)]
    )
    assert "your program" not in killed.message, killed.message


def test_a_pvc_still_binding_is_pending_not_stuck():
    pod = chief_pod(
        None,
        phase="Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            }
        ],
    )
    pod["status"]["containerStatuses"] = []
    running = {
        "metadata": {
            "name": "c-chief",
            "labels": {"app.kubernetes.io/component": "chief", "tfk8s.io/strategy": "mirrored"},
        },
        "spec": {"completions": 1},
        "status": {"active": 1},
    }
    s = compute_status("c", "team", [running], [pod])
    assert s.phase == "Pending"
    assert s.message.startswith("pod c-chief-0-abcde waits for its PersistentVolumeClaims to bind")


def kubelet_fallback(log: str) -> str:
    """A container's termination message under FallbackToLogsOnError when it wrote none: its
    log's last 80 lines, at most their last 2048 bytes (the kubelet's limits)."""
    tail = "".join(log.splitlines(keepends=True)[-80:]).encode()[-2048:]
    return tail.decode(errors="ignore")


@pytest.mark.parametrize(
    "output, exit_code, cause",
    [
        ("killed", 137, "killed by SIGKILL (signal 9)"),
        ("during_handling", 1, "NameError: name 'undefined_name' is not defined"),
        ("keras3_shape", 1, 'ValueError: Invalid input shape for input Tensor("data:0", shape=(32, 784), dtype='),
        ("per_replica", 1, "ValueError: Attempt to convert a value (PerReplica:{...}) with an unsupported type"),
    ],
)
def test_a_programs_cause_is_read_from_its_log_tail_by_the_one_rule(output, exit_code, cause):
    """A program of the user's writes no termination message: `status` reads its cause from the
    log tail the kubelet put there (tests/worker/outputs: real outputs)."""
    log = (OUTPUTS / f"{output}.log").read_text()
    pod = chief_pod({"exitCode": exit_code, "reason": "Error", "message": kubelet_fallback(log)}, program=None)
    s = compute_status("c", "team", [failed_chief_job()], [pod])
    assert s.message.startswith(f"chief failed: {cause}")  # 1 and 137 mean nothing of ours
    assert s.message.endswith(" (BackoffLimitExceeded: Job has reached the specified backoff limit)")
    assert s.roles[0].reason.startswith(f"Error: {cause}")
