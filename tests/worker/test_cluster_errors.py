"""The chief's one-line reason when it loses part of a parameter-server cluster: it names the
tasks TF's error names (ps or workers) with their addresses, never blames the ps for a worker
loss. The errors are real TF exception types carrying the text TF's runtime writes."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from worker.context import TaskContext  # noqa: E402
from worker.contract import Role, Strategy  # noqa: E402
from worker.roles.coordinator import _lost_parameter_server  # noqa: E402

TASK = TaskContext(
    strategy=Strategy.PARAMETER_SERVER,
    role=Role.CHIEF,
    index=0,
    cluster={"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222", "p1:2222"]},
    model_dir="/ckpt/x",
    program_module="worker.examples.fashion_mnist",
    peer_timeout_seconds=60,
)


def reason(message: str) -> str:
    exc = tf.errors.UnavailableError(None, None, message)
    return str(_lost_parameter_server(exc, TASK, "step 120", "resume from ckpt-100"))


def test_a_lost_ps_is_named_with_its_address():
    text = reason(
        "Graph execution error:\n\nDetected at node x\nFailed to connect to all "
        "addresses /job:ps/replica:0/task:1/device:CPU:0"
    )
    assert text.startswith("lost contact with ps-1 (p1:2222) at step 120 (UnavailableError: ")
    assert "ps holds the only copy" in text


def test_lost_workers_are_not_reported_as_a_lost_ps():
    text = reason(
        "Worker /job:worker/replica:0/task:0 and /job:worker/replica:0/task:1 have been unavailable for too long"
    )
    assert text.startswith("lost the workers worker-0 (w0:2222), worker-1 (w1:2222) at step 120")
    assert "ps" not in text.split("(")[0] and "only copy" not in text


def test_an_error_naming_no_task_says_so():
    text = reason("Socket closed")
    assert "the cluster (TF's error names no task; ps: p0:2222, p1:2222)" in text
