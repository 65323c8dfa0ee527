"""Prometheus alerting rules for trainings (a rule file; the chart's PrometheusRule later).

    python -m launcher monitoring alerts [--stalled-seconds 600 ...] > tfk8s-alerts.yaml

Each alert is one line of PromQL (launcher/monitoring/queries.py) with its threshold as an
argument; tests/worker/test_prometheus.py loads them into a real Prometheus and makes the stalled
and the restarts alerts fire and stay quiet, on a real training and on tasks retried as new pods
(Kubernetes: a new series per pod) or stuck at start-up.
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
    stalled_seconds: int = 600  # up this long with no step and no save in it, not finished
    checkpoint_age_seconds: int = 3600  # the last checkpoint is older, not finished
    restarts: int = 3  # more task restarts than this ...
    restarts_window: str = "1h"  # ... within this window
    evaluation_lag_seconds: int = 1800  # checkpoints this much newer than the last evaluation
    hold: str = "2m"  # how long a condition holds before the alert fires (`for:`)


def rules(t: Thresholds = Thresholds()) -> dict:
    """The rule file (groups -> rules) for these thresholds."""
    not_finished = f"unless on ({queries.TRAINING}) ({queries.finished(LOOKBACK)})"
    alerts = [
        (
            # Up for longer than the threshold with no progress in it, a first step included: a
            # training stuck at start-up fires too. Only while a task of it answers: one that
            # ended, its tasks gone, resolves at once.
            "TFK8sTrainingStalled",
            f"time() - {queries.running_since()} > {t.stalled_seconds} "
            f"unless on ({queries.TRAINING}) (time() - {queries.last_progress(LOOKBACK)} <= {t.stalled_seconds}) "
            f"{not_finished}",
            "critical",
            f"Training {{{{ $labels.training_namespace }}}}/{{{{ $labels.training }}}} has had a task up for over "
            f"{t.stalled_seconds} s and made no step and no save in the last {t.stalled_seconds} s "
            f"(also before a first step)",
        ),
        (
            "TFK8sCheckpointOld",
            f"time() - {queries.last_checkpoint(LOOKBACK)} > {t.checkpoint_age_seconds} {not_finished}",
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
            f"{queries.last_checkpoint(LOOKBACK)} - {queries.last_evaluation(LOOKBACK)} > {t.evaluation_lag_seconds}",
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
