"""What users meet in a team's namespace and with their own edited model, on a real cluster:

- a ResourceQuota on cpu and memory and no LimitRange: a cluster with `code:` (an init
  container) and sized roles trains; one over the quota is refused by the API server, and
  `status` and `submit --wait` say so in one line instead of Pending forever;
- a model edited (a layer widened) and resubmitted onto its checkpoints on a PVC: the first
  attempt fails with the variables and shapes, not a retry loop under the Job's backoff.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from local_clusters import measure
from test_e2e import cli

pytestmark = pytest.mark.kind
DEMO = Path(__file__).resolve().parents[1] / "code_demo" / "v1"
SIZED = {"requests": {"cpu": "200m", "memory": "768Mi"}, "limits": {"cpu": "2", "memory": "3Gi"}}
QUOTA = {"requests.cpu": "2", "requests.memory": "4Gi", "limits.cpu": "6", "limits.memory": "8Gi"}


def _write(tmp_path: Path, name: str, spec: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _code_spec(tmp_path: Path, name: str, namespace: str, image: str, resources: dict, **extra) -> dict:
    src = tmp_path / "src"
    if not src.exists():
        src.mkdir()
        (src / "train.py").write_text("from worker.examples.digits import *  # noqa: F401,F403\n")
    return {
        "name": name,
        "namespace": namespace,
        "image": image,
        "imagePullPolicy": "Never",
        "strategy": "mirrored",
        "code": "./src",
        "backoffLimit": 2,
        "program": {
            "module": "train",
            "args": ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "32"],
        },
        "roles": {"chief": {"replicas": 1, "resources": resources}},
        "ttlSecondsAfterFinished": 600,
        **extra,
    }


@pytest.mark.tf_trainings(1)
def test_a_quota_namespace_trains_sized_clusters_and_says_why_it_refuses_others(
    kind_cluster, worker_image, namespace, tmp_path
):
    kind_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team", "namespace": namespace},
            "spec": {"hard": QUOTA},
        }
    )
    fits = _write(tmp_path, "fits", _code_spec(tmp_path, "fits", namespace, worker_image, SIZED))
    done = cli(kind_cluster, "submit", str(fits), "--wait", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    measure(
        f"kind quota namespace: a sized cluster with code: trained in {done.seconds:.0f} s "
        f"(quota {QUOTA}, no LimitRange)"
    )

    too_big = {"requests": {"cpu": "3", "memory": "1Gi"}, "limits": {"cpu": "3", "memory": "3Gi"}}
    over = _write(tmp_path, "over", _code_spec(tmp_path, "over", namespace, worker_image, too_big))
    started = time.monotonic()
    cli(kind_cluster, "submit", str(over), check=True)
    status, seconds = {}, 0.0
    while time.monotonic() - started < 60:
        result = cli(kind_cluster, "status", "over", "-n", namespace, "-o", "json")
        status = json.loads(result.stdout) if result.returncode == 0 else {}
        if "refused" in status.get("message", ""):
            seconds = time.monotonic() - started
            break
        time.sleep(2)
    print(f"status of the over-quota cluster: {status}")
    assert status.get("phase") == "Stuck", status
    assert status["message"].startswith("the API server refused the chief's pod: pods "), status
    assert "exceeded quota: team" in status["message"], status
    assert seconds <= 30, seconds
    waited = cli(kind_cluster, "submit", str(over), "--replace", "--wait", "--stuck-timeout", "20", timeout=300)
    assert waited.returncode == 1, waited.stdout[-2000:]
    assert "the API server refused the chief's pod" in waited.stdout + waited.stderr
    assert "It is left in place" in waited.stdout + waited.stderr
    measure(
        f"kind quota namespace: an over-quota cluster: `status` said the refusal after "
        f"{seconds:.1f} s: {status['message'][:160]}; `submit --wait` gave up after "
        f"{waited.seconds:.0f} s (--stuck-timeout 20)"
    )


@pytest.mark.tf_trainings(2)
def test_a_widened_layer_on_a_pvc_fails_at_its_first_attempt_with_the_shapes(
    kind_cluster, worker_image, namespace, checkpoint_pvc, tmp_path
):
    src = tmp_path / "src"
    src.mkdir()
    program = src / "train.py"

    def write_program(width: int) -> None:
        program.write_text(
            "import tensorflow as tf\n"
            "from worker.examples.digits import IMAGE_SHAPE, build_dataset, build_optimizer  "
            "# noqa: F401\n\n\n"
            "def build_model():\n"
            "    return tf.keras.Sequential([\n"
            "        tf.keras.Input(shape=IMAGE_SHAPE), tf.keras.layers.Flatten(),\n"
            f"        tf.keras.layers.Dense({width}, activation='relu'),\n"
            "        tf.keras.layers.Dense(10)])\n"
        )

    def spec(steps: int) -> Path:
        data = _code_spec(
            tmp_path,
            "edited",
            namespace,
            worker_image,
            {},
            checkpoint={
                "dir": "/ckpt/edited",
                "volume": {"persistentVolumeClaim": {"claimName": checkpoint_pvc.claim_name}},
            },
        )
        data["program"]["args"][1] = str(steps)
        return _write(tmp_path, "edited", data)

    write_program(64)
    first = cli(kind_cluster, "submit", str(spec(20)), "--wait", timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    write_program(96)
    again = cli(kind_cluster, "submit", str(spec(30)), "--replace", "--wait", timeout=600)
    said = again.stdout + again.stderr
    assert again.returncode != 0, said[-3000:]
    assert "the model does not fit its checkpoint" in said, said[-3000:]
    assert "dense/kernel is (64, 96) in the model, (64, 64) in the checkpoint" in said
    pods = kind_cluster.get_json(
        "-n", namespace, "pods", "-l", "app.kubernetes.io/instance=edited,app.kubernetes.io/component=chief"
    )["items"]
    assert 1 <= len(pods) <= 2, [p["metadata"]["name"] for p in pods]
    status = json.loads(cli(kind_cluster, "status", "edited", "-n", namespace, "-o", "json", check=True).stdout)
    assert status["phase"] == "Failed" and "does not fit its checkpoint" in status["message"]
    measure(
        f"kind widened layer on a PVC: `submit --replace --wait` exited {again.returncode} "
        f"after {again.seconds:.0f} s and {len(pods)} chief pod(s): {status['message'][:200]}"
    )
