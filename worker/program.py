"""The training program interface: what a module named by TFK8S_PROGRAM (the spec's
`program.module`) must provide. The built-in one is `worker/examples/fashion_mnist.py`;
`worker/examples/digits.py` is a small one (8x8 digits, one hidden layer).

The worker owns everything distributed: strategies, per-worker datasets, loss scaling, loops,
checkpoints, restarts, evaluation, export. The program only builds things:

    build_model() -> keras.Model
        A new, built model that outputs logits: give it an Input layer so its variables exist
        before training (checkpoints are restored into them). The worker calls it inside the
        strategy's scope for training and outside any strategy for evaluation and export.
        Use `tf.keras` (not `import keras`): it is tf_keras for the fit loop and under
        parameter_server (the worker sets TF_USE_LEGACY_KERAS=1 before importing TensorFlow),
        and Keras 3 otherwise; a model of the other Keras fails at once (exit 2; docs/keras.md).

    build_optimizer() -> keras optimizer
        A new optimizer, created in the strategy's scope. Use `tf.keras.optimizers`, as for the
        model: one of the other Keras (a tf_keras optimizer where tf.keras is Keras 3) fails at
        once (exit 2).

    build_dataset(split, batch_size, input_context=None, data=...) -> tf.data.Dataset
        split: "train" (shuffled, repeated forever) or "test" (one pass, for the evaluator).
        batch_size: examples per batch *for this input pipeline*: the worker passes the
        per-replica batch (global batch / replicas in sync) for training.
        input_context: a tf.distribute.InputContext, or None outside distribution. Shard with
        `dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)`.
        data: the worker's --data argument, whose meaning is the program's.
        Elements are (images, integer labels). Under parameter_server this function runs
        while the coordinator builds each worker's dataset: arrays it captures are shipped to
        the workers inside the dataset graph, so keep them small or read files on the worker.

A mistake that no restart can cure (a missing data file, a bad --data value) should raise
worker.errors.ConfigError with a message that says how to fix it: the task then exits 2 at
once, and the cluster fails without using up its restarts (any other exception is retried).
A module that does not import is judged as the exception check judges a program of your own's
exception (worker/exit_cause.py EXCEPTION_KINDS): a deterministic kind (SyntaxError, ImportError,
NameError, AttributeError, ...) exits 2 at once, a transient one (OSError, ...) is retried (exit 1);
a shared library that does not load (`cannot open shared object file`) is the node's fault (exit 9,
retried) only for a library the node's GPU driver provides (libcuda.so.1), else the image's (exit
2; worker/node_faults.py). An import inside the program's code while it runs (in build_dataset)
gets the same verdicts, its line naming the program's file and line.

Optional:

    per_example_loss(labels, logits) -> Tensor of shape [batch]
        One loss value per example, unreduced. Default: sparse softmax cross-entropy on logits.
        The worker reduces it with tf.nn.compute_average_loss over the GLOBAL batch, so the
        sum over replicas is the mean over the global batch (and Model.fit does the same).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from worker import errors, exit_cause, node_faults

REQUIRED = ("build_model", "build_optimizer", "build_dataset")


@dataclass(frozen=True)
class Program:
    module: ModuleType
    build_model: Callable
    build_optimizer: Callable
    build_dataset: Callable
    per_example_loss: Callable
    learning_rate: float | None = None  # --learning-rate: set on the optimizer build_optimizer() returns

    @property
    def name(self) -> str:
        return self.module.__name__


def load(module_name: str) -> Program:
    """Import the program module and check it provides the builders (imports TensorFlow)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise errors.ConfigError(
                f"program module {module_name!r} (TFK8S_PROGRAM / spec program.module) was not "
                "found: install it in the image or put it on PYTHONPATH"
            ) from None
        stack = errors.from_missing_module(exc)
        raise stack or errors.ConfigError(
            f"program module {module_name!r} imports {exc.name!r}, which is not installed in "
            "this Python environment: install it in the image"
        ) from None
    except Exception as exc:  # noqa: BLE001 - the program's own code, run at its import
        what = f"program module {module_name!r} does not import"
        verdict = isinstance(exc, ImportError) and node_faults.from_import_error(exc, what)
        raise (verdict or judged(what, exc)) from exc
    missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
    if missing:
        raise errors.ConfigError(
            f"program module {module_name!r} ({module.__file__}) lacks {', '.join(missing)}; "
            "see worker/program.py for the interface"
        )
    return Program(
        module=module,
        build_model=module.build_model,
        build_optimizer=module.build_optimizer,
        build_dataset=module.build_dataset,
        per_example_loss=getattr(module, "per_example_loss", None) or sparse_cross_entropy,
    )


