"""Reading a local run's log files: whole, the last lines, or followed while the run goes on."""

from __future__ import annotations

import collections
import logging
import time
from pathlib import Path
from typing import Callable, Iterator

from launcher.backends.local.supervisor import POLL_SECONDS
from launcher.errors import LauncherError


def read_log(
    path: Path, what: str, finished: Callable[[], bool], follow: bool, tail: int | None = None, per_task: bool = False
) -> Iterator[str]:
    """Lines of the log at `path` (`what`: whose, for messages), each ending in a newline like
    the Kubernetes backend's chunks (tail: only the last ones; per_task: the last ones of each
    `[task]` prefix of a combined log, as `logs --all --tail` gives on Kubernetes); with follow,
    until finished(): waiting for a log that does not exist yet."""
    if follow and not path.exists() and not finished():
        logging.getLogger("tfk8s.local").info(f"waiting for {what} to start (no log yet)")
    while follow and not path.exists() and not finished():
        time.sleep(POLL_SECONDS)
    if not path.exists():
        raise LauncherError(f"no log for {what} ({path})")
    with path.open("rb") as src:
        if tail is not None and per_task:
            yield from _last_lines_per_task(src, max(tail, 0))
        elif tail is not None:  # read to the end, keeping the last lines; follow from there
            for line in collections.deque(src, maxlen=max(tail, 0)):
                yield line.decode("utf-8", errors="replace")
        partial = b""  # a line the task is still writing
        while True:
            chunk = src.readline()
            if chunk:
                partial += chunk
                if partial.endswith(b"\n"):
                    yield partial.decode("utf-8", errors="replace")
                    partial = b""
                continue
            if not follow or finished():
                if partial:
                    yield partial.decode("utf-8", errors="replace")
                return
            time.sleep(POLL_SECONDS)


def _last_lines_per_task(src, tail: int) -> Iterator[str]:
    """The last `tail` lines of each `[task]` prefix (the launcher's `[tfk8s]` lines count as
    one more), in the order they were written; reads `src` to its end."""
    kept: dict[bytes, collections.deque] = {}
    for number, line in enumerate(src):
        prefix = line.split(b"] ", 1)[0] if line.startswith(b"[") else b""
        kept.setdefault(prefix, collections.deque(maxlen=tail)).append((number, line))
    for _, line in sorted(entry for lines in kept.values() for entry in lines):
        yield line.decode("utf-8", errors="replace")
