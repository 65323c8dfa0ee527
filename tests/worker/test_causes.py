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
    spec = make_spec(
        "broken",
        "mirrored",
        ["--steps", "10"],
        evaluator=False,
        backoffLimit=3,
        program={"module": "broken_program", "args": ["--steps", "10"]},
    )
    code = Submission(backend, spec).wait(120)
    status = backend.status("broken")
    [chief] = status.roles
    print(f"syntax error: exit {code}, {chief.reason}")
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    assert len(attempts(backend, "broken", "chief", 0)) == 1
    assert "program module 'broken_program' does not import: SyntaxError: " in chief.reason
    assert "(broken_program.py, line 1)" in chief.reason, chief.reason
    log = run_files(backend, "broken").log_path("chief", 0).read_text()
    assert "Traceback (most recent call last)" in log  # the details stay in the log


@pytest.mark.process
def test_a_tf_keras_optimizer_where_tf_keras_is_keras_3_fails_once_saying_so(backend, probe_programs_importable):
    """Before: AttributeError ('Variable' object has no attribute '_unique_id') deep in the
    optimizer's build, exit 1, retried to backoffLimit though every attempt fails alike."""
    args = ["--steps", "10", "--loop", "custom"]
    spec = make_spec(
        "legacyopt",
        "mirrored",
        args,
        evaluator=False,
        backoffLimit=3,
        program={"module": "legacy_optimizer_program", "args": args},
    )
    code = Submission(backend, spec).wait(120)
    status = backend.status("legacyopt")
    [chief] = status.roles
    print(f"tf_keras optimizer on Keras 3: exit {code}, {chief.reason}")
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    assert len(attempts(backend, "legacyopt", "chief", 0)) == 1
    assert (
        "legacy_optimizer_program.build_optimizer() returned a tf_keras optimizer (tf_keras.src."
    ) in chief.reason, chief.reason
    assert "SGD), but tf.keras is Keras 3 here" in chief.reason, chief.reason
    assert "build it with tf.keras.optimizers, as the model" in chief.reason, chief.reason
