"""SIGTERM means "save the current step and go": pod deletion, a node drain, a spot reclaim.

Kubernetes sends SIGTERM to the container's PID 1 and SIGKILLs it when the pod's grace period
(`terminationGracePeriodSeconds`) ends. The built-in worker is PID 1 in its container, and the
kernel drops a signal whose disposition is the default for PID 1, so without a handler the task
would train on, unaware, until the SIGKILL (31.7 s, measured on kind), while the Job starts its
replacement. With this module:

- Until a training loop takes over (`defer()`), SIGTERM ends the process at once with
  EXIT_PREEMPTED: nothing is lost before the first step.
- Inside a loop, the handler only records the request; the loop saves a checkpoint of the step
  it has reached at its next step boundary, reports `tfk8s-progress {"event": "preempted",
  "step": N, "checkpoint": ...}` and exits EXIT_PREEMPTED (`exit_preempted`). The restarted task
  restores that checkpoint, so its `start` event reports the same step: no step is lost.
- Synchronous strategies (MWMS, mirrored): every worker votes each step, so all of them save
  at the same step (worker/agreement.py; not TF's PreemptionCheckpointHandler, which ignores
  SIGTERM on GCE nodes).

EXIT_PREEMPTED (143) is not a failure: the launcher restarts the task without counting it
against backoffLimit (a Job podFailurePolicy rule on Kubernetes, the same rule locally).
"""
from __future__ import annotations

import os
import signal
import threading

from worker import errors, progress, shutdown

_requested = threading.Event()
_deferred = False


def install() -> None:
    """Called first thing by `python -m worker`: SIGTERM before training ends the task now."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def defer() -> None:
    """From now on the training loop saves before exiting: SIGTERM only records the request."""
    global _deferred
    _deferred = True
    reclaim()


def reclaim() -> None:
    """Takes SIGTERM back after TensorFlow took it: MultiWorkerMirroredStrategy's coordination
    agent installs a C++ handler of its own (preemption_notifier.cc, "SIGTERM caught"), which
    only logs, so the task would train on to the SIGKILL. Called right after the strategy is
    created, and again by defer()."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def exit_on_sigterm_from_a_thread(before_exit=None) -> None:
    """For tasks that block in C++ (a ps/worker server's join()), where a Python handler never
    runs: SIGTERM ends them with EXIT_PREEMPTED from a thread (they hold no state of their own
    to save).

    Not SIG_DFL: as PID 1 of its container (a JobSet's ps and workers run without our
    supervisor), the kernel drops a SIGTERM whose disposition is the default, and the pod
    would live on until the SIGKILL at the end of its grace period. So a handler stays
    installed, and Python's C-level handler, which runs whatever the main thread is doing,
    writes the signal number to the wakeup fd that the thread reads.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: None)

    def exit_on_sigterm() -> None:
        while signal.SIGTERM not in os.read(read_fd, 64):
            pass
        if before_exit is not None:
            before_exit()
        exit_preempted(None, None)

    threading.Thread(target=exit_on_sigterm, name="tfk8s-sigterm", daemon=True).start()


def requested() -> bool:
    return _requested.is_set()


def exit_preempted(step: int | None, checkpoint: str | None) -> None:
    progress.report("preempted", step=step, checkpoint=checkpoint)
    shutdown.exit_now(errors.EXIT_PREEMPTED)


def _on_sigterm(signum, frame) -> None:
    if _requested.is_set():
        return
    _requested.set()
    if not _deferred:
        exit_preempted(None, None)
    progress.report("sigterm", action="saving at the next step boundary, then exiting")
