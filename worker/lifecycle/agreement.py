"""Synchronous workers stop together on a SIGTERM, without TF's PreemptionCheckpointHandler.

Why not TF's handler: it asks the GCE metadata server whether it runs on GCP
(`failure_handling_util.on_gcp`), and every GKE pod reaches that server. On a GCE CPU node it
then restores nothing and installs no SIGTERM handler; on a GCE GPU node it polls the server's
maintenance event instead of SIGTERM. Kubernetes, on every cloud and on bare metal, says
"stop" with SIGTERM (pod deletion, drain, spot reclaim, a Kueue suspend), so the worker
restores, watches SIGTERM and saves by itself, the same way everywhere.

How the workers agree: SIGTERM reaches one pod (or several, at different moments), but every
MWMS worker must save at the same step, since a save may all-reduce and the restart restores
one step for all. So each training step also sums, over all replicas, a flag that is 1 where
this task has received SIGTERM (worker/lifecycle/preemption.py records it). The sum is the same on every
worker after the same step; when it is positive, they all save that step and exit
EXIT_PREEMPTED. The flag is one float per replica in the step's own function (the custom loop)
or in one small function after each batch (Model.fit, whose step is tf_keras's).
"""

from __future__ import annotations

import tensorflow as tf

from worker import errors, progress
from worker.context import TaskContext
from worker.lifecycle import preemption
from worker.model_dir import layout


def flag() -> tf.Tensor:
    """This task's vote: 1.0 once it has received SIGTERM."""
    return tf.constant(1.0 if preemption.requested() else 0.0)


def make_train_step(strategy, replica_step):
    """One distributed step over the next batch: (the step's loss, summed over replicas, and
    the number of replicas whose task has received SIGTERM, the same on every worker). Loss
    and vote travel in one all-reduce: a second one per step cost 8% of the steps/s of a small
    model on 2 CPU workers (bench/vote.py)."""

    def replica_step_and_vote(images, labels, vote):
        return tf.stack([tf.cast(replica_step(images, labels), tf.float32), vote])

    @tf.function
    def train_step(iterator, vote):
        images, labels = next(iterator)
        both = strategy.run(replica_step_and_vote, args=(images, labels, vote))
        loss_and_votes = strategy.reduce(tf.distribute.ReduceOp.SUM, both, axis=None)
        return loss_and_votes[0], loss_and_votes[1]

    return train_step


def make_stop_vote(strategy):
    """For Model.fit: a function every worker calls after each batch; True when any worker has
    received SIGTERM (every worker gets the same answer after the same batch)."""

    @tf.function
    def votes(vote):
        return _sum_over_replicas(strategy, vote)

    return lambda: float(votes(flag())) > 0


def _sum_over_replicas(strategy, vote):
    """Each replica's copy of this task's vote, summed over every replica of every worker
    (under MWMS a cross-worker all-reduce, like the loss's)."""
    per_replica = strategy.run(tf.identity, args=(vote,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


def check_same_restored_step(strategy, task: TaskContext, step: int, restored: str | None) -> None:
    """All-gathers every worker's restored step: different steps mean different weights, and
    all-reducing gradients into them would train a wrong model without any error."""

    @tf.function
    def gather_steps():
        own = strategy.run(lambda: tf.constant([step], tf.int64))
        return strategy.gather(own, axis=0)

    steps = [int(s) for s in gather_steps().numpy()]
    progress.report("restored_steps", steps=steps)
    if len(set(steps)) > 1:
        raise errors.DivergedRestore(
            f"the workers restored different steps {steps} (this worker, {task.name}: step "
            f"{step} from {restored or 'no checkpoint'} in {layout.checkpoint_dir(task.model_dir)}); "
            "training them on would all-reduce gradients into different weights. Every MWMS "
            "worker must see the same checkpoint directory: use a ReadWriteMany "
            "PersistentVolumeClaim or a gs:// checkpoint dir. If it is shared, a worker read it "
            "while worker 0 was still saving; the restart that follows reads it again"
        )
