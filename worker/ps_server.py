"""ps and worker tasks under parameter_server: serve variables and closures until killed.

`server.join()` never returns: the launcher ends these tasks (SIGTERM) once training is over
(as Jobs, through the supervisor; in a JobSet, JobSet deletes their Jobs), and counts them as
completed. A Python handler would never run while `join()` blocks in C++, so SIGTERM is
answered from a thread (preemption.exit_on_sigterm_from_a_thread), also when this process is
PID 1. A server holds nothing of its own to save (the chief checkpoints the variables), so
exiting 143 at once is a clean preemption.
"""
from __future__ import annotations

import tensorflow as tf

from worker import preemption, progress
from worker.context import TaskContext


def run(task: TaskContext, resolver) -> int:
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    progress.report("serving", task=task.name, address=task.address(task.role, task.index))
    preemption.exit_on_sigterm_from_a_thread()
    server.join()
    return 0  # not reached: join() blocks until the process is killed
