"""ps and worker tasks under parameter_server: serve variables and closures until killed.

`server.join()` never returns: the launcher ends these tasks (SIGTERM) once training is over
(as Jobs, through the supervisor; in a JobSet, JobSet deletes their Jobs), and counts them as
completed. A Python handler would never run while `join()` blocks in C++, so SIGTERM is
answered from a thread (preemption.exit_on_sigterm_from_a_thread), also when this process is
PID 1. A server holds nothing of its own to save (the chief checkpoints the variables), so
exiting 143 is a clean preemption; but when the whole cluster gets SIGTERM at once (a JobSet
suspended by Kueue, a drained node), the chief is saving the current step from the ps'
variables, so the server keeps serving until the chief has gone, at most
TFK8S_SERVER_LINGER_SECONDS, which the launcher sets from the pod's grace period
(contract.server_linger_seconds), so it lasts as long as the chief's save may. A lone preempted
ps makes the chief restart from its last checkpoint then, as before.
"""
from __future__ import annotations

import os
import time

import tensorflow as tf

from worker import contract, errors, peers, preemption, progress
from worker.context import TaskContext


def run(task: TaskContext, resolver) -> int:
    cluster = resolver.cluster_spec()
    chief = (cluster.as_dict().get(contract.Role.CHIEF.value) or [None])[0]
    linger = _linger_seconds()
    # Before the server starts and says "serving": until this replaces the start-up handler, a
    # SIGTERM exits at once without lingering (seen under load: the whole window was ~2 s).
    preemption.exit_on_sigterm_from_a_thread(lambda: serve_while_up(chief, linger))
    server = tf.distribute.Server(
        cluster,
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    progress.report("serving", task=task.name, address=task.address(task.role, task.index))
    server.join()
    return 0  # not reached: join() blocks until the process is killed


def _linger_seconds() -> float:
    text = os.environ.get(contract.SERVER_LINGER, str(contract.DEFAULT_SERVER_LINGER_SECONDS))
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise errors.ConfigError(f"{contract.SERVER_LINGER}={text!r}: not a number of seconds >= 0")
    return value


def serve_while_up(chief: str | None, seconds: float) -> None:
    """After SIGTERM: go on serving while the chief's port answers, at most `seconds`."""
    if chief is None:
        return
    progress.report("sigterm", action=f"serving while the chief is up, at most {seconds:g} s")
    peer = peers.Peer(contract.task_name(contract.Role.CHIEF, 0), chief)
    deadline = time.monotonic() + seconds
    misses = 0  # the chief counts as gone after two misses in a row: one can be load (seen in CI)
    while time.monotonic() < deadline and misses < 2:
        misses = misses + 1 if peers.problem(peer) is not None else 0
        time.sleep(0.5)
