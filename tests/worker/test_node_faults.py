"""Node faults (exit 9, retried and counted) against the program's errors (exit 2, not retried):
the worker's classification where it happens, without TensorFlow (docs/lifecycle.md's table)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from local_clusters import REPO_ROOT

from worker import contract, errors, node_faults, program
from worker.lifecycle import peers

LIBCUDA = "libcuda.so.1: cannot open shared object file: No such file or directory"


@pytest.fixture
def on_node(monkeypatch):
    monkeypatch.setenv(contract.NODE_NAME, "gpu-node-7")
    return "gpu-node-7"


def _program_module(tmp_path, monkeypatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_a_shared_library_missing_at_the_programs_import_is_a_node_fault(tmp_path, monkeypatch, on_node):
    module = _program_module(tmp_path, monkeypatch, "needs_cuda", f"raise ImportError({LIBCUDA!r})\n")
    with pytest.raises(errors.NodeFault) as raised:
        program.load(module)
    assert raised.value.exit_code == contract.EXIT_NODE_FAULT == 9
    line = str(raised.value)
    assert line.startswith(f"node fault on node {on_node}: program module 'needs_cuda' does not import: ")
    assert f"ImportError: {LIBCUDA} (shared library libcuda.so.1 missing or unreadable on this node)" in line
    assert "kubectl cordon gpu-node-7" in line and "\n" not in line


def test_any_other_import_error_of_the_program_stays_its_own_fault(tmp_path, monkeypatch):
    module = _program_module(tmp_path, monkeypatch, "bad_name", "from os import no_such_name\n")
    with pytest.raises(errors.ConfigError) as raised:
        program.load(module)
    assert type(raised.value) is errors.ConfigError and raised.value.exit_code == contract.EXIT_CONFIG
    assert "does not import: ImportError: cannot import name 'no_such_name'" in str(raised.value)


@pytest.mark.parametrize(
    "message, library",
    [
        (LIBCUDA, "libcuda.so.1"),
        (
            "/usr/lib/x86_64-linux-gnu/libcudnn.so.8: cannot open shared object file: Permission denied",
            "/usr/lib/x86_64-linux-gnu/libcudnn.so.8",
        ),
        ("Error loading shared library libstdc++.so.6: No such file or directory", "libstdc++.so.6"),
        ("cannot import name 'x' from 'y'", None),
        ("No module named 'z'", None),
    ],
)
def test_which_import_errors_name_a_missing_shared_library(message, library):
    assert node_faults.missing_shared_library(ImportError(message)) == library


def test_the_tasks_own_port_taken_is_a_node_fault_naming_the_node(on_node):
    with socket.socket() as taken:  # no SO_REUSEADDR: a listener that really holds the port
        taken.bind(("", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(errors.NodeFault) as raised:
            with peers.hold_own_port(f"127.0.0.1:{port}", linger_seconds=0):
                pass
    assert raised.value.exit_code == contract.EXIT_NODE_FAULT
    assert str(raised.value).startswith(f"node fault on node {on_node}: this task's own port {port} is in use")


def test_a_node_fault_names_the_hostname_without_the_launchers_node_name(monkeypatch):
    monkeypatch.delenv(contract.NODE_NAME, raising=False)
    line = str(errors.NodeFault("x"))
    assert line.startswith(f"node fault on node {socket.gethostname()}: x; retried in a new attempt"), line
    assert line.endswith("if it repeats, repair it") and "kubectl" not in line


@pytest.mark.parametrize(
    "given, visible, fault", [(0, 0, False), (1, 1, False), (2, 4, False), (1, 0, True), (4, 2, True)]
)
def test_fewer_gpus_than_given_is_a_node_fault(given, visible, fault, on_node):
    found = node_faults.missing_gpus(given, visible)
    assert (found is not None) == fault
    if fault:
        assert str(found).startswith(f"node fault on node {on_node}: this task was given {given} GPU(s)")
        assert f"TensorFlow sees {visible}" in str(found)


def test_the_gpus_given_come_from_the_launcher():
    assert node_faults.gpus_given({}) == 0
    assert node_faults.gpus_given({contract.GPUS: "2"}) == 2
    with pytest.raises(errors.ConfigError, match="TFK8S_GPUS='two' must be a whole number"):
        node_faults.gpus_given({contract.GPUS: "two"})


SCALE_KEYS = {
    "keras 3": ["optimizer/dynamic_scale", "optimizer/inner_optimizer/iteration"],
    "tf_keras": ["optimizer/loss_scale/current_loss_scale", "optimizer/loss_scale/good_steps"],
}


@pytest.mark.parametrize("keras", sorted(SCALE_KEYS))
def test_a_loss_scale_only_in_the_checkpoint_on_a_node_without_a_gpu_is_a_node_fault(keras, on_node):
    found = node_faults.lost_loss_scale(SCALE_KEYS[keras], "mixed_bfloat16", visible_gpus=0)
    assert found is not None and found.exit_code == contract.EXIT_NODE_FAULT
    assert str(found).startswith(f"node fault on node {on_node}: the checkpoint was trained with loss scaling")
    assert "TensorFlow sees no GPU on this node, so this task would train mixed_bfloat16" in str(found)
    # with a GPU, or without --mixed-precision's choice, the program changed: not the node
    assert node_faults.lost_loss_scale(SCALE_KEYS[keras], "mixed_bfloat16", visible_gpus=1) is None
    assert node_faults.lost_loss_scale(SCALE_KEYS[keras], "float32", visible_gpus=0) is None
    assert node_faults.lost_loss_scale(["model/dense/kernel"], "mixed_bfloat16", visible_gpus=0) is None


def test_tensorflow_that_cannot_load_a_shared_library_is_a_node_fault(tmp_path):
    """`python -m worker` on a node whose TensorFlow cannot load libcuda (a stand-in package
    raising the loader's ImportError: no such node here) exits 9 with one line naming the
    node, no longer 1 (an unexpected error)."""
    broken = tmp_path / "tensorflow"
    broken.mkdir()
    (broken / "__init__.py").write_text(f"raise ImportError({LIBCUDA!r})\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TFK8S_", "TF_CONFIG"))}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
            "TF_CONFIG": json.dumps({"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}}),
            contract.STRATEGY: "mirrored",
            contract.MODEL_DIR: str(tmp_path / "model"),
            contract.NODE_NAME: "gpu-node-7",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "worker"], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == contract.EXIT_NODE_FAULT, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tfk8s chief-0: error: node fault on node gpu-node-7: tensorflow does not import: "), last
    assert f"ImportError: {LIBCUDA} (shared library libcuda.so.1 missing or unreadable" in last
    assert "Traceback (most recent call last)" in done.stderr  # the details stay in the log
