"""Progress events: what TFK8sClient.watch() yields, one per visible change of a cluster."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.status.lines import status_line
from launcher.status.status import ClusterStatus, Phase


def _training_field(field: str) -> property:
    """One field of the status's training progress, None while there is none."""
    return property(lambda event: getattr(event.status.training, field) if event.status.training else None)


@dataclass(frozen=True)
class JobEvent:
    """A cluster's state when it changed: its phase, tasks, message or training progress.

    step/target/loss/steps_per_s/eta_seconds/evaluation come from the success task's (chief,
    MWMS worker 0) and the evaluator's progress lines; None until they report. `line` is the
    status line the CLI prints for the same status."""

    status: ClusterStatus

    @property
    def name(self) -> str:
        return self.status.name

    @property
    def phase(self) -> Phase:
        return self.status.phase

    @property
    def finished(self) -> bool:
        return self.status.finished

    # What the cluster's training reports, None before it reports anything.
    step = _training_field("step")
    target = _training_field("target")
    loss = _training_field("loss")
    steps_per_s = _training_field("steps_per_s")
    eta_seconds = _training_field("eta_seconds")
    evaluation = _training_field("evaluation")

    @property
    def line(self) -> str:
        return status_line(self.status)

    def __str__(self) -> str:
        return self.line
