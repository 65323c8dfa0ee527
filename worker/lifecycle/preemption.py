"""SIGTERM means "save the current step and go": pod deletion, a node drain, a spot reclaim.

Kubernetes sends SIGTERM to the container's PID 1 and SIGKILLs it when the pod's grace period
(`terminationGracePeriodSeconds`) ends. The built-in worker is PID 1 in its container, and the
kernel drops a signal whose disposition is the default for PID 1, so without a handler the task
would train on, unaware, until the SIGKILL (31.7 s, measured on kind), while the Job starts its
replacement. With this module:

- SIGTERM is blocked in every thread and taken by one thread with sigwait (`install`), so no
  handler TensorFlow installs can swallow it. Once TensorFlow's set-up is past (the strategy
  exists), the main thread unblocks it again (`unblock_in_this_thread`): a child process
  keeps its parent thread's signal mask through exec, and one started with SIGTERM blocked
  would ignore the pod's SIGTERM and be SIGKILLed at the end of the grace.
- Until a training loop takes over (`defer()`), SIGTERM ends the process at once with
  EXIT_PREEMPTED: nothing is lost before the first step.
- Inside a loop, the handler only records the request; the loop saves a checkpoint of the step
  it has reached at its next step boundary, reports `tfk8s-progress {"event": "preempted",
  "step": N, "checkpoint": ...}` and exits EXIT_PREEMPTED (`exit_preempted`). The restarted task
  restores that checkpoint, so its `start` event reports the same step: no step is lost.
- Synchronous strategies (MWMS, mirrored): every worker votes each step, so all of them save
  at the same step (worker/lifecycle/agreement.py; not TF's PreemptionCheckpointHandler, which ignores
  SIGTERM on GCE nodes).

EXIT_PREEMPTED (143) is not a failure: the launcher restarts the task without counting it
against backoffLimit (a Job podFailurePolicy rule on Kubernetes, the same rule locally).
"""

from __future__ import annotations

import os
import signal
import threading

from worker import errors, progress
from worker.lifecycle import shutdown

_requested = threading.Event()
_first_sigterm = threading.Lock()  # two threads may take SIGTERMs: only the first one acts
_deferred = False
_unblocked = False
_server_exit: list = []  # a server's last words before its preempted exit (exit_on_sigterm_...)


# Under parameter_server, steps scheduled ahead of the chief's look at a SIGTERM request (about
# 0.2 s of digits training): a closure once scheduled cannot be recalled, so the custom loop
# joins each slice, and fit waits for the step this many batches back (worker/roles).
PS_SLICE_STEPS = 10


def install() -> None:
    """Called first thing by `python -m worker`, while the main thread is the only thread:
    SIGTERM is blocked in it, so in every thread started later (each inherits the mask: the
    TensorFlow import, gRPC's and TF's own C++ threads), and one thread takes it with sigwait.

    A handler would not do: MultiWorkerMirroredStrategy(...) installs TF's C++ SIGTERM notifier
    (preemption_notifier.cc) while it waits for its peers, which replaces any handler and only
    logs "SIGTERM caught": a pod deleted, drained or preempted in that window trained on to the
    SIGKILL (exit 137, counted). A blocked signal reaches no handler, TF's included; it waits
    for sigwait. Before training (`defer()`) the task then exits at once with EXIT_PREEMPTED,
    also inside that constructor, whose wait runs without the GIL (gil_free_wait.py)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=_take_sigterm, name="tfk8s-sigterm", daemon=True).start()


def _take_sigterm() -> None:
    while True:
        signal.sigwait({signal.SIGTERM})
        _on_sigterm()


def unblock_in_this_thread() -> None:
    """Called on the main thread once TensorFlow has installed what it installs on SIGTERM (a
    strategy's constructor: MultiWorkerMirroredStrategy's C++ notifier): the processes this
    thread starts from now on (the program's and the worker's), and the threads it starts, no
    longer inherit a blocked SIGTERM.

    SIGTERM then reaches whichever unblocked thread the kernel picks, so its disposition is
    set here, over TensorFlow's: Python's C-level handler, which needs no GIL and writes the
    signal's number to a wakeup pipe, read by a thread that acts at once (`_take_wakeups`),
    whatever the main thread is doing. A disposition is needed anyway: as PID 1, a process
    whose main thread does not block SIGTERM and has no handler drops the signal."""
    global _unblocked
    if _unblocked:
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    threading.Thread(target=_take_wakeups, args=(read_end,), name="tfk8s-sigterm-wakeup", daemon=True).start()
    signal.signal(signal.SIGTERM, _acted_on_by_the_wakeup_thread)
    signal.siginterrupt(signal.SIGTERM, False)  # a C++ thread's system call resumes, no EINTR
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    _unblocked = True


def _acted_on_by_the_wakeup_thread(signum, frame) -> None:
    """Python runs a handler on the main thread, late if it is inside a C call: nothing to do."""


def _take_wakeups(read_end: int) -> None:
    while True:
        for signum in os.read(read_end, 64):
            if signum == signal.SIGTERM:
                _on_sigterm()


def defer() -> None:
    """From now on the training loop saves before exiting: SIGTERM only records the request."""
    global _deferred
    _deferred = True


def exit_on_sigterm_from_a_thread(before_exit=None) -> None:
    """For tasks that block in C++ (a ps/worker server's join()): SIGTERM ends them with
    EXIT_PREEMPTED (they hold no state of their own to save), after `before_exit` (a server
    serving on while the chief saves). The sigwait thread of install() runs it, whatever the
    main thread is doing; as PID 1 of its container (a JobSet's ps and workers run without our
    supervisor), a blocked signal is never dropped as one with the default disposition would be."""
    _server_exit.append(before_exit)


def requested() -> bool:
    return _requested.is_set()


def exit_preempted(step: int | None, checkpoint: str | None) -> None:
    progress.report("preempted", step=step, checkpoint=checkpoint)
    shutdown.exit_now(errors.EXIT_PREEMPTED)


def _on_sigterm() -> None:
    with _first_sigterm:
        if _requested.is_set():
            return
        _requested.set()
    if _server_exit:
        if _server_exit[0] is not None:
            _server_exit[0]()
        exit_preempted(None, None)
    if not _deferred:
        exit_preempted(None, None)
    progress.report("sigterm", action="saving at the next step boundary, then exiting")
