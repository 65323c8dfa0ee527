"""A failed task says why in one line: the exception's type and its first informative line,
never a tensor printout or a log tail; a program that cannot import fails once (deterministic)."""

from __future__ import annotations

import pytest
from job_controller import first_pod_failure, termination_message
from local_clusters import Submission, attempts, make_spec, run_files

from worker import errors
from worker.errors import EXIT_CONFIG

KERAS_ASSIGN_ERROR = (
    "The shape of the target variable and the shape of the target value in `variable.assign"
    "(value)` must match. variable.shape=(4, 32), Received: value.shape=(4, 16). Target "
    "variable: <Variable path=sequential/dense/kernel, shape=(4, 32), value=[[ 0.1  0.2\n"
    "  -0.05656788  0.3660949 ]]>"
)


def test_the_cause_is_the_type_and_first_line_not_the_tensor_printout():
    line = errors.cause_line(ValueError(KERAS_ASSIGN_ERROR))
    assert line.startswith("ValueError: The shape of the target variable"), line
    assert "variable.shape=(4, 32), Received: value.shape=(4, 16)" in line
    assert "0.3660949" not in line and "\n" not in line


def test_a_tf_error_is_its_first_informative_line():
    message = (
        'Graph execution error:\n\nDetected at node Adam/update:\n  File "x.py", line 3\n'
        "Input to reshape is a tensor with 10 values, but the requested shape has 12"
    )
    assert errors.cause_line(RuntimeError(message)) == (
        "RuntimeError: Input to reshape is a tensor with 10 values, but the requested shape has 12"
    )
    assert errors.cause_line(KeyError()) == "KeyError"


