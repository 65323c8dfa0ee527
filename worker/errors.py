"""The worker's user-facing failures and their exit codes.

The launcher and the user read these codes from a pod's (or local task's) exit status, so each
failure class keeps its own number. Every message says what went wrong, where, and how to fix it.
"""

from __future__ import annotations

import os
import socket

# Exit codes of `python -m worker` (documented in `python -m worker --help`); the numbers live
# in the contract, which the launcher reads them from too.
from worker import contract, exit_cause
from worker.contract import (  # noqa: F401  (re-exported: the worker raises by these names)
    EXIT_CONFIG,
    EXIT_DIVERGED_RESTORE,
    EXIT_LOST_PARAMETER_SERVER,
    EXIT_NODE_FAULT,
    EXIT_OK,
    EXIT_PEER_LOST,
    EXIT_PEERS_UNREACHABLE,
    EXIT_PREEMPTED,
    EXIT_SUPERSEDED,
    EXIT_UNEXPECTED,
)


class WorkerError(Exception):
    """A failure the worker explains in one message instead of a traceback."""

    exit_code = EXIT_CONFIG


class ConfigError(WorkerError):
    exit_code = EXIT_CONFIG


class Retried(WorkerError):
    """A failure a new attempt may get past (a transient kind of exception: OSError, ...), said in
    one line with its rule: exit 1, retried and counted like an unexpected exception."""

    exit_code = EXIT_UNEXPECTED


class PeersUnreachable(WorkerError):
    exit_code = EXIT_PEERS_UNREACHABLE


class LostParameterServer(WorkerError):
    exit_code = EXIT_LOST_PARAMETER_SERVER


class DivergedRestore(WorkerError):
    exit_code = EXIT_DIVERGED_RESTORE


class CheckpointMismatch(WorkerError):
    """The model dir's checkpoint was written by a different model: deterministic, like a bad
    argument (worker/model_dir/checkpoint_match.py)."""

    exit_code = EXIT_CONFIG


class PeerLost(WorkerError):
    exit_code = EXIT_PEER_LOST


class NodeFault(WorkerError):
    """The node this task runs on, not the program, is at fault: a retry in a new pod (perhaps
    on another node) can succeed, so it is retried, and counted (docs/lifecycle.md)."""

    exit_code = EXIT_NODE_FAULT

    def __init__(self, what: str):
        pod_node = os.environ.get(contract.NODE_NAME)
        node = pod_node or socket.gethostname()  # a local task's node is its machine
        remedy = f"repair that node or keep tasks off it (kubectl cordon {node})" if pod_node else "repair it"
        super().__init__(
            f"node fault on node {node}: {what}; retried in a new attempt (counted against backoffLimit): "
            f"if it repeats, {remedy}"
        )


def after_peer_loss(message: str, counted: WorkerError | None, saved_step: int | None) -> WorkerError | None:
    """What a task that lost a peer exits with: PeerLost (not counted against backoffLimit) when
    this attempt saved a checkpoint beyond the step it restored (`saved_step`:
    progress.saved_step()), else `counted` (None: let the original error go on).

    Only saved progress earns an uncounted restart, so restarts that save nothing (a peer that
    is never back, a network that fails every time) still end at backoffLimit.
    """
    if saved_step is None:
        return counted
    return PeerLost(
        f"{message}; this attempt had saved step {saved_step}, so this restart is not "
        f"counted against backoffLimit (exit {EXIT_PEER_LOST})"
    )


def cause_line(exc: BaseException) -> str:
    """An unexpected exception as the one line `status` shows: its type and the first line of
    its message that says something (never a tensor printout from the message's tail)."""
    return exit_cause.exception_line(type(exc).__name__, str(exc))


def from_missing_module(exc: ModuleNotFoundError) -> ConfigError | None:
    """A missing module of the worker's training stack, as a configuration error that says what
    to install (a restart would fail alike); None for any other module."""
    message = contract.missing_module_message(exc.name or "")
    return None if message is None else ConfigError(message)


def write_termination_message(message: str, path: str = contract.TERMINATION_MESSAGE_PATH) -> None:
    """Leave the one-line reason where Kubernetes reads it into the pod's status (and so
    `status`). Only into a file the kubelet mounted: never create one outside a pod."""
    if os.path.isfile(path) and os.access(path, os.W_OK):
        with open(path, "w", encoding="utf-8") as out:
            out.write(message)
