"""Model.fit's setup for --loop fit (always tf_keras): the compiled model and the callbacks that
give fit the checkpoints, pruning, progress lines and preemption exit the custom loops have.
Separate from worker/roles/training.py (the pieces both loops share) so that each module holds one
topic and stays under the 350-line limit; the custom loops never call into it.
"""

from __future__ import annotations

import time

import tensorflow as tf

from worker import progress
from worker.args import Options
from worker.context import TaskContext
from worker.contract import Strategy
from worker.lifecycle import agreement, preemption
from worker.model_dir import checkpoint_match, layout, writer_lease
from worker.program import Program
from worker.roles import training


def build_compiled_model(program: Program, strategy):
    """For Model.fit: Keras scales the loss by the global batch itself under a strategy."""
    with strategy.scope():
        model = training.build_model(program)
        model.compile(
            optimizer=training.build_optimizer(program),
            loss=program.per_example_loss,
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
    return model


def fit_progress_callback(task: TaskContext, options: Options, synchronous: bool):
    """Progress lines of Model.fit: a `step` event every few seconds under MWMS/mirrored; under
    PS, where tf_keras supports no batch-level callbacks, one per epoch (--checkpoint-every
    steps), with the epoch's logs.

    Built on demand so roles that never fit do not load Keras's callback machinery.
    """

    class FitProgressCallback(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self._epoch_start = time.monotonic()
            self._first = True
            step = int(self.model.optimizer.iterations.numpy())
            self._steps = progress.StepReporter(step, options.steps)
            # After BackupAndRestore's on_train_begin: the step training resumes from.
            progress.report("start", step=step, restored_from=layout.backup_dir(task.model_dir), target=options.steps)

        def on_train_end(self, logs=None):
            progress.report("train_end", step=int(self.model.optimizer.iterations.numpy()))

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch_start = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            seconds = time.monotonic() - self._epoch_start
            step = int(self.model.optimizer.iterations.numpy())
            fields = {k: round(float(v), 5) for k, v in (logs or {}).items()}
            if self._first:
                progress.report("first_epoch", step=step)
                self._first = False
            progress.report(
                "epoch",
                epoch=epoch + 1,
                step=step,
                steps_per_s=round(options.checkpoint_every / seconds, 2),
                **fields,
            )
            self._epoch_step(step, fields)

        def _epoch_step(self, step: int, fields: dict) -> None:
            if "loss" in fields:
                self._steps.add(fields["loss"])
            self._steps.report(step)

    class SynchronousFitProgressCallback(FitProgressCallback):
        def _epoch_step(self, step: int, fields: dict) -> None:
            pass  # reported by the batch, every few seconds

        def on_train_batch_end(self, batch, logs=None):
            if self._steps.timing and not self._steps.due():
                return
            if logs and "loss" in logs:
                self._steps.add(logs["loss"])
            step = int(self.model.optimizer.iterations.numpy())
            if self._steps.timing:
                self._steps.report(step)
            else:
                self._steps.first_step(step)

    return SynchronousFitProgressCallback() if synchronous else FitProgressCallback()


def fit_callbacks(task: TaskContext, options: Options, synchronous: bool):
    """Model.fit's callbacks, in order: restore/backup, evaluator checkpoints, their pruning,
    progress, and (last, after every save) the preemption exit."""
    model_dir = task.model_dir
    # Restores the model, optimizer and epoch after a restart of the chief (or all MWMS
    # workers); tf_keras gives non-chief MWMS workers their own temporary folders. The backup
    # is never deleted: a chief restarted after fit returned (a lost ps exits 4 right there)
    # or a rerun with a larger --steps resumes from it instead of training again from fresh
    # weights and overwriting ckpt-1, ckpt-2, ... Never save_before_preemption: that is TF's
    # PreemptionCheckpointHandler, which on a GCE node skips the restore (worker/lifecycle/agreement.py);
    # the preemption callback saves instead. MWMS/mirrored back up every --checkpoint-every
    # batches (an int, so a save in mid-epoch resumes at the next batch, not the next epoch).
    backup = tf.keras.callbacks.BackupAndRestore(
        backup_dir=layout.backup_dir(model_dir),
        delete_checkpoint=False,
        save_freq=options.checkpoint_every if synchronous else "epoch",
    )
    return [
        _writer_lease_callback(),  # first: an epoch's check comes before any of its saves
        _checkpoint_match_callback(model_dir),  # before the backup's restore
        backup,
        # The evaluator's checkpoints: SidecarEvaluator-compatible names ckpt-<epoch>.
        tf.keras.callbacks.ModelCheckpoint(
            filepath=layout.join(layout.checkpoint_dir(model_dir), layout.CHECKPOINT_PREFIX + "-{epoch}"),
            save_weights_only=True,
        ),
        _prune_checkpoints_callback(task, options),
        fit_progress_callback(task, options, synchronous),
        _preemption_callback(task, synchronous, backup),
    ]


def _checkpoint_match_callback(model_dir: str):
    """Refuses a backup that does not fit the model (worker/model_dir/checkpoint_match.py) before
    BackupAndRestore restores it. Only the model's weights are compared: fit builds the
    optimizer's slots and the metrics at the first step, after the restore."""

    class CheckpointMatch(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            # BackupAndRestore keeps the chief's (or only) copy in <backup dir>/chief.
            latest = tf.train.latest_checkpoint(layout.join(layout.backup_dir(model_dir), "chief"))
            checkpoint_match.check(
                tf.train.Checkpoint(model=self.model),
                latest,
                model_dir,
                only_under=("model/",),
                ignore_under=("model/optimizer/",),
            )

    return CheckpointMatch()


def _writer_lease_callback():
    """The writer checks its lease at each epoch's start (worker/model_dir/writer_lease.py): a replaced
    writer that still runs saves at most the epoch it is in."""

    class WriterLease(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            writer_lease.check(before=f"epoch {epoch + 1}")

    return WriterLease()


def _prune_checkpoints_callback(task: TaskContext, options: Options):
    """ModelCheckpoint keeps every epoch's checkpoint: keep the newest --max-checkpoints."""
    directory = layout.checkpoint_dir(task.model_dir)

    class PruneCheckpoints(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if task.is_writer:
                prune_checkpoints(directory, options.max_checkpoints)

    return PruneCheckpoints()


def prune_checkpoints(directory: str, keep: int) -> None:
    """Deletes all but the `keep` highest-numbered ckpt-<n> files."""
    prefix = layout.join(directory, layout.CHECKPOINT_PREFIX + "-")
    numbers = sorted({int(path[len(prefix) :].split(".", 1)[0]) for path in tf.io.gfile.glob(prefix + "*.index")})
    for number in numbers[:-keep]:
        for path in tf.io.gfile.glob(f"{prefix}{number}.*"):
            tf.io.gfile.remove(path)


def _preemption_callback(task: TaskContext, synchronous: bool, backup):
    """Ends the task after a SIGTERM, once its progress is saved.

    PS: batch-level callbacks do not exist under ParameterServerStrategy, so the chief finishes
    the current epoch (--checkpoint-every steps; it must fit in the pod's grace period), whose
    backup BackupAndRestore has just written, and exits. MWMS/mirrored: after every batch the
    workers vote (worker/lifecycle/agreement.py); once any has received SIGTERM, all of them back up
    that batch and exit EXIT_PREEMPTED. Also checks that all MWMS workers restored one step.
    """

    class PreemptionExit(tf.keras.callbacks.Callback):
        """PS: exits at the end of the epoch (no batch hooks: tf_keras refuses them there)."""

        def on_train_begin(self, logs=None):
            preemption.defer()

        def on_epoch_end(self, epoch, logs=None):
            if preemption.requested():
                self._exit()

        def _step(self) -> int:
            return int(self.model.optimizer.iterations.numpy())

        def _exit(self):
            preemption.exit_preempted(self._step(), layout.backup_dir(task.model_dir))

    class SynchronousPreemptionExit(PreemptionExit):
        def on_train_begin(self, logs=None):
            # After BackupAndRestore's on_train_begin, which restored the backup.
            strategy = self.model.distribute_strategy
            if task.strategy is Strategy.MULTI_WORKER_MIRRORED:
                agreement.check_same_restored_step(strategy, task, self._step(), layout.backup_dir(task.model_dir))
            self._stop_vote = agreement.make_stop_vote(strategy)
            preemption.defer()

        def on_epoch_begin(self, epoch, logs=None):
            # A resumed mid-epoch start shifts BackupAndRestore's batch count; its backups stay
            # at the ends of epochs (private attribute of tf_keras 2.21).
            if hasattr(backup, "_batches_count"):
                backup._batches_count = 0

        def on_train_batch_end(self, batch, logs=None):
            if self._stop_vote():  # the same answer on every worker
                self.model._training_state.back_up(epoch=None, batch=batch)
                self._exit()

        def on_epoch_end(self, epoch, logs=None):
            pass  # saved and exited at the batch

    return SynchronousPreemptionExit() if synchronous else PreemptionExit()
