"""What `submit --wait`, `submit --local` and `status --watch` show on a terminal while a cluster
runs: a live panel (rich) with the phase, the tasks, a progress bar with steps/s, ETA, the last
loss and the last evaluation. Elsewhere (CI logs, pipes) the CLI shows the backends' plain lines
(launcher/backends/view.py).
"""

from __future__ import annotations

import sys
from typing import IO

from launcher.backends.base import View
from launcher.backends.view import DEFAULT_LINE_SECONDS, LineView
from launcher.status.lines import printable, tasks_summary
from launcher.status.status import ClusterStatus


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
        self.console.print(printable(text), markup=False, highlight=False)

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
    if status.message:  # a failed task's last output line among them: no terminal control
        header.append(f" {printable(status.message)}")
    tasks = Text("  " + tasks_summary(status) + "  (running/replicas)")
    parts = [header, tasks]
    training = status.training
    if training is not None:
        row = Table.grid(padding=(0, 1))
        if training.target:
            row.add_column(width=30)
        row.add_column()
        cells = [printable(", ".join(training.facts(fraction=False)))]
        if training.target:
            cells.insert(0, ProgressBar(total=training.target, completed=training.step or 0, width=30))
        row.add_row(*cells)
        parts.append(row)
        if training.evaluation is not None:
            parts.append(Text("  " + printable(training.evaluation.summary())))
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
