"""A Grafana dashboard of trainings (JSON model), from the worker's series (docs/metrics.md).

    python -m launcher monitoring dashboard > tfk8s-dashboard.json

Per training (the $namespace and $training variables): progress, throughput, loss and
evaluation curves, restarts, checkpoint age, ETA; across trainings: a table. Every panel's
PromQL is in PANELS, and tests/worker/test_prometheus.py queries each against a real Prometheus
scraping a real training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from launcher.monitoring import queries as q

ONE = '{training_namespace=~"$namespace", training=~"$training"}'  # the chosen trainings
SWEEP = '{training_namespace=~"$namespace", sweep=~"$sweep", sweep!=""}'  # the chosen sweeps' trials
WINDOW = "6h"


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # Grafana panel type
    exprs: tuple[tuple[str, str], ...]  # (legend, PromQL)
    unit: str = "short"
    width: int = 12
    of_sweeps: bool = False  # reads only a sweep's trials' series (the $sweep variable)


PANELS = (
    Panel(
        "Step and target", "timeseries", (("step {{training}}", q.step(ONE)), ("target {{training}}", q.target(ONE)))
    ),
    Panel("Progress", "gauge", (("{{training}}", f"{q.step(ONE)} / {q.target(ONE)}"),), unit="percentunit", width=6),
    Panel("ETA", "stat", (("{{training}}", q.eta_seconds(ONE)),), unit="s", width=6),
    Panel("Steps per second", "timeseries", (("{{training}}", q.steps_per_second(ONE)),)),
    Panel("Examples per second", "timeseries", (("{{training}}", q.examples_per_second(ONE)),)),
    Panel("Training loss", "timeseries", (("{{training}} {{role}}-{{index}}", f"tfk8s_loss{ONE}"),)),
    Panel("Evaluation", "timeseries", (("{{training}} {{metric}}", q.evaluation(selector=ONE)),)),
    Panel(
        "Checkpoint age", "stat", (("{{training}}", f"time() - {q.last_checkpoint(WINDOW, ONE)}"),), unit="s", width=6
    ),
    Panel("Restarts (1h)", "stat", (("{{training}}", q.restarts("1h", ONE)),), width=6),
    Panel("Start-up phases", "bargauge", (("{{role}}-{{index}} {{phase}}", f"tfk8s_startup_seconds{ONE}"),), unit="s"),
    Panel(
        "Sweep: evaluation by trial",  # the $sweep variable's trials (launcher sweep), each a training
        "timeseries",
        (("{{sweep}} {{training}} {{metric}}", f"max by (sweep, training, metric) (tfk8s_evaluation{SWEEP})"),),
        of_sweeps=True,
    ),
    Panel(
        "Trainings",
        "table",
        (
            ("step", q.step()),
            ("target", q.target()),
            ("steps/s", q.steps_per_second()),
            ("checkpoint age (s)", f"time() - {q.last_checkpoint(WINDOW)}"),
            ("accuracy", q.evaluation("accuracy")),
        ),
        width=24,
    ),
)


def dashboard() -> dict:
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    panels, x, y = [], 0, 0
    for number, panel in enumerate(PANELS, start=1):
        if x + panel.width > 24:
            x, y = 0, y + 8
        panels.append(
            {
                "id": number,
                "title": panel.title,
                "type": panel.kind,
                "datasource": datasource,
                "gridPos": {"x": x, "y": y, "w": panel.width, "h": 8},
                "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "instant": panel.kind == "table"}
                    for i, (legend, expr) in enumerate(panel.exprs)
                ],
            }
        )
        x += panel.width
    variable = {
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "multi": True,
        "includeAll": True,
    }
    return {
        "title": "tfk8s trainings",
        "uid": "tfk8s-trainings",
        "tags": ["tfk8s", "tensorflow"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {**variable, "name": "namespace", "query": "label_values(tfk8s_task_info, training_namespace)"},
                {
                    **variable,
                    "name": "training",
                    "query": 'label_values(tfk8s_task_info{training_namespace=~"$namespace"}, training)',
                },
                {
                    **variable,
                    "name": "sweep",
                    "query": 'label_values(tfk8s_task_info{training_namespace=~"$namespace"}, sweep)',
                },
            ]
        },
        "panels": panels,
    }


def panel_queries(namespace: str = ".*", training: str = ".*", sweep: str | None = ".*") -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel's target with the variables set (regexes, as Grafana
    substitutes them): what the tests run against a real Prometheus. sweep None: a training that
    is no sweep's trial, without the panels only trials answer."""
    of_sweeps = {p.title for p in PANELS if p.of_sweeps}
    values = {"$namespace": namespace, "$training": training, "$sweep": sweep or ""}

    def substituted(expr: str) -> str:
        for variable, value in values.items():
            expr = expr.replace(variable, value)
        return expr

    return [
        (panel["title"], substituted(target["expr"]))
        for panel in dashboard()["panels"]
        if sweep is not None or panel["title"] not in of_sweeps
        for target in panel["targets"]
    ]


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"
