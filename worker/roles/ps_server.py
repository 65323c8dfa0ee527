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
import socket
import threading
import time

import tensorflow as tf

from worker import contract, errors, progress
from worker.context import TaskContext
from worker.lifecycle import peers, preemption


def run(task: TaskContext, resolver) -> int:
    cluster = resolver.cluster_spec()
    chief = (cluster.as_dict().get(contract.Role.CHIEF.value) or [None])[0]
    linger = _linger_seconds()
    # Before the server starts and says "serving": until this replaces the start-up handler, a
    # SIGTERM exits at once without lingering (seen under load: the whole window was ~2 s).
    chief_address = LastKnownAddress(chief)
    preemption.exit_on_sigterm_from_a_thread(lambda: serve_while_up(chief_address, linger))
    chief_address.keep_fresh()
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


class LastKnownAddress:
    """The chief's address as last resolved. A pod being deleted leaves its headless Service's
    DNS records (its endpoint is no longer ready) while it still runs and saves: after the
    SIGTERM of a whole-cluster suspension the chief's name may no longer resolve although its
    port still answers at the address it had. So the name is resolved every REFRESH_SECONDS
    while serving, and the last answer is used when it stops resolving."""

    REFRESH_SECONDS = 10.0

    def __init__(self, address: str | None):
        self.peer = None if address is None else peers.Peer(contract.task_name(contract.Role.CHIEF, 0), address)
        self.known: list[str] = []  # host:port with the host as an IP address

    def refresh(self) -> None:
        if self.peer is None:
            return
        host, port = self.peer.host_port
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            return  # keep what was known
        self.known = [f"[{info[4][0]}]:{port}" if ":" in info[4][0] else f"{info[4][0]}:{port}" for info in infos]

    def keep_fresh(self) -> None:
        def loop():
            while True:
                self.refresh()
                time.sleep(self.REFRESH_SECONDS)

        threading.Thread(target=loop, name="chief-address", daemon=True).start()

    def answers(self) -> bool:
        """Whether the chief's port accepts a connection, by name or at its last known address."""
        if self.peer is None:
            return False
        if peers.problem(self.peer) is None:
            return True
        return any(peers.problem(peers.Peer(self.peer.name, address)) is None for address in self.known)


def serve_while_up(chief: LastKnownAddress, seconds: float) -> None:
    """After SIGTERM: go on serving while the chief's port answers, at most `seconds`."""
    if chief.peer is None:
        return
    progress.report(
        "sigterm", action=f"serving while the chief is up, at most {seconds:g} s", chief_addresses=chief.known
    )
    deadline = time.monotonic() + seconds
    misses = 0  # the chief counts as gone after two misses in a row: one can be load (seen in CI)
    while time.monotonic() < deadline and misses < 2:
        misses = misses + 1 if not chief.answers() else 0
        time.sleep(0.5)
    print(
        f"tfk8s: {'the chief stopped answering' if misses >= 2 else 'linger time is up'}; the server exits", flush=True
    )
