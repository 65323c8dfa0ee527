"""Ending a worker process without TensorFlow's teardown.

Returning from a role's loop frees its strategy, datasets, coordinator and remote functions, and
their destructors talk to the other tasks (deleting remote iterators and functions, leaving the
collective group). Measured here, that took 0.2-30 s after the final checkpoint, silently: a
custom-loop PS chief (see the notes), and MWMS workers whose peer had already exited (3-13 s).
Everything is written by then, so the loops call exit_now() at their end instead of returning,
and `__main__` does the same for errors, while the failed frames are still referenced.
"""

from __future__ import annotations

import os
import sys

from worker import errors, metrics, progress


def exit_now(code: int):
    progress.report("exit", code=code)
    if code != errors.EXIT_PREEMPTED:  # a preempted task's grace is for its save, not a scrape
        metrics.wait_for_last_scrape()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
