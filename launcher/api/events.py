"""Progress events: what TFK8sClient.watch() yields, one per visible change of a cluster."""
from __future__ import annotations

from dataclasses import dataclass

from launcher.progress import Evaluation
from launcher.status import ClusterStatus, Phase
from launcher.view import status_line


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

    @property
    def step(self) -> int | None:
        return self.status.training.step if self.status.training else None

    @property
    def target(self) -> int | None:
        return self.status.training.target if self.status.training else None

    @property
    def loss(self) -> float | None:
        return self.status.training.loss if self.status.training else None

    @property
    def steps_per_s(self) -> float | None:
        return self.status.training.steps_per_s if self.status.training else None

    @property
    def eta_seconds(self) -> float | None:
        return self.status.training.eta_seconds if self.status.training else None

    @property
    def evaluation(self) -> Evaluation | None:
        return self.status.training.evaluation if self.status.training else None

    @property
    def line(self) -> str:
        return status_line(self.status)

    def __str__(self) -> str:
        return self.line
