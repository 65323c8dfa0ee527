"""Machine-readable progress lines on stdout: `tfk8s-progress {"event": ..., ...}`.

The format and the event names are the contract's (worker/contract.py); the launcher reads these
lines for `status` and its live view, bench/local.py and the process tests for time to first
step and steps/s.
"""

from __future__ import annotations

import json
import os
import time

from worker import metrics
from worker.contract import (
    DEFAULT_PROGRESS_SECONDS,
    EVENT_STEP,
    PROGRESS_PREFIX,
    PROGRESS_SECONDS,
    parse_progress_line,
)

PREFIX = PROGRESS_PREFIX

# When this module is first imported, which `python -m worker` does before importing TensorFlow,
# so "seconds since start" includes TF's import time (the Python interpreter's own start-up of
# about 0.05 s is not included).
PROCESS_START = time.time()


def seconds_since_start() -> float:
    return round(time.time() - PROCESS_START, 3)


# Events that follow a save of the training state (a checkpoint; fit's epoch end, when
# BackupAndRestore saves): the last step such an event named in this process, and the step
# training started from ("start").
SAVED_EVENTS = ("checkpoint", "epoch")
_saved: dict[str, int | None] = {"step": None, "start": None}


def report(event: str, **fields) -> None:
    # t: seconds since this process started; wall: Unix time, to line up events of tasks.
    record = {"event": event, "t": seconds_since_start(), "wall": round(time.time(), 3), **fields}
    print(PREFIX + json.dumps(record, sort_keys=True), flush=True)
    metrics.observe(record)
    if event in SAVED_EVENTS:
        _saved["step"] = int(fields.get("step") or 0)
    elif event == "start":
        _saved["start"] = int(fields.get("step") or 0)


def saved_step() -> int | None:
    """The step this process last saved beyond the one it started from (None: no progress
    saved yet; a save at the restored step, as on a preemption at once, is none), for
    errors.after_peer_loss."""
    step, start = _saved["step"], _saved["start"]
    return step if step is not None and (start is None or step > start) else None


def parse_line(line: str) -> dict | None:
    """The record in one log line, or None if the line is not a progress line."""
    return parse_progress_line(line)


def progress_seconds() -> float:
    value = os.environ.get(PROGRESS_SECONDS, "")
    try:
        seconds = float(value) if value else DEFAULT_PROGRESS_SECONDS
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        from worker.errors import ConfigError

        raise ConfigError(f"{PROGRESS_SECONDS}={value!r}: must be a number of seconds > 0")
    return seconds


class StepReporter:
    """`step` events every `every_seconds` while training runs: the view's live step, loss and
    steps/s. Losses are passed as they come (tensors are fine) and converted only when a line is
    due, so reporting adds no per-step synchronisation.

    The first step (tracing, connecting to the ps) is reported by `first_step`, without a rate:
    rates and ETAs start after it, or the first ETA would be off by the start-up time.
    """

    def __init__(self, step: int, target: int, every_seconds: float | None = None, clock=time.monotonic):
        self.target = target
        self.every = progress_seconds() if every_seconds is None else every_seconds
        self.clock = clock
        self.timing = False  # set by first_step
        self._since = clock()
        self._since_step = step
        self._losses: list = []

    def add(self, loss) -> None:
        self._losses.append(loss)

    def due(self) -> bool:
        return self.timing and self.clock() - self._since >= self.every

    def maybe_report(self, step: int) -> None:
        if self.due():
            self.report(step)

    def first_step(self, step: int) -> None:
        """The first steps are done: report them without a rate and start timing from here."""
        self._since_step = step
        self.report(step)
        self.timing = True

    def report(self, step: int) -> None:
        now = self.clock()
        losses = [float(x) for x in self._losses]
        seconds = now - self._since
        fields = {"step": step, "target": self.target}
        if losses:
            fields["loss"] = round(sum(losses) / len(losses), 5)
        if step > self._since_step and seconds > 0:
            fields["steps_per_s"] = round((step - self._since_step) / seconds, 3)
        report(EVENT_STEP, **fields)
        self._since, self._since_step, self._losses = now, step, []
