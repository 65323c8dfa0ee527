"""Workers under multi_worker_mirrored: every worker trains; worker 0 is the chief (writer).

The strategy is created before any other TensorFlow op (collective ops must be configured at
program startup). Worker 0 writes checkpoints, the SavedModel and FINAL.json into the model dir;
the other workers write their share of each checkpoint into a temporary directory. Losing a
worker stops the others (collectives fail): with restartPolicy OnFailure they all restart and
resume from worker 0's latest checkpoint (custom loop) or backup (fit loop). A worker whose
collective failed after it had saved a checkpoint exits EXIT_PEER_LOST, which the Jobs do not
count (the lost worker's own failure counts against its index); before any save, it fails as
any error does (exit 1), counted.
"""

from __future__ import annotations

import tensorflow as tf

from worker import errors, exit_cause, progress
from worker.args import Options
from worker.context import TaskContext
from worker.contract import Role
from worker.lifecycle import gil_free_wait, preemption
from worker.program import Program
from worker.roles import synchronous, training


def run(task: TaskContext, options: Options, program: Program, resolver):
    """Trains, then exits the process (worker/lifecycle/shutdown.py)."""
    # The constructor waits for every peer to join; a SIGTERM meanwhile (TF's own notifier is
    # installed in there) ends the task at once (worker/lifecycle/gil_free_wait.py).
    with gil_free_wait.without_the_gil():
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver,
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=_collective(options.collective)
            ),
        )
    preemption.unblock_in_this_thread()  # after TF's notifier: the processes the program starts get SIGTERM
    progress.report(
        "connected",
        workers=len(task.cluster.get(Role.WORKER.value, [])),
        collective=_collective(options.collective).name,
        replicas=strategy.num_replicas_in_sync,
        writer=task.is_writer,
    )
    if task.is_writer:
        training.forget_stale_marker(task, options)
    try:
        if options.loop == "fit":
            synchronous.fit(task, options, program, strategy)
        else:
            synchronous.custom_loop(task, options, program, strategy, resolver)
    except PEER_ERRORS as exc:
        lost = errors.after_peer_loss(
            f"a collective failed ({type(exc).__name__}: "
            f"{exit_cause.first_informative_line(str(exc))}): a peer worker was lost; "
            "every worker restarts from worker 0's latest checkpoint",
            None,
            progress.saved_step(),
        )
        if lost is None:
            raise  # nothing saved yet: a counted failure, with its traceback
        raise lost from None


# What a collective raises when a peer worker is gone (TF's MWMS health check aborts the
# collectives with UnavailableError; a broken connection can read as any of these).
PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.DeadlineExceededError,
)


def _collective(choice: str):
    """--collective: auto is NCCL when this task sees a GPU (TF's own AUTO does not pick it on
    its own for MWMS), ring otherwise."""
    implementation = tf.distribute.experimental.CommunicationImplementation
    if choice == "auto":
        return implementation.NCCL if tf.config.list_physical_devices("GPU") else implementation.RING
    return {"ring": implementation.RING, "nccl": implementation.NCCL}[choice]
