"""Wait until every peer a task needs answers, or fail with one error naming the missing ones.

Without this wait TF hangs or fails deep inside gRPC: the PS coordinator retries connecting for
about 3 minutes and then raises an error that names no task, and MWMS blocks in collective setup
with no message at all. Here a peer counts as up once its DNS name resolves and its port accepts
a TCP connection.

Who waits for whom:
- parameter_server: the chief waits for every worker and ps (they serve from the moment they
  start); workers and ps wait for nobody: the chief connects to them.
- multi_worker_mirrored: every worker waits for every other worker.
- mirrored and the evaluator: nobody (one process; the evaluator never joins the cluster).

MWMS workers open their gRPC port only when they create the strategy, which happens after this
wait, so two workers would each wait for the other's closed port forever. Each MWMS worker
therefore holds its own port open with a plain listening socket while it waits (see
`hold_own_port`), and closes it just before TensorFlow binds the same port.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from worker import contract, errors
from worker.context import TaskContext

# A round of checks is a DNS lookup and a TCP connect per pending peer: cheap, and each round
# saved is time the chief would otherwise sit idle after the last server came up.
POLL_SECONDS = 0.25
# A held port stays open this long after its holder's wait ends (hold_own_port).
HOLD_LINGER_SECONDS = 2.0
CONNECT_TIMEOUT_SECONDS = 2.0
STATUS_EVERY_SECONDS = 15.0


@dataclass(frozen=True)
class Peer:
    name: str  # worker-1
    address: str  # host:port

    @property
    def host_port(self) -> tuple[str, int]:
        return split_address(self.address)


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise errors.ConfigError(f"address {address!r} in TF_CONFIG is not host:port")
    return host.strip("[]"), int(port)


def peers_needed(task: TaskContext) -> list[Peer]:
    return [
        Peer(contract.task_name(role, i), address)
        for role in contract.awaited_peers(task.strategy, task.role)
        for i, address in enumerate(task.cluster.get(role.value, []))
        if (role, i) != (task.role, task.index)
    ]


def holds_own_port(task: TaskContext) -> bool:
    """MWMS workers hold their port while waiting (see the module docstring)."""
    return task.strategy is contract.Strategy.MULTI_WORKER_MIRRORED and task.role is contract.Role.WORKER


def problem(peer: Peer) -> str | None:
    """Why `peer` is not reachable right now, or None if its port accepts connections."""
    host, port = peer.host_port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"DNS name {host!r} does not resolve ({exc.strerror})"
    last = "no address"
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(CONNECT_TIMEOUT_SECONDS)
                sock.connect(sockaddr)
                return None
        except ConnectionRefusedError:
            last = f"connection refused on port {port}"
        except socket.timeout:
            last = f"no answer on port {port} within {CONNECT_TIMEOUT_SECONDS:g} s"
        except OSError as exc:
            last = f"cannot connect to port {port} ({exc.strerror or exc})"
    return last


def wait_for_peers(
    peers: list[Peer],
    timeout_seconds: float,
    *,
    log: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> float:
    """Block until every peer is reachable; returns the seconds waited.

    A peer that answered once is not checked again: a peer that restarts later is TF's business
    (the coordinator retries workers; MWMS fails and restarts).
    """
    start = clock()
    pending = {peer.name: peer for peer in peers}
    reasons: dict[str, str] = {}
    last_status = start
    if pending:
        log(
            f"tfk8s: waiting up to {timeout_seconds:g} s for peers: "
            + ", ".join(f"{p.name} ({p.address})" for p in peers)
        )
    while pending:
        for name, peer in list(pending.items()):
            reason = problem(peer)
            if reason is None:
                del pending[name]
            else:
                reasons[name] = reason
        if not pending:
            break
        now = clock()
        if now - start >= timeout_seconds:
            missing = "; ".join(f"{p.name} at {p.address}: {reasons[name]}" for name, p in pending.items())
            raise errors.PeersUnreachable(
                f"{len(pending)} of {len(peers)} peers unreachable after {timeout_seconds:g} s "
                f"(TFK8S_PEER_TIMEOUT): {missing}. Check that those tasks are running "
                "(`python -m launcher status <cluster>`) and that TF_CONFIG names their "
                "addresses; raise peerTimeoutSeconds in the spec if they start slowly"
            )
        if now - last_status >= STATUS_EVERY_SECONDS:
            log(
                f"tfk8s: still waiting after {now - start:.0f} s for: "
                + ", ".join(f"{name} ({reasons[name]})" for name in pending)
            )
            last_status = now
        time.sleep(POLL_SECONDS)
    waited = clock() - start
    if peers:
        log(f"tfk8s: all {len(peers)} peers reachable after {waited:.1f} s")
    return waited


@contextmanager
def hold_own_port(address: str, linger_seconds: float = HOLD_LINGER_SECONDS) -> Iterator[None]:
    """Accept (and drop) connections on our own port until the block ends.

    The port stays open `linger_seconds` after the block, so that peers, which poll every
    POLL_SECONDS (but a round can take longer: one connect per pending peer), see it once more
    before it closes for TF to take over.

    Binds all interfaces like TF's gRPC server does; SO_REUSEADDR lets TF bind the port again
    right after, despite connections this listener accepted and closed (TIME_WAIT).
    """
    _, port = split_address(address)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # as TF's server under a local run (TF_GRPC_REUSE_PORT): binds beside the launcher's
    # listeners at the machine's other addresses (launcher/backends/local/ports.py)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        listener.bind(("", port))
    except OSError as exc:
        listener.close()
        # Another process holds it (locally, one that took it after the launcher found it free):
        # a retry can find it free, and a port taken in every attempt still ends at backoffLimit.
        if exc.errno == errno.EADDRINUSE:
            raise errors.NodeFault(
                f"this task's own port {port} is in use by another process ({exc.strerror})"
            ) from None
        raise errors.ConfigError(
            f"cannot listen on this task's own port {port} ({exc.strerror}): pick another port in the spec"
        ) from None
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept_and_drop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=accept_and_drop, name="hold-own-port", daemon=True)
    thread.start()
    try:
        yield
        time.sleep(linger_seconds)
    finally:
        stop.set()
        thread.join()
        listener.close()
