"""ps and worker tasks under parameter_server: serve variables and closures until killed.

`server.join()` never returns: the launcher ends these tasks (SIGTERM) once training is over,
and counts them as completed. SIGTERM gets its default action back before `join()`: a Python
handler would never run while `join()` blocks in C++, so SIGTERM would be ignored and only
SIGKILL would work. A server holds nothing of its own to save (the chief checkpoints the
variables), so dying of the signal (exit status 143) is a clean preemption.
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
    preemption.restore_default()
    server.join()
    return 0  # not reached: join() blocks until the process is killed
