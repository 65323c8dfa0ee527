"""The worker's user-facing failures and their exit codes.

The launcher and the user read these codes from a pod's (or local task's) exit status, so each
failure class keeps its own number. Every message says what went wrong, where, and how to fix it.
"""
from __future__ import annotations

# Exit codes of `python -m worker` (documented in `python -m worker --help`).
EXIT_OK = 0
EXIT_UNEXPECTED = 1  # an unexpected exception; its traceback is in the log
EXIT_CONFIG = 2  # bad arguments, environment, TF_CONFIG or program module
EXIT_PEERS_UNREACHABLE = 3  # a peer never answered within TFK8S_PEER_TIMEOUT
EXIT_LOST_PARAMETER_SERVER = 4  # a ps died during training; restart the chief to resume
# SIGTERM (pod deletion, node drain, spot reclaim) after the current step was checkpointed; the
# same code a process killed by SIGTERM reports (128 + 15), so ps/worker servers that simply die
# of the signal read alike. Not a failure: the launcher restarts the task without counting it.
EXIT_PREEMPTED = 143
EXIT_DIVERGED_RESTORE = 5  # MWMS workers restored different steps: would train a wrong model


class WorkerError(Exception):
    """A failure the worker explains in one message instead of a traceback."""

    exit_code = EXIT_CONFIG


class ConfigError(WorkerError):
    exit_code = EXIT_CONFIG


class PeersUnreachable(WorkerError):
    exit_code = EXIT_PEERS_UNREACHABLE


class LostParameterServer(WorkerError):
    exit_code = EXIT_LOST_PARAMETER_SERVER


class DivergedRestore(WorkerError):
    exit_code = EXIT_DIVERGED_RESTORE
