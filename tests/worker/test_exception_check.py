"""An uncaught exception of a program of your own (worker/exception_check.py, started as --local
starts it, by worker/startup/sitecustomize.py on the task's PYTHONPATH, and as the worker
image's .pth file does): a deterministic kind exits EXIT_DETERMINISTIC_EXCEPTION (its Job's
podFailurePolicy fails it at once), any other keeps Python's exit 1 (retried); both say the
rule in the line `status` shows. Real Python processes, TensorFlow and Keras 3 where the
exception is theirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.backends.local.tasks import STARTUP_DIR
from worker import contract, exit_cause

REPO = str(Path(__file__).resolve().parents[2])  # this checkout's worker, as a local run's tasks import it
TF_CONFIG = json.dumps({"cluster": {"chief": ["localhost:1"]}, "task": {"type": "chief", "index": 0}})


def run_program(code: str, **env: str) -> tuple[int, str]:
    """A program of your own as a task runs it: (exit status, what it printed on stderr)."""
    task_env = {k: v for k, v in os.environ.items() if k not in (contract.PROGRAM, "PYTHONPATH")}
    task_env.update(
        PYTHONPATH=os.pathsep.join([STARTUP_DIR, REPO]), TF_CONFIG=TF_CONFIG, TF_CPP_MIN_LOG_LEVEL="2", **env
    )
    done = subprocess.run([sys.executable, "-c", code], env=task_env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr


def said(stderr: str) -> str:
    """The cause line `status` shows: worker/exit_cause.py on the task's output."""
    return exit_cause.exit_cause(stderr)


@pytest.mark.parametrize(
    "raised, kind",
    [
        ("raise ValueError('Shapes (None, 10) and (None, 1) are incompatible')", "ValueError"),
        ("raise KeyError('label')", "KeyError"),
        ("__import__('json').loads('{')", "ValueError"),  # a JSONDecodeError is a ValueError
        ("undefined_name", "NameError"),
        ("import no_such_module_here", "ImportError"),  # a ModuleNotFoundError
    ],
)
def test_a_deterministic_exception_exits_70_saying_so(raised, kind):
    """Before: exit 1, retried backoffLimit (6) times, the same failure each time."""
    code, stderr = run_program(raised + "\n")
    assert code == contract.EXIT_DETERMINISTIC_EXCEPTION, stderr
    assert "Traceback (most recent call last):" in stderr  # Python's own traceback first
    cause = said(stderr)
    assert f" {kind} is deterministic: not retried; retriedExceptions: [" in cause, cause


def test_the_atexit_handlers_still_run():
    code, stderr = run_program("import atexit, sys\natexit.register(lambda: sys.stderr.write('atexit ran\\n'))\n1/0\n")
    assert code == contract.EXIT_DETERMINISTIC_EXCEPTION and "atexit ran" in stderr


@pytest.mark.parametrize(
    "raised, rule",
    [
        ("ConnectionError('peer reset')", "an OSError may pass: retried"),
        ("TimeoutError()", "an OSError may pass: retried"),
        ("RuntimeError('step 3 went wrong')", "retried; fatalExceptions: [RuntimeError] fails the training at once"),
    ],
)
def test_another_exception_keeps_exit_1_and_says_the_rule(raised, rule):
    code, stderr = run_program(f"raise {raised}\n")
    assert code == 1 and said(stderr).endswith(f"({rule})"), stderr


def test_the_specs_lists_come_first():
    code, stderr = run_program("raise RuntimeError('boom')\n", **{contract.FATAL_EXCEPTIONS: "RuntimeError"})
    assert code == contract.EXIT_DETERMINISTIC_EXCEPTION
    assert said(stderr) == "RuntimeError: boom (RuntimeError is in fatalExceptions: not retried)"
    # a base class named retries every subclass of it; a dotted prefix is ignored
    code, stderr = run_program("raise KeyError('x')\n", **{contract.RETRIED_EXCEPTIONS: "builtins.LookupError"})
    assert code == 1 and "LookupError is in retriedExceptions: retried" in said(stderr)


def test_the_built_in_worker_and_a_process_without_tf_config_are_left_alone():
    code, _ = run_program("raise ValueError('x')\n", **{contract.PROGRAM: "worker.examples.digits"})
    assert code == 1
    done = subprocess.run(
        [sys.executable, "-c", "raise ValueError('x')"],
        env={k: v for k, v in os.environ.items() if k != "TF_CONFIG"} | {"PYTHONPATH": STARTUP_DIR + os.pathsep + REPO},
        capture_output=True,
    )
    assert done.returncode == 1


@pytest.mark.process
def test_tensorflow_errors_by_kind():
    code, stderr = run_program(
        "import tensorflow as tf\ntf.reshape(tf.zeros([6]), [4])\n"  # InvalidArgumentError
    )
    assert code == contract.EXIT_DETERMINISTIC_EXCEPTION, stderr[-2000:]
    assert said(stderr).startswith("InvalidArgumentError: ") and "InvalidArgumentError is deterministic" in said(stderr)
    code, stderr = run_program("import tensorflow as tf\nraise tf.errors.UnavailableError(None, None, 'peer gone')\n")
    assert code == 1 and said(stderr) == "UnavailableError: peer gone (an UnavailableError may pass: retried)"


@pytest.mark.process
@pytest.mark.parametrize(
    "call",
    ["model.reset_states()", "model.save_weights('/tmp/tfk8s-ckpt')"],
    ids=["reset_states", "save_weights"],
)
def test_a_keras_2_api_under_keras_3_names_the_fix(call):
    """Before: `AttributeError: 'Sequential' object has no attribute 'reset_states'`, retried, and
    nothing pointed to TF_USE_LEGACY_KERAS=1."""
    code, stderr = run_program(
        "import keras\nmodel = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n" + call + "\n",
        TF_USE_LEGACY_KERAS="0",
    )
    cause = said(stderr)
    assert code == contract.EXIT_DETERMINISTIC_EXCEPTION, stderr[-2000:]
    assert "set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported (docs/keras.md)" in cause, cause
    assert "is deterministic: not retried" in cause
