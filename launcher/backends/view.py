"""What a backend's wait() shows while a cluster runs, when the caller gives no view of its own:
one plain line whenever the phase or a task changes, and every `every_seconds` while training
advances (CI logs, pipes, the API). The CLI's live panel is launcher/live_view.py.
"""

from __future__ import annotations

import time
from typing import IO, Callable

from launcher.backends.base import View
from launcher.status.lines import printable, state_line, status_line
from launcher.status.status import ClusterStatus

DEFAULT_LINE_SECONDS = 10.0


class LineView:
    """Plain lines: the state line (phase, tasks, message) when it changes, and the training
    summary every `every_seconds` when that changed (None: only with the state line)."""

    def __init__(
        self,
        out: IO[str],
        every_seconds: float | None = DEFAULT_LINE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.out = out
        self.every = every_seconds
        self.clock = clock
        self._state: str | None = None
        self._shown: str | None = None
        self._shown_at = 0.0

    def show(self, status: ClusterStatus) -> None:
        state, line = state_line(status), status_line(status)
        due = self.every is not None and self.clock() - self._shown_at >= self.every
        if state != self._state or (due and line != self._shown):
            self._state, self._shown, self._shown_at = state, line, self.clock()
            self.note(line)

    def note(self, text: str) -> None:
        print(printable(text), file=self.out, flush=True)

    def close(self) -> None:
        pass


class NoteStream:
    """A text stream whose lines become the view's notes (the local supervisor's messages, so
    that they scroll above a live panel instead of tearing it)."""

    def __init__(self, view: View):
        self.view = view
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self.view.note(line)
        return len(text)

    def flush(self) -> None:
        pass
