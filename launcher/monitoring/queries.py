"""The PromQL the dashboard and the alerts are built from, over the built-in worker's series
(worker/metrics.py, docs/metrics.md). One training is one (training_namespace, training) pair;
`selector` ({...} or "") narrows the series, as the dashboard's variables do.

The series of a task that ended (or stopped answering) go stale in Prometheus within 5 min, so
what must outlive a task reads its last value through max_over_time over a window. On Kubernetes
each retry of a task is a new pod, so a new series (its pod and instance labels differ): what
spans retries groups by the task's own labels (TASK), never by series.
"""

from __future__ import annotations

TRAINING = "training_namespace, training"  # the labels one training's series share
TASK = f"{TRAINING}, role, index"  # the labels one task's series share, across its pods


def by_training(expr: str) -> str:
    return f"max by ({TRAINING}) ({expr})"


def step(selector: str = "") -> str:
    return by_training(f"tfk8s_global_step{selector}")


def target(selector: str = "") -> str:
    return by_training(f"tfk8s_target_steps{selector}")


def steps_per_second(selector: str = "") -> str:
    return by_training(f"tfk8s_steps_per_second{selector}")


def examples_per_second(selector: str = "") -> str:
    return by_training(f"tfk8s_examples_per_second{selector}")


def eta_seconds(selector: str = "") -> str:
    return f"({target(selector)} - {step(selector)}) / {steps_per_second(selector)}"


def finished(window: str, selector: str = "") -> str:
    """A training whose final checkpoint was written (within `window`) at or after its
    longest-running task that answers now started: a finish of an earlier run of the same name
    is not this run's (a resubmission is a new training)."""
    written = by_training(f"max_over_time(tfk8s_training_finished_timestamp_seconds{selector}[{window}])")
    return f"{written} >= on ({TRAINING}) {running_since(selector)}"


def last_progress(window: str, selector: str = "") -> str:
    return by_training(f"max_over_time(tfk8s_progress_timestamp_seconds{selector}[{window}])")


def progress_interval(window: str, selector: str = "") -> str:
    """The training's rhythm: seconds between its last two progress records that moved the step,
    as each task last reported it (within `window`), its slowest task's (no value before a
    task's second step report)."""
    return by_training(f"last_over_time(tfk8s_progress_interval_seconds{selector}[{window}])")


def last_checkpoint(window: str, selector: str = "") -> str:
    return by_training(f"max_over_time(tfk8s_checkpoint_timestamp_seconds{selector}[{window}])")


def last_evaluation(window: str, selector: str = "") -> str:
    return by_training(f"max_over_time(tfk8s_evaluation_timestamp_seconds{selector}[{window}])")


def evaluation(metric: str = "", selector: str = "") -> str:
    """The evaluator's last value of `metric` (every metric: "")."""
    inner = selector[1:-1] if selector else ""
    matchers = ", ".join(filter(None, [inner, f'metric="{metric}"' if metric else ""]))
    return f"max by ({TRAINING}, metric) (tfk8s_evaluation{{{matchers}}})"


def starts(window: str, selector: str = "") -> str:
    """Per task, its distinct process start times within `window` (the process running when the
    window began counts as one). Each pod's series holds its own start time: the distinct last
    values of a task's series count its pods (count_values: one pod scraped by two jobs counts
    once); a process restarted in the same pod (restartPolicy OnFailure, a `--local` restart)
    changes the value of one series, which changes() counts."""
    started = f"tfk8s_task_start_timestamp_seconds{selector}[{window}]"
    pods = f'count by ({TASK}) (count_values by ({TASK}) ("start", max_over_time({started})))'
    in_place = f"sum by ({TASK}) (changes({started}))"
    return f"{pods} + {in_place}"


def restarts(window: str, selector: str = "") -> str:
    """Process starts after each task's first within `window`, over all of a training's tasks."""
    return f"sum by ({TRAINING}) ({starts(window, selector)} - 1)"


def running_since(selector: str = "") -> str:
    """When the longest-running task of a training that answers now started (no value: no task
    of the training answers, it ended or has not started)."""
    return f"min by ({TRAINING}) (tfk8s_task_start_timestamp_seconds{selector})"