@pytest.mark.process
def test_a_program_with_a_syntax_error_fails_once_with_file_and_line(backend, tmp_path, monkeypatch):
    (tmp_path / "broken_program.py").write_text("def build_model(:\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reason = fails_once_as_a_config_error(backend, "broken", "broken_program", ["--steps", "10"], "syntax error")
    assert "program module 'broken_program' does not import: SyntaxError: " in reason
    assert "(broken_program.py, line 1)" in reason, reason
    log = run_files(backend, "broken").log_path("chief", 0).read_text()
    assert "Traceback (most recent call last)" in log  # the details stay in the log


@pytest.mark.process
def test_a_tf_keras_optimizer_where_tf_keras_is_keras_3_fails_once_saying_so(backend, probe_programs_importable):
    """Before: AttributeError ('Variable' object has no attribute '_unique_id') deep in the
    optimizer's build, exit 1, retried to backoffLimit though every attempt fails alike."""
    reason = fails_once_as_a_config_error(
        backend,
        "legacyopt",
        "legacy_optimizer_program",
        ["--steps", "10", "--loop", "custom"],
        "tf_keras optimizer on Keras 3",
    )
    assert "legacy_optimizer_program.build_optimizer() returned a tf_keras optimizer (tf_keras.src." in reason, reason
    assert "SGD), but tf.keras is Keras 3 here" in reason, reason
    assert "build it with tf.keras.optimizers, as the model" in reason, reason


@pytest.mark.process
def test_a_keras_3_model_where_the_worker_runs_tf_keras_fails_once_saying_so(backend, probe_programs_importable):
    """Before: `ValueError: Unrecognized data type: x=<tf_keras...DatasetCreator>` from tf_keras'
    fit, exit 1, retried to backoffLimit (under parameter_server it trained, losing updates)."""
    reason = fails_once_as_a_config_error(
        backend, "k3model", "keras3_model_program", ["--steps", "10", "--loop", "fit"], "Keras 3 model on tf_keras"
    )
    assert "keras3_model_program.build_model() returned a Keras 3 model (keras.src." in reason, reason
    assert "but tf.keras is tf_keras here" in reason and "build it with tf.keras, not `import keras`" in reason


@pytest.mark.process
def test_a_program_module_raising_name_error_at_import_fails_once(backend, tmp_path, monkeypatch):
    """Before: the NameError escaped to the worker's catch-all, exit 1, retried to backoffLimit
    (4 attempts here), though the README says a program's errors are fatal."""
    (tmp_path / "typo_program.py").write_text("import os\n\nDATA = os.path.join(DATA_DIR, 'x')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reason = fails_once_as_a_config_error(backend, "typo", "typo_program", ["--steps", "10"], "NameError at import")
    assert "program module 'typo_program' does not import: NameError: name 'DATA_DIR' is not defined" in reason
    assert "(a NameError is deterministic: not retried); fix the program" in reason, reason
    assert reason.count("not retried") == 1, reason  # the cause gives the verdict: said once


LAZY_GL_PROGRAM = """
import tensorflow as tf


def build_model():
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])


def build_optimizer():
    return tf.keras.optimizers.SGD(0.1)


def build_dataset(split, batch_size, input_context=None, data=None):
    import augment  # only now, as a program imports cv2 for its augmentation
"""


@pytest.mark.process
def test_a_lazy_import_in_build_dataset_of_a_library_the_image_lacks_fails_once_naming_the_program(
    backend, tmp_path, monkeypatch
):
    """Before: `node fault on node ...: tensorflow does not import: ImportError: libGL.so.1: ...`,
    exit 9, retried to backoffLimit with `kubectl cordon` advice: the import was the program's, and
    libGL is the image's, missing on every node alike."""
    (tmp_path / "lazy_gl_program.py").write_text(LAZY_GL_PROGRAM)
    (tmp_path / "augment.py").write_text(
        "raise ImportError('libGL.so.1: cannot open shared object file: No such file or directory')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reason = fails_once_as_a_config_error(backend, "lazygl", "lazy_gl_program", ["--steps", "10"], "lazy libGL")
    assert (
        "an import in the program's code at lazy_gl_program.py:14 (in build_dataset) failed: "
        "ImportError: libGL.so.1: cannot open shared object file" in reason
    ), reason
    assert "(shared library libGL.so.1 is not in the image: a retry fails alike on every node" in reason, reason
    assert "tensorflow does not import" not in reason and "node fault" not in reason


@pytest.mark.process
def test_a_bug_in_build_dataset_fails_once_and_its_line_names_the_programs_frame(backend, tmp_path, monkeypatch):
    """Before: a ValueError the program's build_dataset raised while the role ran escaped to the
    worker's catch-all, exit 1, retried to backoffLimit (4 attempts here), its line without a
    place in the program."""
    (tmp_path / "bad_data_program.py").write_text(
        LAZY_GL_PROGRAM.replace(
            "    import augment  # only now, as a program imports cv2 for its augmentation",
            "    raise ValueError(f'no such split: {split!r}')",
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reason = fails_once_as_a_config_error(backend, "baddata", "bad_data_program", ["--steps", "10"], "bug at run")
    assert "the program's code at bad_data_program.py:14 (in build_dataset) failed: ValueError: no such split" in (
        reason
    ), reason
    assert "(a ValueError is deterministic: not retried); fix the program" in reason, reason
    assert reason.count("not retried") == 1, reason  # the cause gives the verdict: said once


def fails_once_as_a_config_error(backend, name: str, module: str, args: list[str], what: str) -> str:
    """A mirrored cluster of program `module` that must fail at its first attempt (exit 2,
    backoffLimit 3 unused); its chief's reason. The same fault on Kubernetes (parity): the pod
    with this task's exit code and termination message fails its Job at once, and `status` says
    Failed with the same cause and exit code."""
    spec = make_spec(name, "mirrored", args, evaluator=False, backoffLimit=3, program={"module": module, "args": args})
    code = Submission(backend, spec).wait(120)
    status = backend.status(name)
    [chief] = status.roles
    print(f"{what}: exit {code}, {chief.reason}")
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    assert len(attempts(backend, name, "chief", 0)) == 1

    message = termination_message(run_files(backend, name).last_attempt_tail("chief", 0))
    action, on_kubernetes = first_pod_failure(spec, "chief", code, message)
    assert action == "FailJob", (action, message)  # not retried there either
    assert on_kubernetes.phase.value == status.phase.value == "Failed", on_kubernetes
    assert on_kubernetes.exit_code == code, on_kubernetes
    assert message in on_kubernetes.message and message in chief.reason, (on_kubernetes.message, chief.reason)
    return chief.reason
