"""The ports of one local run, held from planning to the run's end so no other process gets one.

A task binds its gRPC (and metrics) port 10-15 s after it was planned, once it has imported
TensorFlow, and again at every restart. A port that was only seen free at planning goes meanwhile
to whoever asks first: another local run's planner, or the kernel, which picks the source port of
every outgoing connection from the same range. Several local trainings at once took each other's
ports that way. So the supervisor keeps each port bound for the whole run, without listening: the
kernel hands a bound port to no other bind to port 0 nor to any connect(), while the task can still
bind and listen on it, as SO_REUSEADDR allows beside a socket that does not listen. TF's gRPC
server, prometheus_client and the worker's own listener set SO_REUSEADDR; a program of the user's
must set it too (Go, asyncio and Python's socketserver do by default).
"""

from __future__ import annotations

import socket

# The tasks' address in TF_CONFIG. On Linux a port held there is held on every address too: a
# bind to 0.0.0.0 overlaps it. The task's own bind to 0.0.0.0 (TF's gRPC server) is still let
# through, being another address, where SO_REUSEADDR is read as BSD reads it (macOS).
HELD_ADDRESS = "127.0.0.1"


class HeldPorts:
    """`count` distinct ports of this machine, each kept bound until close()."""

    def __init__(self, count: int):
        self._sockets: list[socket.socket] = []
        try:
            for _ in range(count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # lets the task bind it too
                sock.bind((HELD_ADDRESS, 0))
        except BaseException:
            self.close()
            raise
        self.ports = [sock.getsockname()[1] for sock in self._sockets]

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    def __enter__(self) -> HeldPorts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
