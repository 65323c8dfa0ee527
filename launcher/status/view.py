"""What `submit --wait`, `submit --local` and `status --watch` show while a cluster runs.

Two views of the same ClusterStatus: on a terminal a live panel (rich) with the phase, the
tasks, a progress bar with steps/s, ETA, the last loss and the last evaluation; elsewhere (CI
logs, pipes) one plain line whenever the phase or a task changes, and every `every_seconds`
while training advances.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Callable, Protocol

from launcher.status.status import ClusterStatus

DEFAULT_LINE_SECONDS = 10.0


class View(Protocol):
    def show(self, status: ClusterStatus) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


def tasks_summary(status: ClusterStatus) -> str:
    """`chief 1/1, worker 2/2, evaluator 0/1 (1 done)`: running of replicas per role."""

    def one(r) -> str:
        extra = [f"{n} {what}" for n, what in ((r.succeeded, "done"), (r.failed, "failed")) if n]
        return f"{r.role} {r.active}/{r.replicas}" + (f" ({', '.join(extra)})" if extra else "")

    return ", ".join(one(r) for r in status.roles)


def state_line(status: ClusterStatus) -> str:
    """`[Running] chief 1/1, worker 2/2, ps 1/1 - message`: what changes rarely."""
    line = f"[{status.phase}] {tasks_summary(status)}".rstrip()
    return line + (f" - {status.message}" if status.message else "")


def status_line(status: ClusterStatus) -> str:
    """The state line, then `| step 420/1000 (42%), 35 steps/s, ETA 0:00:16, loss 0.51; ...`"""
    line = state_line(status)
    if status.training is not None and (summary := status.training.summary()):
        line += " | " + summary
    return line


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
        print(text, file=self.out, flush=True)

    def close(self) -> None:
        pass


class LiveView:
    """A panel redrawn in place on a terminal (rich.live): lines printed meanwhile, the local
    launcher's notices among them, scroll above it."""

    def __init__(self, out: IO[str]):
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=out)
        self.live = Live(
            console=self.console,
            auto_refresh=False,
            transient=False,
            redirect_stdout=out is sys.stdout,
            redirect_stderr=out is sys.stderr,
        )
        self.live.start()

    def show(self, status: ClusterStatus) -> None:
        self.live.update(render(status), refresh=True)

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        self.live.stop()


def render(status: ClusterStatus):
    """The panel's content (rich renderables) for one status."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    header = Text.assemble(
        (f"{status.namespace}/{status.name} ", "bold"), (f"[{status.phase}]", _PHASE_STYLE.get(status.phase.value, ""))
    )
    if status.message:
        header.append(f" {status.message}")
    tasks = Text("  " + tasks_summary(status) + "  (running/replicas)")
    parts = [header, tasks]
    training = status.training
    if training is not None:
        row = Table.grid(padding=(0, 1))
        if training.target:
            row.add_column(width=30)
        row.add_column()
        cells = [", ".join(training.facts(fraction=False))]
        if training.target:
            cells.insert(0, ProgressBar(total=training.target, completed=training.step or 0, width=30))
        row.add_row(*cells)
        parts.append(row)
        if training.evaluation is not None:
            parts.append(Text("  " + training.evaluation.summary()))
    return Group(*parts)


_PHASE_STYLE = {
    "Succeeded": "green",
    "Failed": "red",
    "Stuck": "red",
    "NodeLost": "red",
    "Running": "cyan",
    "Finishing": "cyan",
    "Queued": "yellow",
    "Pending": "yellow",
}


def make_view(out: IO[str], every_seconds: float | None = DEFAULT_LINE_SECONDS) -> View:
    """The live panel on a terminal, plain lines otherwise."""
    return LiveView(out) if out.isatty() else LineView(out, every_seconds)


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
