"""Training progress from the tasks' `tfk8s-progress` lines (pure: no files, no API calls).

The success role's task (chief, MWMS worker 0) reports `step` events and a `final` one; the
evaluator reports `evaluated` events. Every backend hands the tails of those two logs to
`read_progress`, which folds them into what `status`, `submit --wait` and `status --watch` show.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Iterable

from worker.contract import (
    EVALUATION_META_FIELDS,
    EVENT_EVALUATED,
    EVENT_FINAL,
    EVENT_STEP,
    parse_progress_line,
)

# How much of a log's end the backends read: the latest `step` and `evaluated` events are near
# the end, and every `step` event carries the target, so no log is read whole.
TAIL_LINES = 300
TAIL_BYTES = 256 * 1024


@dataclass
class Evaluation:
    step: int | None
    checkpoint: str | None
    metrics: dict[str, float]
    final: bool = False  # of the checkpoint training ended with

    def to_dict(self) -> dict:
        return {"step": self.step, "checkpoint": self.checkpoint, "metrics": self.metrics, "final": self.final}

    def summary(self) -> str:
        metrics = " ".join(f"{k} {_number(v)}" for k, v in sorted(self.metrics.items()))
        where = self.checkpoint or (f"step {self.step}" if self.step is not None else "?")
        return f"{'final ' if self.final else ''}eval {where}: {metrics}".rstrip(": ")


@dataclass
class TrainingProgress:
    step: int | None = None
    target: int | None = None
    loss: float | None = None
    steps_per_s: float | None = None
    updated_at: float | None = None  # Unix time of the latest step event
    finished: bool = False  # the success task reported its final checkpoint
    final_checkpoint: str | None = None
    evaluation: Evaluation | None = None  # the latest one
    history: list[Evaluation] = field(default_factory=list, repr=False)
    unreadable: str | None = None  # logs that could not be read now, and why
    # the step is its newest checkpoint's (the program printed no progress lines): that one's path
    from_checkpoint: str | None = None

    @property
    def eta_seconds(self) -> float | None:
        return None if self.finished else eta_seconds(self.step, self.target, self.steps_per_s)

    @property
    def fraction(self) -> float | None:
        if self.step is None or not self.target:
            return None
        return min(self.step / self.target, 1.0)

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "target": self.target,
            "loss": self.loss,
            "stepsPerSecond": self.steps_per_s,
            "etaSeconds": _round(self.eta_seconds),
            "updatedAt": self.updated_at,
            "finished": self.finished,
            "finalCheckpoint": self.final_checkpoint,
            "evaluation": self.evaluation.to_dict() if self.evaluation else None,
            "unreadable": self.unreadable,
            "fromCheckpoint": self.from_checkpoint,
        }

    def facts(self, fraction: bool = True) -> list[str]:
        """`step 420/1000 (42%)`, `35.2 steps/s`, `ETA 0:00:16`, `loss 0.512`, `trained`: what
        is known of training; without the fraction where a progress bar shows it."""
        parts = []
        if self.step is not None:
            text = f"step {self.step}" + (f"/{self.target}" if self.target else "")
            if fraction and self.fraction is not None:
                text += f" ({self.fraction:.0%})"
            if self.from_checkpoint:
                text += f" (its newest checkpoint, {self.from_checkpoint})"
            parts.append(text)
        if self.steps_per_s is not None and not self.finished:
            parts.append(f"{_number(self.steps_per_s)} steps/s")
        if self.eta_seconds is not None:
            parts.append(f"ETA {format_seconds(self.eta_seconds)}")
        if self.loss is not None:
            parts.append(f"loss {_number(self.loss)}")
        if self.finished:
            parts.append("trained")
        return parts

    def summary(self) -> str:
        """`step 420/1000 (42%), 35.2 steps/s, ETA 0:00:16, loss 0.512; eval ckpt-400: accuracy 0.81`"""
        parts = self.facts()
        text = ", ".join(parts)
        if self.evaluation is not None:
            text += ("; " if text else "") + self.evaluation.summary()
        if self.unreadable:
            text += ("; " if text else "") + f"log unreadable: {self.unreadable}"
        return text


def eta_seconds(step: int | None, target: int | None, steps_per_s: float | None) -> float | None:
    """Seconds left at the latest rate; None when any of them is unknown or the rate is 0."""
    if step is None or not target or not steps_per_s or steps_per_s <= 0:
        return None
    return max(target - step, 0) / steps_per_s


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def events(lines: Iterable[str]) -> list[dict]:
    return [record for line in lines if (record := parse_progress_line(line)) is not None]


def read_progress(training_log: Iterable[str], evaluator_log: Iterable[str] = ()) -> TrainingProgress | None:
    """The progress told by the success task's and the evaluator's log lines (in order); None
    when neither has reported anything yet."""
    progress = TrainingProgress()
    seen = False
    for event in events(training_log):
        kind = event["event"]
        if kind not in (EVENT_STEP, EVENT_FINAL, "start"):
            continue
        seen = True
        progress.step = _int(event.get("step"), progress.step)
        progress.target = _int(event.get("target"), progress.target)
        if kind == EVENT_STEP:
            progress.loss = _float(event.get("loss"), progress.loss)
            progress.steps_per_s = _float(event.get("steps_per_s"), progress.steps_per_s)
            progress.updated_at = _float(event.get("wall"), progress.updated_at)
        elif kind == EVENT_FINAL:
            progress.finished = True
            progress.final_checkpoint = event.get("checkpoint")
        else:  # start: a (re)started task; its rate is not known yet
            progress.finished = False
            progress.steps_per_s = None
    for event in events(evaluator_log):
        if event["event"] != EVENT_EVALUATED:
            continue
        seen = True
        metrics = {k: float(v) for k, v in event.items() if k not in EVALUATION_META_FIELDS and _is_number(v)}
        progress.history.append(Evaluation(_int(event.get("step"), None), event.get("checkpoint"), metrics))
    if progress.history:
        progress.evaluation = progress.history[-1]
        if progress.finished:
            for evaluation in progress.history:
                evaluation.final = evaluation.step is not None and evaluation.step == progress.step
    return progress if seen else None


# --- without progress lines -----------------------------------------------------------------
# A program of your own that prints no progress lines still shows its step where it can be seen
# from outside: the newest checkpoint in the dirs it writes (a TF checkpoint state file names it,
# `ckpt-N` carries the step). Found by the backend that can read those dirs (--local).

CHECKPOINT_STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's / tf.train.Saver's
_CHECKPOINT_STEP = re.compile(r"-(\d+)(?:\.index)?$")


def checkpoint_step(name: str) -> int | None:
    """The step a checkpoint's name carries: `ckpt-120` and `model.ckpt-120.index` -> 120."""
    found = _CHECKPOINT_STEP.search(name)
    return int(found.group(1)) if found else None


