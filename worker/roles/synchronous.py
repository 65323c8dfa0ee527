"""Training loops for the synchronous strategies (multi_worker_mirrored, mirrored).

Every replica runs every step on its share of the global batch, and gradients are all-reduced.
Under MWMS every worker runs these loops and must take part in every checkpoint save (saving
may all-reduce), but only the writer (worker 0) saves into the model dir; the others save into
a local temporary directory of their own that is deleted at the end (sharing one directory
makes the workers overwrite each other's files, tensorflow#38635). The fit loop leaves that to
tf_keras, whose callbacks do the same.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import tensorflow as tf

from worker import args, progress
from worker.args import Options
from worker.context import TaskContext
from worker.contract import Strategy
from worker.lifecycle import agreement, preemption, shutdown
from worker.model_dir import checkpoint_match, layout, writer_lease
from worker.program import Program
from worker.roles import fit_loop, training


def custom_loop(task: TaskContext, options: Options, program: Program, strategy, resolver=None):
    """Trains, then exits the process (worker/lifecycle/shutdown.py). `resolver`: MWMS's cluster resolver
    (None under mirrored, one process)."""
    args.check_divisible(options, strategy.num_replicas_in_sync)
    write_dir = layout.checkpoint_dir(task.model_dir) if task.is_writer else _temporary_checkpoint_dir(task)
    model, optimizer = training.build_model_and_optimizer(program, strategy)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    # Every worker restores the writer's latest checkpoint (shared storage, required for more
    # than one MWMS worker); non-writers' own saves are temporary.
    shared = training.checkpoint_manager(checkpoint, layout.checkpoint_dir(task.model_dir), options)
    manager = shared if task.is_writer else training.checkpoint_manager(checkpoint, write_dir, options)
    saved = {"path": None, "step": None}  # the last save, for the preemption exit's report

    def save_current_step() -> None:
        """Every worker takes part (saving may all-reduce); only the writer's copy is kept."""
        at_step = int(optimizer.iterations.numpy())
        writer_lease.check(before=f"step {at_step}")  # the writer's, before the collective save
        saved["path"] = manager.save(checkpoint_number=at_step)
        saved["step"] = at_step
        progress.report("checkpoint", step=at_step, path=saved["path"])

    # Restored here, not by TF's PreemptionCheckpointHandler, which skips it on GCE nodes
    # (worker/lifecycle/agreement.py).
    checkpoint_match.check(checkpoint, shared.latest_checkpoint, task.model_dir)
    shared.restore_or_initialize()
    latest = shared.latest_checkpoint
    step = int(optimizer.iterations.numpy())
    if task.strategy is Strategy.MULTI_WORKER_MIRRORED:
        agreement.check_same_restored_step(strategy, task, step, latest)
    saved_step = step if latest else None
    progress.report(
        "start", step=step, restored_from=latest, target=options.steps, replicas=strategy.num_replicas_in_sync
    )

    iterator = iter(strategy.distribute_datasets_from_function(training.train_dataset_fn(program, options)))
    train_step = agreement.make_train_step(
        strategy, training.make_replica_step(model, optimizer, program.per_example_loss, options.global_batch_size)
    )

    preemption.defer()  # from here SIGTERM is a vote to save at the next step (agreement.py)
    blocks = training.BlockProgress(step)
    steps = progress.StepReporter(step, options.steps)
    next_checkpoint = training.next_checkpoint_step(step, options.checkpoint_every)
    while step < options.steps:
        count = blocks.steps_to_run(step, next_checkpoint, options.steps)
        started = time.monotonic()
        losses = []
        for done in range(1, count + 1):
            loss, votes = train_step(iterator, agreement.flag())
            losses.append(loss)
            steps.add(loss)
            steps.maybe_report(step + done)
            if float(votes) > 0:  # the same answer on every worker after this step
                save_current_step()
                preemption.exit_preempted(saved["step"], saved["path"])
        losses = [float(loss) for loss in losses]
        step = int(optimizer.iterations.numpy())
        blocks.done(step, count, time.monotonic() - started, losses)
        if not steps.timing:
            steps.first_step(step)
        if step >= next_checkpoint or step >= options.steps:
            save_current_step()
            saved_step = step
            next_checkpoint = training.next_checkpoint_step(step, options.checkpoint_every)
    steps.report(step)
    # The decision to save depends only on the step, which all workers agree on.
    if saved_step != step:
        save_current_step()
    if task.is_writer:
        training.finish(task, options, program, model, manager.latest_checkpoint, step)
    else:
        shutil.rmtree(write_dir)
    shutdown.exit_now(0)


def _temporary_checkpoint_dir(task: TaskContext) -> str:
    """Where a non-writer saves its share of each checkpoint: local, named after the task, so a
    restarted attempt (a SIGKILLed one cleans up nothing) starts by emptying it."""
    path = os.path.join(tempfile.gettempdir(), f"tfk8s-{task.cluster_name}-{task.name}-checkpoints")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def fit(task: TaskContext, options: Options, program: Program, strategy):
    """Trains, then exits the process (worker/lifecycle/shutdown.py)."""
    args.check_divisible(options, strategy.num_replicas_in_sync)
    model = fit_loop.build_compiled_model(program, strategy)
    model.fit(
        tf.keras.utils.experimental.DatasetCreator(training.train_dataset_fn(program, options)),
        epochs=options.fit_epochs(),
        steps_per_epoch=options.checkpoint_every,
        callbacks=fit_loop.fit_callbacks(task, options, synchronous=True),
        verbose=2,
    )
    step = int(model.optimizer.iterations.numpy())
    if task.is_writer:
        final = tf.train.latest_checkpoint(layout.checkpoint_dir(task.model_dir))
        training.finish(task, options, program, model, final, step)
    shutdown.exit_now(0)
