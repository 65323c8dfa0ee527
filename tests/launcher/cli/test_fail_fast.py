"""Deterministic start-up failures end at once and say why, in one line: a local run refuses
to start where the built-in worker cannot import its training stack, and the worker itself
exits EXIT_CONFIG (not retried) with a one-line reason that reaches `status`.

"Without TensorFlow" is a real environment: a venv whose only packages are links to this
interpreter's site-packages minus tensorflow and tf_keras.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from local_clusters import REPO_ROOT, measure

from worker import contract, errors

HIDDEN = ("tensorflow", "tf_keras")  # names whose site-packages entries the venv leaves out


@pytest.fixture(scope="module")
def python_without_tensorflow(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("no-tf")
    venv.EnvBuilder(with_pip=False).create(root / "venv")
    packages = root / "site-packages"
    packages.mkdir()
    for directory in site.getsitepackages():
        for entry in Path(directory).iterdir():
            if not entry.name.startswith(HIDDEN) and not (packages / entry.name).exists():
                (packages / entry.name).symlink_to(entry)
    python = root / "venv" / "bin" / "python"
    venv_site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(venv_site, "launcher-deps.pth").write_text(f"{packages}\n")
    found = subprocess.run(
        [
            python,
            "-c",
            "import importlib.util as u; print(u.find_spec('tensorflow'), u.find_spec('pydantic') is not None)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert found == ["None", "True"], found  # TF hidden, the launcher's deps there
    return str(python)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TFK8S_", "TF_CONFIG"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def test_a_local_run_without_tensorflow_is_refused_in_one_line(python_without_tensorflow, tmp_path):
    workdir = tmp_path / "runs"
    started = time.monotonic()
    done = subprocess.run(
        [
            python_without_tensorflow,
            "-m",
            "launcher",
            "submit",
            str(REPO_ROOT / "examples" / "mirrored.yaml"),
            "--local",
            "--workdir",
            str(workdir),
        ],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {contract.missing_module_message('tensorflow')} (a local run's tasks use "
        f"{python_without_tensorflow}; nothing was started)\n"
    )
    assert "pip install '.[worker]'" in done.stderr
    assert not workdir.exists()
    measure(f"local submit without tensorflow refused in {elapsed:.2f} s")


def test_the_worker_without_tensorflow_exits_config_in_one_line(python_without_tensorflow):
    """Past the preflight (a pod whose image lacks TensorFlow): exit 2, which the Jobs'
    podFailurePolicy does not retry, and one line saying what to install, no traceback."""
    env = _env()
    env.update(
        {
            contract.TF_CONFIG: json.dumps(
                {"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}}
            ),
            contract.STRATEGY: "mirrored",
            contract.MODEL_DIR: "/tmp/unused",
        }
    )
    done = subprocess.run(
        [python_without_tensorflow, "-m", "worker", "--steps", "2"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == errors.EXIT_CONFIG, done.stderr
    assert done.stderr == (f"tfk8s chief-0: error: {contract.missing_module_message('tensorflow')}\n")


def test_the_termination_message_goes_only_into_a_file_the_kubelet_mounted(tmp_path):
    mounted = tmp_path / "termination-log"
    mounted.write_text("")
    errors.write_termination_message("--data x.npz: no such file", str(mounted))
    assert mounted.read_text() == "--data x.npz: no such file"
    absent = tmp_path / "not-in-a-pod"
    errors.write_termination_message("anything", str(absent))
    assert not absent.exists()


def test_missing_module_messages_cover_only_the_training_stack():
    assert contract.missing_module_message("tensorflow.python") == (
        "tensorflow is not installed in this Python environment: pip install '.[worker]' (from a tfk8s checkout)"
    )
    assert "--no-deps" in contract.missing_module_message("tf_keras")
    assert contract.missing_module_message("pandas") is None
    assert contract.worker_needs(True)[-1] == "tf_keras"
    assert "tf_keras" not in contract.worker_needs(False)


@pytest.mark.process
def test_a_missing_data_file_fails_the_local_cluster_after_one_attempt(tmp_path):
    """A deterministic failure after TensorFlow loaded (the built-in program's --data file is
    not there): one attempt, not backoffLimit + 1, and the reason in `status -o json`."""
    spec = tmp_path / "missing-data.yaml"
    spec.write_text(
        "name: missing-data\nstrategy: mirrored\n"
        "program: {args: [--data, /nonexistent/train.npz, --steps, '4']}\n"
        "roles: {chief: {replicas: 1}}\nbackoffLimit: 6\n"
    )
    workdir = tmp_path / "runs"
    cli = [sys.executable, "-m", "launcher"]
    started = time.monotonic()
    submitted = subprocess.run(
        [*cli, "submit", str(spec), "--local", "--workdir", str(workdir)],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    assert submitted.returncode == errors.EXIT_CONFIG, submitted.stdout[-3000:]
    shown = subprocess.run(
        [*cli, "status", "missing-data", "--local", "--workdir", str(workdir), "-o", "json"],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    status = json.loads(shown.stdout)
    reason = (
        "--data /nonexistent/train.npz: no such file on this task's filesystem: mount it into the pod, or copy it there"
    )
    assert status["phase"] == "Failed" and status["exitCode"] == errors.EXIT_CONFIG
    assert status["message"] == f"chief-0 exited 2 (deterministic: not retried): {reason}"
    assert status["roles"][0]["failed"] == 1
    log = (workdir / "missing-data" / "logs" / "chief-0.log").read_text()
    assert log.count("=== tfk8s: chief-0 attempt") == 1
    measure(f"local missing --data file: Failed after 1 attempt in {elapsed:.1f} s")
