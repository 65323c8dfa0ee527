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
    assert f"ImportError: {LIBCUDA} (shared library libcuda.so.1, which the node's GPU driver provides, missing" in line
    assert "kubectl cordon gpu-node-7" in line and "\n" not in line


@pytest.mark.parametrize(
    "library", ["libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "/usr/lib64/libcuda.so.1"]
)
def test_a_library_the_node_provides_is_the_nodes_fault(library, tmp_path, monkeypatch, on_node):
    """What the NVIDIA container toolkit mounts from the host's driver: another node may have it."""
    message = f"{library}: cannot open shared object file: No such file or directory"
    module = _program_module(tmp_path, monkeypatch, "needs_driver", f"raise ImportError({message!r})\n")
    with pytest.raises(errors.NodeFault) as raised:
        program.load(module)
    assert f"(shared library {library}, which the node's GPU driver provides, missing or unreadable" in str(
        raised.value
    )


@pytest.mark.parametrize(
    "library, remedy",
    [
        ("libGL.so.1", "install libgl1 in the image (apt-get install libgl1), or opencv-python-headless"),
        ("libgomp.so.1", "install the system package that provides libgomp.so.1 in the image (Debian/Ubuntu: "),
        ("libcudart.so.12", "libcudart.so.12 is a CUDA runtime library, which comes with the image, not the node"),
        (
            "libcudnn.so.9",
            "libcudnn.so.9 is a CUDA runtime library, which comes with the image, not the node: install TensorFlow "
            "with its CUDA wheels (tensorflow[and-cuda]) or build on a CUDA base image",
        ),
        ("/usr/local/cuda/lib64/libcublasLt.so.12", "libcublasLt.so.12 is a CUDA runtime library"),
    ],
)
def test_a_library_the_image_lacks_fails_once_saying_how_to_install_it(library, remedy, tmp_path, monkeypatch, on_node):
    """Before: a node fault (exit 9, retried on every node alike, `kubectl cordon` a healthy node):
    `import cv2` without libGL in the image is the image's, as is CUDA's runtime, which comes with
    TensorFlow's wheels or the base image."""
    message = f"{library}: cannot open shared object file: No such file or directory"
    module = _program_module(tmp_path, monkeypatch, "needs_gl", f"raise ImportError({message!r})\n")
    with pytest.raises(errors.ConfigError) as raised:
        program.load(module)
    line = str(raised.value)
    assert raised.value.exit_code == contract.EXIT_CONFIG, line
    assert line.startswith(f"program module 'needs_gl' does not import: ImportError: {message} (shared library ")
    assert f"{library} is not in the image: a retry fails alike on every node); {remedy}" in line
    assert "node fault" not in line and "cordon" not in line and "\n" not in line


@pytest.mark.parametrize(
    "body, kind, cause",
    [
        ("undefined_name\n", "NameError", "NameError: name 'undefined_name' is not defined"),
        ("import os\nos.no_such_thing\n", "AttributeError", "AttributeError: module 'os' has no attribute"),
        ("{}['key']\n", "KeyError", "KeyError: 'key'"),
    ],
)
def test_a_program_module_raising_a_deterministic_error_at_import_is_not_retried(
    body, kind, cause, tmp_path, monkeypatch
):
    """Before: the NameError escaped load() to the worker's catch-all, exit 1, retried to backoffLimit."""
    module = _program_module(tmp_path, monkeypatch, "typo_program", body)
    with pytest.raises(errors.ConfigError) as raised:
        program.load(module)
    line = str(raised.value)
    assert raised.value.exit_code == contract.EXIT_CONFIG
    assert line.startswith(f"program module 'typo_program' does not import: {cause}"), line
    assert line.endswith(
        f"({_a(kind)} {kind} is deterministic: not retried); fix the program (its traceback is in the task's log)"
    )
    assert type(raised.value.__cause__).__name__ == kind  # its traceback goes to the log


def _a(kind: str) -> str:
    return "an" if kind[0] in "AEIOU" else "a"


def test_a_program_module_raising_a_transient_error_at_import_is_retried_with_its_cause(tmp_path, monkeypatch):
    module = _program_module(tmp_path, monkeypatch, "flaky_mount", "raise OSError(5, 'Input/output error', '/mnt/d')\n")
    with pytest.raises(errors.Retried) as raised:
        program.load(module)
    assert raised.value.exit_code == contract.EXIT_UNEXPECTED == 1
    assert str(raised.value) == (
        "program module 'flaky_mount' does not import: OSError: [Errno 5] Input/output error: '/mnt/d' "
        "(an OSError may pass: retried)"
    )


def test_the_spec_exception_lists_judge_a_program_modules_import_as_the_exception_check_does(tmp_path, monkeypatch):
    module = _program_module(tmp_path, monkeypatch, "typo_program", "undefined_name\n")
    monkeypatch.setenv(contract.RETRIED_EXCEPTIONS, "NameError")
    with pytest.raises(errors.Retried, match=r"\(NameError is in retriedExceptions: retried\)$"):
        program.load(module)
    module = _program_module(tmp_path, monkeypatch, "flaky_mount", "raise OSError('gone')\n")
    monkeypatch.setenv(contract.FATAL_EXCEPTIONS, "tf.errors.OSError")
    with pytest.raises(errors.ConfigError, match=r"\(OSError is in fatalExceptions: not retried\); fix the program"):
        program.load(module)


LAZY_PROGRAM = """
def build_dataset(split, batch_size, input_context=None, data=None):
    import {imported}  # only when training starts, as a program's augmentation imports cv2
"""


@pytest.mark.parametrize(
    "imported_body, verdict, said",
    [
        (
            "raise ImportError('libGL.so.1: cannot open shared object file: No such file or directory')\n",
            errors.ConfigError,
            "ImportError: libGL.so.1: cannot open shared object file: No such file or directory (shared library "
            "libGL.so.1 is not in the image",
        ),
        (
            f"raise ImportError({LIBCUDA!r})\n",
            errors.NodeFault,
            f"ImportError: {LIBCUDA} (shared library libcuda.so.1, ",
        ),
        ("import no_such_package_here\n", errors.ConfigError, "'no_such_package_here' is not installed in this Python"),
        ("from os import no_such_name\n", errors.ConfigError, "ImportError: cannot import name 'no_such_name'"),
    ],
)
def test_an_import_inside_the_programs_code_while_it_runs_names_the_program_not_tensorflow(
    imported_body, verdict, said, tmp_path, monkeypatch
):
    """Before: every ImportError raised while the role ran was reported as `tensorflow does not
    import` (a libGL one as a node fault; any other as an unexpected error, retried)."""
    _program_module(tmp_path, monkeypatch, "lazy_needs", imported_body)
    module = _program_module(tmp_path, monkeypatch, "lazy_program", LAZY_PROGRAM.format(imported="lazy_needs"))
    import lazy_program

    with pytest.raises(ImportError) as raised:
        lazy_program.build_dataset("train", 8)
    found = program.import_failure(raised.value, module)
    assert type(found) is verdict, found
    line = str(found)
    assert "an import in the program's code at lazy_program.py:3 (in build_dataset) failed: " in line
    assert said in line and "tensorflow" not in line, line
    assert found.__cause__ is raised.value  # its traceback goes to the log


def test_an_import_error_outside_the_program_is_the_workers_unless_a_library_is_missing(tmp_path, monkeypatch):
    _program_module(tmp_path, monkeypatch, "lazy_program", LAZY_PROGRAM.format(imported="os"))
    with pytest.raises(ImportError) as raised:
        from os import no_such_name  # noqa: F401 - this test's own frame, not the program's
    assert program.import_failure(raised.value, "lazy_program") is None  # unexpected: exit 1, its traceback
    try:
        raise ImportError("libGL.so.1: cannot open shared object file: No such file or directory")
    except ImportError as exc:
        found = program.import_failure(exc, "lazy_program")
    assert isinstance(found, errors.ConfigError) and "an import at test_node_faults.py:" in str(found), found


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
    found = node_faults.missing_gpus(given, visible, built_with_cuda=True)
    assert (found is not None) == fault
    if fault:
        assert str(found).startswith(f"node fault on node {on_node}: this task was given {given} GPU(s)")
        assert f"TensorFlow sees {visible}" in str(found)


@pytest.mark.parametrize("given", [1, 4])
def test_gpus_given_to_a_tensorflow_built_without_cuda_is_the_images_fault(given, on_node):
    """Before: a node fault (exit 9: 7 pods per task, `kubectl cordon` a healthy node) for a GPU
    role on the stock tensorflow-cpu image, which sees no GPU on any node."""
    found = node_faults.missing_gpus(given, 0, built_with_cuda=False)
    assert isinstance(found, errors.ConfigError) and found.exit_code == contract.EXIT_CONFIG
    line = str(found)
    assert line.startswith(f"this task was given {given} GPU(s) (TFK8S_GPUS, the role's nvidia.com/gpu limit) and ")
    assert "the image's TensorFlow is built without CUDA (tf.test.is_built_with_cuda() is False" in line
    assert "use a GPU image, with tensorflow[and-cuda] installed" in line and "node" not in line.split("on any node")[1]
    assert node_faults.missing_gpus(given, given, built_with_cuda=False) is None


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
    assert f"ImportError: {LIBCUDA} (shared library libcuda.so.1, which the node's GPU driver provides, missing" in last
    assert "Traceback (most recent call last)" in done.stderr  # the details stay in the log
