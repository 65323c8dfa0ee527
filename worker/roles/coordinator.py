"""The chief under parameter_server: coordinates training on the workers, variables on the ps.

custom loop: ClusterCoordinator schedules one step (closure) at a time on whichever worker is
free. Each worker reads its own dataset (create_per_worker_dataset), so a step's batch is the
global batch. A dead worker's closures move to the others (GRPC_FAIL_FAST=use_caller), and the
coordinator recreates its dataset once it is back; a closure that was in flight on it runs again,
so the step counter can advance by one more than scheduled (at-least-once). Checkpoints every
--checkpoint-every steps through tf.train.CheckpointManager, numbered by the optimizer's step;
a restarted chief restores the latest and continues from optimizer.iterations.

fit loop (tf_keras): Model.fit with steps_per_epoch=--checkpoint-every, a DatasetCreator,
BackupAndRestore (a restarted chief resumes at the interrupted epoch) and ModelCheckpoint.

Losing a ps loses the variables it held: the chief then exits with code 4 and a message naming
the ps; restarting the chief (and the ps) resumes from the last checkpoint.
"""

from __future__ import annotations

import re
import time

import tensorflow as tf

from worker import errors, exit_cause, progress
from worker.args import Options
from worker.context import TaskContext
from worker.contract import Role
from worker.lifecycle import preemption, shutdown
from worker.model_dir import checkpoint_match, layout, writer_lease
from worker.program import Program
from worker.roles import fit_loop, training

# What the coordinator raises when a ps (or the network to it) is gone.
CLUSTER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.DeadlineExceededError,
)
PREEMPTION_SLICE_STEPS = preemption.PS_SLICE_STEPS


def run(task: TaskContext, options: Options, program: Program, resolver):
    """Trains, then exits the process (worker/lifecycle/shutdown.py)."""
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    preemption.unblock_in_this_thread()  # after TF's set-up: the processes the program starts get SIGTERM
    progress.report(
        "connected", workers=len(task.cluster.get(Role.WORKER.value, [])), ps=len(task.cluster.get(Role.PS.value, []))
    )
    training.forget_stale_marker(task, options)
    if options.loop == "fit":
        _fit(task, options, program, strategy)
    else:
        _custom_loop(task, options, program, strategy)


def _custom_loop(task: TaskContext, options: Options, program: Program, strategy):
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    model, optimizer = training.build_model_and_optimizer(program, strategy)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = training.checkpoint_manager(checkpoint, layout.checkpoint_dir(task.model_dir), options)
    reached = {"step": 0}  # the last step read from the ps: it cannot be read once it is lost
    try:  # the restore already reads the ps: a ps lost here is exit 4 like any other
        checkpoint_match.check(checkpoint, manager.latest_checkpoint, task.model_dir)
        restored = manager.restore_or_initialize()
        reached["step"] = int(optimizer.iterations.numpy())
        progress.report("start", step=reached["step"], restored_from=restored, target=options.steps)
        _train_custom(
            task, options, program, strategy, coordinator, model, optimizer, manager, reached
        )  # exits the process when done
    except CLUSTER_ERRORS as exc:
        latest = manager.latest_checkpoint
        resume = f"resume from {latest}" if latest else "start again from step 0 (no checkpoint was written yet)"
        raise _lost_parameter_server(exc, task, f"step {reached['step']}", resume) from None