def state_file_checkpoint(text: str) -> str | None:
    """The newest checkpoint a TF checkpoint state file names (`model_checkpoint_path: "ckpt-3"`)."""
    found = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', text, re.MULTILINE)
    return found.group(1) if found else None


def from_checkpoint(step: int, where: str, written_at: float) -> TrainingProgress:
    return TrainingProgress(step=step, updated_at=written_at, from_checkpoint=where)


# --- a training that says nothing ------------------------------------------------------------
# No step and no checkpoint for QUIET_SECONDS while every task runs: said in `status`, with the
# likely cause when every task alive only serves (it never trains by itself).
QUIET_SECONDS = 300.0
# TF's line when a task starts its gRPC server (tf.distribute.Server, a strategy's own server)
SERVER_STARTED = "Started server with target"
PS_SERVES = ("ps", "worker")  # under parameter_server: they serve the chief, which trains


def waits_as_server(log_tail: Iterable[str]) -> bool:
    """The task's last line is TF's server start: it serves and waits (tf.distribute.Server.join)."""
    lines = [line for line in log_tail if line.strip() and parse_progress_line(line) is None]
    return bool(lines) and SERVER_STARTED in lines[-1]


def add_quiet_note(status, last_sign: float, strategy: str, alive: dict[str, str], serving: set[str]) -> None:
    """quiet_note's text into `status` (a ClusterStatus), now: its message when it has none, else
    one of its notes; nothing while the training is not quiet."""
    quiet = quiet_note(last_sign, time.time(), strategy, alive, serving)
    if quiet is None:
        return
    if status.message:
        status.notes.append(quiet)
    else:
        status.message = quiet


def quiet_note(last_sign: float, now: float, strategy: str, alive: dict[str, str], serving: set[str]) -> str | None:
    """What `status` says of a running training with no step and no checkpoint since `last_sign`
    (Unix time: the latest of a step, a checkpoint, a task's start), None if not QUIET_SECONDS
    before `now`. alive: {task: role} of the tasks that run; serving: those of them whose log ends
    with TF's server start. The text stays the same while nothing changes (a view prints it once)."""
    if now - last_sign < QUIET_SECONDS or not alive:
        return None
    since = time.strftime("%H:%M:%S", time.localtime(last_sign))
    text = f"no step and no checkpoint since {since} (over {format_minutes(QUIET_SECONDS)})"
    roles = sorted(set(alive.values()))
    if strategy == "parameter_server" and all(role in PS_SERVES for role in roles):
        return (
            f"{text}: every task alive is a server ({', '.join(roles)}) and the chief, which trains under "
            "parameter_server, is not running (see its reason)"
        )
    if set(alive) <= serving:
        return (
            f"{text}: every task alive ({', '.join(sorted(alive))}) ends its log with TF's '{SERVER_STARTED}' "
            f"and waits as a server: no task drives training under {strategy}. A parameter-server program "
            "(tf.distribute.Server(...).join() on its ps and workers) needs strategy: parameter_server with a chief"
        )
    return text + " (a program of your own shows its step by progress lines, docs/watching.md)"


def format_minutes(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value, default):
    return int(value) if _is_number(value) else default


def _float(value, default):
    return float(value) if _is_number(value) else default


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _number(value: float) -> str:
    return f"{value:.4g}"
