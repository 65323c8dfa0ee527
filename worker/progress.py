"""Machine-readable progress lines on stdout: `tfk8s-progress {"event": ..., ...}`.

The launcher streams task logs as they are, so progress is plain text any log reader can grep;
bench/local.py and the process tests parse these lines for time to first step and steps/s.
"""
from __future__ import annotations

import json
import time

from worker.contract import PROGRESS_PREFIX as PREFIX

# When this module is first imported, which `python -m worker` does before importing TensorFlow,
# so "seconds since start" includes TF's import time (the Python interpreter's own start-up of
# about 0.05 s is not included).
PROCESS_START = time.time()


def seconds_since_start() -> float:
    return round(time.time() - PROCESS_START, 3)


def report(event: str, **fields) -> None:
    # t: seconds since this process started; wall: Unix time, to line up events of tasks.
    record = {"event": event, "t": seconds_since_start(), "wall": round(time.time(), 3), **fields}
    print(PREFIX + json.dumps(record, sort_keys=True), flush=True)


def parse_line(line: str) -> dict | None:
    """The record in one log line, or None if the line is not a progress line.

    Accepts lines with a launcher prefix such as `[chief-0] tfk8s-progress {...}`.
    """
    at = line.find(PREFIX)
    if at < 0:
        return None
    return json.loads(line[at + len(PREFIX):])
