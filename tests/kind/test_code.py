"""`code:` on a real cluster: a dir of two modules (one imports the other), in no image, runs
on the stock worker image as `program.module` and as `command:`; a changed file resubmitted
(--replace) runs in new pods. Measures submit -> first step, to quote against the derived-image
route (docker build FROM tfk8s/worker + kind load + submit; README "Your own code")."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml
from local_clusters import measure
from test_e2e import cli, progress

from launcher.code_shipping import code_bundle

pytestmark = pytest.mark.kind
DEMO = Path(__file__).resolve().parents[1] / "code_demo" / "v1"
STEPS = 20


def _spec(tmp_path: Path, name: str, namespace: str, image: str, run: dict) -> Path:
    if not (tmp_path / "src").exists():
        shutil.copytree(DEMO, tmp_path / "src")
    spec = {
        "name": name,
        "namespace": namespace,
        "image": image,
        "imagePullPolicy": "Never",
        "strategy": "mirrored",
        "code": "./src",
        "roles": {"chief": {"replicas": 1}},
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": 600,
        **run,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _logs(cluster, namespace: str, name: str) -> str:
    r = cluster.kubectl(
        "-n",
        namespace,
        "logs",
        "-l",
        f"app.kubernetes.io/instance={name}",
        "--tail=-1",
        "-c",
        "tensorflow",
        check=False,
    )
    return r.stdout if r.returncode == 0 else ""


def _wait_done(cluster, namespace: str, name: str, timeout: float = 300) -> None:
    cluster.kubectl(
        "-n",
        namespace,
        "wait",
        "--for=condition=complete",
        f"job/{name}-chief",
        f"--timeout={int(timeout)}s",
        timeout=timeout + 30,
    )


def _first_step(cluster, namespace: str, name: str, started: float, timeout: float = 300) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.get("event") == "step" for p in progress(_logs(cluster, namespace, name))):
            return time.monotonic() - started
        time.sleep(1)
    raise AssertionError(f"{name}: no step within {timeout} s:\n{_logs(cluster, namespace, name)}")


@pytest.mark.tf_trainings(2)
def test_program_module_from_code_and_resubmit_after_an_edit(kind_cluster, namespace, worker_image, tmp_path):
    path = _spec(
        tmp_path,
        "codemod",
        namespace,
        worker_image,
        {"program": {"module": "mytrain", "args": ["--steps", str(STEPS), "--global-batch-size", "32"]}},
    )
    started = time.monotonic()
    cli(kind_cluster, "submit", str(path), check=True)
    first = _first_step(kind_cluster, namespace, "codemod", started)
    measure(f"kind code: submit -> first step {first:.1f} s (program.module from code:, no image build, no kind load)")
    _wait_done(kind_cluster, namespace, "codemod")
    assert "tfk8s-code-marker v1" in _logs(kind_cluster, namespace, "codemod")

    # the same code again: nothing to do
    again = cli(kind_cluster, "submit", str(path), check=True)
    assert "unchanged" in again.stdout + again.stderr
    # one file edited: a different spec, said so; --replace runs the new code in new pods
    (tmp_path / "src" / "mylib" / "marker.py").write_text('MARKER = "v2"\n')
    refused = cli(kind_cluster, "submit", str(path))
    assert refused.returncode == 2 and "its code changed" in refused.stderr
    started = time.monotonic()
    cli(kind_cluster, "submit", str(path), "--replace", check=True)
    first = _first_step(kind_cluster, namespace, "codemod", started)
    measure(f"kind code: resubmit --replace after an edit -> first step {first:.1f} s (old cluster deleted first)")
    _wait_done(kind_cluster, namespace, "codemod")
    logs = _logs(kind_cluster, namespace, "codemod")
    assert "tfk8s-code-marker v2" in logs and "tfk8s-code-marker v1" not in logs
    maps = kind_cluster.kubectl("-n", namespace, "get", "configmaps", "-o", "name").stdout
    bundle = code_bundle.pack(tmp_path / "src")
    assert f"configmap/{bundle.object_name('codemod')}" in maps.split()


@pytest.mark.tf_trainings(1)  # counted: the runtime count cannot see that run.py imports no TensorFlow
def test_command_from_code_with_env_in_its_order(kind_cluster, namespace, worker_image, tmp_path):
    """A command from shipped code runs in the code dir; its `env` in the order written reaches
    the pod: Kubernetes expands B=$(A)-x from the earlier A=1 (sorted or after a valueFrom, B
    came first and stayed literal), and LOG_DIR from a valueFrom written before it
    (docs/spec.md#env)."""
    env = [
        {"name": "B_AFTER", "value": "$(A)-late"},  # written before A: stays as written
        {"name": "A", "value": "1"},
        {"name": "B", "value": "$(A)-x"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "LOG_DIR", "value": "/logs/$(POD_NAME)"},
    ]
    path = _spec(tmp_path, "codecmd", namespace, worker_image, {"command": ["python", "run_env.py"], "env": env})
    (tmp_path / "src" / "run_env.py").write_text(
        "import os\n"
        "import runpy\n"
        "for name in ('B_AFTER', 'B', 'LOG_DIR', 'POD_NAME'):\n"
        "    print(f'tfk8s-env {name}={os.environ[name]}', flush=True)\n"
        "runpy.run_path('run.py', run_name='__main__')\n"
    )
    cli(kind_cluster, "submit", str(path), check=True)
    _wait_done(kind_cluster, namespace, "codecmd")
    logs = _logs(kind_cluster, namespace, "codecmd")
    assert "tfk8s-code-marker v1 cwd=/opt/tfk8s/code" in logs
    lines = {line for line in logs.splitlines() if line.startswith("tfk8s-env ")}
    pod = next(line.split("=", 1)[1] for line in lines if line.startswith("tfk8s-env POD_NAME="))
    assert pod.startswith("codecmd-chief-"), lines
    assert lines == {
        "tfk8s-env B_AFTER=$(A)-late",
        "tfk8s-env B=1-x",
        f"tfk8s-env LOG_DIR=/logs/{pod}",
        f"tfk8s-env POD_NAME={pod}",
    }


def test_configmap_limit_on_the_api_server(kind_cluster, namespace):
    """The largest archive the launcher ships (code_bundle.LIMIT, incompressible) is accepted;
    one byte over the API server's 1 MiB is refused (why the launcher stops at 0.95 MiB)."""

    def configmap(size: int) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "immutable": True,
            "metadata": {"name": f"limit-{size}", "namespace": namespace},
            "binaryData": {"code.tar.gz": base64.b64encode(os.urandom(size)).decode()},
        }

    ok = kind_cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(configmap(code_bundle.LIMIT)), check=False
    )
    assert ok.returncode == 0, ok.stderr
    over = kind_cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(configmap(1024 * 1024 + 1)), check=False
    )
    assert over.returncode != 0 and "1048576" in over.stderr, over.stderr
    measure(
        f"kind code: a ConfigMap of {code_bundle.LIMIT} archive bytes (0.95 MiB) accepted, "
        "1048577 refused by the API server"
    )
