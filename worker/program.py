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
A module that does not import is such a mistake, except where a shared library does not load
(`libcuda.so.1: cannot open shared object file`): that is the node's fault (exit 9, retried).

Optional:

    per_example_loss(labels, logits) -> Tensor of shape [batch]
        One loss value per example, unreduced. Default: sparse softmax cross-entropy on logits.
        The worker reduces it with tf.nn.compute_average_loss over the GLOBAL batch, so the
        sum over replicas is the mean over the global batch (and Model.fit does the same).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from worker import errors, node_faults

REQUIRED = ("build_model", "build_optimizer", "build_dataset")


@dataclass(frozen=True)
class Program:
    module: ModuleType
    build_model: Callable
    build_optimizer: Callable
    build_dataset: Callable
    per_example_loss: Callable

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
    except (ImportError, SyntaxError) as exc:
        fault = isinstance(exc, ImportError) and node_faults.from_import_error(exc, f"program module {module_name!r}")
        if fault:
            raise fault from exc
        # the program's own code: a retry fails alike
        raise errors.ConfigError(
            f"program module {module_name!r} does not import: {errors.cause_line(exc)}; fix "
            "the program (its traceback is in the task's log)"
        ) from exc
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


def sparse_cross_entropy(labels, logits):
    """Per-example softmax cross-entropy for integer labels and logits (no reduction)."""
    import tensorflow as tf

    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
