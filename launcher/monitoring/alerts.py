"""Prometheus alerting rules for trainings (a rule file; the chart's PrometheusRule later).

    python -m launcher monitoring alerts [--stalled-seconds 600 ...] > tfk8s-alerts.yaml

Each alert is one line of PromQL (launcher/monitoring/queries.py) with its threshold as an
argument; tests/worker/test_prometheus.py loads them into a real Prometheus and makes them fire
and stay quiet, on a real training, on tasks retried as new pods (Kubernetes: a new series per
pod) or stuck at start-up, and on staged histories: a slow progress rhythm, a resubmitted name, a
training whose tasks are gone.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from launcher.monitoring import queries

GROUP = "tfk8s-training"
# How far back a stopped task's last values are read (its series are stale by then).
LOOKBACK = "6h"


@dataclass(frozen=True)
class Thresholds:
    stalled_seconds: int = 600  # up this long with no step and no save in it, not finished ...
    stalled_intervals: int = 3  # ... nor in this many of the training's own progress intervals
    checkpoint_age_seconds: int = 3600  # the last checkpoint is older, not finished
    restarts: int = 3  # more task restarts than this ...
    restarts_window: str = "1h"  # ... within this window
    evaluation_lag_seconds: int = 1800  # checkpoints this much newer than the last evaluation
    hold: str = "2m"  # how long a condition holds before the alert fires (`for:`)


def rules(t: Thresholds = Thresholds()) -> dict:
    """The rule file (groups -> rules) for these thresholds."""
    # A task of the training answers now: one whose tasks are gone (ended, failed, deleted) is
    # silent at the next evaluation, though its last values stay readable for LOOKBACK.
    answering = f"and on ({queries.TRAINING}) {queries.running_since()}"
    not_finished = f"unless on ({queries.TRAINING}) ({queries.finished(LOOKBACK)})"
    silent_for = f"time() - {queries.last_progress(LOOKBACK)}"
    alerts = [
        (
            # Up for longer than the threshold with no progress in it, a first step included: a
            # training stuck at start-up fires too. A training whose own rhythm is slower (PS
            # Model.fit reports once per epoch) is judged by that rhythm: silent for more than
            # stalled_intervals of its progress intervals.
            "TFK8sTrainingStalled",
            f"time() - {queries.running_since()} > {t.stalled_seconds} "
            f"unless on ({queries.TRAINING}) ({silent_for} <= {t.stalled_seconds}) "
            f"unless on ({queries.TRAINING}) "
            f"({silent_for} <= {t.stalled_intervals} * {queries.progress_interval(LOOKBACK)}) "
            f"{not_finished}",
            "critical",
            f"Training {{{{ $labels.training_namespace }}}}/{{{{ $labels.training }}}} has had a task up for over "
            f"{t.stalled_seconds} s and made no step and no save in the last {t.stalled_seconds} s, nor in "
            f"{t.stalled_intervals} of its own progress intervals (also before a first step)",
        ),
        (
            "TFK8sCheckpointOld",
            f"time() - {queries.last_checkpoint(LOOKBACK)} > {t.checkpoint_age_seconds} {answering} {not_finished}",
            "warning",
            f"Training {{{{ $labels.training_namespace }}}}/{{{{ $labels.training }}}}: its last checkpoint is "
            f"over {t.checkpoint_age_seconds} s old; a failure now loses that much work",
        ),
        (
            "TFK8sRestartsRising",
            f"{queries.restarts(t.restarts_window)} > {t.restarts}",
            "warning",
            f"Training {{{{ $labels.training_namespace }}}}/{{{{ $labels.training }}}}: more than {t.restarts} "
            f"task restarts in {t.restarts_window} (`python -m launcher status` names the cause)",
        ),
        (
            "TFK8sEvaluationStale",
            f"{queries.last_checkpoint(LOOKBACK)} - {queries.last_evaluation(LOOKBACK)} > {t.evaluation_lag_seconds} "
            f"{answering}",
            "warning",
            f"Training {{{{ $labels.training_namespace }}}}/{{{{ $labels.training }}}}: checkpoints are over "
            f"{t.evaluation_lag_seconds} s ahead of the last evaluation (the evaluator is behind or stopped)",
        ),
    ]
    return {
        "groups": [
            {
                "name": GROUP,
                "rules": [
                    {
                        "alert": name,
                        "expr": expr,
                        "for": t.hold,
                        "labels": {"severity": severity},
                        "annotations": {"summary": summary},
                    }
                    for name, expr, severity, summary in alerts
                ],
            }
        ]
    }


def rules_yaml(t: Thresholds = Thresholds()) -> str:
    return yaml.safe_dump(rules(t), sort_keys=False, width=1000)
