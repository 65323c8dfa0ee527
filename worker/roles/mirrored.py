"""The chief under mirrored: one process training over all local GPUs (or the CPU if none)."""

from __future__ import annotations

import tensorflow as tf

from worker import progress
from worker.args import Options
from worker.context import TaskContext
from worker.lifecycle import preemption
from worker.program import Program
from worker.roles import synchronous, training


def run(task: TaskContext, options: Options, program: Program, resolver):
    """Trains, then exits the process (worker/lifecycle/shutdown.py)."""
    # No device list: MirroredStrategy takes every visible GPU, or the CPU when there is none.
    strategy = tf.distribute.MirroredStrategy()
    preemption.unblock_in_this_thread()  # the processes the program starts get SIGTERM
    progress.report("devices", devices=list(strategy.extended.worker_devices), replicas=strategy.num_replicas_in_sync)
    training.forget_stale_marker(task, options)
    if options.loop == "fit":
        synchronous.fit(task, options, program, strategy)
    else:
        synchronous.custom_loop(task, options, program, strategy)
