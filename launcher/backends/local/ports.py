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

import ipaddress
import select
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Callable

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


# TensorFlow's gRPC servers bind every interface, whatever TF_CONFIG names (TF 2.21's
# grpc_server_lib.cc listens on "0.0.0.0:<port>", which gRPC opens as `[::]:<port>`, dual stack;
# `ss -ltn` shows `*:<port>`), and TF's gRPC has no authentication: whoever reaches the port
# reads and writes files as the task's user. No TF setting binds loopback only. What the kernel
# does allow: a listener bound to one address wins a connection to that address over a wildcard
# listener of the same port, when both set SO_REUSEPORT (one user's sockets). So the supervisor
# listens on each task port at every address of this machine but loopback, and closes what
# connects there; the tasks get TF_GRPC_REUSE_PORT=true, which makes TF's server set
# SO_REUSEPORT (without it the server's bind would fail beside these listeners).
GUARD_REFRESH_SECONDS = 2.0  # how soon an address that appears (a VPN, a new lease) is guarded


def machine_addresses() -> list[tuple]:
    """Every address of this machine but loopback, as socket.bind takes it: (host, port 0) for
    IPv4, (host, 0, 0, scope id) for IPv6 (a link-local one needs its interface). Linux: from
    /proc/net/fib_trie (the `/32 host LOCAL` entries) and /proc/net/if_inet6; elsewhere none."""
    found: list[tuple] = []
    try:
        trie = Path("/proc/net/fib_trie").read_text().splitlines()
        inet6 = Path("/proc/net/if_inet6").read_text().splitlines()
    except FileNotFoundError:
        return found
    for previous, line in zip(trie, trie[1:]):
        host = previous.strip().removeprefix("|-- ")
        if line.strip() == "/32 host LOCAL" and not host.startswith("127.") and (host, 0) not in found:
            found.append((host, 0))
    for line in inet6:
        hexed, index, _, scope, _, _ = line.split()
        host = ipaddress.IPv6Address(int(hexed, 16))
        if not host.is_loopback:
            found.append((str(host), 0, 0, int(index, 16) if host.is_link_local else 0))
    return found


class OffLoopbackGuard:
    """Listeners on `ports` at every address of this machine but loopback (machine_addresses,
    looked at again by refresh()), each connection closed at once (a reset): what reaches a
    task's port from the network meets this, not the task. close() ends them."""

    def __init__(self, ports: list[int], say: Callable[[str], None]):
        self._ports = list(ports)
        self._say = say
        self._listeners: dict[tuple, socket.socket] = {}
        self._failed: set[tuple] = set()  # said once each
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._refreshed = 0.0
        self.refresh()
        self._thread = threading.Thread(target=self._reset_connections, name="off-loopback-guard", daemon=True)
        self._thread.start()

    def refresh(self) -> None:
        """Listen at the addresses that appeared since the last refresh (at most every
        GUARD_REFRESH_SECONDS); an address that went away keeps its closed listener."""
        if not self._ports or time.monotonic() - self._refreshed < GUARD_REFRESH_SECONDS:
            return
        self._refreshed = time.monotonic()
        for address in machine_addresses():
            for port in self._ports:
                key = (*address[:1], port, *address[2:])
                if key in self._listeners or key in self._failed:
                    continue
                family = socket.AF_INET6 if len(address) == 4 else socket.AF_INET
                listener = socket.socket(family, socket.SOCK_STREAM)
                try:
                    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                    listener.bind(key)
                    listener.listen(16)
                    listener.setblocking(False)
                except OSError as exc:
                    listener.close()
                    self._failed.add(key)
                    self._say(
                        f"warning: cannot guard task port {port} at {address[0]} ({exc.strerror}): the task's "
                        f"unauthenticated gRPC may be reachable there from the network"
                    )
                    continue
                with self._lock:
                    self._listeners[key] = listener

    def _reset_connections(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                listeners = list(self._listeners.values())
            if not listeners:
                self._closed.wait(0.2)
                continue
            ready, _, _ = select.select(listeners, [], [], 0.2)
            for listener in ready:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    continue
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
                connection.close()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)
        with self._lock:
            for listener in self._listeners.values():
                listener.close()
            self._listeners = {}
