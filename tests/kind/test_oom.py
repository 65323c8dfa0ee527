"""A chief OOM-killed under a memory limit: `status` says OOMKilled and the limit, never the TF
start-up log line that FallbackToLogsOnError leaves as the termination message."""

from __future__ import annotations

import json

import pytest
from test_e2e import cli, wait_for, write_spec
from test_network import measured

pytestmark = pytest.mark.kind

LIMIT = "128Mi"  # importing TensorFlow alone takes more (187 MiB peak RSS in the worker image)


@pytest.mark.tf_trainings(1)
def test_an_oom_killed_chief_is_reported_with_its_limit(kind_cluster, worker_image, namespace, tmp_path):
    name = "oom"
    spec = write_spec(
        tmp_path,
        name,
        namespace,
        None,
        worker_image,
        strategy="mirrored",
        roles={"chief": {"replicas": 1, "resources": {"limits": {"memory": LIMIT}}}},
        backoffLimit=0,
    )
    cli(kind_cluster, "submit", str(spec), check=True, timeout=300)
    seen = {}

    def failed():
        result = cli(kind_cluster, "status", name, "-n", namespace, "-o", "json", timeout=60)
        status = json.loads(result.stdout) if result.returncode == 0 else {}
        seen.update(status)
        return status.get("phase") == "Failed"

    try:
        wait_for(failed, 600, "the chief to be OOM-killed")
        text = cli(kind_cluster, "status", name, "-n", namespace, timeout=60).stdout
    finally:
        cli(kind_cluster, "delete", name, "-n", namespace, timeout=300)
    chief = next(r for r in seen["roles"] if r["role"] == "chief")
    assert seen["exitCode"] == 137, seen
    assert seen["message"].startswith(
        f"chief failed: OOMKilled: exit code 137, the task exceeded its memory limit {LIMIT}"
    ), seen["message"]
    assert chief["reason"].startswith("OOMKilled") and LIMIT in chief["reason"], chief
    assert "AVX" not in text and "oneDNN" not in text and "I0000" not in text, text
    measured(f"oom: a chief under a {LIMIT} memory limit: `status` said: {text.splitlines()[0]}")
