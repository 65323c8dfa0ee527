"""TensorFlow pieces every training role shares: the replica step, model and optimizer building,
mixed precision, per-replica datasets, block progress, the final export and marker. Role modules
(coordinator, mwms, mirrored) own the loops; Model.fit's setup is in worker/roles/fit_loop.py.
"""

from __future__ import annotations

import time

import tensorflow as tf

from worker import errors, node_faults, progress
from worker.args import Options
from worker.context import TaskContext
from worker.contract import Strategy
from worker.model_dir import layout, writer_lease
from worker.program import Program
from worker.roles import data_service


def scaled_loss_and_gradients(model, per_example_loss, images, labels, global_batch_size: int, optimizer=None):
    """One replica's share of the loss and its gradients.

    The loss is divided by the GLOBAL batch size, not this replica's batch: the strategy sums
    gradients over replicas, and sum over replicas of (sum of losses / global batch) is the
    mean over the global batch, the same value one replica would get for the whole batch.

    A LossScaleOptimizer (mixed_float16, or the program's own) gets the loss scaled before the
    gradients are taken and the gradients unscaled after: without that, float16 gradients
    underflow, and tf_keras's apply_gradients would divide unscaled gradients by 2^15.
    """
    with tf.GradientTape() as tape:
        # float32 logits: a 16-bit softmax cross-entropy loses precision (mixed precision).
        logits = tf.cast(model(images, training=True), tf.float32)
        per_example = per_example_loss(labels, logits)
        if per_example.shape.rank == 0:
            raise errors.ConfigError(
                "the program's per_example_loss returned a scalar: it must return one loss per "
                "example (shape [batch]), which the worker averages over the global batch; with "
                "a Keras loss pass reduction='none' (worker/program.py)"
            )
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
        if model.losses:  # regularisation losses are per replica: scale them the same way
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        scaled = loss
        if hasattr(optimizer, "get_scaled_loss"):  # tf_keras LossScaleOptimizer
            scaled = optimizer.get_scaled_loss(loss)
        elif hasattr(optimizer, "scale_loss"):  # Keras 3 (its apply() unscales by itself)
            scaled = optimizer.scale_loss(loss)
    gradients = tape.gradient(scaled, model.trainable_variables)
    if hasattr(optimizer, "get_unscaled_gradients"):
        gradients = optimizer.get_unscaled_gradients(gradients)
    return loss, gradients


def make_replica_step(model, optimizer, per_example_loss, global_batch_size: int):
    """The function `strategy.run` executes on each replica for one step; returns its loss."""

    def replica_step(images, labels):
        loss, gradients = scaled_loss_and_gradients(
            model, per_example_loss, images, labels, global_batch_size, optimizer
        )
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    return replica_step


def set_precision_policy(options: Options, strategy: str) -> str | None:
    """Before any model is built: mixed_float16 on a GPU, mixed_bfloat16 on a CPU and under
    parameter_server, where tf_keras refuses loss scaling (float16 would need it)."""
    if not options.mixed_precision:
        return None
    gpu = tf.config.list_physical_devices("GPU")
    policy = "mixed_float16" if gpu and strategy != Strategy.PARAMETER_SERVER else node_faults.POLICY_WITHOUT_A_GPU
    tf.keras.mixed_precision.set_global_policy(policy)
    progress.report("precision", policy=policy)
    return policy


def build_optimizer(program: Program):
    """The program's optimizer (in the strategy's scope), loss-scaled under mixed_float16."""
    try:
        optimizer = program.build_optimizer()
        require_tf_keras(program, "build_optimizer", "optimizer", optimizer, "tf.keras.optimizers, as the model")
        if program.learning_rate is not None:
            optimizer.learning_rate = program.learning_rate
        return wrap_for_mixed_precision(optimizer)
    except ValueError as exc:
        if "Loss scaling is not supported" not in str(exc):
            raise
        raise errors.ConfigError(
            f"{program.name}.build_optimizer() returned a LossScaleOptimizer, which tf_keras "
            "does not support under parameter_server; return the plain optimizer and use "
            "--mixed-precision (mixed_bfloat16 there, which needs no loss scaling)"
        ) from None


def require_tf_keras(program: Program, builder: str, what: str, built, fix: str) -> None:
    """What `builder` returned must come from the Keras that tf.keras is here; any other fails
    every retry alike: a tf_keras optimizer meets Keras 3's variables in build() (no
    `_unique_id`), a Keras 3 one is no optimizer to tf_keras, tf_keras' fit refuses a Keras 3
    model's data, and under parameter_server a Keras 3 model would train with lost updates."""
    wanted = _keras_library(tf.keras.__name__)
    got = next(filter(None, (_keras_library(c.__module__) for c in type(built).__mro__)), None)
    if None in (wanted, got) or got == wanted:
        return
    kind = type(built)
    raise errors.ConfigError(
        f"{program.name}.{builder}() returned a {_KERAS[got]} {what} ({kind.__module__}."
        f"{kind.__qualname__}), but tf.keras is {_KERAS[wanted]} here (tf_keras for --loop fit and "
        f"under parameter_server, else Keras 3): build it with {fix}"
    )


def build_model(program: Program):
    """The program's model, from the Keras that tf.keras is here."""
    model = program.build_model()
    require_tf_keras(
        program,
        "build_model",
        "model",
        model,
        "tf.keras, not `import keras` or tf_keras (the worker sets TF_USE_LEGACY_KERAS=1 where tf_keras runs)",
    )
    return model


_KERAS = {"tf_keras": "tf_keras", "keras": "Keras 3"}  # top-level package: the name users know