def _train_custom(task, options, program, strategy, coordinator, model, optimizer, manager, reached: dict) -> None:
    step = reached["step"]
    dataset_fn = training.train_dataset_fn(program, options)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    train_step = training.make_train_step(
        strategy, training.make_replica_step(model, optimizer, program.per_example_loss, options.global_batch_size)
    )

    def save(at_step: int) -> str:
        latest = manager.latest_checkpoint
        if latest is not None and _checkpoint_number(latest) == at_step:
            return latest  # already saved (a preemption right after a periodic checkpoint)
        writer_lease.check(before=f"step {at_step}")
        path = manager.save(checkpoint_number=at_step)
        progress.report("checkpoint", step=at_step, path=path)
        return path

    blocks = training.BlockProgress(step)
    steps = progress.StepReporter(step, options.steps)
    next_checkpoint = training.next_checkpoint_step(step, options.checkpoint_every)
    preemption.defer()
    while step < options.steps:
        count = blocks.steps_to_run(step, next_checkpoint, options.steps)
        started = time.monotonic()
        losses, scheduled = [], 0
        # Scheduled in short slices, so a SIGTERM is acted on within PREEMPTION_SLICE_STEPS
        # steps; closures already scheduled cannot be recalled, so each slice is joined first.
        while scheduled < count and not preemption.requested():
            size = min(PREEMPTION_SLICE_STEPS, count - scheduled)
            results = [coordinator.schedule(train_step, args=(per_worker_iterator,)) for _ in range(size)]
            coordinator.join()
            fetched = [result.fetch() for result in results]
            losses += fetched
            scheduled += size
            for loss in fetched:
                steps.add(loss)
            steps.maybe_report(step + scheduled)
        step = reached["step"] = int(optimizer.iterations.numpy())
        if scheduled:
            blocks.done(step, scheduled, time.monotonic() - started, losses)
            if not steps.timing:
                steps.first_step(step)
        if preemption.requested():
            preemption.exit_preempted(step, save(step))
        if step >= next_checkpoint or step >= options.steps:
            save(step)
            next_checkpoint = training.next_checkpoint_step(step, options.checkpoint_every)
    steps.report(step)
    progress.report("trained", step=step)
    training.finish(task, options, program, model, save(step), step)
    # Here, not after returning: the return would free the per-worker iterator, whose
    # destructor talks to every worker (4-14 s measured between `final` and `exit`).
    shutdown.exit_now(0)


def _fit(task: TaskContext, options: Options, program: Program, strategy):
    model = fit_loop.build_compiled_model(program, strategy)
    try:
        model.fit(
            tf.keras.utils.experimental.DatasetCreator(training.train_dataset_fn(program, options)),
            epochs=fit_loop.ps_fit_epochs(task.model_dir, options),
            steps_per_epoch=options.checkpoint_every,
            callbacks=fit_loop.fit_callbacks(task, options, synchronous=False),
            verbose=2,  # tf_keras rejects verbose=1 (a progress bar) under PS
        )
        step = int(model.optimizer.iterations.numpy())
        progress.report("trained", step=step)
        final = tf.train.latest_checkpoint(layout.checkpoint_dir(task.model_dir))
        training.finish(task, options, program, model, final, step)
    except CLUSTER_ERRORS as exc:
        resume = f"resume at the interrupted epoch (BackupAndRestore in {layout.backup_dir(task.model_dir)})"
        raise _lost_parameter_server(exc, task, "Model.fit", resume) from None
    shutdown.exit_now(0)


def _checkpoint_number(path: str) -> int:
    return int(path.rsplit("-", 1)[1])


def _lost_parameter_server(exc: Exception, task: TaskContext, where: str, resume: str) -> errors.WorkerError:
    """The chief lost part of its cluster: names the tasks TF's error names (ps or workers),
    each with its address, or says that TF named none. LostParameterServer (exit 4, counted),
    or PeerLost (exit 6, not counted) once this attempt saved a checkpoint
    (errors.after_peer_loss): a preempted ps or worker is no crash of ours."""
    named = sorted({(job, int(i)) for job, i in re.findall(r"/job:(ps|worker)/replica:\d+/task:(\d+)", str(exc))})
    cause = f"{type(exc).__name__}: {exit_cause.first_informative_line(str(exc))}"
    ps_named = [(job, i) for job, i in named if job == Role.PS.value]
    if named and not ps_named:
        # ClusterCoordinator retries on other workers; it gives up only when none is left
        # (workers unreachable for longer than its timeout).
        lost = errors.LostParameterServer(
            f"lost the workers {_tasks(named, task)} at {where} ({cause}): no worker was left "
            "to run steps on. Check why they failed (`logs NAME --role worker`); restarting the "
            f"chief once workers are back (restartPolicy OnFailure, or resubmit) will {resume}"
        )
    else:
        who = (
            _tasks(ps_named, task)
            if ps_named
            else "the cluster (TF's error names no task; ps: " + ", ".join(task.cluster.get(Role.PS.value, [])) + ")"
        )
        lost = errors.LostParameterServer(
            f"lost contact with {who} at {where} ({cause}). The ps holds the only copy of the "
            "variables, so training cannot go on. Restart the chief once the ps is back "
            f"(restartPolicy OnFailure does this, or resubmit the cluster) to {resume}"
        )
    return errors.after_peer_loss(str(lost), lost, progress.saved_step())


def _tasks(named: list[tuple[str, int]], task: TaskContext) -> str:
    def address(job: str, index: int) -> str:
        addresses = task.cluster.get(job, [])
        return f" ({addresses[index]})" if index < len(addresses) else ""

    return ", ".join(f"{job}-{index}{address(job, index)}" for job, index in named)
