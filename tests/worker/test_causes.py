"""A failed task says why in one line: the exception's type and its first informative line,
never a tensor printout or a log tail; a program that cannot import fails once (deterministic)."""

from __future__ import annotations

import pytest
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


def fails_once_as_a_config_error(backend, name: str, module: str, args: list[str], what: str) -> str:
    """A mirrored cluster of program `module` that must fail at its first attempt (exit 2,
    backoffLimit 3 unused); its chief's reason."""
    spec = make_spec(name, "mirrored", args, evaluator=False, backoffLimit=3, program={"module": module, "args": args})
    code = Submission(backend, spec).wait(120)
    status = backend.status(name)
    [chief] = status.roles
    print(f"{what}: exit {code}, {chief.reason}")
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    assert len(attempts(backend, name, "chief", 0)) == 1
    return chief.reason
