"""Model.fit's setup for --loop fit (always tf_keras): the compiled model and the callbacks that
give fit the checkpoints, pruning, progress lines and preemption exit the custom loops have.
Separate from worker/roles/training.py (the pieces both loops share) so that each module holds one
topic and stays under the 350-line limit; the custom loops never call into it.
"""

from __future__ import annotations

import collections
import re
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

# tf_keras's BackupAndRestore state (WorkerTrainingState): the last epoch it backed up
_SAVED_EPOCH = re.compile(r"^ckpt_saved_epoch/\.ATTRIBUTES/VARIABLE_VALUE$")
_SAVED_STEP = re.compile(r"^model/optimizer/(_iterations|iter)/\.ATTRIBUTES/VARIABLE_VALUE$")


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
            self._epoch_from = int(self.model.optimizer.iterations.numpy())  # a preempted epoch ends early

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
                steps_per_s=round((step - self._epoch_from) / seconds, 2),
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
        _preemption_callback(task, options, synchronous, backup),
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


def _preemption_callback(task: TaskContext, options: Options, synchronous: bool, backup):
    """Ends the task after a SIGTERM, once its progress is saved.

    PS: tf_keras refuses batch-level callbacks under ParameterServerStrategy unless they take
    its remote logs (`_supports_tf_logs`), and its BackupAndRestore backs up only at an epoch's
    end there. So after a SIGTERM this callback ends the epoch at the next batch
    (`stop_training`): fit joins the steps in flight, BackupAndRestore and ModelCheckpoint save
    that step as the epoch's end, and the chief exits. The shortened epoch counts as one:
    ps_fit_epochs gives the resumed fit the epochs that --steps still needs, and this callback
    stops fit at --steps exactly. MWMS/mirrored: after every batch the workers vote
    (worker/lifecycle/agreement.py); once any has received SIGTERM, all of them back up that
    batch and exit EXIT_PREEMPTED. Also checks that all MWMS workers restored one step.
    """

    class PreemptionExit(tf.keras.callbacks.Callback):
        """PS: ends the epoch at the batch after a SIGTERM, exits at its end (saved)."""

        def __init__(self):
            super().__init__()
            self._supports_tf_logs = True  # the remote logs as they are: never read here

        def on_train_begin(self, logs=None):
            preemption.defer()
            self._scheduled = self._step()  # after BackupAndRestore's restore
            self._in_flight = collections.deque()

        def on_train_batch_end(self, batch, logs=None):
            self._scheduled += 1  # fit schedules one step per batch (steps_per_execution 1)
            # fit schedules a whole epoch ahead of its workers, and a scheduled step cannot be
            # recalled: wait for the step PS_SLICE_STEPS back, so few are in flight at a SIGTERM
            self._in_flight.append(logs)
            if len(self._in_flight) > preemption.PS_SLICE_STEPS:
                self._in_flight.popleft().fetch()
            if preemption.requested() or self._scheduled >= options.steps:
                self.model.stop_training = True  # fit joins the steps in flight, ends the epoch

        def on_epoch_end(self, epoch, logs=None):
            self._in_flight.clear()  # joined by fit
            if preemption.requested():
                self._exit()

        def _step(self) -> int:
            return int(self.model.optimizer.iterations.numpy())

        def _exit(self):
            preemption.exit_preempted(self._step(), layout.backup_dir(task.model_dir))

    class SynchronousPreemptionExit(PreemptionExit):
        def __init__(self):
            tf.keras.callbacks.Callback.__init__(self)  # numpy logs, as every synchronous callback

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


def ps_fit_epochs(model_dir: str, options: Options) -> int:
    """Model.fit's `epochs` under PS: the epochs done in the backup (BackupAndRestore's; a
    preemption's epoch ends early, _preemption_callback) plus those --steps still needs, so the
    resumed fit reaches --steps, where the callback stops it."""
    latest = tf.train.latest_checkpoint(layout.join(layout.backup_dir(model_dir), "chief"))
    if latest is None:
        return options.fit_epochs()
    reader = tf.train.load_checkpoint(latest)
    values = {}
    for key in reader.get_variable_to_shape_map():
        for name, pattern in (("epoch", _SAVED_EPOCH), ("step", _SAVED_STEP)):
            if pattern.match(key):
                values[name] = int(reader.get_tensor(key))
    if set(values) != {"epoch", "step"}:
        raise RuntimeError(
            f"{latest}: the BackupAndRestore backup has no {sorted({'epoch', 'step'} - set(values))} "
            "(tf_keras's ckpt_saved_epoch and the optimizer's iterations); was it written by this tf_keras?"
        )
    left = max(0, options.steps - values["step"])
    return values["epoch"] + 1 + -(-left // options.checkpoint_every)
