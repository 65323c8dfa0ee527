"""A deterministic start-up failure on a real cluster: one pod attempt, the Job failed by its
podFailurePolicy (not backoffLimit restarts), and the worker's one line in `status`, read
from the pod's termination message."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import yaml
from support import REPO, wait_until

pytestmark = pytest.mark.kind
INSTANCE = "app.kubernetes.io/instance"


def _cli(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args, "--kubeconfig", cluster.kubeconfig, "--context", cluster.context],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


@pytest.mark.tf_trainings(1)
def test_a_missing_data_file_fails_the_cluster_at_once_with_the_reason(
    kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path
):
    name = "missingdata"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "namespace": namespace,
                "image": worker_image,
                "strategy": "mirrored",
                "program": {"args": ["--data", "/nonexistent/train.npz", "--steps", "4"]},
                "roles": {"chief": {"replicas": 1}},
                "backoffLimit": 6,
                "checkpoint": {
                    "dir": f"/ckpt/{name}",
                    "volume": {"persistentVolumeClaim": {"claimName": checkpoint_pvc.claim_name}},
                },
                "ttlSecondsAfterFinished": 600,
            }
        )
    )
    started = time.monotonic()
    submitted = _cli(kind_cluster, "submit", str(spec), "--wait")
    elapsed = time.monotonic() - started
    print(submitted.stdout[-3000:], submitted.stderr[-3000:])
    assert submitted.returncode == 2, submitted.stderr

    def chief_job() -> dict | None:
        jobs = kind_cluster.get_json("jobs", "-n", namespace, "-l", f"{INSTANCE}={name}")["items"]
        return next(
            (
                j
                for j in jobs
                if any(
                    c["type"] == "Failed" and c["status"] == "True"
                    for c in (j.get("status") or {}).get("conditions") or []
                )
            ),
            None,
        )

    job = wait_until(chief_job, 60, "the chief's Job to be marked Failed")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy", failed
    pods = kind_cluster.get_json("pods", "-n", namespace, "-l", f"{INSTANCE}={name}")["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]  # one attempt, no retry
    reason = (
        "--data /nonexistent/train.npz: no such file on this task's filesystem: mount it into the pod, or copy it there"
    )
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    # The worker's own file, not the log tail FallbackToLogsOnError would have used instead.
    assert terminated["message"] == reason and terminated["exitCode"] == 2, terminated

    shown = _cli(kind_cluster, "status", name, "-n", namespace, "-o", "json")
    status = json.loads(shown.stdout)
    assert status["phase"] == "Failed" and status["exitCode"] == 2, status
    assert status["message"].startswith(f"chief failed: {reason} (PodFailurePolicy: "), status
    assert status["roles"][0]["reason"] == f"Error: {reason}", status
    print(f"MEASURE kind missing --data file: Failed after 1 pod attempt, submit --wait returned in {elapsed:.1f} s")


def test_a_tfjob_with_restart_policy_never_fails_at_its_first_failure(kind_cluster, worker_image, namespace, tmp_path):
    """TFJob's default restartPolicy (Never): the first failed pod fails the TFJob. Submitted as
    the TFJob file itself, a chief of the team's own that exits 1 (no TensorFlow: the smallest
    real pod) fails the cluster after one attempt, not after backoffLimit's retries."""
    name = "never-once"
    tfjob = tmp_path / f"{name}.yaml"
    tfjob.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "tfReplicaSpecs": {
                        "Chief": {
                            "replicas": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "tensorflow",
                                            "image": worker_image,
                                            "command": [
                                                "python3",
                                                "-c",
                                                "import sys; print('input shard missing'); sys.exit(1)",
                                            ],
                                        }
                                    ]
                                }
                            },
                        }
                    }
                },
            }
        )
    )
    started = time.monotonic()
    submitted = _cli(kind_cluster, "submit", str(tfjob), "--wait")
    elapsed = time.monotonic() - started
    print(submitted.stdout[-2000:], submitted.stderr[-2000:])
    assert "the first failed pod fails the cluster, as under TFJob" in submitted.stderr, submitted.stderr
    assert submitted.returncode == 1, submitted.stderr
    pods = kind_cluster.get_json("pods", "-n", namespace, "-l", f"{INSTANCE}={name}")["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]  # one attempt, no retry
    status = json.loads(_cli(kind_cluster, "status", name, "-n", namespace, "-o", "json").stdout)
    assert status["phase"] == "Failed" and status["exitCode"] == 1, status
    assert "input shard missing" in status["message"], status
    print(f"MEASURE kind TFJob restartPolicy Never, chief exit 1: Failed after 1 pod attempt in {elapsed:.1f} s")