def judged(what: str, exc: Exception, environ=os.environ) -> errors.WorkerError:
    """`what` failed with the program's exception `exc`, judged as the exception check judges a
    program of your own's (worker/exit_cause.py EXCEPTION_KINDS, under the spec's fatalExceptions
    and retriedExceptions): a deterministic kind is a ConfigError (exit 2, not retried), any other
    errors.Retried (exit 1, retried and counted). The line says the rule."""
    verdict, rule = exit_cause.exception_verdict(
        [cls.__name__ for cls in type(exc).__mro__], *exit_cause.spec_exception_lists(environ)
    )
    # What follows "; " tells a command of your own how to override the rule in the spec, whose
    # fatalExceptions and retriedExceptions a built-in worker's spec refuses.
    said = f"{what}: {errors.cause_line(exc)} ({rule.split('; ')[0]})"
    if verdict == exit_cause.FATAL:
        judgement = errors.ConfigError(f"{said}; fix the program (its traceback is in the task's log)")
    else:
        judgement = errors.Retried(said)
    judgement.__cause__ = exc  # its traceback goes to the log
    return judgement


def import_failure(exc: ImportError, module_name: str | None) -> errors.WorkerError | None:
    """The verdict on an ImportError raised while the role ran (a lazy import in the program's
    build_dataset, a library TensorFlow loads late): a missing package of the training stack, or
    what the program's code imported (its deepest frame named), or a shared library that does
    not load (worker/node_faults.py); None for any other (an unexpected error of the worker)."""
    if isinstance(exc, ModuleNotFoundError):
        stack = errors.from_missing_module(exc)
        if stack is not None:
            return stack
    in_program, where = _raised_where(exc, module_name)
    if in_program:
        what = f"an import in the program's code{where} failed"
    else:
        what = f"an import{where} failed"
    if isinstance(exc, ModuleNotFoundError) and in_program:
        missing = errors.ConfigError(
            f"{what}: {exc.name!r} is not installed in this Python environment: install it in the image"
        )
        missing.__cause__ = exc  # its traceback goes to the log
        return missing
    return node_faults.from_import_error(exc, what) or (judged(what, exc) if in_program else None)


def runtime_failure(exc: Exception, module_name: str | None) -> errors.WorkerError | None:
    """The verdict on an exception the program's own code raised while the role ran (its
    build_dataset, build_model, a loss; the deepest frame in its files named), judged as a
    program's exception at import is: a bug (ValueError, KeyError, ...) fails at once, a
    transient kind is retried with its rule said. None when no frame of the program's code
    raised it (the worker's own failure, said as unexpected)."""
    in_program, where = _raised_where(exc, module_name)
    return judged(f"the program's code{where} failed", exc) if in_program else None


def _raised_where(exc: BaseException, module_name: str | None) -> tuple[bool, str]:
    """(whether a frame of the program's files raised `exc`, " at file:line (in function)" of its
    deepest such frame, else of the deepest frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    files = _program_files(module_name)
    in_program = [frame for frame in frames if os.path.abspath(frame.filename).startswith(files)] if files else []
    site = (in_program or frames or [None])[-1]
    where = "" if site is None else f" at {os.path.basename(site.filename)}:{site.lineno} (in {site.name})"
    return bool(in_program), where


def _program_files(module_name: str | None) -> tuple[str, ...]:
    """The program module's file, or its package's directory (with a separator: no sibling
    matches), as absolute paths; () if it is not imported."""
    module = sys.modules.get(module_name or "")
    file = getattr(module, "__file__", None)
    if not file:
        return ()
    file = os.path.abspath(file)
    if os.path.basename(file) == "__init__.py":
        return (os.path.dirname(file) + os.sep,)
    return (file,)


def sparse_cross_entropy(labels, logits):
    """Per-example softmax cross-entropy for integer labels and logits (no reduction)."""
    import tensorflow as tf

    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