def _keras_library(module: str) -> str | None:
    """The Keras library a module belongs to (a key of _KERAS), or None."""
    top = module.split(".", 1)[0]
    return top if top in _KERAS else None


def wrap_for_mixed_precision(optimizer):
    """mixed_float16 needs dynamic loss scaling; a program's own LossScaleOptimizer is kept."""
    policy = tf.keras.mixed_precision.global_policy().name
    if policy == "mixed_float16" and not isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
        return tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


def make_train_step(strategy, replica_step):
    """One distributed step over the next batch: each replica's share of the global-batch
    loss (compute_average_loss), summed into the step's loss."""

    @tf.function
    def train_step(iterator):
        images, labels = next(iterator)
        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    return train_step


def build_model_and_optimizer(program: Program, strategy):
    """In the strategy's scope, with the optimizer's slots created now so a restore fills them."""
    with strategy.scope():
        model = build_model_with_variables(program)
        optimizer = build_optimizer(program)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def build_model_with_variables(program: Program):
    """The program's model, whose variables exist: a checkpoint is compared and restored into them."""
    model = build_model(program)
    if not model.built:
        raise errors.ConfigError(
            f"{program.name}.build_model() returned an unbuilt model: start it with "
            "keras.Input(shape=...) so its variables exist before a checkpoint is restored"
        )
    return model


def require_legacy_keras(why: str) -> None:
    """tf.keras must be tf_keras (TF_USE_LEGACY_KERAS=1 was set before importing TF)."""
    try:
        flavour = tf.keras.__name__
    except ImportError as exc:
        flavour = f"not importable ({exc})"
    if not flavour.startswith("tf_keras"):
        raise errors.ConfigError(
            f"{why} needs tf_keras, but tf.keras is {flavour}: install it with "
            "`pip install --no-deps tf-keras==<your TF version>` (plain `pip install tf-keras` "
            "would replace tensorflow-cpu with tensorflow)"
        )


def train_dataset_fn(program: Program, options: Options):
    """dataset_fn(input_context) for distribute_datasets_from_function and DatasetCreator:
    each worker (or input pipeline) builds its own shard, batched per replica."""

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(options.global_batch_size)
        dataset = program.build_dataset("train", batch, input_context, data=options.data)
        if options.data_service:  # the pipeline runs on the data workers
            dataset = data_service.distribute(dataset, input_context.input_pipeline_id)
        return dataset

    return dataset_fn


class BlockProgress:
    """Reports the first step and each block of steps of a custom loop."""

    def __init__(self, start_step: int):
        self.first_reported = False
        self.start_step = start_step

    def steps_to_run(self, step: int, next_checkpoint: int, target: int) -> int:
        # The very first block is one step, so time to first step is measured, not estimated.
        if not self.first_reported:
            return 1
        return min(next_checkpoint, target) - step

    def done(self, step: int, steps: int, seconds: float, losses) -> None:
        loss = float(sum(losses) / len(losses)) if losses else float("nan")
        if not self.first_reported:
            self.first_reported = True
            progress.report("first_step", step=step, loss=round(loss, 5))
            return
        progress.report(
            "block",
            step=step,
            steps=steps,
            seconds=round(seconds, 3),
            steps_per_s=round(steps / seconds, 2) if seconds > 0 else None,
            loss=round(loss, 5),
        )


def checkpoint_manager(checkpoint, directory: str, options: Options) -> tf.train.CheckpointManager:
    """The manager of our checkpoints in `directory`: the layout's name, --max-checkpoints kept."""
    return tf.train.CheckpointManager(
        checkpoint, directory, max_to_keep=options.max_checkpoints, checkpoint_name=layout.CHECKPOINT_PREFIX
    )


def next_checkpoint_step(step: int, every: int) -> int:
    return (step // every + 1) * every


def forget_stale_marker(task: TaskContext, options: Options) -> None:
    marker = layout.read_marker(task.model_dir)
    if marker is not None and not marker.matches(options.steps, options.loop):
        print(
            f"tfk8s: removing FINAL.json of an earlier run (--steps {marker.requested_steps} "
            f"--loop {marker.loop}); this run trains to --steps {options.steps}",
            flush=True,
        )
        layout.remove_marker(task.model_dir)


def export_saved_model(program: Program, trained_model, path: str) -> None:
    """A SavedModel of a fresh, strategy-free copy of the model, so it loads anywhere.

    The trained variables may live on parameter servers or be mirrored; copying the values into
    a model built outside any strategy scope leaves no device placement or distributed variable
    in the export.
    """
    plain = program.build_model()
    plain.set_weights(trained_model.get_weights())
    input_shape = [None, *plain.inputs[0].shape[1:]]

    class Exported(tf.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec(input_shape, tf.float32, name="images")])
        def serve(self, images):
            return {"logits": self.model(images, training=False)}

    exported = Exported(plain)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
    tf.saved_model.save(exported, path, signatures={"serving_default": exported.serve})


def finish(task: TaskContext, options: Options, program: Program, model, final_checkpoint: str, step: int) -> None:
    """Writer only: export the SavedModel, then mark the final checkpoint for the evaluator."""
    writer_lease.check(before="the final SavedModel")
    saved_model = layout.saved_model_dir(task.model_dir)
    export_saved_model(program, model, saved_model)
    progress.report("exported", path=saved_model)
    layout.write_marker(
        task.model_dir,
        layout.FinalMarker(
            checkpoint=layout.checkpoint_name(final_checkpoint),
            step=step,
            requested_steps=options.steps,
            loop=options.loop,
            saved_model=layout.SAVED_MODEL,
            written_at=time.time(),
            code=task.code_digest,
            run=task.run,
        ),
    )
    progress.report("final", step=step, checkpoint=final_checkpoint, saved_model=saved_model)
